#!/bin/bash
# The end-to-end testbed, sourced by tests/e2e/e2e_failover_test.sh and bench/e2e_failover.sh:
# network namespaces for the primary and secondary sites (HTTP servers on 198.18.0.10/.11), a
# monitor namespace holding BIND (TSIG primary + NOTIFY-fed secondary), a PostgreSQL 15 primary
# and streaming standby and failoverd, all on the monitor's own loopback. Nothing is attached to
# the root namespace; everything is torn down on exit.
#
# Usage: define E2E_POLICY (TOML lines for [group.policy]), E2E_INTERVAL, E2E_PROBE_TIMEOUT,
# E2E_WARM (0/1), E2E_REWIND (0/1), then `e2e_main FUNCTION "$@"` runs FUNCTION inside the monitor
# namespace with the testbed up (e2e_up) and tears everything down afterwards.

E2E_PG_BIN=/usr/lib/postgresql/15/bin
E2E_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
E2E_PRIMARY_IP=198.18.0.10
E2E_SECONDARY_IP=198.18.0.11
E2E_MONITOR_IP=198.18.0.2
E2E_NS_PORT_P=5300   # BIND primary (takes the updates)
E2E_NS_PORT_S=5301   # BIND secondary (zone transfer after NOTIFY)
E2E_PG_PORT_A=5432   # PostgreSQL of the primary site
E2E_PG_PORT_B=5433   # PostgreSQL of the secondary site (streaming standby)
E2E_SECRET="FtCUJtDFAMJOMmBcnCKqYwexLZTSkvZm1LUIXtGxn/8="

e2e_fail() {
  echo "FAIL: $*" >&2
  exit 1
}
e2e_log() { echo "$(date +%H:%M:%S.%3N) $*"; }
e2e_now_ms() { echo $(($(date +%s%N) / 1000000)); }

# --- outside: the namespaces ------------------------------------------------------------------

e2e_netns_up() {
  local id=$1 n a
  E2E_NS_CORE=fo-e2e-$id-core
  ip netns add "$E2E_NS_CORE"
  ip -n "$E2E_NS_CORE" link add br0 type bridge
  ip -n "$E2E_NS_CORE" link set br0 up
  ip -n "$E2E_NS_CORE" link set lo up
  for n in mon:$E2E_MONITOR_IP pri:$E2E_PRIMARY_IP sec:$E2E_SECONDARY_IP; do
    a=${n#*:}
    n=${n%%:*}
    ip netns add "fo-e2e-$id-$n"
    # Created in the root namespace and moved at once; interface names are at most 15 bytes.
    ip link add "fe$id$n" type veth peer name eth0 netns "fo-e2e-$id-$n"
    ip link set "fe$id$n" netns "$E2E_NS_CORE"
    ip -n "$E2E_NS_CORE" link set "fe$id$n" master br0 up
    ip -n "fo-e2e-$id-$n" addr add "$a/24" dev eth0
    ip -n "fo-e2e-$id-$n" link set eth0 up
    ip -n "fo-e2e-$id-$n" link set lo up
  done
}

# Namespaces left by a run that was killed with SIGKILL (no trap ran): their owner pid is gone.
# Whatever still runs inside them was started by that run.
e2e_sweep_stale() {
  local ns owner p
  for ns in $(ip netns list | sed -n 's/^\(fo-e2e-[0-9]*-[a-z]*\).*/\1/p'); do
    owner=${ns#fo-e2e-}
    owner=${owner%%-*}
    [ -d "/proc/$owner" ] && continue
    for p in $(ip netns pids "$ns"); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  for d in /tmp/fo-e2e-[0-9]*.*; do
    [ -d "$d" ] || continue
    owner=${d#/tmp/fo-e2e-}
    [ -d "/proc/${owner%%.*}" ] || rm -rf "$d"
  done
}

e2e_netns_down() {
  local id=$1 n
  for n in mon pri sec core; do ip netns del "fo-e2e-$id-$n" 2>/dev/null || true; done
}

# e2e_main FUNCTION "$@": re-runs the calling script (with its arguments) inside the monitor
# namespace, brings the testbed up there and runs FUNCTION.
e2e_main() {
  local fn=$1
  shift
  if [ -z "${E2E_INNER:-}" ]; then
    [ "$(id -u)" = 0 ] || e2e_fail "needs root (network namespaces, PostgreSQL as postgres)"
    for tool in ip named dig nsupdate sqlite3 python3 runuser "$E2E_PG_BIN/initdb" \
      "$E2E_PG_BIN/pg_rewind" "$E2E_PG_BIN/pg_ctl"; do
      command -v "$tool" >/dev/null || e2e_fail "$tool not found (scripts/install-deps.sh)"
    done
    local id=$$ rc=0
    e2e_sweep_stale
    trap "e2e_netns_down $id" EXIT
    e2e_netns_up "$id"
    # In the background, so that a TERM (ctest's timeout) reaches the inner part at once.
    E2E_INNER=1 E2E_ID=$id ip netns exec "fo-e2e-$id-mon" "$0" "$@" &
    E2E_INNER_PID=$!
    trap 'kill -TERM $E2E_INNER_PID 2>/dev/null; wait $E2E_INNER_PID; exit 143' TERM INT
    wait $E2E_INNER_PID || rc=$?
    return $rc
  fi
  E2E_NS_PRI=fo-e2e-$E2E_ID-pri
  E2E_NS_SEC=fo-e2e-$E2E_ID-sec
  T=$(mktemp -d "/tmp/fo-e2e-$E2E_ID.XXXXXX")
  chmod 755 "$T"
  trap e2e_down EXIT
  trap 'exit 143' TERM INT
  e2e_up
  "$fn"
}

# --- inside the monitor namespace -------------------------------------------------------------

E2E_PIDS=()

e2e_down() {
  local rc=$?
  [ -n "${E2E_DAEMON_PID:-}" ] && kill -TERM "$E2E_DAEMON_PID" 2>/dev/null
  [ -n "${E2E_DAEMON_PID:-}" ] && wait "$E2E_DAEMON_PID" 2>/dev/null
  for d in "$T/pg/b" "$T/pg/a"; do
    [ -f "$d/postmaster.pid" ] &&
      runuser -u postgres -- "$E2E_PG_BIN/pg_ctl" -D "$d" -m immediate -w -t 20 stop >/dev/null 2>&1
  done
  for p in "${E2E_PIDS[@]}" $(cat "$T"/*.httppid 2>/dev/null); do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  if [ "$rc" != 0 ] && [ -z "${E2E_KEEP:-}" ]; then
    echo "--- daemon log (tail)" >&2
    tail -40 "$T/daemon.log" >&2 2>/dev/null
  fi
  if [ -n "${E2E_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
  return $rc
}

# wait_for SECONDS COMMAND...: polls every 20 ms.
e2e_wait_for() {
  local limit=$1 end
  shift
  end=$(($(e2e_now_ms) + limit * 1000))
  until "$@"; do
    [ "$(e2e_now_ms)" -lt "$end" ] || return 1
    sleep 0.02
  done
}

# HTTP server of a site (python3 -m http.server in the site's namespace); its pid in $T/SITE.httppid.
e2e_http_start() {
  local site=$1 ns ip
  if [ "$site" = primary ]; then ns=$E2E_NS_PRI ip=$E2E_PRIMARY_IP; else ns=$E2E_NS_SEC ip=$E2E_SECONDARY_IP; fi
  ip netns exec "$ns" python3 -m http.server 8080 --bind "$ip" --directory "$T/www" \
    >>"$T/$site.http.log" 2>&1 &
  echo $! >"$T/$site.httppid"
  disown $!  # killed by pid; no job-control notice
  e2e_wait_for 10 curl -sf -o /dev/null --max-time 1 "http://$ip:8080/health" ||
    e2e_fail "HTTP server of $site did not start"
}
e2e_http_kill() { kill -KILL "$(cat "$T/$1.httppid")"; }

e2e_dig() { dig +short +time=1 +tries=1 @127.0.0.1 -p "$1" www.failover.test A 2>/dev/null; }
# Whether every authoritative server answers ADDRESS.
e2e_dns_is() { [ "$(e2e_dig $E2E_NS_PORT_P)" = "$1" ] && [ "$(e2e_dig $E2E_NS_PORT_S)" = "$1" ]; }

# Changes the www record behind the daemon's back (drift for the reconciliation to find).
e2e_nsupdate_www() {  # ADDRESS
  printf 'server 127.0.0.1 %s\nzone failover.test\nupdate delete www.failover.test A\nupdate add www.failover.test 30 A %s\nsend\n' \
    "$E2E_NS_PORT_P" "$1" | nsupdate -k "$T/dns/tsig.key" -t 5
}

e2e_psql() {
  runuser -u postgres -- "$E2E_PG_BIN/psql" -X -h 127.0.0.1 -p "$1" -U postgres -d postgres -Atc "$2" 2>&1
}

e2e_named_conf() {  # DIR PORT ROLE
  local d=$1 port=$2 role=$3
  mkdir -p "$d"
  {
    echo "options { directory \"$d\"; listen-on port $port { 127.0.0.1; }; listen-on-v6 { none; };"
    echo "  pid-file \"$d/named.pid\"; session-keyfile \"$d/session.key\"; recursion no;"
    echo "  dnssec-validation no;"
    if [ "$role" = primary ]; then
      echo "  notify explicit; notify-delay 0; also-notify { 127.0.0.1 port $E2E_NS_PORT_S; };"
      echo "  allow-transfer { 127.0.0.1; }; };"
      echo "controls { };"
      echo "include \"$T/dns/tsig.key\";"
      echo "zone \"failover.test\" { type primary; file \"$d/failover.test.zone\";"
      echo "  update-policy { grant e2e-key zonesub ANY; }; };"
    else
      echo "  notify no; allow-transfer { none; }; };"
      echo "controls { };"
      echo "zone \"failover.test\" { type secondary; file \"$d/failover.test.db\";"
      echo "  primaries { 127.0.0.1 port $E2E_NS_PORT_P; }; };"
    fi
  } >"$d/named.conf"
}

e2e_dns_up() {
  mkdir -p "$T/dns"
  printf 'key "e2e-key" {\n\talgorithm hmac-sha256;\n\tsecret "%s";\n};\n' "$E2E_SECRET" \
    >"$T/dns/tsig.key"
  chmod 600 "$T/dns/tsig.key"
  e2e_named_conf "$T/dns/p" $E2E_NS_PORT_P primary
  e2e_named_conf "$T/dns/s" $E2E_NS_PORT_S secondary
  cat >"$T/dns/p/failover.test.zone" <<EOF
\$TTL 30
@ IN SOA ns1.failover.test. hostmaster.failover.test. ( 1 60 30 3600 30 )
  IN NS ns1.failover.test.
ns1 IN A 127.0.0.1
www IN A $E2E_PRIMARY_IP
EOF
  named -g -4 -c "$T/dns/p/named.conf" >"$T/dns/p/named.log" 2>&1 &
  E2E_PIDS+=($!)
  named -g -4 -c "$T/dns/s/named.conf" >"$T/dns/s/named.log" 2>&1 &
  E2E_PIDS+=($!)
  e2e_wait_for 20 e2e_dns_is "$E2E_PRIMARY_IP" ||
    e2e_fail "BIND did not serve the zone: $(tail -5 "$T/dns/s/named.log")"
}

e2e_pg_start() {  # NODE PORT
  runuser -u postgres -- "$E2E_PG_BIN/pg_ctl" -D "$T/pg/$1" -o "-p $2" -l "$T/pg/$1.log" \
    -w -t 60 start >/dev/null || e2e_fail "PostgreSQL $1 did not start: $(tail -5 "$T/pg/$1.log")"
}

e2e_pg_up() {
  mkdir -p "$T/pg/sock"
  chown -R postgres:postgres "$T/pg"
  runuser -u postgres -- "$E2E_PG_BIN/initdb" -D "$T/pg/a" -U postgres --auth=trust -E UTF8 \
    --locale=C.UTF-8 --no-sync >"$T/pg/initdb.log" 2>&1 || e2e_fail "initdb: $(tail -5 "$T/pg/initdb.log")"
  # Ports only on the command line: pg_rewind copies postgresql.conf from the other node.
  cat >>"$T/pg/a/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$T/pg/sock'
wal_level = replica
max_wal_senders = 10
hot_standby = on
wal_log_hints = on
wal_keep_size = 256MB
fsync = off
synchronous_commit = off
shared_buffers = 16MB
max_connections = 30
EOF
  echo "host replication all 127.0.0.1/32 trust" >>"$T/pg/a/pg_hba.conf"
  e2e_pg_start a $E2E_PG_PORT_A
  runuser -u postgres -- "$E2E_PG_BIN/pg_basebackup" -h 127.0.0.1 -p $E2E_PG_PORT_A -U postgres \
    -D "$T/pg/b" -R -X stream -c fast --no-sync >"$T/pg/basebackup.log" 2>&1 ||
    e2e_fail "pg_basebackup: $(tail -5 "$T/pg/basebackup.log")"
  e2e_pg_start b $E2E_PG_PORT_B
  e2e_wait_for 30 e2e_pg_streaming $E2E_PG_PORT_A || e2e_fail "the standby does not stream"
  [ "$(e2e_psql $E2E_PG_PORT_A 'CREATE TABLE orders(x int)')" = "CREATE TABLE" ] ||
    e2e_fail "cannot write to the primary database"
}
e2e_pg_streaming() {
  [ "$(e2e_psql "$1" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1 ]
}

e2e_db() {  # "host = ..., port = N" inline table of a site's database
  echo "{ host = \"127.0.0.1\", port = $1, user = \"postgres\" }"
}

e2e_config() {
  local dns_common="kind = \"dns\"
name = \"www-record\"
timeout = \"20s\"
retries = 2
zone = \"failover.test\"
record = \"www\"
ttl = 30
primary = [\"$E2E_PRIMARY_IP\"]
secondary = [\"$E2E_SECONDARY_IP\"]
server = \"127.0.0.1:$E2E_NS_PORT_P\"
tsig_key_file = \"$T/dns/tsig.key\"
verify = [\"127.0.0.1:$E2E_NS_PORT_P\", \"127.0.0.1:$E2E_NS_PORT_S\"]
verify_interval = \"20ms\""
  local pg_common
  pg_common="kind = \"postgres\"
timeout = \"30s\"
primary = $(e2e_db $E2E_PG_PORT_A)
secondary = $(e2e_db $E2E_PG_PORT_B)"
  cat <<EOF
[daemon]
state_db = "$T/state.db"
control_socket = "$T/control.sock"
metrics_listen = ""

[[group]]
name = "shop"
interval = "$E2E_INTERVAL"
[group.primary]
probes = [ { kind = "http", name = "web", url = "http://$E2E_PRIMARY_IP:8080/health", timeout = "$E2E_PROBE_TIMEOUT" } ]
[group.secondary]
probes = [ { kind = "http", name = "web", url = "http://$E2E_SECONDARY_IP:8080/health", timeout = "$E2E_PROBE_TIMEOUT" } ]

[group.policy]
$E2E_POLICY
EOF
  if [ "${E2E_WARM:-0}" = 1 ]; then
    cat <<EOF

[[group.warm]]
kind = "exec"
name = "mark-warm"
timeout = "5s"
argv = ["/usr/bin/touch", "$T/warm.done"]
EOF
  fi
  cat <<EOF

[[group.failover]]
name = "promote-secondary-db"
max_lag = "16MB"
$pg_common

[[group.failover]]
$dns_common
EOF
  if [ "${E2E_REWIND:-0}" = 1 ]; then
    # The old primary becomes a standby of the new one right after the failover: the failback
    # plan's pre-checks refuse the promotion of a fenced former primary (docs/steps/postgres.md).
    local start="runuser -u postgres -- $E2E_PG_BIN/pg_ctl -D $T/pg/a -o '-p $E2E_PG_PORT_A' -l $T/pg/a.log -w -t 60 start"
    cat <<EOF

[[group.failover]]
kind = "exec"
name = "rewind-old-primary"
timeout = "60s"
on_failure = "continue"
argv = ["/bin/bash", "$E2E_REPO/etc/examples/pg-rewind.sh", "--pgdata", "$T/pg/a",
        "--source", "host=127.0.0.1 port=$E2E_PG_PORT_B user=postgres dbname=postgres",
        "--start", "$start"]

[[group.failback]]
kind = "check"
name = "primary-caught-up"
timeout = "20s"
retries = 5
probe = { kind = "postgres", host = "127.0.0.1", port = $E2E_PG_PORT_A, user = "postgres", role = "standby", max_lag = "1MB" }

[[group.failback]]
name = "promote-primary-db"
max_lag = "1MB"
$pg_common
EOF
  fi
  cat <<EOF

[[group.failback]]
$dns_common
EOF
}

e2e_status_field() {  # python expression on the group's status object
  "$E2E_CTL" --socket "$T/control.sock" --json status 2>/dev/null |
    python3 -c "import json,sys; g=json.load(sys.stdin)['groups'][0]; print($1)" 2>/dev/null
}
e2e_state() { e2e_status_field 'g["state"]'; }
e2e_state_is() { [ "$(e2e_state)" = "$1" ]; }

e2e_daemon_up() {
  e2e_config >"$T/failoverd.toml"
  "$E2E_FAILOVERD" --check-config --config "$T/failoverd.toml" >"$T/check.log" 2>&1 ||
    e2e_fail "config rejected: $(cat "$T/check.log")"
  "$E2E_FAILOVERD" --config "$T/failoverd.toml" >"$T/daemon.log" 2>&1 &
  E2E_DAEMON_PID=$!
  e2e_wait_for 20 e2e_state_is primary_active || e2e_fail "daemon did not reach primary_active"
}

e2e_up() {
  mkdir -p "$T/www"
  echo OK >"$T/www/health"
  e2e_http_start primary
  e2e_http_start secondary
  e2e_dns_up
  e2e_pg_up
  e2e_daemon_up
}
