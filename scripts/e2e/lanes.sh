#!/usr/bin/env bash
# Runs the end-to-end files in two lanes side by side, each lane's files one after another.
# The files mostly wait on blocks, so two run well together on two cores; three do not (a
# verifier sharing the CPU with two trainers misses its commit). `node --test
# --test-concurrency=2` over all the files starts them in the order of their names (it
# sorts them, whatever order they are given in), which put the two longest (the worker's,
# ~20 minutes, and the long units', ~16) one after the other in one lane: 34 minutes.
# These lanes are balanced by measured durations (docs/ci.md), about 26 minutes each, and
# pair only files already seen to pass side by side. Within a lane node still sorts, so
# the files run as:
#   lane 1: the kill test (~8 min), the lying aggregator (~6), job submission (~1), then
#           the worker's file (~16);
#   lane 2: the light client (~1), the local networks (~8), the long units (~14), the
#           solver behind NAT (~2), the rounds job (~9).
# (Measured cold on 2026-12-02 with job submission in lane 2: lane 1 1,457 s, lane 2
# 1,630 s; its minute moved to lane 1 evens them.)
# Each line is prefixed with its lane. Exits non-zero if either lane fails.
set -uo pipefail
cd "$(dirname "$0")"
lane() {
	local name="$1"
	shift
	node --test --test-concurrency=1 "$@" 2>&1 | sed -u "s/^/[$name] /"
}
lane 1 worker.test.mjs kill-anywhere.test.mjs submit-job.test.mjs rounds-lie.test.mjs &
first=$!
lane 2 long-units.test.mjs localnet.test.mjs light-client.test.mjs nat.test.mjs rounds.test.mjs
second=$?
wait "$first"
first=$?
echo "end-to-end lanes: lane 1 exited $first, lane 2 exited $second"
[ "$first" -eq 0 ] && [ "$second" -eq 0 ]
