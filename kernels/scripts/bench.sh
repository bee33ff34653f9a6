#!/usr/bin/env bash
# Runs the kernels benchmark (kernels/benches/kernels.rs) with every backend:
# the CPU reference, wgpu (whatever adapter passes the conformance self-test;
# lavapipe on a machine without a GPU) and tch (libtorch on the CPU), plus
# PyTorch eager from Python for the step table. Prints Markdown tables; the
# figures in docs/performance.md come from this script.
#
# Needs kernels/scripts/setup-torch.sh to have run (for tch and PyTorch) and a
# Vulkan driver (`apt-get install mesa-vulkan-drivers libvulkan1`).
# Arguments go to the benchmark: `--quick` (tiny sizes), `--only ops|steps|protocol|proof|trace`.
# A copy of the output goes to $TOUCHSTONE_BENCH_OUT (default: a dated file in ~/.cache/touchstone).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=kernels/scripts/torch-env.sh
source kernels/scripts/torch-env.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/touchstone/target-kernels}"
out="${TOUCHSTONE_BENCH_OUT:-$HOME/.cache/touchstone/bench-$(date -u +%Y%m%dT%H%M%SZ).md}"
{
	echo "<!-- $(date -u +%FT%TZ), $(uname -m), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') -->"
	cargo bench --locked -p touchstone-kernels-bench --bench kernels -- "$@"
} | tee "$out"
echo "bench: written to $out" >&2
