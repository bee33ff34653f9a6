#!/usr/bin/env bash
# Artifact transfer throughput between workers (figures for docs/performance.md): a 1 GiB
# artifact fetched from 1, 2 and 4 providers on loopback with 50 ms of latency added to
# every request, against a single stream, with the memory high-water mark
# (worker/examples/bench_transfer.rs). Extra arguments go to the example, for example
# `--size-mib 256 --latency-ms 0`.
#
# Latency is added by `tc netem` on the loopback interface of a network namespace this
# script makes, when it runs as root and the kernel has netem; otherwise (a container
# without the sch_netem module) by the serving nodes, which hold every answer for the
# latency before sending it. The script says which it used.
source "$(dirname "$0")/lib.sh"
build_workspace --examples
bench="$CARGO_TARGET_DIR/debug/examples/bench_transfer"

namespace="touchstone-bench-$$"
if [[ $EUID -eq 0 ]] && ip netns add "$namespace" 2>/dev/null; then
	trap 'ip netns del "$namespace" 2>/dev/null' EXIT
	ip netns exec "$namespace" ip link set lo up
	# 25 ms each way on loopback: 50 ms more on every round trip.
	if ip netns exec "$namespace" tc qdisc add dev lo root netem delay 25ms 2>/dev/null; then
		log "latency: tc netem, 25 ms each way on the loopback of network namespace $namespace"
		ip netns exec "$namespace" "$bench" --latency-ms 0 "$@"
		exit
	fi
fi
log "latency: no tc netem here (needs root and the kernel's sch_netem): the serving nodes hold each answer 50 ms"
"$bench" --latency-ms 50 "$@"
