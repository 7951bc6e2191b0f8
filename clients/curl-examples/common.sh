# Sourced by every example: where the daemon is, and curl with the right headers.
# TRAIND_URL (default http://127.0.0.1:8470); TRAIND_TOKEN if the daemon has --token-file.
TRAIND_URL=${TRAIND_URL:-http://127.0.0.1:8470}

api() {  # api METHOD PATH [curl args...]: prints the body; fails with the API's error on 4xx/5xx
  local method=$1 path=$2; shift 2
  local auth=()
  [ -n "${TRAIND_TOKEN:-}" ] && auth=(-H "Authorization: Bearer $TRAIND_TOKEN")
  local out code
  out=$(curl -sS -X "$method" "${auth[@]}" -w '\n%{http_code}' "$@" "$TRAIND_URL$path") || return 1
  code=${out##*$'\n'}
  out=${out%$'\n'*}
  if [ "$code" -ge 400 ]; then
    echo "$method $path: HTTP $code: $out" >&2
    return 1
  fi
  printf '%s\n' "$out"
}
