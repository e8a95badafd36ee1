#!/bin/bash
# One location blackholed: loc1's packets to the primary vanish (nft drop in loc1's namespace).
# loc1 sees the primary time out, loc2 and loc3 see it healthy: primary health 2/3, the
# secondary is warmed (exec step "warm" ran), and there is no failover however long it lasts.
# When the blackhole goes, the primary is 3/3 again and the secondary is cooled after cool_after.
# usage: test_blackhole.sh FAILOVERD FAILOVERCTL DELAY_PROXY
set -euo pipefail
. "$(dirname "$0")/testbed.sh"
tb_args "$@"
tb_begin
tb_start_all

two_of_three='P["healthy"] == 2 and P["reporting"] == 3 and abs(P["health"] - 2 / 3) < 0.001
  and L["loc1"]["primary"] == "unhealthy" and L["loc1"]["secondary"] == "healthy"
  and L["loc2"]["primary"] == "healthy" and L["loc3"]["primary"] == "healthy"
  and probe("primary", "loc1")["error"].startswith("http: timeout after") and S["healthy"] == 3'

tb_fault_blackhole loc1 primary
tb_log "fault: blackhole loc1 -> primary"
tb_wait_for "primary 2/3: loc1 sees it time out, loc2 and loc3 healthy" 10 "$two_of_three"
tb_log "ok: primary 2/3"
tb_wait_for "the secondary to be warmed" 10 'g["state"] == "primary_degraded" and g["secondary_warm"]'
tb_wait_cmd "the warm step" 10 grep -qx warm "$TB_DIR/steps.log"
tb_log "ok: secondary warmed, warm step ran"

# 20 more rounds (6 s) under the blackhole: still 2/3, and nothing but warm (or cool) happened.
tb_wait_rounds 20 20
tb_wait_for "primary 2/3 after 20 more rounds" 5 "$two_of_three"
tb_expect "no round counts towards failover" 'g["rounds_below"] == 0'
tb_expect_no_failover
tb_daemon_alive

tb_fault_clear loc1
tb_log "fault cleared"
tb_wait_for "the primary to be 3/3 again" 10 'P["healthy"] == 3'
tb_wait_for "the secondary to be cooled (cool_after $TB_COOL_AFTER)" 15 \
  'g["state"] == "primary_active" and not g["secondary_warm"]'
tb_wait_cmd "the cool step" 10 grep -qx cool "$TB_DIR/steps.log"
tb_expect_no_failover
tb_log "PASS: one location blackholed -> 2/3, warmed, no failover; cooled after recovery"
