#!/bin/bash
# packaging.files: sysusers and tmpfiles entries apply cleanly to an empty root, the journal
# catalog has one valid entry per MESSAGE_ID of daemon/events.hpp, the man pages render without
# warnings and cover every option and verb in the code, and the changelog has this version.
# Usage: test_files.sh SOURCE_DIR PROJECT_VERSION FAILOVERD_BINARY FAILOVERCTL_BINARY
set -euo pipefail
src=$1
version=$2
daemon=$3
ctl=$4
. "$src/tests/packaging/lib.sh"
need_tools awk systemd-sysusers systemd-tmpfiles journalctl man dpkg-parsechangelog stat
pkg=$src/packaging
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# sysusers + tmpfiles into an empty root.
root=$T/root
mkdir -p "$root/etc" "$root/var/lib"
systemd-sysusers --root="$root" - <"$pkg/failoverd.sysusers" >"$T/sysusers.log" 2>&1 ||
    fail "systemd-sysusers: $(cat "$T/sysusers.log")"
grep -q '^failoverd:x:[0-9]*:[0-9]*:[^:]*:/var/lib/failoverd:/usr/sbin/nologin$' \
    "$root/etc/passwd" || fail "user failoverd not created as expected: $(cat "$root/etc/passwd")"
grep -q '^failoverd:' "$root/etc/group" || fail "group failoverd not created"
grep -q '^failoverd-admin:' "$root/etc/group" || fail "group failoverd-admin not created"
systemd-tmpfiles --root="$root" --create - <"$pkg/failoverd.tmpfiles" >"$T/tmpfiles.log" 2>&1 ||
    fail "systemd-tmpfiles: $(cat "$T/tmpfiles.log")"
[ ! -s "$T/tmpfiles.log" ] || fail "systemd-tmpfiles printed: $(cat "$T/tmpfiles.log")"
fo_uid=$(awk -F: '$1 == "failoverd" { print $3 }' "$root/etc/passwd")
fo_gid=$(awk -F: '$1 == "failoverd" { print $3 }' "$root/etc/group")
[ "$(stat -c '%a %u %g' "$root/var/lib/failoverd")" = "750 $fo_uid $fo_gid" ] ||
    fail "/var/lib/failoverd: $(stat -c '%a %u %g' "$root/var/lib/failoverd")"
[ "$(stat -c '%a %u %g' "$root/etc/failoverd")" = "750 0 $fo_gid" ] ||
    fail "/etc/failoverd: $(stat -c '%a %u %g' "$root/etc/failoverd")"

# Catalog: the IDs match events.hpp exactly, and journalctl compiles and lists them all.
grep -o '"[0-9a-f]\{32\}"' "$src/daemon/events.hpp" | tr -d '"' | sort >"$T/ids.code"
[ -s "$T/ids.code" ] || fail "no MESSAGE_IDs found in daemon/events.hpp"
grep -o '^-- [0-9a-f]\{32\}$' "$pkg/failoverd.catalog" | cut -c4- | sort >"$T/ids.catalog"
diff -u "$T/ids.code" "$T/ids.catalog" >"$T/ids.diff" ||
    fail "catalog and daemon/events.hpp disagree (- code, + catalog):
$(cat "$T/ids.diff")"
croot=$T/croot
mkdir -p "$croot/usr/lib/systemd/catalog" "$croot/var/lib/systemd/catalog"
cp "$pkg/failoverd.catalog" "$croot/usr/lib/systemd/catalog/"
journalctl --root="$croot" --update-catalog >"$T/catalog.log" 2>&1 ||
    fail "journalctl --update-catalog: $(cat "$T/catalog.log")"
[ ! -s "$T/catalog.log" ] || fail "journalctl --update-catalog printed: $(cat "$T/catalog.log")"
journalctl --root="$croot" --list-catalog | awk '{ print $1 }' | sort >"$T/ids.listed"
diff -u "$T/ids.code" "$T/ids.listed" >/dev/null ||
    fail "journalctl lists other IDs than events.hpp: $(cat "$T/ids.listed")"
while read -r id; do
    entry=$(journalctl --root="$croot" --dump-catalog "$id")
    grep -q '^Subject: failoverd' <<<"$entry" || fail "catalog entry $id has no Subject"
    [ "$(wc -l <<<"$entry")" -ge 8 ] || fail "catalog entry $id explains nothing"
done <"$T/ids.code"

# Man pages render without a single groff warning.
for page in failoverd.8 failoverctl.1 failoverd.toml.5; do
    out=$(MANWIDTH=80 man --warnings -l "$pkg/$page" 2>&1 >/dev/null)
    [ -z "$out" ] || fail "man --warnings $page:
$out"
    head -n 3 "$pkg/$page" | grep -q '^\.TH ' || fail "$page has no .TH near the top"
done
render() { MANWIDTH=200 man -l "$pkg/$1" 2>/dev/null; }

# Every option and verb that --help shows (hidden test-only flags are not shown) is documented,
# and every verb is completed.
render failoverd.8 >"$T/failoverd.txt"
opts=$("$daemon" --help | grep -o -- '--[a-z][a-z-]*' | sort -u)
[ -n "$opts" ] || fail "no options in failoverd --help"
for o in $opts; do
    grep -q -- "$o" "$T/failoverd.txt" || fail "failoverd(8) does not document $o"
done
render failoverctl.1 >"$T/failoverctl.txt"
"$ctl" --help >"$T/ctl-help.txt"
verbs=$(sed -n '/^Subcommands:/,$p' "$T/ctl-help.txt" | awk 'NR > 1 && NF { print $1 }')
[ -n "$verbs" ] || fail "no verbs in failoverctl --help"
for v in $verbs; do
    grep -q "^       $v\b" "$T/failoverctl.txt" || fail "failoverctl(1) does not document verb $v"
    grep -q "verbs=\".*\b$v\b" "$pkg/failoverctl.bash-completion" ||
        fail "bash completion does not offer verb $v"
done
for o in $(sed '/^Subcommands:/,$d' "$T/ctl-help.txt" | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    grep -q -- "$o" "$T/failoverctl.txt" || fail "failoverctl(1) does not document $o"
done
for v in $verbs; do
    for o in $("$ctl" "$v" --help | sed '/^Subcommands:/,$d' | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        grep -q -- "$o" "$T/failoverctl.txt" || fail "failoverctl(1) does not document $v $o"
    done
done
render failoverd.toml.5 >"$T/toml.txt"
for key in state_db control_socket log_level store_queue_limit interval locations warm_below \
    failover_below failover_after secondary_min failback_stable min_dwell flap_limit argv \
    on_failure; do
    grep -q "\b$key\b" "$T/toml.txt" || fail "failoverd.toml(5) does not mention $key"
done

# The changelog's newest entry is this version.
cl=$(dpkg-parsechangelog -l "$pkg/changelog" -S Version)
[ "$cl" = "$version" ] || fail "packaging/changelog's newest entry is $cl, the project is $version"
echo "packaging.files: OK"
