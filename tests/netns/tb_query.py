#!/usr/bin/python3
"""Evaluates a Python expression over `failoverctl --json status` (read from stdin).

The testbed's assertions are written against the status reply: names bound for the expression
are s (the whole reply), g (the first group), P and S (its primary and secondary SITE objects)
and L (its LOCATION objects by name); probe(site, loc) is the latest result of the site's probe
"web" from that location ({"ok", "latency_ms", "error"}, {} if none). See
docs/control-protocol.md for the fields.

usage: tb_query.py EXPR          print the value of EXPR (exit 1 if the input is not a status)
       tb_query.py --check EXPR  exit 0 if EXPR holds, 1 if not or if the input is unusable
"""
import json
import sys


def main():
    args = sys.argv[1:]
    check = bool(args) and args[0] == "--check"
    if check:
        args = args[1:]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        s = json.load(sys.stdin)
        g = s["groups"][0]
        def probe(site, loc):
            for entry in g[site]["locations"]:
                if entry["name"] == loc:
                    for p in entry.get("probes", []):
                        if p["name"] == "web":
                            return p
            return {}

        names = {"s": s, "g": g, "P": g["primary"], "S": g["secondary"],
                 "L": {loc["name"]: loc for loc in g["locations"]}, "probe": probe}
        # Parenthesised, so that expressions may span lines.
        value = eval("(" + args[0] + "\n)", {"__builtins__": __builtins__}, names)
    except (ValueError, KeyError, IndexError, TypeError):
        return 1
    if check:
        return 0 if value else 1
    print(value if isinstance(value, str) else json.dumps(value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
