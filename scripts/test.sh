#!/usr/bin/env bash
# Sets up the machine, builds, and runs every test: unit and integration tests of every
# crate, the pallets' benchmarks as tests, and the end-to-end tests against real nodes
# (polkadot.js submitting jobs to a dev chain; a three-validator local network).
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/setup.sh"
started=$(date +%s)
# The test binaries (and the examples `cargo test` compiles) in the same cargo run as the
# binaries: cargo then fills the build's one-core stretches (the runtime's wasm, the
# node's link) with them, instead of compiling them after it.
build_workspace --lib --bins --tests --examples

log "Unit and integration tests (the kernels on the CPU reference, wgpu and libtorch)"
(cd "$ROOT" && cargo test --workspace --locked --features "$TEST_FEATURES")

# The wasm check and the pallets' benchmarks run as tests (their own build,
# `runtime-benchmarks`, about four minutes cold) run beside the end-to-end tests at the
# lowest CPU priority: those mostly wait on block times, and take the CPU first whenever
# they need it.
log "The wasm check and the benchmarks run as tests, beside the end-to-end tests (output below when both end)"
benchmarks_log="$(mktemp)"
(
	cd "$ROOT"
	echo "The kernels build no_std for the runtime's wasm target"
	nice -n 19 "$ROOT/kernels/scripts/check-wasm.sh"
	nice -n 19 cargo test --locked -p pallet-touchstone-staking -p pallet-touchstone-tasks -p pallet-touchstone-disputes -p pallet-touchstone-verification --features runtime-benchmarks
) >"$benchmarks_log" 2>&1 &
benchmarks=$!

log "End-to-end tests against real nodes"
e2e_status=0
(cd "$ROOT/scripts/e2e" && npm test) || e2e_status=$?
benchmarks_status=0
wait "$benchmarks" || benchmarks_status=$?
log "The wasm check and the benchmarks run as tests: output"
cat "$benchmarks_log"
rm -f "$benchmarks_log"
[ "$e2e_status" -eq 0 ] || { log "The end-to-end tests failed"; exit "$e2e_status"; }
[ "$benchmarks_status" -eq 0 ] || { log "The wasm check or the benchmarks run as tests failed"; exit "$benchmarks_status"; }

log "All tests passed in $(( $(date +%s) - started )) s"
