#!/usr/bin/env bash
# Sets up the machine, builds, and starts a development chain: one validator (Alice)
# producing and finalising a block every 3 seconds, RPC on ws://127.0.0.1:9944 and
# Prometheus on http://127.0.0.1:9615/metrics. Stop it with Ctrl-C.
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/setup.sh"
build_workspace
log "Starting the development chain (state is discarded on exit)"
exec "$TOUCHSTONE_NODE" --dev --tmp --rpc-cors all "$@"
