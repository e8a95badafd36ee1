#!/bin/bash
# Control-socket access with real non-root users (SO_PEERCRED). The real failoverd runs as a
# throwaway daemon user, like the packaged unit (User=failoverd): its socket is mode 0660 with
# the daemon's group. A member of that group may read (status) but not change (hold: "permission
# denied", exit code 1); a member of failoverd-admin (and of the daemon's group, to reach the
# socket) may change; a user in neither group cannot even connect.
# Users and groups get unique names and are removed on exit; failoverd-admin is created only if
# absent, and then removed again. Must run as root.
# usage: peercred_test.sh FAILOVERD FAILOVERCTL
set -euo pipefail
FAILOVERD=$1 FAILOVERCTL=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "must run as root (it creates users)"
for tool in useradd userdel groupadd groupdel usermod setpriv runuser getent python3 stat; do
    command -v "$tool" >/dev/null || fail "$tool is missing"
done

ADMIN_GROUP=failoverd-admin  # hard-coded in daemon/daemon_control.cpp
suffix=$(printf '%04x%04x' $$ $RANDOM)
DAEMON_USER=fod$suffix READER=for$suffix ADMIN=foa$suffix OUTSIDER=foo$suffix
users=()
created_admin_group=0
T=$(mktemp -d /tmp/fo-peercred-XXXXXX)
pids=()
cleanup() {
    for f in "$T"/*.pid; do [ -f "$f" ] && pids+=("$(cat "$f")"); done
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for u in "${users[@]}"; do userdel "$u" 2>/dev/null || echo "cleanup: userdel $u failed" >&2; done
    [ "$created_admin_group" = 1 ] && { groupdel "$ADMIN_GROUP" || echo "cleanup: groupdel $ADMIN_GROUP failed" >&2; }
    rm -rf "$T"
}
trap cleanup EXIT

for u in "$DAEMON_USER" "$READER" "$ADMIN" "$OUTSIDER"; do
    if id "$u" >/dev/null 2>&1 || getent group "$u" >/dev/null; then fail "user or group $u exists"; fi
    useradd --no-create-home --user-group --shell /usr/sbin/nologin "$u"
    users+=("$u")
done
if ! getent group "$ADMIN_GROUP" >/dev/null; then
    groupadd --system "$ADMIN_GROUP"
    created_admin_group=1
fi
usermod -a -G "$DAEMON_USER" "$READER"
usermod -a -G "$DAEMON_USER,$ADMIN_GROUP" "$ADMIN"

# Everyone may traverse the test directory; only the daemon user writes its run directory.
chmod 0755 "$T"
mkdir -p "$T/run" "$T/www"
chown "$DAEMON_USER:$DAEMON_USER" "$T/run"
chmod 0755 "$T/run"
echo OK >"$T/www/health"
site() {  # prints the port a fresh http.server listens on
    python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www" >"$T/$1.out" 2>&1 &
    echo $! >"$T/$1.pid"
    for _ in $(seq 100); do
        port=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$T/$1.out" | head -1)
        [ -n "$port" ] && { echo "$port"; return; }
        sleep 0.05
    done
    fail "http.server for $1 did not start"
}
P1=$(site primary)
P2=$(site secondary)
SOCK=$T/run/control.sock
cat >"$T/f.toml" <<TOML
[daemon]
state_db = "$T/run/state.db"
control_socket = "$SOCK"
metrics_listen = ""
[[group]]
name = "shop"
interval = "200ms"
[group.primary]
probes = [ { kind = "http", url = "http://127.0.0.1:$P1/health", timeout = "150ms" } ]
[group.secondary]
probes = [ { kind = "http", url = "http://127.0.0.1:$P2/health", timeout = "150ms" } ]
TOML
chmod 0644 "$T/f.toml"

# setpriv execs the daemon directly (its pid is the daemon's), with the user's groups.
setpriv --reuid="$DAEMON_USER" --regid="$DAEMON_USER" --init-groups \
    "$FAILOVERD" --config "$T/f.toml" >"$T/daemon.log" 2>&1 &
echo $! >"$T/daemon.pid"
ctl() {  # USER ARGS...: failoverctl as USER (root: directly); output in $T/out, $T/err
    local user=$1
    shift
    local rc=0
    if [ "$user" = root ]; then
        "$FAILOVERCTL" --socket "$SOCK" "$@" >"$T/out" 2>"$T/err" || rc=$?
    else
        runuser -u "$user" -- "$FAILOVERCTL" --socket "$SOCK" "$@" >"$T/out" 2>"$T/err" || rc=$?
    fi
    echo "$rc"
}
for _ in $(seq 100); do [ "$(ctl root status)" = 0 ] && break; sleep 0.1; done
[ "$(ctl root status)" = 0 ] || fail "daemon did not come up: $(cat "$T/daemon.log")"

# The socket: owner and group of the daemon, mode 0660.
[ "$(stat -c '%a %U %G' "$SOCK")" = "660 $DAEMON_USER $DAEMON_USER" ] ||
    fail "socket is $(stat -c '%a %U %G' "$SOCK"), expected 660 $DAEMON_USER $DAEMON_USER"
echo "ok: socket is mode 0660, owner and group $DAEMON_USER"

state() { ctl root --json status >/dev/null; python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["groups"][0]["state"])' "$T/out"; }

rc=$(ctl "$OUTSIDER" status)
[ "$rc" = 3 ] || fail "outsider status: exit $rc, expected 3: $(cat "$T/err")"
grep -q "Permission denied" "$T/err" || fail "outsider status: $(cat "$T/err")"
grep -q "run as root or as a member of its group" "$T/err" || fail "outsider hint: $(cat "$T/err")"
echo "ok: a user outside the daemon's group cannot connect (exit 3, with a hint)"

rc=$(ctl "$READER" --json status)
[ "$rc" = 0 ] || fail "reader status: exit $rc: $(cat "$T/err")"
grep -q '"shop"' "$T/out" || fail "reader status output: $(cat "$T/out")"
rc=$(ctl "$READER" history shop)
[ "$rc" = 0 ] || fail "reader history: exit $rc: $(cat "$T/err")"
echo "ok: a member of the daemon's group may read (status, history)"

rc=$(ctl "$READER" hold shop --yes --reason "reader tries")
[ "$rc" = 1 ] || fail "reader hold: exit $rc, expected 1: $(cat "$T/out" "$T/err")"
reader_uid=$(id -u "$READER")
grep -q "permission denied: uid $reader_uid may not hold (needs root or group $ADMIN_GROUP)" "$T/err" ||
    fail "reader hold message: $(cat "$T/err")"
refusal=$(head -1 "$T/err")
[ "$(state)" = primary_active ] || fail "the refused hold changed the state to $(state)"
echo "ok: a reader's hold is refused: $refusal"

rc=$(ctl "$ADMIN" hold shop --yes --reason "admin maintenance")
[ "$rc" = 0 ] || fail "admin hold: exit $rc: $(cat "$T/out" "$T/err")"
[ "$(state)" = held ] || fail "after the admin's hold the state is $(state)"
rc=$(ctl "$ADMIN" release shop --yes)
[ "$rc" = 0 ] || fail "admin release: exit $rc: $(cat "$T/out" "$T/err")"
echo "ok: a member of $ADMIN_GROUP may hold and release"

rc=$(ctl root --json history shop --kind commands)
[ "$rc" = 0 ] || fail "history of commands: exit $rc: $(cat "$T/err")"
python3 - "$T/out" "$reader_uid" "$(id -u "$ADMIN")" <<'PY' || fail "commands history: $(cat "$T/out")"
import json, sys
rows = json.load(open(sys.argv[1]))["commands"]
seen = {(r["command"], r["uid"], r["result"].startswith("permission denied")) for r in rows}
assert ("hold", int(sys.argv[2]), True) in seen, seen
assert ("hold", int(sys.argv[3]), False) in seen, seen
assert ("release", int(sys.argv[3]), False) in seen, seen
PY
echo "ok: the history records each command with the caller's uid, the refusal included"
echo "5 passed, 0 failed"
