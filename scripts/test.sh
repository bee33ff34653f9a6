#!/usr/bin/env bash
# Sets up the machine, builds, and runs every test: unit and integration tests of every
# crate, the pallets' benchmarks as tests, and the end-to-end tests against real nodes
# (polkadot.js submitting jobs to a dev chain; local networks; workers; a light client).
#
# The end-to-end tests, the longest stage, need only the node and the worker, and mostly
# wait on block times. So those two binaries are built first, the end-to-end tests start,
# and everything else compiles beside them at the lowest CPU priority (the test binaries,
# the examples, the kernels' no_std build for wasm, the pallets with their benchmarks).
# The tests those builds make run once the end-to-end tests end, at normal priority: a
# test with a timeout (a libp2p fetch) starved by two busy trainers could fail for want
# of CPU, not for a fault.
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/setup.sh"
started=$(date +%s)
# The pallets with their benchmarks compiled in, run as tests (a build of their own).
BENCHMARK_TESTS=(-p pallet-touchstone-staking -p pallet-touchstone-tasks -p pallet-touchstone-disputes
	-p pallet-touchstone-verification --features runtime-benchmarks)
build_workspace --bins

log "Building the tests, the examples, the wasm check and the benchmarks, beside the end-to-end tests (output below when both end)"
background_log="$(mktemp)"
(
	set -e
	cd "$ROOT"
	nice -n 19 cargo build --workspace --locked --features "$TEST_FEATURES" --lib --bins --tests --examples
	echo "The kernels build no_std for the runtime's wasm target"
	nice -n 19 "$ROOT/kernels/scripts/check-wasm.sh"
	nice -n 19 cargo test --no-run --locked "${BENCHMARK_TESTS[@]}"
) >"$background_log" 2>&1 &
background=$!

log "End-to-end tests against real nodes"
e2e_status=0
(cd "$ROOT/scripts/e2e" && npm test) || e2e_status=$?
background_status=0
wait "$background" || background_status=$?
log "The builds beside the end-to-end tests: output"
cat "$background_log"
rm -f "$background_log"
[ "$e2e_status" -eq 0 ] || { log "The end-to-end tests failed"; exit "$e2e_status"; }
[ "$background_status" -eq 0 ] || { log "A build beside the end-to-end tests failed"; exit "$background_status"; }

log "Unit and integration tests (the kernels on the CPU reference, wgpu and libtorch)"
(cd "$ROOT" && cargo test --workspace --locked --features "$TEST_FEATURES")
log "The pallets' benchmarks run as tests"
(cd "$ROOT" && cargo test --locked "${BENCHMARK_TESTS[@]}")

log "All tests passed in $(( $(date +%s) - started )) s"
