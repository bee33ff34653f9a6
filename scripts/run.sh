#!/usr/bin/env bash
# Sets up the machine, builds, and trains a real model through the chain: starts a
# development chain (one validator, Alice, a block every 3 seconds), one solver worker
# (Bob) and one verifier worker (Dave), submits the digits job (Alice pays), waits while
# the units are trained, proven, re-executed by the verifier, and paid after their
# challenge windows, fetches the final model by its proven state root and prints its test
# accuracy.
#
#   scripts/run.sh          then keeps the chain and the workers running: RPC on
#                           ws://127.0.0.1:9944, node metrics on :9615, solver metrics
#                           on :9616. Ctrl-C stops everything.
#   scripts/run.sh --once   stops everything and exits 0 after printing the accuracy.
source "$(dirname "$0")/lib.sh"

once=0
for arg in "$@"; do
	case "$arg" in
		--once) once=1 ;;
		-h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
		*) echo "unknown option: $arg (see --help)" >&2; exit 2 ;;
	esac
done

"$ROOT/scripts/setup.sh"
build_workspace
WORKER="$TOUCHSTONE_WORKER"
work="$(mktemp -d "${TMPDIR:-/tmp}/touchstone-run.XXXXXX")"
pids=()
trap stop_all EXIT
trap 'exit 130' INT TERM
start_dev_chain "$work"
start_solver "$work"
start_verifier "$work"
wait_registered "$work/solver.log"
wait_registered "$work/verifier.log"

log "Submitting the digits job as Alice, and following it until it is paid (about 7 minutes:"
log "the last unit waits out its 5-minute challenge window)"
# The submitter keeps its own data directory: the solver fetches the dataset from it, and
# the final model comes back from the solver, over libp2p.
submitter=("$WORKER" --data-dir "$work/submitter")
submitted="$("${submitter[@]}" submit --key //Alice --example digits --wait --peer "$SOLVER_PEER")"
echo "$submitted"
job="$(sed -n 's/^job \([0-9]*\) submitted.*/\1/p' <<<"$submitted")"

"${submitter[@]}" fetch --job "$job" --out "$work/model.safetensors" --peer "$SOLVER_PEER"
"${submitter[@]}" evaluate --example digits --model "$work/model.safetensors"
# Each unit is paid only after its verification round concludes, so every reveal is in.
attested="$(grep -c "verification: revealed" "$work/verifier.log" || true)"
echo "the verifier re-executed its samples of the job's units and revealed $attested verdicts (log: $work/verifier.log)"

if [ "$once" -eq 1 ]; then
	exit 0
fi
log "The chain, the solver and the verifier keep running. Try: $WORKER status"
log "Ctrl-C stops them all."
wait "${pids[0]}"
