#!/usr/bin/env bash
# replicas.sh TRAIN_URL [REPLICAS] [DEVICE] [ITERATIONS]: trains the DC-taxi baseline as REPLICAS
# data-parallel copies (default 2) on DEVICE ("cpu", the default: CPU workers; "auto": GPUs where
# traind has them and NCCL; or a JSON list such as '["cuda:0","cuda:1"]'), shows where each
# replica runs and its step times while the job trains, then the job's last loss.
#   ./replicas.sh "file://$PWD/traind-sample/dc-taxi/csv/dev/part*.csv" 4 auto
set -euo pipefail
. "$(dirname "$0")/common.sh"
usage="usage: replicas.sh TRAIN_URL [REPLICAS] [DEVICE] [ITERATIONS]"
train=${1:?$usage}
replicas=${2:-2}
device=${3:-cpu}
iterations=${4:-200}
case $device in \[*) ;; *) device=$(jq -n --arg d "$device" '$d') ;; esac
more=$(jq -n --argjson replicas "$replicas" --argjson device "$device" \
          '{name: "dc-taxi-replicas", replicas: $replicas, device: $device}')
id=$("$(dirname "$0")/submit-dc-taxi.sh" "$train" "$iterations" "$more")
echo "job $id: $replicas replicas"
# /replicas lists the replicas while the job runs; keep the latest answer that had them.
seen=
while :; do
  state=$(api GET "/jobs/$id" | jq -r .state)
  page=$(api GET "/jobs/$id/replicas")
  [ "$(jq '.replicas | length' <<<"$page")" -gt 0 ] && seen=$page
  case $state in succeeded|failed|cancelled) break ;; esac
  sleep 0.2
done
if [ -n "$seen" ]; then
  jq -r '.replicas[] | "replica on \(.device) (rank \(.rank), \(.host)): \(.iterations) iterations, " +
         "median step \(.step_seconds.median * 1000 | floor / 1000) s, " +
         "\(.allreduce_seconds * 1000 | floor / 1000) s in all-reduces so far" +
         (if .straggler then ", straggler" else "" end)' <<<"$seen"
else
  echo "(the job ended before /replicas was read while it ran)"
fi
job=$(api GET "/jobs/$id")
jq -r '"job \(.id) \(.state) after \(.progress.iteration) iterations, MSE \(.metrics.loss // "not finite")"' <<<"$job"
[ "$(jq -r .state <<<"$job")" = succeeded ]
