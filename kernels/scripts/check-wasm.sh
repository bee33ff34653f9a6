#!/usr/bin/env bash
# Builds the kernels the way the runtime's referee links them: no_std, for
# wasm32v1-none (the target substrate-wasm-builder uses). Fails if anything in
# the reference pulls in std. Extra arguments go to cargo, e.g. `-j 1`.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/touchstone/target-kernels}"
cargo build --locked -p touchstone-kernels --no-default-features --target wasm32v1-none "$@"
cargo build --locked -p touchstone-kernels --no-default-features --target wasm32v1-none --release "$@"
# The referee's SCALE types, as the runtime links them (feature `codec`).
cargo build --locked -p touchstone-kernels --no-default-features --features codec --target wasm32v1-none --release "$@"
