#!/usr/bin/env python3
"""list_add_dot.py LIST-REPORTS.txt OUT.dot: lkdtm's CORRUPT_LIST_ADD
as the kernel's report of it describes it. The list head on the task's
stack holds one good entry, and its next has been pointed at a small
array of the test's (the "where" of a write-what-where). list_add()
asks __list_add_valid() whether a new entry may go in between the head
(prev) and what its next says (next); the check follows next, reads its
prev, the array's second slot, finds NULL where the head should be, and
reports the three addresses drawn here.

Fails, naming what is missing, unless list_add_checks recorded the
report: a picture without it would be made up."""
import re
import sys

REPORT = re.compile(r"^CORRUPT_LIST_ADD\tlist_add corruption\. next->prev should be prev "
                    r"\(([0-9a-f]{16})\), but was ([0-9a-f]{16})\. \(next=([0-9a-f]{16})\)\.$")


def main(src, out):
    found = [m.groups() for line in open(src) if (m := REPORT.match(line.rstrip("\n")))]
    if not found:
        sys.exit(f"{src}: no report of CORRUPT_LIST_ADD by list_add_checks")
    prev, was, nxt = found[-1]
    short = lambda address: f"0x…{address[-6:]}"
    lines = [
        "digraph corrupt_list_add {",
        "  rankdir=LR;",
        '  node [shape=record, fontname="monospace"];',
        f'  head [label="{{test_head (prev)|{short(prev)}}}|{{<next>next|<prev>prev}}"];',
        '  good [label="{good.node}|{<next>next|<prev>prev}"];',
        f'  target [label="{{target[2] (next)|{short(nxt)}}}|{{<t0>[0] = NULL|<t1>[1] = '
        f'{"NULL" if int(was, 16) == 0 else short(was)}}}"];',
        '  new [label="{bad.node (new)}|{next = ?|prev = ?}", style=dashed];',
        '  null [label="NULL", shape=plaintext];',
        '  head:next -> target [color=red, fontcolor=red, label="overwritten"];',
        "  head:prev -> good;",
        "  good:next -> head; good:prev -> head;",
        '  target:t1 -> null [color=red, fontcolor=red, '
        'label="read as next->prev: not prev"];',
        '  new -> head [style=dashed, label="list_add(new, head)"];',
        "}",
    ]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
