#!/usr/bin/env bash
# What a worker on a light client costs, against the same worker on a node's RPC (figures
# for docs/performance.md): the wall time of `status` (start, sync to a finalized block,
# read, exit), and for a watching challenger (`challenge --watch`) the time from start to
# its first pass and its memory high-water mark (VmHWM) after WATCH_SECONDS (default 60)
# of following blocks. Against a dev chain this script starts on ports of its own; the
# light client starts from the node's sync spec, with the node as its boot node.
source "$(dirname "$0")/lib.sh"
build_workspace --bins
watch_seconds="${WATCH_SECONDS:-60}"
dir="$(mktemp -d)"
rpc=19955
p2p=30455
"$TOUCHSTONE_NODE" --dev --tmp --rpc-port "$rpc" --port "$p2p" --prometheus-port 19655 --no-telemetry --no-mdns >"$dir/node.log" 2>&1 &
node_pid=$!
trap 'kill "$node_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT

call() {
	curl -sf -H 'content-type: application/json' -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$1\",\"params\":${2:-[]}}" "http://127.0.0.1:$rpc"
}
for _ in $(seq 120); do
	finalized="$(call chain_getFinalizedHead | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"])' 2>/dev/null || true)"
	if [ -n "$finalized" ] && [ "$(call chain_getHeader "[\"$finalized\"]" | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["result"]["number"], 16))')" -ge 2 ]; then
		break
	fi
	sleep 1
done
peer="$(call system_localPeerId | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"])')"
call sync_state_genSyncSpec '[true]' | python3 -c '
import json, sys
spec = json.load(sys.stdin)["result"]
spec["bootNodes"] = [sys.argv[1]]
json.dump(spec, open(sys.argv[2], "w"))
' "/ip4/127.0.0.1/tcp/$p2p/p2p/$peer" "$dir/spec.json"
log "sync spec: $(stat -c %s "$dir/spec.json") bytes"

# Runs a worker command for at most $1 seconds; prints its wall time, the seconds until a
# line matching $2 appeared in its log (or -), and its memory high-water mark (MiB).
measure() {
	local limit_ms=$(($1 * 1000)) ready="$2"
	shift 2
	local start log="$dir/worker.log" hwm=0 ready_ms=- now
	start=$(date +%s%3N)
	"$TOUCHSTONE_WORKER" --data-dir "$dir/data-$RANDOM" "$@" >"$log" 2>&1 &
	local pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		now=$(date +%s%3N)
		hwm=$(awk '/VmHWM/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo "$hwm")
		if [ "$ready_ms" = - ] && grep -q -- "$ready" "$log"; then
			ready_ms=$((now - start))
		fi
		if [ $((now - start)) -gt "$limit_ms" ]; then
			kill -INT "$pid" 2>/dev/null || true
		fi
		sleep 0.2
	done
	wait "$pid" || true
	local seconds=- wall_ms=$(($(date +%s%3N) - start))
	[ "$ready_ms" = - ] || seconds="$((ready_ms / 1000)).$(((ready_ms % 1000) / 100))"
	echo "$((wall_ms / 1000)).$(((wall_ms % 1000) / 100)) $seconds $((${hwm:-0} / 1024))"
}

echo "| reaching the chain through | status: wall seconds | watch: seconds to first pass | watch: memory high-water (MiB) |"
echo "| --- | --- | --- | --- |"
for mode in node light; do
	if [ "$mode" = node ]; then
		access=(--node "ws://127.0.0.1:$rpc")
		key=//Charlie
	else
		access=(--chain-spec "$dir/spec.json")
		key=//Dave
	fi
	read -r status_seconds _ _ < <(measure 120 'finalized block' "${access[@]}" status)
	read -r _ first_pass watch_hwm < <(measure "$watch_seconds" 'watch: checking every proof' "${access[@]}" challenge --watch --key "$key" --no-mdns --p2p-listen /ip4/127.0.0.1/tcp/0)
	echo "| $mode | $status_seconds | $first_pass | $watch_hwm |"
done
