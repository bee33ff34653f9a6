#!/usr/bin/env bash
# Sets up the machine, builds, and runs every test: unit and integration tests of every
# crate, the pallets' benchmarks as tests, and the end-to-end tests against real nodes
# (polkadot.js submitting jobs to a dev chain; a three-validator local network).
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/setup.sh"
started=$(date +%s)
build_workspace

log "Unit and integration tests (the kernels on the CPU reference, wgpu and libtorch)"
(cd "$ROOT" && cargo test --workspace --locked)

log "The kernels build no_std for the runtime's wasm target"
"$ROOT/kernels/scripts/check-wasm.sh"

log "Benchmarks, run as tests"
(cd "$ROOT" && cargo test --locked -p pallet-touchstone-staking -p pallet-touchstone-tasks -p pallet-touchstone-disputes -p pallet-touchstone-verification --features runtime-benchmarks)

log "End-to-end tests against real nodes"
(cd "$ROOT/scripts/e2e" && npm test)

log "All tests passed in $(( $(date +%s) - started )) s"
