#!/usr/bin/env bash
# The rounds benchmark, run by `scripts/bench-worker.sh [--cpu-threads N] --rounds [JOB ...]`:
# each rounds job of scripts/bench/ named (default: rounds, four shards and three rounds of
# 1,000 local steps, where the chain's latency dominates; and rounds-long, the same with
# 10,000 local steps, where training does) through a fresh dev chain with 1, 2 and 4 solvers (Bob, Charlie, Dave, Eve), each
# trainer on the threads `--cpu-threads` gives. Prints one table row per solver count: the
# time from submission until every unit is proven (at the best block and at finality), and the
# model-file bytes moved per round: every shard end state the round's aggregator did not
# train itself (it fetches it), and the aggregate to every other solver of the next round
# (each fetches it once). Those counts are read from the chain (`status`), the bytes are the
# job's model file: 333,834 parameters and as many momentum words, as f32.
source "$(dirname "$0")/../lib.sh"
threads=()
if [ "${1:-}" = --cpu-threads ]; then
	threads=(--cpu-threads "$2")
	shift 2
fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(rounds rounds-long)
for name in "${names[@]}"; do
	[ -f "$ROOT/scripts/bench/$name.toml" ] || { echo "no rounds job scripts/bench/$name.toml: give rounds or rounds-long" >&2; exit 2; }
done
"$ROOT/scripts/setup.sh"
build_workspace

MODEL_BYTES=$((2 * 333834 * 4))
keys=(//Bob //Charlie //Dave //Eve)
first_peer=/ip4/127.0.0.1/tcp/30555
work=""
pids=()
trap stop_all EXIT
trap 'exit 130' INT TERM

for name in "${names[@]}"; do
job="$ROOT/scripts/bench/$name.toml"
printf '\n%s (%s)\n\n' "$name" "$(sed -n 's/^steps = //p' "$job") steps"
printf '| solvers | proven, best block (s) | proven, finalized (s) | × one solver (finalized) | model bytes moved per round |\n'
printf '| --- | --- | --- | --- | --- |\n'
one=""
for count in 1 2 4; do
	work="$(mktemp -d "${TMPDIR:-/tmp}/touchstone-bench-rounds.XXXXXX")"
	pids=()
	start_dev_chain "$work"
	for ((i = 0; i < count; i++)); do
		"$TOUCHSTONE_WORKER" --data-dir "$work/solver-$i" solve --key "${keys[i]}" --p2p-listen "/ip4/127.0.0.1/tcp/$((30555 + i))" \
			--peer "$first_peer" "${threads[@]}" >"$work/solver-$i.log" 2>&1 &
		pids+=($!)
	done
	for ((i = 0; i < count; i++)); do
		wait_registered "$work/solver-$i.log" || { echo "solver ${keys[i]} did not register; see $work/solver-$i.log" >&2; exit 1; }
	done
	"$TOUCHSTONE_WORKER" --data-dir "$work/submitter" submit --key //Alice --job "$job" --wait --peer "$first_peer" \
		2>"$work/progress.log" >"$work/submit.log" &
	pids+=($!)
	# Every unit proven at finality, within half an hour.
	for _ in $(seq 900); do
		grep -qE "\] finalized: .*units( (Proven|Finalized))+$" "$work/progress.log" && break
		sleep 2
	done
	proven() {
		grep -E "\] $1: .*units( (Proven|Finalized))+$" "$work/progress.log" | head -1 | sed -n 's/^\[ *\([0-9]*\) s\].*/\1/p'
	}
	best_s="$(proven best)"
	final_s="$(proven finalized)"
	[ -n "$final_s" ] || { echo "the rounds job was not proven with $count solvers; see $work/progress.log" >&2; tail -5 "$work/progress.log" >&2; exit 1; }
	[ -n "$one" ] || one="$final_s"
	# Who trained each shard and who aggregated each round, from the chain.
	moved="$("$TOUCHSTONE_WORKER" --data-dir "$work/submitter" status --job 0 | awk '
		/RoundShard \{ round: / { match($0, /round: [0-9]+/); r = substr($0, RSTART + 7, RLENGTH - 7) + 0; shard[r] = shard[r] " " $NF }
		/Aggregate \{ round: / { match($0, /round: [0-9]+/); r = substr($0, RSTART + 7, RLENGTH - 7) + 0; agg[r] = $NF; if (r + 1 > rounds) rounds = r + 1 }
		END {
			for (r = 0; r < rounds; r++) {
				n = split(shard[r], solvers, " ")
				for (i = 1; i <= n; i++) if (solvers[i] != agg[r]) total++
				if (r + 1 < rounds) {
					delete seen
					n = split(shard[r + 1], next_solvers, " ")
					for (i = 1; i <= n; i++) if (next_solvers[i] != agg[r] && !(next_solvers[i] in seen)) { seen[next_solvers[i]] = 1; total++ }
				}
			}
			printf "%.1f", total / rounds
		}')"
	bytes="$(awk -v files="$moved" -v size="$MODEL_BYTES" 'BEGIN { printf "%.1f MB (%s model files)", files * size / 1e6, files }')"
	ratio="$(awk -v a="$final_s" -v b="$one" 'BEGIN { printf "%.2f", a / b }')"
	printf '| %s | %s | %s | %s× | %s |\n' "$count" "$best_s" "$final_s" "$ratio" "$bytes"
	stop_all
	trap stop_all EXIT
done
done
