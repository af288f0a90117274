#!/usr/bin/env python3
"""owner_word_svg.py KTAP.txt OUT.svg: the owner word of one mutex
through a handoff, as the KUnit case
a_handoff_gives_the_lock_to_the_first_waiter logged it in a real run.
One row per moment: which task the word names (the case, the first
waiter, the second, or none) and which of its three flag bits are set.

Fails, naming what is missing, unless the case logged every moment: a
picture with a gap would mislead."""
import re
import sys
from xml.sax.saxutils import escape

CASE = "a_handoff_gives_the_lock_to_the_first_waiter"
LINE = re.compile(r"#\s*" + CASE + r": owner word (.+?): (pid (\d+)|0)((?:\|\w+)*)\s*$")
MOMENTS = ["held by the case", "with two waiters asleep", "with a handoff asked for",
           "after the unlock", "as the first waiter found it",
           "as the second waiter found it", "at the end"]
FLAGS = ["WAITERS", "HANDOFF", "PICKUP"]


def main(src, out):
    rows = {}
    for line in open(src, errors="replace"):
        if m := LINE.search(line.rstrip("\n")):
            moment, _, pid, flags = m.groups()
            rows[moment] = (int(pid) if pid else 0, [f for f in flags.split("|") if f])
    missing = [m for m in MOMENTS if m not in rows]
    if missing:
        sys.exit(f"{src}: {CASE} logged no owner word {', '.join(missing)}")
    # Name the tasks by their role: the case holds first, then the first
    # waiter gets it, then the second.
    roles = {rows[MOMENTS[0]][0]: "the case", rows[MOMENTS[4]][0]: "first waiter",
             rows[MOMENTS[5]][0]: "second waiter", 0: "no task"}
    width, row_h, left = 760, 34, 230
    height = 70 + row_h * len(MOMENTS)
    cells = [("task", 170)] + [(flag, 90) for flag in FLAGS]
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="DejaVu Sans, sans-serif" font-size="13">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    x = left
    for name, w in cells:
        svg.append(f'<text x="{x + w / 2}" y="30" text-anchor="middle" '
                   f'font-weight="bold">{name}</text>')
        x += w
    for i, moment in enumerate(MOMENTS):
        y = 45 + i * row_h
        pid, flags = rows[moment]
        svg.append(f'<text x="{left - 10}" y="{y + 21}" text-anchor="end">'
                   f'{escape(moment)}</text>')
        x = left
        for name, w in cells:
            if name == "task":
                label = roles.get(pid, f"pid {pid}") + (f" ({pid})" if pid else "")
                fill = "#dde8f6" if pid else "#f2f2f2"
            else:
                label = "1" if name in flags else "0"
                fill = "#f6c9a0" if name in flags else "#f2f2f2"
            svg.append(f'<rect x="{x}" y="{y}" width="{w - 4}" height="{row_h - 6}" '
                       f'fill="{fill}" stroke="#888"/>')
            svg.append(f'<text x="{x + (w - 4) / 2}" y="{y + 19}" '
                       f'text-anchor="middle">{escape(label)}</text>')
            x += w
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
