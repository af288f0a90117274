#!/usr/bin/env python3
"""len_hist_svg.py HISTOGRAM.txt OUT.svg: draw lwt_len_hist's text
histogram (lines "LOW -> HIGH : COUNT |***|") as an SVG bar chart.

Packet counts of a TCP stream span several orders of magnitude (a few
handshake packets, hundreds of thousands of segments), so the bars use
a logarithmic scale; the exact count stands above each bar."""
import math
import re
import sys
from xml.sax.saxutils import escape

LINE = re.compile(r"^\s*(\d+)\s+->\s+(\d+)\s+:\s+(\d+)\s+\|")
WIDTH, HEIGHT = 760, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 30, 80


def read(path):
    rows = []
    for line in open(path):
        if m := LINE.match(line):
            rows.append(tuple(int(g) for g in m.groups()))
    return rows


def svg(rows):
    top = max(count for _, _, count in rows)
    decades = max(1, math.ceil(math.log10(top + 1)))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(rows)

    def y(count):  # log10(count + 1), so that an empty bucket sits on the axis
        return TOP + plot_h - (math.log10(count + 1) / decades) * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, sans-serif" '
           'font-size="11">',
           '<title>Packet lengths at the LWT out hook during an iperf3 run</title>',
           f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    for grid in [0] + [10 ** d for d in range(1, decades + 1)]:
        gy = y(grid)
        out.append(f'<line x1="{LEFT}" y1="{gy:.1f}" x2="{WIDTH - RIGHT}" y2="{gy:.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{gy + 4:.1f}" text-anchor="end">{grid:,}</text>')
    for i, (low, high, count) in enumerate(rows):
        x = LEFT + i * slot
        bar_y = y(count)
        out.append(f'<rect x="{x + slot * 0.15:.1f}" y="{bar_y:.1f}" width="{slot * 0.7:.1f}" '
                   f'height="{TOP + plot_h - bar_y:.1f}" fill="#3b6ea5">'
                   f'<title>{low}-{high} bytes: {count} packets</title></rect>')
        if count:
            out.append(f'<text x="{x + slot / 2:.1f}" y="{bar_y - 4:.1f}" text-anchor="middle" '
                       f'font-size="9">{count}</text>')
        label = escape(f"{low}-{high}")
        lx, ly = x + slot / 2, TOP + plot_h + 12
        out.append(f'<text x="{lx:.1f}" y="{ly:.1f}" text-anchor="end" '
                   f'transform="rotate(-45 {lx:.1f} {ly:.1f})">{label}</text>')
    out.append(f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" '
               f'y2="{TOP + plot_h}" stroke="black"/>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 8}" text-anchor="middle">'
               'packet length, bytes (skb-&gt;len, power-of-two buckets)</text>')
    out.append(f'<text x="14" y="{TOP + plot_h / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {TOP + plot_h / 2})">packets (log scale)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = read(sys.argv[1])
    if not rows or not any(count for _, _, count in rows):
        sys.exit(f"{sys.argv[1]}: no histogram lines with packets in them")
    with open(sys.argv[2], "w") as out:
        out.write(svg(rows))
    print(f"{sum(c for _, _, c in rows)} packets in {len(rows)} buckets -> {sys.argv[2]}")


if __name__ == "__main__":
    main()
