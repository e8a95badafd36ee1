#!/bin/bash
# End-to-end failover time (issue #5, "Performance"): in the testbed of tests/e2e/testbed.sh
# (site namespaces with HTTP servers, BIND with TSIG, PostgreSQL primary + standby, failoverd
# with interval = "1s" and failover_after = 3), the time from killing the primary's HTTP server
# process (SIGKILL) to the moment every authoritative server answers with the secondary's
# address, polled with dig every 20 ms. Each run builds a fresh testbed; the kill lands at a
# random point of the probe interval. Prints one line per run with the daemon's own timestamps
# (first failed round, failover decision, each step), then min / median / max.
# usage: bench/e2e_failover.sh [BUILD_DIR]   (default build-e2e; RUNS=5 by default; needs root)
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$REPO/build-e2e}
RUNS=${RUNS:-5}
E2E_FAILOVERD=$BUILD/daemon/failoverd
E2E_CTL=$BUILD/ctl/failoverctl
export E2E_FAILOVERD E2E_CTL
# shellcheck source=tests/e2e/testbed.sh
source "$REPO/tests/e2e/testbed.sh"

E2E_INTERVAL=1s
E2E_PROBE_TIMEOUT=800ms
E2E_WARM=1
E2E_REWIND=0
E2E_POLICY='failover_after = 3
failback_stable = "1h"
min_dwell = "1s"'

# Milliseconds since the epoch of the first daemon log line matching PATTERN (spdlog prints
# local wall time with milliseconds).
log_ms() {
  local line
  line=$(grep -m1 -E "$1" "$T/daemon.log") || { echo -1; return; }
  echo $(($(date -d "${line:0:23}" +%s%N) / 1000000))
}

measure() {
  local t_kill t_done
  # A random phase of the 1 s probe interval.
  sleep "0.$(printf '%03d' $((RANDOM % 1000)))"
  t_kill=$(e2e_now_ms)
  e2e_http_kill primary
  until e2e_dns_is "$E2E_SECONDARY_IP"; do
    [ $(($(e2e_now_ms) - t_kill)) -lt 30000 ] || e2e_fail "no DNS switch within 30 s"
    sleep 0.02
  done
  t_done=$(e2e_now_ms)
  local degraded failing plan pg dns
  degraded=$(log_ms 'primary_active -> primary_degraded')
  failing=$(log_ms 'primary_degraded -> failing_over')
  plan=$(log_ms 'running failover plan')
  pg=$(log_ms 'failover step 0 \(promote-secondary-db\) ok')
  dns=$(log_ms 'failover step 1 \(www-record\) ok')
  echo "RESULT total_ms=$((t_done - t_kill)) first_failed_round_ms=$((degraded - t_kill))" \
    "decision_ms=$((failing - t_kill))" \
    "plan_start_ms=$((plan - t_kill)) postgres_done_ms=$((pg - t_kill)) dns_done_ms=$((dns - t_kill))"
}

if [ -n "${E2E_BENCH_ONE:-}" ]; then
  e2e_main measure "$@"
  exit $?
fi

[ -x "$E2E_FAILOVERD" ] && [ -x "$E2E_CTL" ] ||
  e2e_fail "build failoverd and failoverctl first: cmake --build $BUILD --target failoverd failoverctl"
echo "machine: $(nproc) vCPU, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
totals=()
for i in $(seq "$RUNS"); do
  out=$(E2E_BENCH_ONE=1 "$0" "$@" 2>&1) || { echo "$out" >&2; e2e_fail "run $i failed"; }
  line=$(grep '^RESULT' <<<"$out")
  echo "run $i: ${line#RESULT }"
  totals+=("$(sed -n 's/.*total_ms=\([0-9]*\).*/\1/p' <<<"$line")")
done
sorted=$(printf '%s\n' "${totals[@]}" | sort -n)
echo "total_ms min $(head -1 <<<"$sorted") median $(sed -n "$(((RUNS + 1) / 2))p" <<<"$sorted")" \
  "max $(tail -1 <<<"$sorted") (target <= 3500, detection floor 3000)"
