#!/bin/bash
# Agents that go away: loc2's agent is killed (SIGKILL: connections refused), later loc3's is
# frozen (SIGSTOP: connections accepted, never answered). Each time that location is stale with
# the reason, its results are missing (not failures: primary 2/2, nothing warmed), the daemon
# keeps running its rounds, and the location comes back when its agent does.
# usage: test_agent_killed.sh FAILOVERD FAILOVERCTL DELAY_PROXY
set -euo pipefail
. "$(dirname "$0")/testbed.sh"
tb_args "$@"
tb_begin
tb_start_all

kill -KILL "$(tb_agent_pid loc2)"
tb_log "fault: loc2's agent killed"
tb_wait_for "loc2 to be stale" 10 \
  'L["loc2"]["stale"] and L["loc2"]["detail"].startswith("agent: cannot connect")'
tb_wait_rounds 10 10
tb_expect "loc2 missing, primary 2/2, still primary_active" \
  'L["loc2"]["primary"] == "missing" and L["loc2"]["secondary"] == "missing"
   and P["healthy"] == 2 and P["reporting"] == 2 and S["reporting"] == 2
   and g["state"] == "primary_active" and not L["loc1"]["stale"] and not L["loc3"]["stale"]'
tb_daemon_alive
tb_start_agent loc2
tb_log "loc2's agent restarted"
# The daemon backs a failed agent off (1 s, 2 s, 4 s ... with jitter): it returns within seconds.
tb_wait_for "loc2 to report again" 20 'not L["loc2"]["stale"] and P["healthy"] == 3 and L["loc2"]["detail"] == ""'

kill -STOP "$(tb_agent_pid loc3)"
tb_log "fault: loc3's agent frozen (SIGSTOP)"
tb_wait_for "loc3 to be stale" 10 \
  'L["loc3"]["stale"] and L["loc3"]["detail"].startswith("agent: no answer within")'
tb_wait_rounds 10 10
tb_expect "loc3 missing, primary 2/2, still primary_active" \
  'L["loc3"]["primary"] == "missing" and P["healthy"] == 2 and P["reporting"] == 2
   and g["state"] == "primary_active"'
tb_daemon_alive
kill -CONT "$(tb_agent_pid loc3)"
tb_log "loc3's agent continued"
tb_wait_for "loc3 to report again" 20 'not L["loc3"]["stale"] and P["healthy"] == 3'

[ -z "$(tb_steps)" ] || tb_fail "missing locations made steps run: $(tb_steps)"
[ -z "$(tb_transitions)" ] || tb_fail "missing locations made transitions: $(tb_transitions)"
tb_log "ok: no steps, no transitions"
tb_daemon_alive
tb_log "PASS: killed and frozen agents -> stale, missing (not failing), daemon unharmed, recovery"
