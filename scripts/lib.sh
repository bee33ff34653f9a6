# Shared by the scripts: paths and the build every command uses.
# shellcheck shell=bash
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# One persistent build folder outside the clone, so every clone and every CI run reuses it.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/touchstone/target}"
export PATH="$HOME/.cargo/bin:$PATH"
# The node binary the run and test commands use.
export TOUCHSTONE_NODE="$CARGO_TARGET_DIR/debug/touchstone-node"
# Mesa's Vulkan drivers (lavapipe, for the wgpu tests) warn on every start without a
# runtime directory: give them a private one when the session has none.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "$XDG_RUNTIME_DIR" ]; then
	export XDG_RUNTIME_DIR="${TMPDIR:-/tmp}/touchstone-runtime-$(id -u)"
	mkdir -p -m 700 "$XDG_RUNTIME_DIR"
fi

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# Points the build and the tests at the libtorch that setup installed.
use_torch() {
	# shellcheck source=../kernels/scripts/torch-env.sh
	source "$ROOT/kernels/scripts/torch-env.sh"
}

# The features every build and test command selects, the same each time so that the crate
# graph compiles once: the worker's test equipment (`solve --inject-fault`, `verify
# --attest-without-checking`, which the end-to-end tests use), with the kernels' `testing`
# feature (fault injection) it needs. The kernels' integration tests enable `testing`
# through a dev-dependency anyway. A release worker built for operators
# (`cargo build --release -p touchstone-worker`) has neither, and the runtime's wasm is
# built without them.
TEST_FEATURES="touchstone-worker/test-equipment"

# Builds every crate of the workspace once, in the one profile tests use too, with
# $TEST_FEATURES. The kernels' wgpu and libtorch backends are crates of their own
# (kernels/wgpu, kernels/tch): the node never links a GPU stack or libtorch. Arguments
# select more targets of the same build (the test command adds the tests').
build_workspace() {
	use_torch
	log "Building the workspace into $CARGO_TARGET_DIR"
	(cd "$ROOT" && cargo build --workspace --locked --features "$TEST_FEATURES" "$@")
}

# The worker binary the run, test and benchmark commands use.
export TOUCHSTONE_WORKER="$CARGO_TARGET_DIR/debug/touchstone-worker"

# Starts a development chain (Alice validating, RPC on :9944) in the background, logging to
# $1/node.log, and waits until its RPC answers. Its pid is appended to `pids`.
start_dev_chain() {
	log "Starting the development chain (state is discarded on exit; log: $1/node.log)"
	"$TOUCHSTONE_NODE" --dev --tmp --rpc-cors all >"$1/node.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 120); do
		if curl -sf -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"system_health"}' \
			http://127.0.0.1:9944 >/dev/null; then
			return 0
		fi
		sleep 1
	done
	echo "the development chain did not answer RPC within two minutes; see $1/node.log" >&2
	return 1
}

# The solver's artifact-network address: a submitter or a fetch in another data directory
# reaches it here (`--peer "$SOLVER_PEER"`).
SOLVER_PEER=/ip4/127.0.0.1/tcp/30555

# Starts a solver worker as Bob, with its data in $1/solver, artifacts served on
# $SOLVER_PEER and Prometheus metrics on :9616, logging to $1/solver.log; further
# arguments are more flags for it. Its pid is appended to `pids`.
start_solver() {
	log "Starting a solver worker as Bob (log: $1/solver.log)"
	"$TOUCHSTONE_WORKER" --data-dir "$1/solver" solve --key //Bob --metrics 127.0.0.1:9616 \
		--p2p-listen "$SOLVER_PEER" "${@:2}" >"$1/solver.log" 2>&1 &
	pids+=($!)
}

# Starts a verifier worker as Dave in the background, logging to $1/verifier.log: it is
# drawn for every proof, re-executes the unit and attests. Its pid is appended to `pids`.
start_verifier() {
	log "Starting a verifier worker as Dave (log: $1/verifier.log)"
	"$TOUCHSTONE_WORKER" --data-dir "$1/verifier" verify --key //Dave \
		--p2p-listen /ip4/127.0.0.1/tcp/0 >"$1/verifier.log" 2>&1 &
	pids+=($!)
}

# Waits until the worker logging to $1 says it is registered (its bond is on-chain), at
# most two minutes; a job submitted before any solver is registered is refused.
wait_registered() {
	for _ in $(seq 120); do
		if grep -q "registered as a" "$1"; then
			return 0
		fi
		sleep 1
	done
	echo "the worker did not register within two minutes; see $1" >&2
	return 1
}

# Stops every process in `pids`, the last started first (workers before their node), and
# removes $work.
stop_all() {
	local index
	for ((index = ${#pids[@]} - 1; index >= 0; index--)); do kill -INT "${pids[index]}" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "${work:?}"
}
