#!/usr/bin/env bash
# Prints what one pass of a watching challenger and of a verifier makes a light client
# download (the storage proof of what it reads) with the chain full (MaxOpenUnits units
# proven inside their windows), keyed reads against the whole-map scans they replaced
# (figures for docs/performance.md).
source "$(dirname "$0")/lib.sh"
build_workspace --examples
"$CARGO_TARGET_DIR/debug/examples/bench_keyed_reads"
