#!/usr/bin/env bash
# pause-resume.sh JOB_ID pause|resume: pausing checkpoints a running job at its next step and frees
# its worker; resuming puts it back in the queue, to go on from that checkpoint.
set -euo pipefail
. "$(dirname "$0")/common.sh"
id=${1:?usage: pause-resume.sh JOB_ID pause|resume}
verb=${2:?usage: pause-resume.sh JOB_ID pause|resume}
case $verb in pause|resume) ;; *) echo "usage: pause-resume.sh JOB_ID pause|resume" >&2; exit 2 ;; esac
api POST "/jobs/$id/$verb" >/dev/null
want=$([ "$verb" = pause ] && echo paused || echo 'queued|running')
# A running job stops at its next step boundary: wait until it has.
for _ in $(seq 1 100); do
  state=$(api GET "/jobs/$id" | jq -r .state)
  if [[ $state =~ ^($want)$ ]]; then
    api GET "/jobs/$id" | jq -c '{id, state, progress, checkpoint}'
    exit 0
  fi
  sleep 0.2
done
echo "job $id is still $state" >&2
exit 1
