#!/usr/bin/env bash
# submit-dc-taxi.sh TRAIN_URL [ITERATIONS] [MORE_JSON]: submits PyTorch's DC-taxi baseline
# (linear regression, float64, batch 2^20, SGD lr 0.03, clip_grad_norm 0.5) and prints the job id;
# MORE_JSON's fields are added to the spec or replace its own (e.g. '{"replicas": 2}').
#   ./submit-dc-taxi.sh "file://$PWD/traind-sample/dc-taxi/csv/dev/part*.csv"
set -euo pipefail
. "$(dirname "$0")/common.sh"
train=${1:?usage: submit-dc-taxi.sh TRAIN_URL [ITERATIONS] [MORE_JSON]}
iterations=${2:-50}
more=${3:-'{}'}
spec=$(jq -n --arg train "$train" --argjson iterations "$iterations" --argjson more "$more" '{
  name: "dc-taxi-baseline",
  data: {train: $train, label: 0, features: "rest"},
  model: {type: "linear"},
  loss: "mse",
  optimizer: {type: "sgd", lr: 0.03},
  clip_grad_norm: 0.5,
  batch_size: 1048576,
  iterations: $iterations,
  dtype: "float64",
  seed: 0
} + $more')
api POST /jobs -H 'Content-Type: application/json' --data-binary "$spec" | jq -r .id
