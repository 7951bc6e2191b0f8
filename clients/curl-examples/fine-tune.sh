#!/usr/bin/env bash
# fine-tune.sh TRAIN_URL FROM [EPOCHS]: trains the DC-taxi linear model for EPOCHS passes over
# TRAIN_URL (default 1), starting from FROM: a job id (its latest checkpoint) or the URL or path
# of a .safetensors file (only the parameters; a fresh optimizer). Prints the new job's id.
#   ./fine-tune.sh "file://$PWD/traind-sample/dc-taxi/csv/dev/part*.csv" 3f9c0a1b2c3d4e5f 2
set -euo pipefail
. "$(dirname "$0")/common.sh"
train=${1:?usage: fine-tune.sh TRAIN_URL FROM [EPOCHS]}
from=${2:?usage: fine-tune.sh TRAIN_URL FROM [EPOCHS]}
epochs=${3:-1}
spec=$(jq -n --arg train "$train" --arg from "$from" --argjson epochs "$epochs" '{
  name: "dc-taxi-fine-tune",
  data: {train: $train},
  model: {type: "linear"},
  loss: "mse",
  optimizer: {type: "sgd", lr: 0.03},
  clip_grad_norm: 0.5,
  batch_size: 1048576,
  epochs: $epochs,
  dtype: "float64",
  init: {from: $from}
}')
api POST /jobs -H 'Content-Type: application/json' --data-binary "$spec" | jq -r .id
