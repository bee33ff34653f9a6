#!/usr/bin/env bash
# Regenerates the pallets' weights from their benchmarks, run in the real wasm runtime by
# `touchstone-node benchmark pallet`. Needs the node built with runtime-benchmarks in the
# release profile, which this script does (a second build of the node, in its own folder,
# about 50 minutes cold on the 2-core VM), so host functions run at release speed.
#   scripts/benchmark.sh [steps] [repeat] [pallet...]   (pallets: staking, tasks, disputes, verification; default all)
source "$(dirname "$0")/lib.sh"
# A build folder of its own: the runtime-benchmarks runtime must never share the wasm
# builder's output with the node the tests and the dev chain use.
export CARGO_TARGET_DIR="${TOUCHSTONE_BENCH_TARGET_DIR:-$HOME/.cache/touchstone/target-benchmarks}"
TOUCHSTONE_NODE="$CARGO_TARGET_DIR/release/touchstone-node"
steps="${1:-20}"
repeat="${2:-5}"
"$ROOT/scripts/setup.sh"
log "Building touchstone-node (release) with runtime-benchmarks"
(cd "$ROOT" && cargo build --locked --release -p touchstone-node --features runtime-benchmarks)
# The runtime blob the build embeds, with the benchmarking API; genesis from its preset.
runtime="$CARGO_TARGET_DIR/release/wbuild/touchstone-runtime/touchstone_runtime.wasm"
pallets=("${@:3}")
[ ${#pallets[@]} -gt 0 ] || pallets=(staking tasks disputes verification)
for pallet in "${pallets[@]}"; do
	log "Benchmarking pallet_touchstone_$pallet (steps $steps, repeat $repeat)"
	"$TOUCHSTONE_NODE" benchmark pallet \
		--runtime "$runtime" \
		--genesis-builder runtime \
		--genesis-builder-preset development \
		--pallet "pallet_touchstone_$pallet" \
		--extrinsic '*' \
		--wasm-execution compiled \
		--steps "$steps" \
		--repeat "$repeat" \
		--heap-pages 4096 \
		--template "$ROOT/scripts/weight-template.hbs" \
		--output "$ROOT/pallets/$pallet/src/weights.rs"
	# The command line in the header names this machine's folders; keep it portable.
	sed -i "s|$CARGO_TARGET_DIR|\$CARGO_TARGET_DIR|g; s|$ROOT/||g" "$ROOT/pallets/$pallet/src/weights.rs"
done
log "Weights written to pallets/*/src/weights.rs"
