#!/usr/bin/env bash
# User-space instructions per HTTP probe, counted by callgrind: a measure that a busy shared
# machine cannot blur, for comparing builds of probe_bench (kernel work is not counted).
#   bench/probe_callgrind.sh BUILD_DIR [BUILD_DIR...]    (each holds bench/probe_bench)
# Environment: TARGETS [1000], ROUNDS [3], CONCURRENCY [16], TOP [0]: also list the TOP
# functions by exclusive instructions. Starts its own nginx on 127.0.0.1 (stopped on exit).
set -euo pipefail
(($# >= 1)) || { echo "usage: $0 BUILD_DIR [BUILD_DIR...]" >&2; exit 2; }
TARGETS=${TARGETS:-1000}
ROUNDS=${ROUNDS:-3}
CONCURRENCY=${CONCURRENCY:-16}
TOP=${TOP:-0}
# shellcheck source=bench/nginx_targets.sh
source "$(dirname "$0")/nginx_targets.sh"
for tool in nginx valgrind callgrind_annotate curl python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done

T=$(mktemp -d)
NGINX_PID=""
cleanup() {
  [[ -n $NGINX_PID ]] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null
  [[ -n ${KEEP:-} ]] || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
nginx_targets_conf "$T/nginx" "$PORT"
nginx -e "$T/nginx/error.log" -c "$T/nginx/nginx.conf" -p "$T/nginx" -g 'daemon off;' &
NGINX_PID=$!
BASE=http://127.0.0.1:$PORT/t/
for _ in $(seq 250); do
  curl -sf --noproxy '*' -o /dev/null "${BASE}0" && break
  sleep 0.02
done

echo "targets=$TARGETS rounds=$ROUNDS concurrency=$CONCURRENCY"
echo "| build | probes | instructions (user space) | per probe |"
echo "|---|---|---|---|"
for dir in "$@"; do
  out=$T/callgrind.out
  line=$(valgrind --tool=callgrind --callgrind-out-file="$out" "$dir/bench/probe_bench" \
    --base "$BASE" --targets "$TARGETS" --rounds "$ROUNDS" --concurrency "$CONCURRENCY" \
    --timeout-ms 30000 2>/dev/null)
  probes=$(sed -n 's/.*probes=\([0-9]*\).*/\1/p' <<<"$line")
  total=$(sed -n 's/^summary: *//p; s/^totals: *//p' "$out" | head -1)
  echo "| $dir | $probes | $total | $(awk -v t="$total" -v p="$probes" 'BEGIN{printf "%.0f", t/p}') |"
  if ((TOP > 0)); then
    callgrind_annotate --inclusive=no "$out" 2>/dev/null | sed -n '/^Ir/,$p' | sed -n "3,$((TOP + 2))p" \
      >"$T/top.txt"
    sed 's/^/    /' "$T/top.txt"
  fi
done
