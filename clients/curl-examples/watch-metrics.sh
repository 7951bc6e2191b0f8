#!/usr/bin/env bash
# watch-metrics.sh JOB_ID: prints one line per iteration as the PyTorch training loop does,
#   Iteration: 049, Seconds/Iteration: 0.009 MSE: 583.92
# (MSE: nan where the loss was not finite, as PyTorch prints it)
# (with " Eval loss: 455.10" added where the job evaluated on its data.test)
# until the job ends; exits non-zero if it did not succeed.
set -euo pipefail
. "$(dirname "$0")/common.sh"
id=${1:?usage: watch-metrics.sh JOB_ID}
since=0
while :; do
  state=$(api GET "/jobs/$id" | jq -r .state)
  page=$(api GET "/jobs/$id/metrics?since=$since")
  jq -r '.columns as $c | .rows[]
         | [.[$c | index("iteration")], .[$c | index("seconds_per_iteration")], .[$c | index("loss")],
            (($c | index("eval_loss")) as $e | if $e then .[$e] else null end // "")]
         | @tsv' <<<"$page" |
    awk -F'\t' '{ printf "Iteration: %03d, Seconds/Iteration: %.3f MSE: ", $1, $2
                  if ($3 == "") printf "nan"; else printf "%.2f", $3   # null: not finite
                  if ($4 != "") printf " Eval loss: %.2f", $4
                  printf "\n" }'
  since=$(jq -r .next_since <<<"$page")
  case $state in
    succeeded) exit 0 ;;
    failed|cancelled)
      api GET "/jobs/$id" | jq -r '"job \(.id) \(.state): \(.error.code // "") \(.error.message // "")"' >&2
      exit 1 ;;
  esac
  sleep 0.5
done
