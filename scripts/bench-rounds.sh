#!/usr/bin/env bash
# Prints what data-parallel rounds reach on the digits job, simulated on this machine with
# the aggregate operator the referee recomputes: four shards, 10, 50 or 250 local steps a
# round, plain averaging or Nesterov's outer step, against one run of the job's steps and
# one of the same total (figures for docs/performance.md). One core; a few seconds once built.
source "$(dirname "$0")/lib.sh"
# Built with the whole workspace's features (scripts/lib.sh), so it reuses the test build.
build_workspace --examples
"$CARGO_TARGET_DIR/debug/examples/rounds"
