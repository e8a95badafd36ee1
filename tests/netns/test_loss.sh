#!/bin/bash
# 50 % random packet loss between loc1 and the primary (nft numgen in loc1's namespace) for 200
# rounds of 300 ms (60 s of real time). loc1's verdict on the primary flickers; the primary is
# never below 2/3, so the daemon may warm (and cool) the secondary but never fails over and
# never holds: no flapping.
# usage: test_loss.sh FAILOVERD FAILOVERCTL DELAY_PROXY
set -euo pipefail
. "$(dirname "$0")/testbed.sh"
tb_args "$@"
ROUNDS=${FO_NETNS_LOSS_ROUNDS:-200}
tb_begin
tb_start_all

start=$(tb_rounds)
start_ms=$(date +%s%3N)
tb_fault_loss loc1 50 primary
tb_log "fault: 50% loss loc1 -> primary, for $ROUNDS rounds"
tb_wait_rounds "$ROUNDS" $((ROUNDS * 2 / 5 + 30))
end=$(tb_rounds)
end_ms=$(date +%s%3N)
tb_fault_clear loc1
tb_daemon_alive

# The rounds of the stretch, from the history: how often loc1 saw the primary fail.
"$FAILOVERCTL" --socket "$TB_DIR/control.sock" --json history shop --kind rounds --limit 10000 |
  "$TB_PY" -c '
import json, sys
start, end, start_ms, end_ms = (int(a) for a in sys.argv[1:])
rounds = [r for r in json.load(sys.stdin)["rounds"] if start_ms <= r["ts_ms"] <= end_ms]
full = sum(1 for r in rounds if r["primary"]["healthy"] == 3)
two = sum(1 for r in rounds if r["primary"]["healthy"] == 2 and r["primary"]["reporting"] == 3)
low = sum(1 for r in rounds if r["primary"]["known"] and 2 * r["primary"]["healthy"] < r["primary"]["reporting"])
print(f"rounds {len(rounds)}: primary 3/3 in {full}, 2/3 in {two}, below half in {low}")
assert len(rounds) >= (end - start) * 9 // 10, "rounds missing from the history"
assert two >= len(rounds) // 10, "the loss was hardly visible: not a test of flapping"
assert full >= 1, "loc1 never got through: that is a blackhole, not loss"
' "$start" "$end" "$start_ms" "$end_ms" || tb_fail "round history"

tb_expect_no_failover
tb_log "PASS: 50% loss at one location for $ROUNDS rounds -> no failover, no hold"
