#!/usr/bin/env bash
# Protocol overhead: the wall time of a job trained through a dev chain by one solver (no
# disputes), over the same training run done locally with the same backend
# (`touchstone-worker train`), for the digits job, a synthetic job of 26 s
# (scripts/bench/synthetic-large.toml) and one of more than two minutes in four ranges
# (scripts/bench/synthetic-long.toml). Prints one table row per job; the figures go in
# docs/performance.md.
#
# "Proven" is the time from submission until every unit's learning proof is on-chain, the
# part of the job's latency the protocol adds to training, read at the best block (what
# solvers act on) and at finality; "paid" adds the challenge window (5 minutes), which a
# submitter waits for before the result is final.
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/setup.sh"
build_workspace

work="$(mktemp -d "${TMPDIR:-/tmp}/touchstone-bench.XXXXXX")"
pids=()
trap stop_all EXIT
trap 'exit 130' INT TERM
start_dev_chain "$work"
start_solver "$work"

W=("$TOUCHSTONE_WORKER" --data-dir "$work/submitter")
printf '| job | steps | local (s) | proven, best block (s) | ratio | proven, finalized (s) | ratio | paid (s) |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- |\n'
for job in "--example digits" "--job $ROOT/scripts/bench/synthetic-large.toml" "--job $ROOT/scripts/bench/synthetic-long.toml"; do
	# shellcheck disable=SC2086
	local_line="$("${W[@]}" train $job)"
	steps="$(sed -n 's/^trained \([0-9]*\) steps in.*/\1/p' <<<"$local_line")"
	local_s="$(sed -n 's/^trained [0-9]* steps in \([0-9.]*\) s.*/\1/p' <<<"$local_line")"
	# shellcheck disable=SC2086
	"${W[@]}" submit --key //Alice $job --wait --peer "$SOLVER_PEER" 2>"$work/progress.log" >"$work/submit.log"
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
