#!/bin/bash
# packaging.unit: failoverd.service passes `systemd-analyze verify` without a single message,
# scores an exposure of at most 1.5, and keeps the properties the daemon depends on.
# Usage: test_unit.sh SOURCE_DIR FAILOVERD_BINARY
set -euo pipefail
src=$1
daemon=$2
. "$src/tests/packaging/lib.sh"
need_tools systemd-analyze awk sed grep

unit=$src/packaging/failoverd.service
[ -f "$unit" ] || fail "$unit is missing"
[ -x "$daemon" ] || fail "$daemon is not executable"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# verify needs ExecStart= to exist: point it at the freshly built binary. The man pages are
# not installed here, hence --man=no (test_deb.sh verifies the installed unit with them).
sed "s#/usr/sbin/failoverd#$daemon#g" "$unit" > "$T/failoverd.service"
out=$(cd "$T" && systemd-analyze verify --man=no "$T/failoverd.service" 2>&1) ||
    fail "systemd-analyze verify exited non-zero: $out"
[ -z "$out" ] || fail "systemd-analyze verify printed something (it exits 0 on warnings):
$out"

score=$(exposure_of "$T/failoverd.service")
[ -n "$score" ] || fail "no 'Overall exposure level' line from systemd-analyze security"
at_most "$score" 1.5 || fail "exposure $score is above 1.5"
echo "exposure: $score"

# What the daemon relies on. Comments are ignored; the unit has no line continuations.
directives=$(grep -v '^[[:space:]]*#' "$unit")
for want in 'Type=notify' 'NotifyAccess=main' 'WatchdogSec=30s' 'Restart=on-failure' \
    'User=failoverd' 'Group=failoverd' 'StateDirectory=failoverd' 'RuntimeDirectory=failoverd' \
    'RuntimeDirectoryMode=0750' 'ConfigurationDirectory=failoverd' \
    'ExecStart=/usr/sbin/failoverd --config /etc/failoverd/failoverd.toml' \
    'ExecReload=/bin/kill -HUP $MAINPID'; do
    grep -qxF "$want" <<<"$directives" || fail "unit lacks '$want'"
done
grep -q '^RestartSec=' <<<"$directives" || fail "unit lacks RestartSec="
grep -q '^UMask=' <<<"$directives" || fail "unit lacks UMask="
families=$(sed -n 's/^RestrictAddressFamilies=//p' <<<"$directives")
for af in AF_UNIX AF_INET AF_INET6; do
    grep -qw "$af" <<<"$families" || fail "RestrictAddressFamilies= must allow $af (probes)"
done
# Peer credentials of failoverctl users must reach the daemon unmapped, and probes need the
# network: these settings would break the daemon even though they lower the score.
for bad in 'DynamicUser=yes' 'PrivateUsers=yes' 'PrivateNetwork=yes' 'IPAddressDeny=any'; do
    if grep -qxF "$bad" <<<"$directives"; then fail "unit must not set $bad"; fi
done
echo "packaging.unit: OK"
