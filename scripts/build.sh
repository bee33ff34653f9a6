#!/usr/bin/env bash
# Builds the workspace (node, runtime, pallets, kernels) into the shared target folder.
source "$(dirname "$0")/lib.sh"
build_workspace
