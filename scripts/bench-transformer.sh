#!/usr/bin/env bash
# Trains the character transformer (4 blocks, 4 heads, width 128, context 64: 812,288
# parameters) on the Shakespeare corpus on the CPU reference, one thread, then the same
# model in PyTorch eager from the same initial weights on the same batches at the same
# rates (kernels/scripts/pytorch_transformer.py), and prints both runs' validation losses,
# their relative gap and the milliseconds per step; then times the same steps on libtorch
# through the tch backend against the reference (kernels/tch/examples/transformer_tch.rs).
# Figures for docs/performance.md.
# Arguments go to the reference and libtorch runs: `--steps N` (200), `--batch B` (12), `--threads T`
# (1), `--layers`, `--heads`, `--width`, `--context`. Needs setup (the corpus and torch).
source "$(dirname "$0")/lib.sh"
use_torch
out="${TOUCHSTONE_BENCH_OUT:-$HOME/.cache/touchstone/transformer-$(date -u +%Y%m%dT%H%M%SZ)}"
build_workspace --examples
log "The reference: $*"
"$CARGO_TARGET_DIR/debug/examples/transformer" --out "$out" "$@"
log "PyTorch eager from the same weights and batches"
python3 "$ROOT/kernels/scripts/pytorch_transformer.py" "$out"
log "libtorch (the tch backend) from the same weights and batches, against the reference"
"$CARGO_TARGET_DIR/debug/examples/transformer_tch" "$@"
log "Written to $out"
