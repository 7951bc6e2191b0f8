#!/usr/bin/env bash
# list-jobs.sh [STATE]: one line per job, newest first: id, state, name.
set -euo pipefail
. "$(dirname "$0")/common.sh"
api GET "/jobs${1:+?state=$1}" | jq -r '.jobs[] | [.id, .state, .name] | @tsv'
