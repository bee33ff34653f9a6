#!/usr/bin/env bash
# Prints the referee's execution time inside the runtime's wasm, per operator of a
# digits-sized and an MNIST-sized training step and of the character transformer's, per
# kind of operator of a GPT-2-small-shaped block, the worst case of each, the step graph's
# rebuild by depth, and the batch pieces against the training set's size (figures for
# docs/performance.md). Arguments pick sections: mlp, transformer, gpt2, graph, batch.
source "$(dirname "$0")/lib.sh"
# Built with the whole workspace's features (scripts/lib.sh), so it reuses the test build
# instead of compiling the runtime's dependency graph a second time.
build_workspace --examples
"$CARGO_TARGET_DIR/debug/examples/referee_wasm_bench" "$@"
