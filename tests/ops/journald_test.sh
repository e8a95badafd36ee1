#!/bin/bash
# failoverd's transitions reach a real journald with their structured fields, and the catalog
# explains them. A private systemd-journald runs in a private mount namespace (the host's /run
# is untouched); the real failoverd fails a group over; journalctl -o json MESSAGE_ID=... returns
# the fields. Then the catalog is installed inside the namespace (host catalogs plus ours
# bind-mounted over /usr/lib/systemd/catalog, the database on a tmpfs) and `journalctl -x` must
# show our explanation, fields substituted, for the failover entry.
# usage: journald_test.sh FAILOVERD FAILOVERCTL EVENTS_HPP CATALOG
set -euo pipefail
FAILOVERD=$1 FAILOVERCTL=$2 EVENTS=$3 CATALOG=$4
if [ -z "${FO_IN_NS:-}" ]; then
  exec env FO_IN_NS=1 unshare -m --propagation private "$0" "$@"
fi
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -x /lib/systemd/systemd-journald ] || fail "/lib/systemd/systemd-journald is missing (package systemd)"
id_of() { sed -n "s/.*$1 = \"\([0-9a-f]\{32\}\)\".*/\1/p" "$EVENTS"; }
FAILOVER_STARTED=$(id_of kFailoverStarted)
FAILOVER_FINISHED=$(id_of kFailoverFinished)
WARM=$(id_of kWarm)
[ ${#FAILOVER_STARTED} -eq 32 ] || fail "cannot read message ids from $EVENTS"

T=$(mktemp -d)
pids=()
cleanup() {
  # site() runs in a command substitution, so its pids are only in the pid files.
  for f in "$T"/*.pid; do [ -f "$f" ] && pids+=("$(cat "$f")"); done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT

mkdir -p /run/systemd/journal /run/log/journal /var/log/journal
mount -t tmpfs tmpfs /run/systemd/journal
mount -t tmpfs tmpfs /run/log/journal
mount -t tmpfs tmpfs /var/log/journal
/lib/systemd/systemd-journald &
pids+=($!)
for _ in $(seq 100); do [ -S /run/systemd/journal/socket ] && break; sleep 0.05; done
[ -S /run/systemd/journal/socket ] || fail "journald did not start"

mkdir -p "$T/www"; echo OK > "$T/www/health"
site() {  # prints the port a fresh http.server listens on
  python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www" > "$T/$1.out" 2>&1 &
  pids+=($!)
  echo $! > "$T/$1.pid"
  for _ in $(seq 100); do
    port=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$T/$1.out" | head -1)
    [ -n "$port" ] && { echo "$port"; return; }
    sleep 0.05
  done
  fail "http.server for $1 did not start"
}
P1=$(site primary)
P2=$(site secondary)
cat > "$T/f.toml" <<TOML
[daemon]
state_db = "$T/state.db"
control_socket = "$T/control.sock"
metrics_listen = ""
[[group]]
name = "shop"
interval = "200ms"
[group.primary]
probes = [ { kind = "http", url = "http://127.0.0.1:$P1/health", timeout = "150ms" } ]
[group.secondary]
probes = [ { kind = "http", url = "http://127.0.0.1:$P2/health", timeout = "150ms" } ]
TOML
"$FAILOVERD" --config "$T/f.toml" > "$T/daemon.log" 2>&1 &
DPID=$!
pids+=($DPID)
state() { "$FAILOVERCTL" --socket "$T/control.sock" --json status 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["groups"][0]["state"])' 2>/dev/null || true; }
for _ in $(seq 100); do [ "$(state)" = primary_active ] && break; sleep 0.1; done
[ "$(state)" = primary_active ] || fail "daemon did not come up: $(cat "$T/daemon.log")"
kill "$(cat "$T/primary.pid")"
for _ in $(seq 100); do [ "$(state)" = secondary_active ] && break; sleep 0.1; done
[ "$(state)" = secondary_active ] || fail "no failover: $(tail -20 "$T/daemon.log")"
kill -TERM $DPID; wait $DPID || true
sleep 0.2

check() {  # message_id python-expression-on-entry description
  journalctl --no-pager -o json "MESSAGE_ID=$1" > "$T/j.json" || true
  python3 - "$T/j.json" "$2" <<'PY' || fail "$3: $(cat "$T/j.json")"
import json, sys
entries = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert entries, "no entries"
e = entries[0]
assert eval(sys.argv[2]), e
PY
  echo "ok: $3"
}
check "$WARM" 'e["GROUP"] == "shop" and e["SYSLOG_IDENTIFIER"] == "failoverd"' "warm event with GROUP"
check "$FAILOVER_STARTED" 'e["GROUP"] == "shop" and e["FROM"] == "primary_degraded" and e["TO"] == "failing_over" and e["REASON"].startswith("failing over: primary 0/1 for 3 rounds") and e["INITIATOR"] == "auto" and e["PRIORITY"] == "5"' "failover started with FROM/TO/REASON"
check "$FAILOVER_FINISHED" 'e["GROUP"] == "shop" and e["PLAN_ID"] == "2"' "failover finished with PLAN_ID"

# --- the catalog, installed privately: journalctl -x explains the failover entry.
[ -d /usr/lib/systemd/catalog ] && [ -d /var/lib/systemd/catalog ] ||
  fail "/usr/lib/systemd/catalog or /var/lib/systemd/catalog is missing (package systemd)"
mkdir -p "$T/catalog"
cp /usr/lib/systemd/catalog/*.catalog "$T/catalog/" 2>/dev/null || true
cp "$CATALOG" "$T/catalog/failoverd.catalog"
mount --bind "$T/catalog" /usr/lib/systemd/catalog
mount -t tmpfs tmpfs /var/lib/systemd/catalog
journalctl --update-catalog || fail "journalctl --update-catalog failed"
journalctl --no-pager -o json "MESSAGE_ID=$FAILOVER_STARTED" > "$T/j.json"
journalctl --no-pager -x "MESSAGE_ID=$FAILOVER_STARTED" > "$T/x.txt" || true
python3 - "$CATALOG" "$FAILOVER_STARTED" "$T/j.json" "$T/x.txt" <<'PY' || fail "journalctl -x: $(cat "$T/x.txt")"
import json, re, sys
catalog, mid, entry_file, shown_file = sys.argv[1:]
entry = json.loads(open(entry_file).readline())
# The catalog entry for this id: header lines, a blank line, the body, up to the next "-- ".
text = open(catalog).read()
start = text.index("-- " + mid + "\n") + len(mid) + 4
end = text.find("\n-- ", start)
block = text[start:] if end < 0 else text[start:end]
header, body = block.split("\n\n", 1)
subst = lambda s: re.sub(r"@([A-Z0-9_]+)@", lambda m: entry.get(m.group(1), m.group(0)), s)
subject = subst(re.search(r"^Subject: (.*)$", header, re.M).group(1))
# journalctl -x prefixes explanation lines with "-- " (or "░░ " in a UTF-8 locale).
shown = [re.sub(r"^(--|░░) ?", "", l).strip() for l in open(shown_file, encoding="utf-8")]
assert "Subject: " + subject in shown, ("subject", subject)
wanted = [subst(l).strip() for l in body.splitlines() if l.strip()]
wanted = [l for l in wanted if "@" not in l]  # fields the entry lacks stay unsubstituted
assert len(wanted) >= 3, wanted
missing = [l for l in wanted if l not in shown]
assert not missing, ("body lines not shown", missing)
assert any("shop" in l for l in wanted), "no line names the group"
print("ok: journalctl -x explains the failover entry:", subject)
PY
echo "2 passed, 0 failed"
