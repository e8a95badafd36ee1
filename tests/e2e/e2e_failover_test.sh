#!/bin/bash
# End-to-end failover and failback (issue #5): the real failoverd with short windows against HTTP
# servers in the site namespaces, BIND with TSIG and a PostgreSQL primary + streaming standby
# (tests/e2e/testbed.sh). The primary's HTTP server is killed: warm, failover (standby promoted,
# every authoritative server answers the secondary, the old primary rewound into a standby);
# the server returns: no failback before failback_stable, failback after it (primary promoted
# again, DNS back). Drift made behind the daemon's back (a DNS record, a second writable
# database) is repaired by the reconciliation, with only the step that drifted. Observed only
# through failoverctl --json, dig, psql and the SQLite history.
# usage: e2e_failover_test.sh FAILOVERD FAILOVERCTL
set -uo pipefail
E2E_FAILOVERD=$1 E2E_CTL=$2
export E2E_FAILOVERD E2E_CTL
# shellcheck source=tests/e2e/testbed.sh
source "$(dirname "$0")/testbed.sh"

E2E_INTERVAL=300ms
E2E_PROBE_TIMEOUT=200ms
E2E_WARM=1
E2E_REWIND=1
STABLE_MS=5000
E2E_POLICY="failover_after = 3
failback_stable = \"5s\"
min_dwell = \"1s\"
cool_after = \"1s\"
flap_limit = 10
reconcile_interval = \"1s\""

checks=0
check() {  # DESCRIPTION COMMAND...: fails the test when COMMAND fails
  local what=$1
  shift
  "$@" || e2e_fail "$what"
  checks=$((checks + 1))
  e2e_log "ok: $what"
}
equals() { [ "$1" = "$2" ] || { echo "  expected '$2', got '$1'" >&2; return 1; }; }
sql() { sqlite3 -batch -noheader "$T/state.db" "$1"; }
# "name=result ..." of the apply stage of the last plan of PHASE (a repair), in step order.
repair_steps() {
  sql "SELECT group_concat(step_name || '=' || result, ' ') FROM (SELECT step_name, result
      FROM action_steps WHERE phase = '$1' AND stage = 'apply' AND attempt = (SELECT max(attempt)
        FROM action_steps b WHERE b.plan_id = action_steps.plan_id AND b.phase = action_steps.phase
          AND b.stage = 'apply' AND b.step_index = action_steps.step_index)
        AND plan_id = (SELECT max(plan_id) FROM action_steps WHERE phase = '$1')
      ORDER BY step_index)"
}

scenario() {
  local A=$E2E_PG_PORT_A B=$E2E_PG_PORT_B t_kill t_back t_left state
  check "before: both authoritative servers answer the primary" e2e_dns_is "$E2E_PRIMARY_IP"
  check "before: the primary database is writable" equals "$(e2e_psql $A 'SELECT pg_is_in_recovery()')" f
  check "before: the secondary database is a standby" equals "$(e2e_psql $B 'SELECT pg_is_in_recovery()')" t
  check "before: a write on the primary" equals "$(e2e_psql $A 'INSERT INTO orders VALUES (1)')" "INSERT 0 1"

  # --- the primary dies -----------------------------------------------------------------------
  t_kill=$(e2e_now_ms)
  e2e_http_kill primary
  e2e_log "killed the primary's HTTP server"
  check "failover reaches secondary_active within 30 s" e2e_wait_for 30 e2e_state_is secondary_active
  e2e_log "failed over after $(($(e2e_now_ms) - t_kill)) ms"
  check "status: the secondary serves" equals "$(e2e_status_field 'g["active"]')" secondary
  check "the warm step ran" test -f "$T/warm.done"
  check "standby promoted: pg_is_in_recovery() is false on the secondary" \
    equals "$(e2e_psql $B 'SELECT pg_is_in_recovery()')" f
  check "the secondary database takes writes" equals "$(e2e_psql $B 'INSERT INTO orders VALUES (2)')" "INSERT 0 1"
  check "DNS primary server answers the secondary" equals "$(e2e_dig $E2E_NS_PORT_P)" "$E2E_SECONDARY_IP"
  check "DNS secondary server answers the secondary" equals "$(e2e_dig $E2E_NS_PORT_S)" "$E2E_SECONDARY_IP"
  check "the old primary was rewound into a standby of the secondary" \
    e2e_wait_for 60 e2e_pg_streaming $B
  check "the old primary is in recovery" equals "$(e2e_psql $A 'SELECT pg_is_in_recovery()')" t
  check "the old primary caught up with the write on the secondary" \
    e2e_wait_for 20 eval '[ "$(e2e_psql $A "SELECT count(*) FROM orders WHERE x = 2")" = 1 ]'
  check "still secondary_active while the primary is down" e2e_state_is secondary_active

  # --- DNS drift behind the daemon's back: reconciliation repairs it --------------------------
  check "drift: nsupdate points www at the primary again" e2e_nsupdate_www "$E2E_PRIMARY_IP"
  check "drift: the primary DNS server answers the primary" \
    equals "$(e2e_dig $E2E_NS_PORT_P)" "$E2E_PRIMARY_IP"
  check "reconciliation repairs the record on every authoritative server within 10 s" \
    e2e_wait_for 10 e2e_dns_is "$E2E_SECONDARY_IP"
  check "the repair changed no state" e2e_state_is secondary_active
  check "history: the repair re-applied only the drifted step" equals "$(repair_steps failover)" \
    "promote-secondary-db=skipped www-record=ok rewind-old-primary=skipped"
  check "history: the drift is recorded with the repair" \
    eval '[ "$(sql "SELECT count(*) FROM action_steps WHERE stage = '"'observe'"' AND step_name = '"'www-record'"'
      AND plan_id = (SELECT max(plan_id) FROM action_steps WHERE phase = '"'failover'"')")" = 1 ]'

  # --- the primary returns --------------------------------------------------------------------
  # Taken before the start: the daemon cannot see the primary healthy any earlier.
  t_back=$(e2e_now_ms)
  e2e_http_start primary
  e2e_log "the primary's HTTP server is back"
  t_left=0
  while [ "$(e2e_now_ms)" -lt $((t_back + STABLE_MS + 30000)) ]; do
    state=$(e2e_state)
    if [ -n "$state" ] && [ "$state" != secondary_active ]; then
      t_left=$(e2e_now_ms)
      break
    fi
    sleep 0.05
  done
  check "the group left secondary_active after the primary returned" test "$t_left" -gt 0
  e2e_log "left secondary_active ($state) $((t_left - t_back)) ms after the primary returned"
  check "no failback before failback_stable (${STABLE_MS} ms)" test $((t_left - t_back)) -ge $STABLE_MS
  # The failback plan takes ~100 ms, so the poll may already see the state after it.
  check "it left towards the failback ($state)" eval '[[ "$state" =~ ^(failing_back|primary_degraded|primary_active)$ ]]'
  check "failback reaches primary_active within 60 s" e2e_wait_for 60 e2e_state_is primary_active
  check "status: the primary serves" equals "$(e2e_status_field 'g["active"]')" primary
  check "DNS primary server answers the primary again" equals "$(e2e_dig $E2E_NS_PORT_P)" "$E2E_PRIMARY_IP"
  check "DNS secondary server answers the primary again" equals "$(e2e_dig $E2E_NS_PORT_S)" "$E2E_PRIMARY_IP"
  check "primary promoted: pg_is_in_recovery() is false on the primary" \
    equals "$(e2e_psql $A 'SELECT pg_is_in_recovery()')" f
  check "the primary has every write" \
    equals "$(e2e_psql $A "SELECT string_agg(x::text, ',' ORDER BY x) FROM orders")" "1,2"
  check "the primary takes writes" equals "$(e2e_psql $A 'INSERT INTO orders VALUES (3)')" "INSERT 0 1"
  check "the secondary database is fenced (read-only)" \
    equals "$(e2e_psql $B 'SHOW default_transaction_read_only')" on

  # --- split brain behind the daemon's back: reconciliation fences the other database ---------
  check "drift: the secondary database is made writable again" \
    eval 'e2e_psql $B "ALTER SYSTEM RESET default_transaction_read_only" >/dev/null &&
      [ "$(e2e_psql $B "SELECT pg_reload_conf()")" = t ]'
  check "drift: both databases are writable" \
    e2e_wait_for 5 eval '[ "$(e2e_psql $B "SHOW default_transaction_read_only")" = off ]'
  check "reconciliation fences the secondary database again within 15 s" \
    e2e_wait_for 15 eval '[ "$(e2e_psql $B "SHOW default_transaction_read_only")" = on ]'
  check "the primary database is still the writable one" \
    equals "$(e2e_psql $A 'SELECT pg_is_in_recovery(), current_setting($$default_transaction_read_only$$)')" "f|off"
  check "the repair changed no state" e2e_state_is primary_active
  check "history: the repair re-applied only the database step" equals "$(repair_steps failback)" \
    "primary-caught-up=skipped promote-primary-db=ok www-record=skipped"

  # --- the history ----------------------------------------------------------------------------
  check "history: the transitions in order" equals "$(sql "SELECT group_concat(to_state, ' ') FROM
      (SELECT to_state FROM transitions WHERE group_name = 'shop' ORDER BY id)")" \
    "primary_degraded failing_over secondary_active failing_back primary_degraded primary_active"
  check "history: the failover counted 3 rounds" \
    eval '[[ "$(sql "SELECT reason FROM transitions WHERE to_state = '"'failing_over'"'")" == "failing over: primary 0/1 for 3 rounds"* ]]'
  check "history: every failover step succeeded" equals "$(sql "SELECT group_concat(step_name || '=' || result, ' ')
      FROM (SELECT step_name, result FROM action_steps a WHERE phase = 'failover' AND stage = 'apply'
        AND plan_id = (SELECT min(plan_id) FROM action_steps WHERE phase = 'failover')
        AND attempt = (SELECT max(attempt) FROM action_steps b WHERE b.plan_id = a.plan_id
          AND b.phase = a.phase AND b.stage = a.stage AND b.step_index = a.step_index) ORDER BY step_index)")" \
    "promote-secondary-db=ok www-record=ok rewind-old-primary=ok"
  check "history: every failback step succeeded" equals "$(sql "SELECT group_concat(step_name || '=' || result, ' ')
      FROM (SELECT step_name, result FROM action_steps a WHERE phase = 'failback' AND stage = 'apply'
        AND plan_id = (SELECT min(plan_id) FROM action_steps WHERE phase = 'failback')
        AND attempt = (SELECT max(attempt) FROM action_steps b WHERE b.plan_id = a.plan_id
          AND b.phase = a.phase AND b.stage = a.stage AND b.step_index = a.step_index) ORDER BY step_index)")" \
    "primary-caught-up=ok promote-primary-db=ok www-record=ok"
  # The stable window in the daemon's own times: from the first round after the failover that
  # saw the primary healthy to the failback decision.
  local window
  window=$(sql "SELECT (SELECT ts_ms FROM transitions WHERE to_state = 'failing_back') -
      (SELECT min(ts_ms) FROM rounds WHERE p_healthy = 1 AND ts_ms >
         (SELECT ts_ms FROM transitions WHERE to_state = 'secondary_active'))")
  e2e_log "history: failback decided ${window} ms after the first healthy round"
  check "history: the failback waited for failback_stable" test "$window" -ge $STABLE_MS
  check "history: and not much longer" test "$window" -le $((STABLE_MS + 2000))
  echo "$checks passed, 0 failed"
}

e2e_main scenario "$@"
