# Shared helpers of the packaging test scripts (sourced, not run).

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

need_tools() {
    local t
    for t in "$@"; do
        command -v "$t" >/dev/null ||
            fail "$t is not installed (scripts/install-deps.sh installs it)"
    done
}

# exposure_of UNIT_FILE: prints the overall exposure of `systemd-analyze security --offline`.
exposure_of() {
    local out
    out=$(systemd-analyze security --offline=true --no-pager "$1" 2>&1) ||
        fail "systemd-analyze security failed on $1: $out"
    printf '%s\n' "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p'
}

# at_most A B: true if the decimal A <= B.
at_most() {
    awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'
}
