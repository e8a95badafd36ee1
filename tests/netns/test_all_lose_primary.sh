#!/bin/bash
# All locations lose the primary, each in its own way: loc1 gets TCP resets (iptables REJECT),
# loc2 a blackhole (nft drop), loc3 resets too. Primary health 0/3 with the secondary 3/3: after
# failover_after rounds the daemon fails over (exec steps warm, then failover) and the
# secondary serves.
# usage: test_all_lose_primary.sh FAILOVERD FAILOVERCTL DELAY_PROXY
set -euo pipefail
. "$(dirname "$0")/testbed.sh"
tb_args "$@"
tb_begin
tb_start_all

tb_fault_reset loc1 primary
tb_fault_blackhole loc2 primary
tb_fault_reset loc3 primary
tb_log "fault: reset at loc1 and loc3, blackhole at loc2 (all towards the primary)"
tb_wait_for "the failover to finish" 20 'g["state"] == "secondary_active" and g["active"] == "secondary"'
tb_log "ok: failed over"
tb_wait_for "every location to see the primary fail, the secondary healthy" 10 \
  'P["healthy"] == 0 and P["reporting"] == 3 and S["healthy"] == 3
   and probe("primary", "loc1")["error"] == "http: connection refused"
   and probe("primary", "loc2")["error"].startswith("http: timeout after")
   and probe("primary", "loc3")["error"] == "http: connection refused"'
[ "$(tb_steps | tr '\n' ' ')" = "warm failover " ] ||
  tb_fail "exec steps: want 'warm failover', got: $(tb_steps)"
tb_log "ok: exec steps ran: warm, failover"
tb_transitions >"$TB_DIR/transitions"
cat "$TB_DIR/transitions"
grep -Eq '^primary_degraded>failing_over failing over: primary 0/[23] for 3 rounds' "$TB_DIR/transitions" ||
  tb_fail "no 'failing over: primary 0/3 (or 0/2) for 3 rounds' transition"
grep -q '^failing_over>secondary_active ' "$TB_DIR/transitions" ||
  tb_fail "no failing_over>secondary_active transition"
tb_daemon_alive
tb_log "PASS: all locations lose the primary -> failover"
