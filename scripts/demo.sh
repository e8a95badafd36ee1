#!/bin/bash
# Local demo on loopback: two HTTP servers play the primary and the secondary site, failoverd
# watches them with a demo config, and failoverctl shows what happens when the primary stops
# and comes back. Nothing leaves 127.0.0.1. usage: scripts/demo.sh [--keep]
#   --keep   leave the servers and the daemon running at the end (prints how to stop them)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
keep=0
[ "${1:-}" = "--keep" ] && keep=1

./scripts/install-deps.sh
echo "== building"
BUILD_TARGETS="failoverd failoverctl" ./scripts/build.sh build

T=$(mktemp -d /tmp/failoverd-demo.XXXXXX)
chmod 755 "$T"
P1=${DEMO_PRIMARY_PORT:-18081}
P2=${DEMO_SECONDARY_PORT:-18082}
PM=${DEMO_METRICS_PORT:-19772}
mkdir -p "$T/www"
echo OK > "$T/www/health"
sed -e "s|@DIR@|$T|g" -e "s|@P1@|$P1|g" -e "s|@P2@|$P2|g" -e "s|@PM@|$PM|g" etc/demo/failoverd-demo.toml > "$T/failoverd.toml"
install -m 0755 etc/demo/step.sh "$T/step.sh"

pids=()
cleanup() {
  [ $keep -eq 1 ] && return
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

start_site() {  # name port -> pid in $site_pid
  python3 -m http.server "$2" --bind 127.0.0.1 --directory "$T/www" >"$T/$1.log" 2>&1 &
  site_pid=$!
  pids+=("$site_pid")
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$2/health" >/dev/null && return; sleep 0.05; done
  echo "demo: the $1 site did not start on port $2 (port in use? set DEMO_PRIMARY_PORT/DEMO_SECONDARY_PORT)" >&2
  exit 1
}
start_site primary "$P1"; primary_pid=$site_pid
start_site secondary "$P2"

"$root/build/daemon/failoverd" --check-config --config "$T/failoverd.toml"
"$root/build/daemon/failoverd" --config "$T/failoverd.toml" >"$T/failoverd.log" 2>&1 &
pids+=("$!")
ctl() { "$root/build/ctl/failoverctl" --socket "$T/control.sock" "$@"; }
for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.1; done
field() { ctl --json status | python3 -c "import json,sys; print(json.load(sys.stdin)['groups'][0]['$1'])"; }
wait_for() {  # field value timeout_s
  for _ in $(seq $(($3 * 5))); do [ "$(field "$1")" = "$2" ] && return 0; sleep 0.2; done
  echo "demo: $1 did not become $2 within $3 s" >&2; return 1
}

echo; echo "== both sites up:  failoverctl --socket $T/control.sock status"
sleep 2; ctl status

echo; echo "== stopping the primary site (kill $primary_pid)"
kill "$primary_pid"
wait_for active secondary 20
ctl status

echo; echo "== the primary comes back; failback waits for 20 s of continuous health (failback_stable)"
start_site primary "$P1"
wait_for active primary 60
ctl status
echo; echo "== history:  failoverctl --socket $T/control.sock history"
ctl history
echo; echo "== steps run:  failoverctl --socket $T/control.sock history --kind actions"
ctl history --kind actions
echo; echo "== Prometheus metrics:  curl -s http://127.0.0.1:$PM/metrics"
curl -s "http://127.0.0.1:$PM/metrics" | grep -E '^failoverd_(group_state|group_active_site|transitions_total)' | grep -v ' 0$' || true
echo; echo "== what the step scripts saw"
cat "$T/steps.log"
echo
echo "demo files, config and logs: $T"
if [ $keep -eq 1 ]; then
  echo "still running (pids ${pids[*]}); try: $root/build/ctl/failoverctl --socket $T/control.sock status"
  echo "stop with: kill ${pids[*]}"
fi
