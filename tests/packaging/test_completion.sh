#!/bin/bash
# packaging.completion: the bash completion offers verbs, options and the group names that
# `failoverctl --json status` reports (a stand-in failoverctl prints that JSON here), asks the
# socket given on the command line, and works with and without the bash-completion package.
# Usage: test_completion.sh SOURCE_DIR
set -euo pipefail
src=$1
. "$src/tests/packaging/lib.sh"
need_tools bash
bc_main=/usr/share/bash-completion/bash_completion
[ -f "$bc_main" ] || fail "$bc_main is missing: the bash-completion package is not installed"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# Stand-in failoverctl: records its arguments and prints a status reply laid out as
# nlohmann::json's dump(2) does (groups' keys at six spaces, locations' deeper).
cat >"$T/failoverctl" <<'STUB'
#!/bin/bash
printf '%s\n' "$*" >>"${0%/*}/calls"
cat <<'JSON'
{
  "daemon": {
    "pid": 42,
    "version": "0.1.0"
  },
  "groups": [
    {
      "active": "primary",
      "name": "shop",
      "primary": {
        "locations": [
          {
            "name": "fra",
            "verdict": "healthy"
          }
        ]
      },
      "state": "primary_active"
    },
    {
      "name": "db-main.eu",
      "state": "held"
    }
  ]
}
JSON
STUB
chmod +x "$T/failoverctl"

# complete_words WORD...: runs the completion function on the words (the last one is the word
# being completed) and prints COMPREPLY sorted, one per line.
cat >"$T/run.sh" <<'RUN'
mode=$1
shift
[ "$mode" = full ] && . /usr/share/bash-completion/bash_completion
. "$COMPLETION"
COMP_WORDS=("$@")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="${COMP_WORDS[*]}"
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
_failoverctl failoverctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
printf '%s\n' "${COMPREPLY[@]}" | sort
RUN
export COMPLETION=$src/packaging/failoverctl.bash-completion

for mode in plain full; do
    c() { bash "$T/run.sh" "$mode" "$@"; }
    got=$(c "$T/failoverctl" "" | tr '\n' ' ')
    [ "$got" = "failback failover history hold probe reconcile release replay simulate status timeline version " ] ||
        fail "[$mode] verbs: '$got'"
    got=$(c "$T/failoverctl" "--j" | tr '\n' ' ')
    [ "$got" = "--json " ] || fail "[$mode] global option: '$got'"
    rm -f "$T/calls"
    got=$(c "$T/failoverctl" --socket /x/ctl.sock failover "" | tr '\n' ' ')
    [ "$got" = "db-main.eu shop " ] || fail "[$mode] group names: '$got'"
    grep -q -- '--socket /x/ctl.sock .*--json status' "$T/calls" ||
        fail "[$mode] the daemon was not asked on --socket: $(cat "$T/calls")"
    got=$(c "$T/failoverctl" hold s | tr '\n' ' ')
    [ "$got" = "shop " ] || fail "[$mode] group prefix: '$got'"
    got=$(c "$T/failoverctl" hold shop "" | tr '\n' ' ')
    [ "$got" = " " ] || fail "[$mode] a second group was offered: '$got'"
    got=$(c "$T/failoverctl" failover shop --f | tr '\n' ' ')
    [ "$got" = "--force " ] || fail "[$mode] failover option: '$got'"
    got=$(c "$T/failoverctl" history --kind "" | tr '\n' ' ')
    [ "$got" = "actions commands rounds transitions " ] || fail "[$mode] --kind: '$got'"
    got=$(c "$T/failoverctl" history --kind rounds "" | tr '\n' ' ')
    [ "$got" = "db-main.eu shop " ] || fail "[$mode] history group: '$got'"
    got=$(c "$T/failoverctl" simulate --t | tr '\n' ' ')
    [ "$got" = "--timeline --timeout " ] || fail "[$mode] simulate options: '$got'"
    got=$(c "$T/failoverctl" replay --d | tr '\n' ' ')
    [ "$got" = "--db " ] || fail "[$mode] replay options: '$got'"
    # An unreachable daemon completes nothing and prints nothing.
    got=$(c /nonexistent/failoverctl failback "" 2>&1 | tr '\n' ' ')
    [ "$got" = " " ] || fail "[$mode] unreachable daemon: '$got'"
done
echo "packaging.completion: OK"
