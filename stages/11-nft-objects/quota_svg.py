#!/usr/bin/env python3
"""quota_svg.py QUOTA-PATTERNS.txt OUT.svg: the fifteen datagrams of 100
bytes that nft-quota-objects sent against a quota of 1000 bytes, once
"until" and once "over", drawn as two rows of cells: the datagrams that
went through and those the rule dropped, with the byte count each one
brought the quota to, and the quota's size between the tenth and the
eleventh.

Fails, naming what is missing, unless both rows are there, each with a
verdict for every datagram: an incomplete picture would mislead."""
import re
import sys

LINE = re.compile(r"^(until|over) (\d+) ([+-]+)$")
CELL, GAP, LEFT, TOP = 40, 4, 70, 40
DATAGRAM = 100


def main(src, out):
    rows = {}
    for line in open(src):
        if m := LINE.match(line.strip()):
            rows[m.group(1)] = (int(m.group(2)), m.group(3))
    if set(rows) != {"until", "over"} or len({len(p) for _, p in rows.values()}) != 1:
        sys.exit(f"{src}: needs an 'until' and an 'over' row of equal length, has {rows}")
    size, count = rows["until"][0], len(rows["until"][1])
    width = LEFT + count * (CELL + GAP) + 20
    height = TOP + 2 * (CELL + 30) + 42
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="DejaVu Sans, sans-serif" font-size="11">',
           f'<text x="{LEFT}" y="18" font-size="12">datagrams of {DATAGRAM} bytes against '
           f'a quota of {size} bytes: through (green) or dropped (red)</text>']
    for r, kind in enumerate(("until", "over")):
        y = TOP + r * (CELL + 30)
        svg.append(f'<text x="8" y="{y + CELL / 2 + 4}" font-size="12">{kind}</text>')
        for i, verdict in enumerate(rows[kind][1]):
            x = LEFT + i * (CELL + GAP)
            colour = "#7bc67b" if verdict == "+" else "#e07a7a"
            svg.append(f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" '
                       f'fill="{colour}" stroke="black"/>')
            svg.append(f'<text x="{x + CELL / 2}" y="{y + CELL / 2 + 4}" '
                       f'text-anchor="middle">{i + 1}</text>')
            svg.append(f'<text x="{x + CELL / 2}" y="{y + CELL + 13}" text-anchor="middle" '
                       f'font-size="9">{(i + 1) * DATAGRAM}</text>')
    edge = LEFT + (size // DATAGRAM) * (CELL + GAP) - GAP / 2
    bottom = TOP + 2 * (CELL + 30)
    svg.append(f'<line x1="{edge}" y1="{TOP - 8}" x2="{edge}" y2="{bottom}" '
               f'stroke="black" stroke-dasharray="4 3"/>')
    svg.append(f'<text x="{edge}" y="{bottom + 14}" text-anchor="middle">'
               f'{size} bytes: the quota</text>')
    svg.append(f'<text x="{LEFT}" y="{bottom + 32}" font-size="10">under each cell: '
               f'the bytes the quota had consumed once that datagram was counted</text>')
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
