#!/bin/bash
# packaging.deb: builds the .deb with cpack, requires a lintian run without errors or warnings,
# installs it, checks the installed files, accounts and directories, runs the installed daemon
# on loopback and completes group names from it, then removes and purges the package.
# It changes this machine (CI runs as root on a throwaway one) and undoes every change on exit,
# also on failure; it refuses to run over an existing installation or existing data.
# Usage: test_deb.sh SOURCE_DIR BUILD_DIR PROJECT_VERSION
set -euo pipefail
src=$1
build=$2
version=$3
. "$src/tests/packaging/lib.sh"
need_tools cpack dpkg dpkg-deb dpkg-query lintian systemd-analyze man getent runuser userdel \
    groupdel stat python3
[ "$(id -u)" = 0 ] || fail "must run as root: it installs the package with dpkg -i"
[ -f "$build/CPackConfig.cmake" ] || fail "$build/CPackConfig.cmake is missing"

# A run killed before its cleanup (e.g. by the ctest timeout) leaves this marker; it records
# which accounts that run created, so the next run can finish the cleanup.
marker=/var/tmp/failoverd-packaging-test.state
T=$(mktemp -d)
daemon_pid=
created_accounts=

# True while dpkg knows any trace of the package: installed, unpacked, half-configured, or
# removed with its configuration kept.
installed() {
    local status
    status=$(dpkg-query -W -f='${Status}' failoverd 2>/dev/null) || return 1
    [[ $status != *not-installed ]]
}

# Purges the package, waiting up to 120 s for the dpkg lock (a killed run may have left a dpkg
# of its own finishing in the background).
purge_package() {
    local deadline=$((SECONDS + 120))
    while installed; do
        dpkg --purge failoverd >>"$T/cleanup.log" 2>&1 && return 0
        grep -q 'lock' "$T/cleanup.log" && [ $SECONDS -lt $deadline ] || return 1
        sleep 0.5
    done
}

# remove_accounts user:NAME|group:NAME...: users first (that may free their groups). Another
# process may hold the lock on /etc/passwd for a moment: retry for up to 60 s.
remove_accounts() {
    local a name deadline=$((SECONDS + 60))
    for a in "$@"; do
        name=${a#*:}
        while case $a in
            user:*) getent passwd "$name" >/dev/null ;;
            *) getent group "$name" >/dev/null ;;
        esac; do
            case $a in
                user:*) userdel "$name" >>"$T/cleanup.log" 2>&1 ;;
                *) groupdel "$name" >>"$T/cleanup.log" 2>&1 ;;
            esac && break
            [ $SECONDS -lt $deadline ] || return 1
            sleep 0.5
        done
    done
}

cleanup() {
    local rc=$?
    set +e
    if [ -n "$daemon_pid" ]; then
        kill "$daemon_pid" 2>/dev/null
        wait "$daemon_pid" 2>/dev/null
    fi
    if [ -f "$marker" ]; then
        if ! purge_package; then
            echo "cleanup: dpkg --purge failoverd failed, $marker kept for the next run:" >&2
            cat "$T/cleanup.log" >&2
            rm -rf "$T"
            exit 1
        fi
        # shellcheck disable=SC1090
        . "$marker"
        if ! remove_accounts $created_accounts; then
            echo "cleanup: could not remove accounts, $marker kept for the next run:" >&2
            cat "$T/cleanup.log" >&2
            rm -rf "$T"
            exit 1
        fi
        rm -f "$marker"
    fi
    rm -rf "$T"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -f "$marker" ]; then
    echo "finishing the cleanup of an interrupted earlier run ($marker)"
    (cleanup) || fail "could not finish the cleanup of the earlier run"
    T=$(mktemp -d)
fi
if installed; then
    fail "a failoverd package is already installed; this test would replace it"
fi
for d in /etc/failoverd /var/lib/failoverd /run/failoverd; do
    [ ! -e "$d" ] || fail "$d exists; this test installs and purges failoverd and would remove it"
done

# --- build and lint
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$T/cpack" >"$T/cpack.log" 2>&1 ||
    fail "cpack failed: $(tail -n 30 "$T/cpack.log")"
deb=$(ls "$T"/cpack/failoverd_"$version"_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "cpack made no failoverd_${version}_*.deb: $(ls "$T/cpack")"
lintian --allow-root --display-info "$deb" >"$T/lintian.txt" 2>&1 || true
echo "lintian:"
sed 's/^/  /' "$T/lintian.txt"
if grep -q '^[EW]:' "$T/lintian.txt"; then fail "lintian reports errors or warnings"; fi
if grep -qv '^[EWIPNXO]: \|^$' "$T/lintian.txt"; then fail "lintian did not run cleanly"; fi

control=$(dpkg-deb -f "$deb")
for want in "Package: failoverd" "Version: $version" "Section: admin" "Priority: optional"; do
    grep -qxF "$want" <<<"$control" || fail "control lacks '$want': $control"
done
grep -q '^Depends: .*libc6' <<<"$control" || fail "Depends not computed by dpkg-shlibdeps"
grep -q '^Depends: .*adduser' <<<"$control" || fail "Depends lacks adduser"
[ "$(dpkg-deb -f "$deb" Description | wc -l)" -ge 5 ] || fail "description too short"
dpkg-deb -I "$deb" conffiles | grep -qx /etc/failoverd/failoverd.toml ||
    fail "/etc/failoverd/failoverd.toml is not a conffile"

# --- install
before=""
getent passwd failoverd >/dev/null || before="$before user:failoverd"
for g in failoverd failoverd-admin; do
    getent group "$g" >/dev/null || before="$before group:$g"
done
printf 'created_accounts="%s"\n' "$before" >"$marker"
dpkg -i "$deb" >"$T/install.log" 2>&1 || fail "dpkg -i failed: $(cat "$T/install.log")"

[ "$(/usr/sbin/failoverd --version)" = "failoverd $version" ] ||
    fail "failoverd --version: $(/usr/sbin/failoverd --version 2>&1)"
/usr/sbin/failoverd --check-config --config /etc/failoverd/failoverd.toml ||
    fail "the installed example configuration does not pass --check-config"
/usr/bin/failoverctl --help >/dev/null || fail "failoverctl --help failed"

getent passwd failoverd | grep -q ':/var/lib/failoverd:/usr/sbin/nologin$' ||
    fail "user failoverd: $(getent passwd failoverd)"
getent group failoverd >/dev/null || fail "group failoverd missing"
getent group failoverd-admin >/dev/null || fail "group failoverd-admin missing"
[ "$(stat -c '%a %U %G' /var/lib/failoverd)" = "750 failoverd failoverd" ] ||
    fail "/var/lib/failoverd: $(stat -c '%a %U %G' /var/lib/failoverd)"
[ "$(stat -c '%a %U %G' /etc/failoverd)" = "750 root failoverd" ] ||
    fail "/etc/failoverd: $(stat -c '%a %U %G' /etc/failoverd)"
# The daemon's user can read its configuration; others cannot even list the directory.
runuser -u failoverd -- /usr/sbin/failoverd --check-config --config /etc/failoverd/failoverd.toml \
    >/dev/null || fail "user failoverd cannot read /etc/failoverd/failoverd.toml"
if runuser -u nobody -- /usr/sbin/failoverd --check-config \
    --config /etc/failoverd/failoverd.toml >/dev/null 2>&1; then
    fail "user nobody can read /etc/failoverd/failoverd.toml"
fi

for f in /usr/lib/systemd/system/failoverd.service /usr/lib/sysusers.d/failoverd.conf \
    /usr/lib/tmpfiles.d/failoverd.conf /usr/lib/systemd/catalog/failoverd.catalog \
    /usr/share/bash-completion/completions/failoverctl /usr/share/doc/failoverd/copyright \
    /usr/share/doc/failoverd/changelog.gz; do
    [ -f "$f" ] || fail "$f is not installed"
done
for page in 8:failoverd 1:failoverctl 5:failoverd.toml; do
    path=$(man -w "${page%%:*}" "${page#*:}") || fail "man ${page%%:*} ${page#*:} not found"
    [ "$path" = "/usr/share/man/man${page%%:*}/${page#*:}.${page%%:*}.gz" ] ||
        fail "man page ${page#*:} at $path"
done
man 8 failoverd 2>/dev/null | grep -q 'failover orchestrator daemon' ||
    fail "man failoverd does not render"

# The installed unit, with its binary and man pages in place: not a single message, and the
# same exposure as checked before installation.
out=$(cd / && systemd-analyze verify /usr/lib/systemd/system/failoverd.service 2>&1) ||
    fail "systemd-analyze verify (installed) exited non-zero: $out"
[ -z "$out" ] || fail "systemd-analyze verify (installed) printed: $out"
score=$(exposure_of /usr/lib/systemd/system/failoverd.service)
at_most "$score" 1.5 || fail "installed unit exposure $score is above 1.5"

# --- the installed daemon on loopback, and group names completed from it
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$T/test.toml" <<TOML
[daemon]
state_db = "$T/state.db"
control_socket = "$T/control.sock"
metrics_listen = ""

[[group]]
name = "pkgtest"
interval = "1s"

[group.primary]
probes = [ { kind = "http", url = "http://127.0.0.1:$port/", timeout = "200ms" } ]

[group.secondary]
probes = [ { kind = "http", url = "http://127.0.0.1:$port/", timeout = "200ms" } ]
TOML
/usr/sbin/failoverd --config "$T/test.toml" >"$T/daemon.log" 2>&1 &
daemon_pid=$!
deadline=$((SECONDS + 20))
until /usr/bin/failoverctl --socket "$T/control.sock" --json status >/dev/null 2>&1; do
    kill -0 "$daemon_pid" 2>/dev/null || fail "installed failoverd exited: $(cat "$T/daemon.log")"
    [ $SECONDS -lt $deadline ] || fail "installed failoverd did not answer within 20 s"
    sleep 0.1
done
got=$(bash -c '. /usr/share/bash-completion/bash_completion
    . /usr/share/bash-completion/completions/failoverctl
    COMP_WORDS=(failoverctl --socket "$1" hold ""); COMP_CWORD=4
    COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
    _failoverctl failoverctl "" hold; printf "%s\n" "${COMPREPLY[@]}"' _ "$T/control.sock")
[ "$got" = "pkgtest" ] || fail "completion from the installed daemon offered '$got'"
kill "$daemon_pid"
wait "$daemon_pid" || fail "failoverd did not stop cleanly on SIGTERM: $(cat "$T/daemon.log")"
daemon_pid=

# --- remove, then purge
dpkg -r failoverd >"$T/remove.log" 2>&1 || fail "dpkg -r failed: $(cat "$T/remove.log")"
for f in /usr/sbin/failoverd /usr/bin/failoverctl /usr/lib/systemd/system/failoverd.service \
    /usr/share/man/man8/failoverd.8.gz; do
    [ ! -e "$f" ] || fail "$f is still there after dpkg -r"
done
[ -f /etc/failoverd/failoverd.toml ] || fail "dpkg -r removed the conffile"
dpkg-query -W -f='${Status}\n' failoverd | grep -q 'config-files' ||
    fail "after dpkg -r: $(dpkg-query -W -f='${Status}' failoverd)"
dpkg --purge failoverd >"$T/purge.log" 2>&1 || fail "dpkg --purge failed: $(cat "$T/purge.log")"
for d in /etc/failoverd /var/lib/failoverd; do
    [ ! -e "$d" ] || fail "$d is still there after dpkg --purge"
done
if installed; then fail "after dpkg --purge: $(dpkg-query -W -f='${Status}' failoverd)"; fi
echo "exposure: $score"
echo "packaging.deb: OK"
