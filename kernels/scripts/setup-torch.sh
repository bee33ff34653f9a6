#!/usr/bin/env bash
# Installs PyTorch 2.13.0 (the libtorch that `tch` 0.26 links against) from PyPI,
# and nothing from anywhere else, into ${TOUCHSTONE_TORCH:-$HOME/.cache/touchstone/torch}.
# Idempotent: a second run with the same requirement list returns at once.
#
# Layout it creates under the prefix:
#   site-packages/        a `pip --target` folder: torch, the CUDA runtime wheels,
#                         the pure-Python packages `import torch` needs
#   libtorch-cpu/         what the `tch` build links: `include` and a `lib` folder
#                         holding only the CPU libraries (see below)
#   .installed            the requirement list of the finished install
#
# Why this shape:
# - PyPI's only Linux x86-64 torch 2.13.0 wheel is the CUDA 13 build. Its
#   `libtorch_cpu.so` needs just `libcudart.so.13` and `libcupti.so.13` at load
#   time, which the `nvidia-cuda-runtime` and `nvidia-cuda-cupti` wheels provide
#   (12.9 MB together). `libtorch-cpu/lib` omits `libtorch_cuda.so`, so the tch
#   build script does not link it and a Rust binary loads only those two.
# - `import torch` in Python loads `libtorch_python.so`, which does link
#   `libtorch_cuda.so` and with it cuDNN, cuBLAS, NCCL, cuFFT and the rest. The
#   benchmark compares against PyTorch eager from Python, so those wheels are
#   installed too (exact versions from torch 2.13.0's own metadata). They are
#   loaded and never used: the benchmark runs on the CPU.
# - `--no-deps` everywhere, with every version pinned: the install is the same
#   on every machine, and pip never pulls triton or the rest of cuda-toolkit.
#
# Use kernels/scripts/torch-env.sh (source it) to point the build, the tests
# and python3 at this install.
set -euo pipefail

prefix="${TOUCHSTONE_TORCH:-$HOME/.cache/touchstone/torch}"
python="${PYTHON:-python3}"

# The wheels whose shared libraries the Rust tch backend loads.
link_requirements=(
	"torch==2.13.0"
	"nvidia-cuda-runtime==13.0.96"
	"nvidia-cuda-cupti==13.0.85"
)
# What `import torch` additionally loads in Python: the CUDA libraries that
# libtorch_python.so links (versions from torch 2.13.0's Requires-Dist and
# cuda-toolkit 13.0.3's pins), and the pure-Python packages torch imports.
python_requirements=(
	"nvidia-cublas==13.1.1.3"
	"nvidia-cuda-nvrtc==13.0.88"
	"nvidia-cufft==12.0.0.61"
	"nvidia-cufile==1.15.1.6"
	"nvidia-curand==10.4.0.35"
	"nvidia-cusparse==12.6.3.3"
	"nvidia-nvjitlink==13.0.88"
	"nvidia-cudnn-cu13==9.20.0.48"
	"nvidia-cusparselt-cu13==0.8.1"
	"nvidia-nccl-cu13==2.29.7"
	"nvidia-nvshmem-cu13==3.4.5"
	"filelock==4.2.11"
	"typing-extensions==4.16.0"
	"sympy==1.14.0"
	"mpmath==1.3.0"
	"networkx==3.6.1"
	"jinja2==3.1.6"
	"markupsafe==3.0.4"
	"fsspec==2026.9.0"
	# Not needed by `import torch`, but without it torch warns at import, and
	# benchmark and accuracy scripts use it.
	"numpy==2.4.6"
)

if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
	echo "setup-torch: torch 2.13.0 needs Python >= 3.10; set PYTHON to such an interpreter" >&2
	exit 1
fi
py_tag="$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
wanted="$(printf '%s\n' "python=$py_tag" "${link_requirements[@]}" "${python_requirements[@]}")"

site="$prefix/site-packages"
view="$prefix/libtorch-cpu"
stamp="$prefix/.installed"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" && -f "$view/lib/libtorch_cpu.so" ]]; then
	echo "setup-torch: torch 2.13.0 already installed in $prefix"
	exit 0
fi

mkdir -p "$prefix"
staging="$(mktemp -d "$prefix/.staging.XXXXXX")"
trap 'rm -rf "$staging"' EXIT

echo "setup-torch: downloading and installing torch 2.13.0 ($py_tag) into $prefix (2.3 GB of wheels)"
start=$SECONDS
"$python" -m pip install --quiet --no-deps --only-binary=:all: --no-warn-script-location \
	--disable-pip-version-check --root-user-action=ignore --target "$staging/site-packages" \
	"${link_requirements[@]}" "${python_requirements[@]}"
echo "setup-torch: pip finished in $((SECONDS - start)) s"

# The link view: headers, and the CPU libraries only. torch-sys links
# torch_cuda whenever `libtorch_cuda.so` sits in the lib folder it is given.
torch_dir="$site/torch"
mkdir -p "$staging/libtorch-cpu/lib"
ln -s "$torch_dir/include" "$staging/libtorch-cpu/include"
for lib in libtorch_cpu.so libtorch.so libc10.so libgomp.so.1 libshm.so libtorch_global_deps.so; do
	ln -s "$torch_dir/lib/$lib" "$staging/libtorch-cpu/lib/$lib"
done
# torch-sys checks this file against the version it was written for.
echo "2.13.0" >"$staging/libtorch-cpu/build-version"

rm -rf "$site" "$view"
mv "$staging/site-packages" "$site"
mv "$staging/libtorch-cpu" "$view"
printf '%s\n' "$wanted" >"$stamp"

if ! PYTHONPATH="$site" "$python" -c 'import torch; assert torch.__version__.startswith("2.13.0")'; then
	echo "setup-torch: the install finished but \`import torch\` fails; rerun after \`rm -rf $prefix\`" >&2
	exit 1
fi
echo "setup-torch: done in $((SECONDS - start)) s; $(du -sh "$prefix" | cut -f1) on disk. Now: source kernels/scripts/torch-env.sh"
