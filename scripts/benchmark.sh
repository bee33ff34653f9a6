#!/usr/bin/env bash
# Regenerates the pallets' weights from their benchmarks, run in the real wasm runtime by
# `touchstone-node benchmark pallet`. Needs the node built with runtime-benchmarks, which
# this script does (a second build of the node, about half an hour cold).
#   scripts/benchmark.sh [steps] [repeat]
source "$(dirname "$0")/lib.sh"
steps="${1:-20}"
repeat="${2:-5}"
"$ROOT/scripts/setup.sh"
log "Building touchstone-node with runtime-benchmarks"
(cd "$ROOT" && cargo build --locked -p touchstone-node --features runtime-benchmarks)
for pallet in staking tasks; do
	log "Benchmarking pallet_touchstone_$pallet (steps $steps, repeat $repeat)"
	"$TOUCHSTONE_NODE" benchmark pallet \
		--chain dev \
		--pallet "pallet_touchstone_$pallet" \
		--extrinsic '*' \
		--wasm-execution compiled \
		--steps "$steps" \
		--repeat "$repeat" \
		--heap-pages 4096 \
		--template "$ROOT/scripts/weight-template.hbs" \
		--output "$ROOT/pallets/$pallet/src/weights.rs"
done
log "Weights written to pallets/*/src/weights.rs"
