#!/usr/bin/env bash
# Prints the referee's execution time inside the runtime's wasm, per operator of a
# digits-sized training step, and the worst case (figures for docs/performance.md).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
cargo run --locked -p touchstone-runtime --example referee_wasm_bench
