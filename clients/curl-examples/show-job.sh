#!/usr/bin/env bash
# show-job.sh JOB_ID: the job's state, progress, last metrics and, once it succeeded, its parameters.
set -euo pipefail
. "$(dirname "$0")/common.sh"
api GET "/jobs/${1:?usage: show-job.sh JOB_ID}" | jq .
