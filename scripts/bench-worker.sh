#!/usr/bin/env bash
# Protocol overhead: the wall time of a job trained through a dev chain by one solver (no
# disputes), over the same training run done locally with the same backend
# (`touchstone-worker train`). Prints one table row per job; the figures go in
# docs/performance.md.
#
# Usage: scripts/bench-worker.sh [--cpu-threads N] [JOB ...]
#        scripts/bench-worker.sh [--cpu-threads N] --rounds [JOB ...]
#   --rounds       the rounds jobs scripts/bench/rounds.toml and rounds-long.toml (four shards,
#                  three rounds of 1,000 and of 10,000 local steps), or those named, each on a
#                  fresh dev chain with 1, 2 and 4 solvers (Bob, Charlie, Dave, Eve), each
#                  with --cpu-threads threads: the wall time until every unit is proven, and
#                  the bytes of model files moved per round (each shard end state the
#                  aggregator did not train, and the aggregate to each other solver of the
#                  next round), computed from who trained what and the model file's size.
#   JOB            digits, or a job file of scripts/bench/ by name: synthetic-large (about 6 s on one core),
#                  synthetic-long (more than two minutes in four ranges) or synthetic-longer
#                  (about four and a half minutes on one core in four ranges). Default: digits
#                  synthetic-large synthetic-long.
#   --cpu-threads  the threads the trainer may use, locally and in the solver alike (every
#                  core when absent). On a 2-core machine, 1 leaves the node, the submitter
#                  and the solver's own bookkeeping a core, as a GPU solver's trainer leaves
#                  them the CPU.
#
# "Proven" is the time from submission until every unit's learning proof is on-chain, the
# part of the job's latency the protocol adds to training, read at the best block (what
# solvers act on) and at finality; "paid" adds the challenge window (5 minutes), which a
# submitter waits for before the result is final.
source "$(dirname "$0")/lib.sh"
threads=()
if [ "${1:-}" = --cpu-threads ]; then
	[ -n "${2:-}" ] || { echo "--cpu-threads needs a number of threads" >&2; exit 2; }
	threads=(--cpu-threads "$2")
	shift 2
fi
if [ "${1:-}" = --rounds ]; then
	shift
	exec "$(dirname "$0")/bench/rounds.sh" "${threads[@]}" "$@"
fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(digits synthetic-large synthetic-long)
jobs=()
for name in "${names[@]}"; do
	if [ "$name" = digits ]; then
		jobs+=("--example digits")
	elif [ -f "$ROOT/scripts/bench/$name.toml" ]; then
		jobs+=("--job $ROOT/scripts/bench/$name.toml")
	else
		echo "no benchmark job $name: give digits or a file name of scripts/bench/ without .toml" >&2
		exit 2
	fi
done
"$ROOT/scripts/setup.sh"
build_workspace

work="$(mktemp -d "${TMPDIR:-/tmp}/touchstone-bench.XXXXXX")"
pids=()
trap stop_all EXIT
trap 'exit 130' INT TERM
start_dev_chain "$work"
start_solver "$work" "${threads[@]}"

W=("$TOUCHSTONE_WORKER" --data-dir "$work/submitter")
printf '| job | steps | local (s) | proven, best block (s) | ratio | proven, finalized (s) | ratio | paid (s) |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- |\n'
for job in "${jobs[@]}"; do
	# shellcheck disable=SC2086
	local_line="$("${W[@]}" "${threads[@]}" train $job)"
	steps="$(sed -n 's/^trained \([0-9]*\) steps in.*/\1/p' <<<"$local_line")"
	local_s="$(sed -n 's/^trained [0-9]* steps in \([0-9.]*\) s.*/\1/p' <<<"$local_line")"
	# shellcheck disable=SC2086
	if ! "${W[@]}" submit --key //Alice $job --wait --peer "$SOLVER_PEER" 2>"$work/progress.log" >"$work/submit.log"; then
		echo "the job $job was not carried through the chain:" >&2
		tail -5 "$work/progress.log" >&2
		exit 1
	fi
	# The first progress line of a view where no unit is still to be proven.
	proven() {
		grep -E "\] $1: .*units( (Proven|Finalized))+$" "$work/progress.log" | head -1 | sed -n 's/^\[ *\([0-9]*\) s\].*/\1/p'
	}
	best_s="$(proven best)"
	final_s="$(proven finalized)"
	paid_s="$(tail -1 "$work/progress.log" | sed -n 's/^\[ *\([0-9]*\) s\].*/\1/p')"
	ratio() { awk -v a="$1" -v b="$local_s" 'BEGIN { printf "%.2f", a / b }'; }
	name="$(sed 's/^--example //; s/^--job .*\///; s/\.toml$//' <<<"$job")"
	printf '| %s | %s | %s | %s | %s× | %s | %s× | %s |\n' "$name" "$steps" "$local_s" "$best_s" "$(ratio "$best_s")" \
		"$final_s" "$(ratio "$final_s")" "$paid_s"
done
