#!/usr/bin/env python3
"""Draw the hotplug states of a real run as one CPU's ladder (SVG).

Reads /sys/devices/system/cpu/hotplug/states as the guest saved it
while samples/cpuhp's module was loaded, and draws every named state at
its number: the prepare section, run for a CPU by the CPU in control
before it comes up; the section from bringup to ap:online, run on the
CPU itself with interrupts off; and the online section, run on the CPU
in its hotplug thread. The sample's two states are marked.

Usage: hotplug_states_svg.py STATES SVG
"""
import html
import re
import sys

SAMPLE = "samples/cpuhp:"
# Where a section begins, by the name of its first state, and what runs it.
SECTIONS = [
    ("offline", "prepare: on the CPU in control, before the CPU runs", "#e8f0fb"),
    ("cpu:bringup", "bringup and starting: on the CPU, interrupts off", "#fdf0e0"),
    ("ap:online", "online: on the CPU, in its hotplug thread", "#e6f5e6"),
]


def read_states(path):
    states = []
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*(\d+): (.+)$", line.rstrip("\n"))
            if m:
                states.append((int(m.group(1)), m.group(2)))
    if not states:
        sys.exit(f"{path}: no states in it")
    return states


def draw(states):
    top, bottom, x0 = 40, 40, 250
    step = 3.2
    last = max(n for n, _ in states)
    height = int(top + bottom + last * step)
    width = 640

    def y(n):  # up is bringing a CPU up: state 0 at the bottom
        return top + (last - n) * step

    number = {name: n for n, name in states}
    starts = [number.get(name) for name, _, _ in SECTIONS]
    if None in starts:
        missing = [s[0] for s, n in zip(SECTIONS, starts) if n is None]
        sys.exit(f"no state named {', '.join(missing)} in the list")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="10" y="20" font-size="13">The hotplug states of one CPU, '
           f'{len(states)} named of {last + 1}, as the guest listed them</text>']
    ends = starts[1:] + [last + 1]
    for (name, what, colour), start, end in zip(SECTIONS, starts, ends):
        out.append(f'<rect x="{x0 - 10}" y="{y(end) + step / 2:.1f}" width="60" '
                   f'height="{(end - start) * step:.1f}" fill="{colour}"/>')
        out.append(f'<text x="{x0 + 60}" y="{y((start + end) / 2):.1f}" fill="#444">'
                   f'{html.escape(what)}</text>')
    out.append(f'<line x1="{x0}" y1="{y(0)}" x2="{x0}" y2="{y(last)}" stroke="#888"/>')
    for n, name in states:
        sample = name.startswith(SAMPLE)
        boundary = name in {s[0] for s in SECTIONS} or n == last
        out.append(f'<line x1="{x0 - 6}" y1="{y(n):.1f}" x2="{x0 + 6}" y2="{y(n):.1f}" '
                   f'stroke="{"#c0392b" if sample else "#555"}" '
                   f'stroke-width="{3 if sample else 1}"/>')
        if sample or boundary:
            weight = ' font-weight="bold" fill="#c0392b"' if sample else ""
            out.append(f'<text x="{x0 - 12}" y="{y(n) + 4:.1f}" text-anchor="end"{weight}>'
                       f'{n}: {html.escape(name)}</text>')
    out.append(f'<text x="10" y="{height - 12}" fill="#444">A CPU comes up through the '
               f'states from 0 to {last}, and goes down through them back to 0.</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    svg = draw(read_states(sys.argv[1]))
    with open(sys.argv[2], "w") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
