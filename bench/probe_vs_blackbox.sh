#!/usr/bin/env bash
# Probe engine vs prometheus-blackbox-exporter, side by side in one run, against the same local
# nginx and the same N targets (http://127.0.0.1:PORT/t/<i>). Prints a Markdown table of
# probes/s, CPU time per probe and RSS for both, and the CPU ratio. See bench/README.md.
#   bench/probe_vs_blackbox.sh [BUILD_DIR]       (default: build-bench next to this folder)
# Environment (defaults in brackets):
#   TARGETS [2000]         distinct target URLs
#   DURATION [10]          seconds of load per measured run
#   CONCURRENCY [16]       probes in flight, the same for the exporter and for us
#   OUR_CONCURRENCY2 [256] a second run of ours at the daemon's default limit ("" to skip)
#   PIN [1]                1: the measured prober on CPU 0, nginx and the load driver on CPU 1
#   RT [1]                 1: every process started here runs SCHED_RR (chrt -r 10), so a busy
#                          shared VM does not turn the run into a measure of wake-up delays;
#                          the kernel's RT throttling still leaves 5 % of each CPU to others
#   NICE [-10]             with RT=0: niceness of every process started here
#   BUILD [1]              0: use the binaries already in BUILD_DIR
#   ABORTIVE [0]           1: probe_bench --abortive-close (RST instead of FIN; the daemon's
#                          default is an ordinary close, so the default run measures that)
# Everything listens on 127.0.0.1 only, and everything started here is stopped on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/nginx_targets.sh
source "$ROOT/bench/nginx_targets.sh"
BUILD_DIR=${1:-$ROOT/build-bench}
TARGETS=${TARGETS:-2000}
DURATION=${DURATION:-10}
CONCURRENCY=${CONCURRENCY:-16}
OUR_CONCURRENCY2=${OUR_CONCURRENCY2-256}
PIN=${PIN:-1}
RT=${RT:-1}
NICE=${NICE:--10}
ABORTIVE=${ABORTIVE:-0}
READY_TIMEOUT_S=10

for tool in nginx prometheus-blackbox-exporter curl python3 taskset chrt pgrep; do
  command -v "$tool" >/dev/null || { echo "missing $tool (scripts/install-deps.sh)" >&2; exit 1; }
done

if [[ ${BUILD:-1} == 1 ]]; then
  # -Wno-restrict: GCC 12 at -O3 reports a false -Wrestrict in std::string (GCC bug 105329).
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFO_BUILD_TESTS=OFF \
    -DCMAKE_CXX_FLAGS=-Wno-restrict >/dev/null
  cmake --build "$BUILD_DIR" --target bench >/dev/null
fi
PROBE_BENCH=$BUILD_DIR/bench/probe_bench
DRIVER=$BUILD_DIR/bench/probe_bbe_driver

T=$(mktemp -d)
NGINX_PID="" BBE_PID=""
cleanup() {
  for pid in $BBE_PID $NGINX_PID; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in $BBE_PID $NGINX_PID; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ $PIN == 1 ]]; then
  ON_PROBER=(taskset -c 0) ON_OTHER=(taskset -c 1) PROBER_CPU=(--cpu 0) DRIVER_CPU=(--cpu 1)
else
  ON_PROBER=() ON_OTHER=() PROBER_CPU=() DRIVER_CPU=()
fi
if [[ $RT == 1 ]]; then
  NICED=(chrt -r 10)
else
  NICED=(nice -n "$NICE")
fi

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# until CMD succeeds or READY_TIMEOUT_S passes
wait_for() {
  local deadline=$((SECONDS + READY_TIMEOUT_S))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "not ready after ${READY_TIMEOUT_S}s: $*" >&2; return 1; }
    sleep 0.02
  done
}

# utime+stime of PID in seconds (/proc/PID/stat fields 14 and 15, after the "(comm)" field)
proc_cpu() {
  local rest
  rest=$(sed 's/^.*) //' "/proc/$1/stat")
  awk -v tck="$(getconf CLK_TCK)" '{printf "%.3f", ($12 + $13) / tck}' <<<"$rest"
}
proc_kib() {  # PID FIELD (VmHWM, VmRSS) in KiB
  awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"
}
kv() {  # KEY LINE: the value of KEY=value in LINE
  sed -n "s/.*[ :]$1=\([^ ]*\).*/\1/p" <<<"$2"
}
calc() { awk "BEGIN{printf \"$1\", $2}"; }

# --- nginx: 200 and a 3-byte body for every /t/<i> -------------------------------------------
NPORT=$(free_port)
nginx_targets_conf "$T/nginx" "$NPORT"
"${NICED[@]}" "${ON_OTHER[@]}" nginx -e "$T/nginx/error.log" -c "$T/nginx/nginx.conf" -p "$T/nginx" \
  -g 'daemon off;' &
NGINX_PID=$!
BASE=http://127.0.0.1:$NPORT/t/
wait_for curl -sf --noproxy '*' -o /dev/null "${BASE}0"
NGINX_WORKER=$(pgrep -P "$NGINX_PID")  # does the work; the master only supervises

# --- blackbox exporter with an http_2xx module ----------------------------------------------
BPORT=$(free_port)
cat >"$T/blackbox.yml" <<'EOF'
modules:
  http_2xx:
    prober: http
    timeout: 5s
    http:
      preferred_ip_protocol: ip4
      valid_status_codes: [200]
EOF
"${NICED[@]}" "${ON_PROBER[@]}" prometheus-blackbox-exporter --config.file="$T/blackbox.yml" \
  --web.listen-address="127.0.0.1:$BPORT" >"$T/bbe.log" 2>&1 &
BBE_PID=$!
PROBE_URL="http://127.0.0.1:$BPORT/probe?module=http_2xx&target="
bbe_ok() { curl -sf --noproxy '*' "${PROBE_URL}${BASE}0" | grep -q '^probe_success 1$'; }
wait_for bbe_ok

echo "machine: $(nproc) CPU(s), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
  "kernel $(uname -r); nginx $(nginx -v 2>&1 | cut -d/ -f2)," \
  "blackbox_exporter $(prometheus-blackbox-exporter --version 2>&1 | sed -n '1s/.*version \([^ ]*\).*/\1/p')"
echo "targets=$TARGETS duration=${DURATION}s concurrency=$CONCURRENCY pin=$PIN rt=$RT" \
  "abortive_close=$ABORTIVE $([[ $RT == 1 ]] || echo "nice=$NICE")"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# --- exporter: warm up, then measure its CPU from /proc around the driver's run --------------
"${NICED[@]}" "$DRIVER" --probe-url "$PROBE_URL" --base "$BASE" --targets "$TARGETS" --duration 1 \
  --concurrency "$CONCURRENCY" "${DRIVER_CPU[@]}" >/dev/null
bbe_cpu0=$(proc_cpu "$BBE_PID")
nginx_cpu0=$(proc_cpu "$NGINX_WORKER")
drv=$("${NICED[@]}" "$DRIVER" --probe-url "$PROBE_URL" --base "$BASE" --targets "$TARGETS" \
  --duration "$DURATION" --concurrency "$CONCURRENCY" "${DRIVER_CPU[@]}") || {
  echo "driver reported failed probes: $drv" >&2
  exit 1
}
bbe_cpu=$(calc %.3f "$(proc_cpu "$BBE_PID") - $bbe_cpu0")
bbe_nginx_cpu=$(calc %.3f "$(proc_cpu "$NGINX_WORKER") - $nginx_cpu0")
bbe_hwm=$(proc_kib "$BBE_PID" VmHWM)
bbe_n=$(kv success "$drv")
bbe_failed=$(kv failed "$drv")
bbe_wall=$(kv wall_s "$drv")
bbe_rate=$(calc %.0f "$bbe_n / $bbe_wall")
bbe_us=$(calc %.1f "$bbe_cpu / $bbe_n * 1e6")
kill "$BBE_PID"
wait "$BBE_PID" 2>/dev/null || true
BBE_PID=""

# --- ours: probe_bench through ProbeDispatcher, same nginx and targets -----------------------
# Three runs: at the exporter's rate (rounds every TARGETS/rate s: CPU per probe compared at
# equal load), back to back (capacity of one core), and back to back at OUR_CONCURRENCY2.
ours() {  # CONCURRENCY [INTERVAL_MS]: sets ours_out (probe_bench's key=value line), ours_nginx
  local n0 pace=()
  [[ -n ${2:-} ]] && pace=(--interval-ms "$2")
  [[ $ABORTIVE == 1 ]] && pace+=(--abortive-close)
  n0=$(proc_cpu "$NGINX_WORKER")
  ours_out=$("${NICED[@]}" "$PROBE_BENCH" --base "$BASE" --targets "$TARGETS" \
    --duration "$DURATION" --concurrency "$1" "${pace[@]}" "${PROBER_CPU[@]}") || {
    echo "probe_bench reported errors: $ours_out" >&2
    exit 1
  }
  ours_nginx=$(calc %.3f "$(proc_cpu "$NGINX_WORKER") - $n0")
}
pace_ms=$(calc %.0f "$TARGETS * 1000 / $bbe_rate")
ours "$CONCURRENCY" "$pace_ms"
paced_line=$ours_out paced_nginx=$ours_nginx
ours "$CONCURRENCY"
full_line=$ours_out full_nginx=$ours_nginx
full2_line=""
if [[ -n $OUR_CONCURRENCY2 ]]; then
  ours "$OUR_CONCURRENCY2"
  full2_line=$ours_out full2_nginx=$ours_nginx
fi

row() {  # NAME CONCURRENCY PROBES ERRORS RATE CPU_US BUSY RSS_KIB NGINX_CPU_S
  printf '| %s | %s | %s | %s | %s | %s µs | %s %% | %s MiB | %s µs |\n' "$1" "$2" "$3" "$4" "$5" \
    "$6" "$7" "$(calc %.1f "$8 / 1024")" "$(calc %.0f "$9 / $3 * 1e6")"
}
ours_row() {  # NAME CONCURRENCY LINE NGINX_CPU_S
  row "$1" "$2" "$(kv probes "$3")" "$(kv errors "$3")" "$(kv probes_per_s "$3")" \
    "$(kv cpu_us_per_probe "$3")" "$(calc %.0f "$(kv cpu_s "$3") / $(kv wall_s "$3") * 100")" \
    "$(kv maxrss_kib "$3")" "$4"
}
echo
echo "| prober | in flight | probes | errors | probes/s | CPU per probe | CPU busy | max RSS |" \
  "nginx CPU per probe |"
echo "|---|---|---|---|---|---|---|---|---|"
row "blackbox_exporter, as fast as it goes" "$CONCURRENCY" "$bbe_n" "$bbe_failed" "$bbe_rate" \
  "$bbe_us" "$(calc %.0f "$bbe_cpu / $bbe_wall * 100")" "$bbe_hwm" "$bbe_nginx_cpu"
ours_row "failoverd, same rate (a round every $pace_ms ms)" "$CONCURRENCY" "$paced_line" \
  "$paced_nginx"
ours_row "failoverd, as fast as it goes" "$CONCURRENCY" "$full_line" "$full_nginx"
if [[ -n $full2_line ]]; then
  ours_row "failoverd, as fast as it goes" "$OUR_CONCURRENCY2" "$full2_line" "$full2_nginx"
fi
echo
echo "exporter load driver (not charged to the exporter): $(kv cpu_us_per_request "$drv") µs CPU" \
  "per request, $(kv requests_per_s "$drv") requests/s"
ratio() { calc %.1f "$bbe_us / $(kv cpu_us_per_probe "$1")"; }
echo "CPU per probe, blackbox_exporter / failoverd: $(ratio "$paced_line")x at the same rate," \
  "$(ratio "$full_line")x against ours at full speed ($CONCURRENCY in flight)"
if [[ -n $full2_line ]]; then
  echo "CPU per probe, blackbox_exporter / failoverd at $OUR_CONCURRENCY2 in flight, full speed:" \
    "$(ratio "$full2_line")x"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
