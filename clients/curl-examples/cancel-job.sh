#!/usr/bin/env bash
# cancel-job.sh JOB_ID: cancels a queued, paused or running job (a running one at its next step)
# and waits until it is cancelled; a job that already ended is left as it is (HTTP 409).
set -euo pipefail
. "$(dirname "$0")/common.sh"
id=${1:?usage: cancel-job.sh JOB_ID}
api POST "/jobs/$id/cancel" >/dev/null
for _ in $(seq 1 100); do
  state=$(api GET "/jobs/$id" | jq -r .state)
  [ "$state" = cancelled ] && { echo "job $id cancelled"; exit 0; }
  sleep 0.2
done
echo "job $id is still $state" >&2
exit 1
