# Source this file (`. kernels/scripts/torch-env.sh`) before cargo commands that
# build the `tch` feature of touchstone-kernels, and before Python scripts that
# `import torch`. It points them at the install that setup-torch.sh made in
# ${TOUCHSTONE_TORCH:-$HOME/.cache/touchstone/torch}. It changes nothing and
# returns non-zero, with a message, when that install is missing.
#
# Exports:
#   LIBTORCH                  the CPU link view: tch links libtorch_cpu, not
#                             libtorch_cuda (see setup-torch.sh)
#   LIBTORCH_CXX11_ABI=1      the PyPI wheel's C++ ABI
#   LD_LIBRARY_PATH           + torch's libraries and the CUDA runtime wheels'
#                             (libcudart.so.13, libcupti.so.13), for test binaries
#   PYTHONPATH                + the pip --target folder, for `python3 -c "import torch"`
# LIBTORCH_USE_PYTORCH is left unset on purpose: it would make the build ask
# Python, which needs setuptools, and link libtorch_cuda. No version-check
# bypass is needed: the link view carries torch's `build-version` (2.13.0).

touchstone_torch_prefix="${TOUCHSTONE_TORCH:-$HOME/.cache/touchstone/torch}"
if [ ! -f "$touchstone_torch_prefix/libtorch-cpu/lib/libtorch_cpu.so" ]; then
	echo "torch-env: no torch install in $touchstone_torch_prefix; run kernels/scripts/setup-torch.sh first" >&2
	unset touchstone_torch_prefix
	return 1 2>/dev/null || exit 1
fi
touchstone_torch_site="$touchstone_torch_prefix/site-packages"

export LIBTORCH="$touchstone_torch_prefix/libtorch-cpu"
export LIBTORCH_CXX11_ABI=1
unset LIBTORCH_USE_PYTORCH LIBTORCH_INCLUDE LIBTORCH_LIB

# Prepends $1 to the colon-separated variable named $2 unless already there.
touchstone_torch_prepend() {
	case ":${!2-}:" in
	*":$1:"*) ;;
	*) export "$2=$1${!2:+:${!2}}" ;;
	esac
}
touchstone_torch_prepend "$touchstone_torch_site/nvidia/cu13/lib" LD_LIBRARY_PATH
touchstone_torch_prepend "$LIBTORCH/lib" LD_LIBRARY_PATH
touchstone_torch_prepend "$touchstone_torch_site" PYTHONPATH
unset -f touchstone_torch_prepend
unset touchstone_torch_prefix touchstone_torch_site
