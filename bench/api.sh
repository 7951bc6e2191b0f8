#!/usr/bin/env bash
# bench/api.sh: HTTP throughput and latency of traind's read endpoints while a CPU job trains,
# and the idle daemon's resident memory. Needs wrk (apt-get install wrk; not part of CI).
#   bench/api.sh [build/traind]        REPEAT=3 DURATION=10 CONNECTIONS=32 THREADS=2 to change
#   RSS_ALSO=build-nocuda/traind bench/api.sh   also the idle RSS of other builds (e.g. -Dcuda=disabled)
# The metrics requests: a follower's (rows from since=N, a page of at most 100) and a first
# load's (10,000 rows from the start).
# Prints each endpoint's requests/s and p99 latency over REPEAT runs of DURATION seconds (min and
# median), against the targets: GET /jobs/{id} >= 20000 req/s with p99 < 5 ms; idle RSS < 20 MB.
set -euo pipefail

bin=${1:-build/traind}
repeat=${REPEAT:-3}
duration=${DURATION:-10}
conns=${CONNECTIONS:-32}
threads=${THREADS:-2}
gen=$(dirname "$bin")/tools/gen-dctaxi
command -v wrk >/dev/null || { echo "bench/api.sh needs wrk: apt-get install wrk" >&2; exit 2; }
[ -x "$bin" ] && [ -x "$gen" ] || { echo "build first: meson setup build && ninja -C build ($bin, $gen)" >&2; exit 2; }

dir=$(mktemp -d /tmp/traind-bench-XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

"$gen" --rows 200000 --partitions 4 "$dir/dev" >/dev/null
"$bin" --listen 127.0.0.1:0 --port-file "$dir/port" --state-dir "$dir/state" --data-root "$dir/dev" \
  --log-level warn 2>"$dir/traind.log" &
pid=$!
for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
url=http://127.0.0.1:$(cat "$dir/port")
sleep 0.5
rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
# /version's "cuda" is null in a build without the CUDA backend.
kind() { if curl -sS "$1/version" | grep -q '"cuda":null'; then echo "no CUDA"; else echo "CUDA build"; fi; }
kind_main=$(kind "$url")

# Another build's idle RSS: started alone, measured after the same 0.5 s, stopped.
idle_rss() {  # idle_rss BIN -> "KB KIND"
  local d p kb k
  d=$(mktemp -d "$dir/rss-XXXXXX")
  "$1" --listen 127.0.0.1:0 --port-file "$d/port" --state-dir "$d/state" --data-root "$dir/dev" \
    --log-level warn 2>"$d/traind.log" &
  p=$!
  for _ in $(seq 1 100); do [ -s "$d/port" ] && break; sleep 0.05; done
  sleep 0.5
  kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status")
  k=$(kind "http://127.0.0.1:$(cat "$d/port")")
  kill "$p" && wait "$p" || true
  echo "$kb $k"
}

# A CPU job that trains for the whole benchmark: the DC-taxi baseline with 2^16-row batches.
id=$(curl -sS -H 'Content-Type: application/json' "$url/jobs" -d "{
  \"name\": \"bench\", \"data\": {\"train\": \"$dir/dev/part*.csv\"},
  \"optimizer\": {\"type\": \"sgd\", \"lr\": 0.03}, \"clip_grad_norm\": 0.5,
  \"batch_size\": 65536, \"iterations\": 1000000000}" | sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p')
[ -n "$id" ] || { echo "could not submit the job" >&2; exit 1; }
sleep 1

# wrk's summary: "Requests/sec: N" and, with --latency, the "99%" percentile line.
run() {
  local out rps p99
  out=$(wrk -t"$threads" -c"$conns" -d"${duration}s" --latency "$1")
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {v = $2; if (v ~ /us$/) {sub(/us$/, "", v); v /= 1000} else if (v ~ /ms$/) {sub(/ms$/, "", v)} else if (v ~ /s$/) {sub(/s$/, "", v); v *= 1000}; print v}' <<<"$out")
  echo "$rps $p99"
}

# min and median of a column of numbers
stats() { sort -g | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f %.1f\n", v[1], m}'; }
stats_ms() { sort -g | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f %.2f\n", v[1], m}'; }

report() {  # report NAME URL
  local name=$1 target=$2 rps=() p99=()
  for _ in $(seq 1 "$repeat"); do
    read -r r p < <(run "$target")
    rps+=("$r")
    p99+=("$p")
  done
  read -r rmin rmed < <(printf '%s\n' "${rps[@]}" | stats)
  read -r pmin pmed < <(printf '%s\n' "${p99[@]}" | stats_ms)
  printf '%-34s %12s %12s %10s %10s\n' "$name" "$rmin" "$rmed" "$pmin" "$pmed"
}

since=$(curl -sS "$url/jobs/$id" | sed -n 's/.*"progress":{"iteration":\([0-9]*\).*/\1/p')
echo "traind $("$bin" --version | cut -d' ' -f2), $(nproc) CPUs, wrk -t$threads -c$conns, ${duration}s x $repeat runs, job $id training"
printf '%-34s %12s %12s %10s %10s\n' "endpoint" "req/s min" "req/s med" "p99 ms min" "p99 ms med"
report "GET /jobs/{id}" "$url/jobs/$id"
report "GET /jobs/{id}/metrics?since=N" "$url/jobs/$id/metrics?since=$since&limit=100"
# A dashboard's first load: 10,000 rows of history in one page (about 1.6 MB of JSON).
report "GET /jobs/{id}/metrics 10k rows" "$url/jobs/$id/metrics?since=0&limit=10000"
iters=$(curl -sS "$url/jobs/$id" | sed -n 's/.*"progress":{"iteration":\([0-9]*\).*/\1/p')
echo "the job ran $iters iterations during the benchmark"
printf 'idle RSS %6.1f MB  %s (%s)  target < 20 MB\n' "$(echo "$rss_kb / 1024" | bc -l)" "$bin" "$kind_main"
for other in ${RSS_ALSO:-}; do
  [ -x "$other" ] || { echo "RSS_ALSO: $other is not an executable" >&2; continue; }
  read -r kb k < <(idle_rss "$other")
  printf 'idle RSS %6.1f MB  %s (%s)  target < 20 MB\n' "$(echo "$kb / 1024" | bc -l)" "$other" "$k"
done
echo "targets: GET /jobs/{id} >= 20000 req/s, p99 < 5 ms"
