#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build, run and test Touchstone.
# Safe to run again: each step checks first and does nothing when already done.
source "$(dirname "$0")/lib.sh"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# System packages: protoc and clang for the node's build, Vulkan's CPU driver (lavapipe)
# for the wgpu kernels, Node.js for the polkadot.js tests, iproute2 and iptables for the
# test that puts a worker behind NAT in a network namespace.
packages=(build-essential pkg-config protobuf-compiler clang libclang-dev curl ca-certificates git
	mesa-vulkan-drivers libvulkan1 unzip iproute2 iptables)
# A machine may have Node.js or Python from elsewhere; only install Debian's when missing.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then packages+=(nodejs npm); fi
if ! python3 -m pip --version >/dev/null 2>&1; then packages+=(python3 python3-pip python3-venv); fi
missing=()
for package in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
	log "Installing Debian packages: ${missing[*]}"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# Rust: rust-toolchain.toml pins the toolchain, its components and the wasm target.
if ! command -v rustup >/dev/null; then
	log "Installing rustup"
	curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain none
fi
(cd "$ROOT" && rustup toolchain install >/dev/null 2>&1 || rustup show active-toolchain >/dev/null)
(cd "$ROOT" && rustup target list --installed | grep -qx wasm32v1-none || rustup target add wasm32v1-none)
(cd "$ROOT" && rustup component list --installed | grep -q '^rust-src' || rustup component add rust-src)

# The workspace's crates (a few minutes from nothing), downloaded while the steps below
# download theirs: those the host's build needs (the build downloads any other itself).
fetch_log="$(mktemp)"
(cd "$ROOT" && cargo fetch --locked --target "$(rustc -vV | sed -n 's/^host: //p')") >"$fetch_log" 2>&1 &
fetch=$!

# polkadot.js for the end-to-end tests, exactly as locked.
e2e="$ROOT/scripts/e2e"
stamp="$e2e/node_modules/.touchstone-lock-sha256"
lock_sum="$(sha256sum "$e2e/package-lock.json" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_sum" ]; then
	log "Installing the polkadot.js test dependencies"
	(cd "$e2e" && npm ci --no-audit --no-fund --loglevel=error)
	echo "$lock_sum" >"$stamp"
fi

# libtorch (the CPU use of PyTorch's wheel) for the kernels' tch backend, and the
# digits dataset from scikit-learn's wheel: both from PyPI, both checked by hash.
"$ROOT/kernels/scripts/setup-torch.sh"
"$ROOT/kernels/scripts/fetch-datasets.sh"

wait "$fetch" || { cat "$fetch_log"; rm -f "$fetch_log"; log "Downloading the workspace's crates failed"; exit 1; }
rm -f "$fetch_log"

log "Setup complete"
