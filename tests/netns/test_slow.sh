#!/bin/bash
# Slow answers at one location: loc1's connections to the primary go through a delay proxy
# (DNAT in loc1's namespace). 500 ms, beyond the 150 ms probe timeout: loc1's probe times out
# (unhealthy, as probes.md documents; loc1's agent still answers within the round, so the
# location is not stale), the primary is 2/3, no failover. 60 ms, within the timeout: healthy,
# and the latency the probe reports includes the delay.
# usage: test_slow.sh FAILOVERD FAILOVERCTL DELAY_PROXY
set -euo pipefail
. "$(dirname "$0")/testbed.sh"
tb_args "$@"
tb_begin
tb_start_all

tb_fault_slow loc1 500 primary
tb_log "fault: loc1 -> primary answers 500 ms late"
# The proxy delays, it does not drop: a patient client in loc1 gets its answer.
out=$(tb_exec loc1 curl -s -o /dev/null --noproxy '*' --max-time 5 -w '%{http_code} %{time_total}' \
  "http://$(tb_addr primary):$TB_SITE_PORT/health" || true)
"$TB_PY" -c 'import sys; c, t = sys.argv[1].split(); assert c == "200" and float(t) >= 0.5' "$out" ||
  tb_fail "curl from loc1 through the delay proxy: '$out' (want 200 after >= 0.5 s)"
tb_log "ok: curl from loc1 through the proxy: $out"

slow='L["loc1"]["primary"] == "unhealthy" and not L["loc1"]["stale"] and L["loc1"]["detail"] == ""
  and probe("primary", "loc1")["error"].startswith("http: timeout after")
  and L["loc1"]["secondary"] == "healthy" and P["healthy"] == 2 and P["reporting"] == 3
  and S["healthy"] == 3'
tb_wait_for "loc1's probe of the primary to time out, loc1 still answering" 10 "$slow"
tb_log "ok: loc1 unhealthy (timeout), not stale; primary 2/3"
tb_wait_rounds 20 20
tb_wait_for "the same after 20 more rounds" 5 "$slow"
tb_expect "degraded, not failing over" 'g["state"] == "primary_degraded" and g["rounds_below"] == 0'
tb_expect_no_failover

tb_fault_clear loc1
tb_fault_slow loc1 60 primary
tb_log "fault: loc1 -> primary answers 60 ms late"
tb_wait_for "loc1 to see the primary healthy, at least 60 ms late" 10 \
  'L["loc1"]["primary"] == "healthy" and probe("primary", "loc1")["latency_ms"] >= 60'
tb_wait_for "primary 3/3" 10 'P["healthy"] == 3'
tb_expect_no_failover
tb_daemon_alive
tb_log "PASS: slow answers beyond the timeout -> unhealthy at that location, no failover"
