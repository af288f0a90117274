#!/usr/bin/env python3
"""trace_dot.py FIB-TRACE.txt OUT.dot: the route lookups of a fib trace
(fib:fib_table_lookup events, with the uid this stage adds), drawn as one
chain per uid: the tables the rules sent the lookup to, in the order it
read them, and what each answered. A table that has no route for the
destination answers -EAGAIN (err -11), and the walk goes on to the next
rule; the first table with a route ends it.

Fails, naming the line, when the trace has no lookup with a uid: an
empty picture would say nothing, and a wrong one would mislead."""
import re
import sys

EVENT = re.compile(r"fib_table_lookup: table (\d+) .* -> ([0-9.]+)/\d+ .* uid (\d+) "
                   r"==> dev (\S+) gw (\S+) err (-?\d+)")
NAMES = {255: "local", 254: "main", 253: "default"}


def lookups(path):
    """{uid: [(table, dev, gw, err)]}, in the trace's order."""
    walks = {}
    for line in open(path):
        if m := EVENT.search(line):
            table, dest, uid, dev, gw, err = m.groups()
            walks.setdefault(int(uid), []).append((int(table), dest, dev, gw.split("/")[0],
                                                   int(err)))
    return walks


def dot(walks):
    out = ["digraph lookups {", "  rankdir=LR;",
           '  node [shape=box, fontname="DejaVu Sans", fontsize=10];',
           '  edge [fontname="DejaVu Sans", fontsize=9];']
    for uid, steps in walks.items():
        start = f"uid{uid}"
        out.append(f'  {start} [label="ip route get {steps[0][1]}\\nuid {uid}", shape=oval];')
        previous = start
        for n, (table, _, dev, gw, err) in enumerate(steps):
            node = f"uid{uid}_{n}"
            name = f"table {table}" + (f" ({NAMES[table]})" if table in NAMES else "")
            answer = "no route (err -11)" if err else f"dev {dev} via {gw}"
            style = ', style="rounded,filled", fillcolor="#dff0d8"' if not err else ""
            out.append(f'  {node} [label="{name}\\n{answer}"{style}];')
            out.append(f'  {previous} -> {node} [label="{"rules" if n == 0 else "next rule"}"];')
            previous = node
    out.append("}")
    return "\n".join(out) + "\n"


def main(trace, target):
    walks = lookups(trace)
    if not walks:
        sys.exit(f"{trace}: no fib_table_lookup event with a uid")
    with open(target, "w") as f:
        f.write(dot(walks))


if __name__ == "__main__":
    main(*sys.argv[1:])
