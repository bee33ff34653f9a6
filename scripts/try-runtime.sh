#!/usr/bin/env bash
# Checks the runtime's try-runtime invariants (every pallet's `try_state`) over a live dev
# chain's real storage: builds the runtime with its `try-runtime` feature (in a build folder
# of its own, so the tests' runtime never carries the checks), starts a dev chain on it,
# seeds state through polkadot.js, and re-executes every block through the standard
# `TryRuntime` runtime API. Not part of CI: the cold build adds about 25 minutes.
#   scripts/try-runtime.sh
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/setup.sh"
build_workspace
runtime_target="${TOUCHSTONE_TRY_RUNTIME_TARGET_DIR:-$HOME/.cache/touchstone/target-try-runtime}"
log "Building the runtime with try-runtime into $runtime_target"
# `check` is enough: the runtime's build script builds the real wasm blob.
(cd "$ROOT" && CARGO_TARGET_DIR="$runtime_target" cargo check --locked -p touchstone-runtime --features try-runtime)
wasm="$runtime_target/debug/wbuild/touchstone-runtime/touchstone_runtime.wasm"
[ -f "$wasm" ] || { echo "the try-runtime build left no wasm at $wasm" >&2; exit 1; }
log "Running the checks over a live dev chain"
(cd "$ROOT/scripts/e2e" && node try-runtime.mjs "$wasm")
