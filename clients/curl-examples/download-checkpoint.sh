#!/usr/bin/env bash
# download-checkpoint.sh JOB_ID [FILE]: saves the job's latest checkpoint (.safetensors, PyTorch
# state_dict names: w and b for the linear model) to FILE (default: the name the daemon gives).
# Load it in Python: from safetensors.torch import load_file; load_file("FILE")
set -euo pipefail
. "$(dirname "$0")/common.sh"
id=${1:?usage: download-checkpoint.sh JOB_ID [FILE]}
auth=()
[ -n "${TRAIND_TOKEN:-}" ] && auth=(-H "Authorization: Bearer $TRAIND_TOKEN")
if [ -n "${2:-}" ]; then
  out=(-o "$2")
else
  out=(-O -J)   # the file name from Content-Disposition: <job id>-iter-<N>.safetensors
fi
code=$(curl -sS "${auth[@]}" -w '%{http_code}' "${out[@]}" "$TRAIND_URL/jobs/$id/checkpoint")
if [ "$code" != 200 ]; then
  echo "GET /jobs/$id/checkpoint: HTTP $code" >&2
  exit 1
fi
echo "saved the checkpoint of job $id${2:+ to $2}"
