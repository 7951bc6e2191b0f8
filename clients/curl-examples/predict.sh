#!/usr/bin/env bash
# predict.sh JOB_ID ROW [ROW...]: the trained model's predictions for rows of feature values, each
# ROW comma-separated in the training CSV's feature order (DC-taxi: pickup lat,lon, dropoff lat,lon,
# year, month, day of week, hour), e.g.
#   predict.sh 3f9c0a1b2c3d4e5f 38.9,-77.03,38.91,-77.02,2017,3,2,14
set -euo pipefail
. "$(dirname "$0")/common.sh"
id=${1:?usage: predict.sh JOB_ID ROW [ROW...]}
shift
[ $# -gt 0 ] || { echo "usage: predict.sh JOB_ID ROW [ROW...]" >&2; exit 2; }
rows=$(printf '[%s]\n' "$@" | jq -sc '{rows: .}')
api POST "/jobs/$id/predict" -H 'Content-Type: application/json' -d "$rows" | jq -r '.predictions[]'
