#!/usr/bin/env bash
# devices.sh: what the daemon trains on: the CPU (cores, model, memory) and each GPU (name, compute
# capability, memory, the job on it), or why there is no GPU. On the daemon's host: traind devices
set -euo pipefail
. "$(dirname "$0")/common.sh"
api GET /devices | jq .
