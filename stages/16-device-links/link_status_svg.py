#!/usr/bin/env python3
"""Draw a device link's status through an unbind (SVG).

Reads the lines that the KUnit case a_consumer_still_probing_is_waited_for
logged into the guest's KTAP output, one per moment of the case:

  link status: MOMENT: STATUS

and draws the status the link had at each moment, on the ladder of the
states a managed link can be in.

Usage: link_status_svg.py KTAP SVG
"""
import html
import re
import sys

STATES = ["dormant", "available", "consumer probing", "active", "supplier unbinding"]
LINE = re.compile(r"link status: (.+): (dormant|available|consumer probing|active|"
                  r"supplier unbinding|none)\s*$")


def read_moments(path):
    moments = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                moments.append((m.group(1), m.group(2)))
    if not moments:
        sys.exit(f"{path}: no 'link status: MOMENT: STATUS' lines in it")
    return moments


def draw(moments):
    left, top, step_x, step_y = 150, 50, 150, 40
    width = left + step_x * len(moments) + 40
    height = top + step_y * len(STATES) + 90

    def y(status):
        return top + (len(STATES) - 1 - STATES.index(status)) * step_y if status in STATES \
            else top + len(STATES) * step_y

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           '<text x="10" y="20" font-size="13">One managed link while its supplier\'s driver '
           'is unbound during its consumer\'s probe, as the KUnit case read it</text>']
    for status in STATES:
        out.append(f'<text x="{left - 10}" y="{y(status) + 4}" text-anchor="end">'
                   f'{html.escape(status)}</text>')
        out.append(f'<line x1="{left}" y1="{y(status)}" x2="{width - 30}" y2="{y(status)}" '
                   f'stroke="#ddd"/>')
    points = []
    for i, (moment, status) in enumerate(moments):
        x = left + step_x * i + step_x / 2
        points.append((x, y(status)))
        out.append(f'<circle cx="{x}" cy="{y(status)}" r="5" fill="#2471a3"/>')
        words, line, lines = moment.split(), "", []
        for word in words:
            if len(line) + len(word) > 22:
                lines.append(line)
                line = ""
            line = f"{line} {word}".strip()
        lines.append(line)
        for j, text in enumerate(lines):
            out.append(f'<text x="{x}" y="{top + len(STATES) * step_y + 20 + 13 * j}" '
                       f'text-anchor="middle">{html.escape(text)}</text>')
    out.append('<polyline fill="none" stroke="#2471a3" stroke-width="1.5" points="'
               + " ".join(f"{x},{y}" for x, y in points) + '"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    svg = draw(read_moments(sys.argv[1]))
    with open(sys.argv[2], "w") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
