#!/bin/bash
# Network-namespace testbed for failoverd: two sites, three probe locations with real
# `failoverd --agent`s, and the daemon, each in its own namespace on one private bridge, plus
# per-location fault injection (nft/iptables, and a userspace delay proxy: no netem here).
#
# Topology (PREFIX is fo<pid>- for a test run, fom- for a testbed brought up by hand):
#   PREFIXcore       bridge br0, no address; every other namespace has a veth into it
#   PREFIXprimary    198.18.0.10   python3 http.server :8080 (/health)
#   PREFIXsecondary  198.18.0.11   python3 http.server :8080 (/health)
#   PREFIXlocN       198.18.1.N    failoverd --agent :9773 (N = 1..3)
#   PREFIXctl        198.18.2.1    failoverd with three agent locations
# Addresses are only in 198.18.0.0/15 and only inside these namespaces: nothing is attached to
# the root namespace, so no test traffic can leave the machine.
#
# As a library (tests/netns/test_*.sh): source it, then tb_args, tb_begin, tb_start_all, faults,
# tb_wait_for ... Cleanup runs on exit (trap); a run killed with SIGKILL (ctest timeout) leaves
# namespaces named fo<pid>- behind, which the next tb_begin removes once that pid is gone.
# As a CLI: testbed.sh up|down|status|fault LOC KIND [ARGS]|clear LOC (docs/testbed.md).

TB_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TB_PY=/usr/bin/python3
[ -x "$TB_PY" ] || TB_PY=python3
TB_LOCATIONS=(loc1 loc2 loc3)
TB_NODES=(primary:198.18.0.10 secondary:198.18.0.11 loc1:198.18.1.1 loc2:198.18.1.2
          loc3:198.18.1.3 ctl:198.18.2.1)
TB_SITE_PORT=8080
TB_AGENT_PORT=9773
TB_PROXY_PORT=18080
TB_PROXY_MARK=102
# Interval and probe timeout of the daemon's group; tests may change them before tb_start_all.
# 300 ms leaves the agents 90 ms of the round's deadline (80 %) beyond a 150 ms probe timeout:
# enough on a loaded 2-core machine, where a local answer can take 50 ms.
TB_INTERVAL=${TB_INTERVAL:-300ms}
TB_PROBE_TIMEOUT=${TB_PROBE_TIMEOUT:-150ms}
TB_COOL_AFTER=${TB_COOL_AFTER:-3s}

tb_fail() {
  echo "FAIL: $*" >&2
  exit 1
}

tb_log() { echo "[$(date +%T.%3N)] $*"; }

tb_ns() { echo "${TB_PREFIX}$1"; }

tb_exec() {
  local node=$1
  shift
  ip netns exec "$(tb_ns "$node")" "$@"
}

# tb_spawn NODE LOG PIDFILE CMD...: starts CMD in NODE's namespace in the background. `ip netns
# exec` execs CMD, so the pid in PIDFILE is CMD's own (a backgrounded shell function would leave
# the pid of a subshell instead).
tb_spawn() {
  local node=$1 log=$2 pidfile=$3
  shift 3
  ip netns exec "$(tb_ns "$node")" "$@" >>"$log" 2>&1 &
  echo $! >"$pidfile"
  disown $!  # killed on purpose by tests: no "Killed" notices from bash
}

# tb_wait_gone PID: waits (5 s at most) until PID has exited; a zombie counts as gone.
tb_wait_gone() {
  for _ in $(seq 100); do
    [ -e "/proc/$1" ] || return 0
    [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ] && return 0
    sleep 0.05
  done
  tb_fail "process $1 did not exit"
}

tb_addr() {
  local nd
  for nd in "${TB_NODES[@]}"; do
    [ "${nd%%:*}" = "$1" ] && { echo "${nd##*:}"; return 0; }
  done
  tb_fail "unknown testbed node '$1'"
}

# --- preconditions, leftovers, lifetime ---------------------------------------------------------

tb_require() {
  [ "$(id -u)" = 0 ] ||
    tb_fail "the netns testbed needs root (network namespaces, nft, iptables); run as root"
  local t
  for t in ip nft iptables curl "$TB_PY"; do
    command -v "$t" >/dev/null ||
      tb_fail "'$t' is missing: run scripts/install-deps.sh (iproute2 nftables iptables curl python3)"
  done
}

# Kills every process inside namespace $1 (TERM, then KILL after 3 s) and waits until none is left.
tb_kill_ns() {
  local ns=$1 pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  # shellcheck disable=SC2086
  kill -CONT $pids 2>/dev/null || true
  for _ in $(seq 60); do
    [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && return 0
    sleep 0.05
  done
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  # shellcheck disable=SC2086
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  for _ in $(seq 60); do
    [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && return 0
    sleep 0.05
  done
}

# Removes namespaces and work dirs of earlier runs whose test process is gone.
tb_sweep() {
  local ns pid dir
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^fo[0-9]+-' || true); do
    pid=${ns#fo}
    pid=${pid%%-*}
    [ "$pid" = "$$" ] && continue
    kill -0 "$pid" 2>/dev/null && continue
    echo "testbed: removing leftover namespace $ns of a run that was killed"
    tb_kill_ns "$ns"
    ip netns del "$ns" 2>/dev/null || true
  done
  for dir in /tmp/fo[0-9]*-netns.*; do
    [ -d "$dir" ] || continue
    pid=${dir#/tmp/fo}
    pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null || rm -rf "$dir"
  done
}

tb_down() {
  [ -n "${TB_PREFIX:-}" ] || return 0
  local nd
  # The daemon first, so that it does not see the sites vanish and run steps meanwhile.
  tb_kill_ns "$(tb_ns ctl)"
  for nd in "${TB_NODES[@]}" core:; do tb_kill_ns "$(tb_ns "${nd%%:*}")"; done
  for nd in "${TB_NODES[@]}" core:; do ip netns del "$(tb_ns "${nd%%:*}")" 2>/dev/null || true; done
}

tb_cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  if [ "$rc" != 0 ] && [ -n "${TB_DIR:-}" ] && [ -d "$TB_DIR" ]; then
    echo "---- daemon log (last 40 lines)" >&2
    tail -n 40 "$TB_DIR/daemon.log" >&2 || true
  fi
  tb_down
  # Under FO_SANITIZE the daemon, agents and proxy report into their logs, also at exit.
  if [ -n "${TB_DIR:-}" ] && [ -d "$TB_DIR" ] &&
    grep -l -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$TB_DIR"/*.log >&2 2>/dev/null; then
    echo "FAIL: sanitizer reports in the logs above" >&2
    grep -h -A12 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$TB_DIR"/*.log >&2
    rc=1
  fi
  if [ -n "${TB_DIR:-}" ] && [ -z "${FO_KEEP_TMP:-}" ]; then rm -rf "$TB_DIR"; fi
  exit "$rc"
}

# tb_begin: checks preconditions, removes leftovers of killed runs, makes the work dir and arms
# the cleanup trap. CMake runs each test under `timeout`, whose SIGTERM reaches this trap well
# before ctest's own timeout would SIGKILL the run without any cleanup.
tb_begin() {
  tb_require
  tb_sweep
  TB_PREFIX="fo$$-"
  TB_DIR=$(mktemp -d "/tmp/fo$$-netns.XXXXXX")
  trap tb_cleanup EXIT
  trap 'echo "FAIL: stopped by a signal (the time limit in tests/netns/CMakeLists.txt?)" >&2; exit 1' \
    INT TERM HUP
}

# Reads the binaries: FAILOVERD FAILOVERCTL DELAY_PROXY (the test's command line).
tb_args() {
  [ $# -eq 3 ] || tb_fail "usage: $0 FAILOVERD FAILOVERCTL DELAY_PROXY"
  FAILOVERD=$1 FAILOVERCTL=$2 DELAY_PROXY=$3
  local b
  for b in "$FAILOVERD" "$FAILOVERCTL" "$DELAY_PROXY"; do
    [ -x "$b" ] || tb_fail "not an executable: $b"
  done
}

# --- topology ------------------------------------------------------------------------------------

tb_up() {
  local core nd node addr ns
  core=$(tb_ns core)
  ip netns add "$core"
  ip -n "$core" link set lo up
  ip -n "$core" link add br0 type bridge
  ip -n "$core" link set br0 up
  for nd in "${TB_NODES[@]}"; do
    node=${nd%%:*} addr=${nd##*:} ns=$(tb_ns "${nd%%:*}")
    ip netns add "$ns"
    # Created inside the core namespace, peer moved straight into the node's: the root
    # namespace never holds either end (and parallel runs cannot clash on names).
    ip -n "$core" link add "v-$node" type veth peer name eth0 netns "$ns"
    ip -n "$core" link set "v-$node" master br0 up
    ip -n "$ns" addr add "$addr/15" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
}

# --- processes -----------------------------------------------------------------------------------

# tb_wait_cmd DESCRIPTION SECONDS CMD...: runs CMD every 50 ms until it succeeds.
tb_wait_cmd() {
  local what=$1 secs=$2 end
  shift 2
  end=$((SECONDS + secs))
  while ! "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || tb_fail "timed out after ${secs}s waiting for $what"
    sleep 0.05
  done
}

tb_http_ok() {  # tb_http_ok FROM_NODE URL
  tb_exec "$1" curl -sf -o /dev/null --noproxy '*' --max-time 1 "$2"
}

tb_start_site() {
  local site=$1 addr
  addr=$(tb_addr "$site")
  mkdir -p "$TB_DIR/www"
  echo OK >"$TB_DIR/www/health"
  tb_spawn "$site" "$TB_DIR/$site.log" "$TB_DIR/$site.pid" \
    "$TB_PY" -m http.server "$TB_SITE_PORT" --bind "$addr" --directory "$TB_DIR/www"
  tb_wait_cmd "the $site site's HTTP server" 10 tb_http_ok ctl "http://$addr:$TB_SITE_PORT/health"
}

tb_stop_site() {
  local pid
  pid=$(cat "$TB_DIR/$1.pid")
  kill -TERM "$pid" 2>/dev/null || true
  tb_wait_gone "$pid"
}

tb_start_agent() {
  local loc=$1 addr
  addr=$(tb_addr "$loc")
  cat >"$TB_DIR/agent-$loc.toml" <<TOML
[agent]
listen = "$addr:$TB_AGENT_PORT"
token_file = "$TB_DIR/token"
location = "$loc"
TOML
  tb_spawn "$loc" "$TB_DIR/agent-$loc.log" "$TB_DIR/agent-$loc.pid" \
    "$FAILOVERD" --agent --config "$TB_DIR/agent-$loc.toml"
  tb_wait_cmd "the agent in $loc" 10 tb_http_ok ctl "http://$addr:$TB_AGENT_PORT/v1/health"
}

tb_agent_pid() { cat "$TB_DIR/agent-$1.pid"; }

tb_write_daemon_config() {
  local loc step
  {
    cat <<TOML
[daemon]
state_db = "$TB_DIR/state.db"
control_socket = "$TB_DIR/control.sock"
metrics_listen = ""
TOML
    for loc in "${TB_LOCATIONS[@]}"; do
      cat <<TOML
[[location]]
name = "$loc"
kind = "agent"
url = "http://$(tb_addr "$loc"):$TB_AGENT_PORT"
token_file = "$TB_DIR/token"
TOML
    done
    cat <<TOML
[[group]]
name = "shop"
interval = "$TB_INTERVAL"
[group.primary]
probes = [ { kind = "http", name = "web", url = "http://$(tb_addr primary):$TB_SITE_PORT/health", timeout = "$TB_PROBE_TIMEOUT" } ]
[group.secondary]
probes = [ { kind = "http", name = "web", url = "http://$(tb_addr secondary):$TB_SITE_PORT/health", timeout = "$TB_PROBE_TIMEOUT" } ]
[group.policy]
cool_after = "$TB_COOL_AFTER"
TOML
    for step in warm failover failback cool; do
      printf '[[group.%s]]\nkind = "exec"\nargv = ["%s", "%s"]\ntimeout = "5s"\n' \
        "$step" "$TB_DIR/step.sh" "$step"
    done
  } >"$TB_DIR/failoverd.toml"
}

# Starts the daemon in the ctl namespace and waits for a first round in which all three
# locations report both sites healthy.
tb_start_daemon() {
  # shellcheck disable=SC2016 # $1 is for the step script, not for us
  printf '#!/bin/sh\n# exec step of the netns testbed: one line per phase that ran\necho "$1" >> "%s"\n' \
    "$TB_DIR/steps.log" >"$TB_DIR/step.sh"
  chmod 0755 "$TB_DIR/step.sh"
  : >"$TB_DIR/steps.log"
  tb_write_daemon_config
  "$FAILOVERD" --check-config --config "$TB_DIR/failoverd.toml" >/dev/null ||
    tb_fail "the testbed's daemon config is invalid: $("$FAILOVERD" --check-config --config "$TB_DIR/failoverd.toml" 2>&1)"
  tb_spawn ctl "$TB_DIR/daemon.log" "$TB_DIR/daemon.pid" "$FAILOVERD" --config "$TB_DIR/failoverd.toml"
  TB_DAEMON_PID=$(cat "$TB_DIR/daemon.pid")
  tb_wait_for "all three locations to see both sites healthy" 20 \
    'g["state"] == "primary_active" and P["healthy"] == 3 and S["healthy"] == 3'
}

# Everything: topology, sites, agents, daemon.
tb_start_all() {
  tb_up
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TB_DIR/token"
  chmod 0600 "$TB_DIR/token"
  tb_start_site primary
  tb_start_site secondary
  local loc
  for loc in "${TB_LOCATIONS[@]}"; do tb_start_agent "$loc"; done
  tb_start_daemon
  tb_log "testbed up: prefix $TB_PREFIX, work dir $TB_DIR"
}

# --- observing the daemon ------------------------------------------------------------------------

tb_status_json() {
  "$FAILOVERCTL" --socket "$TB_DIR/control.sock" --json status
}

# tb_query EXPR: prints EXPR evaluated over the status (see tb_query.py for the names).
tb_query() {
  tb_status_json 2>/dev/null | "$TB_PY" "$TB_HERE/tb_query.py" "$1"
}

tb_check() {
  tb_status_json 2>/dev/null | "$TB_PY" "$TB_HERE/tb_query.py" --check "$1"
}

# tb_wait_for DESCRIPTION SECONDS EXPR: polls the status every 100 ms until EXPR holds.
tb_wait_for() {
  local what=$1 secs=$2 expr=$3 end
  end=$((SECONDS + secs))
  until tb_check "$expr"; do
    if [ $SECONDS -ge $end ]; then
      echo "last status: $(tb_status_json 2>&1)" >&2
      tb_fail "timed out after ${secs}s waiting for $what ($expr)"
    fi
    sleep 0.1
  done
}

# tb_expect DESCRIPTION EXPR: EXPR must hold now.
tb_expect() {
  tb_check "$2" || {
    echo "status: $(tb_status_json 2>&1)" >&2
    tb_fail "$1 ($2)"
  }
  tb_log "ok: $1"
}

tb_rounds() { tb_query 'g["rounds"]'; }

# tb_wait_rounds N SECONDS: waits until the daemon has run N more rounds.
tb_wait_rounds() {
  local target
  target=$(($(tb_rounds) + $1))
  tb_wait_for "$1 more rounds" "$2" "g[\"rounds\"] >= $target"
}

tb_daemon_alive() {
  kill -0 "$TB_DAEMON_PID" 2>/dev/null || tb_fail "the daemon died: $(tail -20 "$TB_DIR/daemon.log")"
}

# Phases the exec steps recorded, one per line (warm, failover, failback, cool).
tb_steps() { cat "$TB_DIR/steps.log"; }

tb_step_count() { grep -cx "$1" "$TB_DIR/steps.log" || true; }

# Transitions in the history as "from>to reason" lines, oldest first.
tb_transitions() {
  "$FAILOVERCTL" --socket "$TB_DIR/control.sock" --json history shop --limit 10000 |
    "$TB_PY" -c 'import json, sys
for t in reversed(json.load(sys.stdin)["transitions"]): print(t["from"] + ">" + t["to"], t["reason"])'
}

# No failover and no hold so far: the history has only warm/cool transitions, only warm/cool
# steps ran, and the primary serves.
tb_expect_no_failover() {
  tb_transitions >"$TB_DIR/transitions"
  if grep -Ev '^(primary_active>primary_degraded|primary_degraded>primary_active) ' \
    "$TB_DIR/transitions" >&2; then
    tb_fail "transitions other than warm/cool (above)"
  fi
  if tb_steps | grep -Ev '^(warm|cool)$' >&2; then tb_fail "exec steps other than warm/cool (above)"; fi
  tb_expect "the primary serves" \
    'g["active"] == "primary" and g["state"] in ("primary_active", "primary_degraded")'
  tb_log "ok: no failover, no hold ($(wc -l <"$TB_DIR/transitions") warm/cool transitions, steps: $(tb_steps | tr '\n' ' '))"
}

# --- faults (each applied inside one location's namespace only) ----------------------------------

tb_target_addr() {
  case $1 in
    primary | secondary) tb_addr "$1" ;;
    *) tb_fail "fault target must be primary or secondary, not '$1'" ;;
  esac
}

tb_fault_table() {  # one inet table per location holds the drop rules
  tb_exec "$1" nft list table inet fo_fault >/dev/null 2>&1 && return 0
  tb_exec "$1" nft -f - <<'NFT'
table inet fo_fault {
  chain out {
    type filter hook output priority 0;
  }
  chain in {
    type filter hook input priority 0;
  }
}
NFT
}

# tb_fault_blackhole LOC [primary|secondary|all]: packets vanish (the prober times out). "all"
# isolates the location entirely, the daemon's requests to its agent included.
tb_fault_blackhole() {
  local loc=$1 target=${2:-primary}
  tb_fault_table "$loc"
  if [ "$target" = all ]; then
    tb_exec "$loc" nft add rule inet fo_fault out oifname eth0 drop
    tb_exec "$loc" nft add rule inet fo_fault in iifname eth0 drop
  else
    tb_exec "$loc" nft add rule inet fo_fault out ip daddr "$(tb_target_addr "$target")" \
      tcp dport "$TB_SITE_PORT" drop
  fi
}

# tb_fault_reset LOC [primary|secondary]: connections are refused at once with a TCP reset.
tb_fault_reset() {
  local loc=$1 target=${2:-primary}
  tb_exec "$loc" iptables -A OUTPUT -d "$(tb_target_addr "$target")" -p tcp \
    --dport "$TB_SITE_PORT" -j REJECT --reject-with tcp-reset
}

# tb_fault_loss LOC PERCENT [primary|secondary|all]: each packet is dropped with that chance
# (to the site; "all": every packet in and out of the location).
tb_fault_loss() {
  local loc=$1 pct=$2 target=${3:-primary}
  if ! [[ $pct =~ ^[0-9]+$ ]] || [ "$pct" -gt 100 ]; then
    tb_fail "loss must be 0..100 percent, not '$pct'"
  fi
  tb_fault_table "$loc"
  if [ "$target" = all ]; then
    tb_exec "$loc" nft add rule inet fo_fault out oifname eth0 numgen random mod 100 \< "$pct" drop
    tb_exec "$loc" nft add rule inet fo_fault in iifname eth0 numgen random mod 100 \< "$pct" drop
  else
    tb_exec "$loc" nft add rule inet fo_fault out ip daddr "$(tb_target_addr "$target")" \
      numgen random mod 100 \< "$pct" drop
  fi
}

# tb_fault_slow LOC DELAY_MS [primary|secondary]: new connections from LOC to the site are
# DNATed to a delay proxy in LOC that relays them after DELAY_MS. The proxy's own upstream
# connections carry a mark the rule skips.
tb_fault_slow() {
  local loc=$1 delay=$2 target=${3:-primary} addr laddr
  addr=$(tb_target_addr "$target")
  laddr=$(tb_addr "$loc")
  : >"$TB_DIR/proxy-$loc.log"
  tb_spawn "$loc" "$TB_DIR/proxy-$loc.log" "$TB_DIR/proxy-$loc.pid" \
    "$DELAY_PROXY" "$laddr:$TB_PROXY_PORT" "$addr:$TB_SITE_PORT" "$delay" "$TB_PROXY_MARK"
  tb_wait_cmd "the delay proxy in $loc" 10 grep -qx ready "$TB_DIR/proxy-$loc.log"
  tb_exec "$loc" nft -f - <<NFT
table ip fo_slow {
  chain out {
    type nat hook output priority -100;
    ip daddr $addr tcp dport $TB_SITE_PORT meta mark != $TB_PROXY_MARK dnat to $laddr:$TB_PROXY_PORT
  }
}
NFT
}

# tb_fault_clear LOC: removes every fault of LOC.
tb_fault_clear() {
  local loc=$1
  tb_exec "$loc" nft delete table inet fo_fault 2>/dev/null || true
  tb_exec "$loc" nft delete table ip fo_slow 2>/dev/null || true
  tb_exec "$loc" iptables -F OUTPUT 2>/dev/null || true
  if [ -f "$TB_DIR/proxy-$loc.pid" ]; then
    local pid
    pid=$(cat "$TB_DIR/proxy-$loc.pid")
    kill -TERM "$pid" 2>/dev/null || true
    tb_wait_gone "$pid"  # its port must be free for the next proxy
    rm -f "$TB_DIR/proxy-$loc.pid"
  fi
}

# --- CLI -----------------------------------------------------------------------------------------

tb_cli_usage() {
  cat >&2 <<'USAGE'
usage: testbed.sh up                       namespaces, sites, agents and the daemon (stays up)
       testbed.sh down                     stop everything and remove the namespaces
       testbed.sh status                   namespaces, processes, failoverctl status
       testbed.sh fault LOC blackhole [primary|secondary|all]
       testbed.sh fault LOC reset [primary|secondary]
       testbed.sh fault LOC loss PERCENT [primary|secondary|all]
       testbed.sh fault LOC slow DELAY_MS [primary|secondary]
       testbed.sh clear LOC                remove LOC's faults
       testbed.sh stop|start SITE          stop or start a site's web server (primary, secondary)
       testbed.sh exec NODE CMD...         run CMD in a node's namespace (primary, loc1, ctl, ...)
The binaries come from FAILOVERD, FAILOVERCTL and DELAY_PROXY (default: the build/ tree of the
repository); the state of the testbed is kept in FO_TESTBED_DIR (default /run/fo-testbed).
USAGE
  exit 2
}

tb_cli() {
  local repo cmd=${1:-}
  repo=$(cd "$TB_HERE/../.." && pwd)
  TB_PREFIX=fom-
  TB_DIR=${FO_TESTBED_DIR:-/run/fo-testbed}
  FAILOVERD=${FAILOVERD:-$repo/build/daemon/failoverd}
  FAILOVERCTL=${FAILOVERCTL:-$repo/build/ctl/failoverctl}
  DELAY_PROXY=${DELAY_PROXY:-$repo/build/tests/netns/delay_proxy}
  [ -n "$cmd" ] || tb_cli_usage
  shift
  case $cmd in
    up)
      tb_require
      [ -e "$TB_DIR" ] && tb_fail "$TB_DIR exists: a testbed is up already (testbed.sh down)"
      mkdir -p "$TB_DIR"
      chmod 0700 "$TB_DIR"
      trap 'tb_down; rm -rf "$TB_DIR"' EXIT
      tb_start_all
      trap - EXIT
      echo "control socket: $TB_DIR/control.sock"
      echo "  $FAILOVERCTL --socket $TB_DIR/control.sock status"
      ;;
    down)
      tb_down
      rm -rf "$TB_DIR"
      ;;
    status)
      ip netns list | grep "^$TB_PREFIX" || echo "no testbed namespaces"
      local nd
      for nd in "${TB_NODES[@]}"; do
        echo "${nd%%:*} (${nd##*:}): pids $(ip netns pids "$(tb_ns "${nd%%:*}")" 2>/dev/null | tr '\n' ' ')"
      done
      [ -S "$TB_DIR/control.sock" ] && "$FAILOVERCTL" --socket "$TB_DIR/control.sock" status
      ;;
    fault)
      [ $# -ge 2 ] || tb_cli_usage
      local loc=$1 kind=$2
      shift 2
      case $loc in loc[0-9]*) tb_addr "$loc" >/dev/null ;; *) tb_fail "faults apply to locations (loc1..loc3), not '$loc'" ;; esac
      case $kind in
        blackhole | reset | loss | slow) "tb_fault_$kind" "$loc" "$@" ;;
        *) tb_cli_usage ;;
      esac
      ;;
    clear) [ $# -eq 1 ] || tb_cli_usage; tb_fault_clear "$1" ;;
    stop | start)
      case ${1:-} in primary | secondary) ;; *) tb_cli_usage ;; esac
      "tb_${cmd}_site" "$1"
      ;;
    exec) [ $# -ge 2 ] || tb_cli_usage; tb_exec "$@" ;;
    *) tb_cli_usage ;;
  esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  tb_cli "$@"
fi
