#!/usr/bin/env python3
"""Draw the deferred frees of a real run on a time line (SVG).

Reads the lines that the KUnit case the_memory_is_unmapped_by_a_worker
logged into the guest's KTAP output, one per area:

  free N: vfree_atomic() on CPU C at T ns under a spinlock,
          __vunmap() on CPU D at U ns by COMM

and draws each area's two moments: its vfree_atomic(), in the task that
held the spinlock, and its __vunmap(), in the worker that unmapped it
later, joined by a line.

Usage: deferred_frees_svg.py KTAP SVG
"""
import html
import re
import sys

LINE = re.compile(r"free (\d+): vfree_atomic\(\) on CPU (\d+) at (\d+) ns under a spinlock, "
                  r"__vunmap\(\) on CPU (\d+) at (\d+) ns by (\S+)")


def read_frees(path):
    frees = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                n, cpu, freed, unmap_cpu, unmapped, comm = m.groups()
                frees.append((int(n), int(cpu), int(freed), int(unmap_cpu), int(unmapped), comm))
    if not frees:
        sys.exit(f"{path}: no 'free N: vfree_atomic() ...' lines in it")
    return frees


def draw(frees):
    start = min(f[2] for f in frees)
    end = max(f[4] for f in frees)
    span = max(end - start, 1)
    width, left, right = 760, 200, 40
    y_free, y_unmap = 70, 190
    height = 260

    def x(t):
        return left + (t - start) * (width - left - right) / span

    comms = sorted({f[5] for f in frees})
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="10" y="20" font-size="13">{len(frees)} areas freed under a spinlock, '
           f'and unmapped later by a worker ({span / 1000:.0f} µs from first to last)</text>',
           f'<text x="10" y="{y_free + 4}">vfree_atomic(), spinlock held</text>',
           f'<text x="10" y="{y_unmap + 4}">__vunmap(), in '
           f'{html.escape(", ".join(comms))}</text>',
           f'<line x1="{left}" y1="{y_free}" x2="{width - right}" y2="{y_free}" stroke="#bbb"/>',
           f'<line x1="{left}" y1="{y_unmap}" x2="{width - right}" y2="{y_unmap}" stroke="#bbb"/>']
    for n, cpu, freed, unmap_cpu, unmapped, comm in frees:
        out.append(f'<line x1="{x(freed):.1f}" y1="{y_free}" x2="{x(unmapped):.1f}" '
                   f'y2="{y_unmap}" stroke="#7f8c8d" stroke-width="0.8"/>')
        out.append(f'<circle cx="{x(freed):.1f}" cy="{y_free}" r="4" fill="#c0392b">'
                   f'<title>area {n}: freed on CPU {cpu}</title></circle>')
        out.append(f'<circle cx="{x(unmapped):.1f}" cy="{y_unmap}" r="4" fill="#2471a3">'
                   f'<title>area {n}: unmapped on CPU {unmap_cpu} by {html.escape(comm)}'
                   f'</title></circle>')
    for i in range(5):
        t = start + span * i / 4
        out.append(f'<text x="{x(t):.1f}" y="{y_unmap + 30}" text-anchor="middle" fill="#444">'
                   f'{(t - start) / 1000:.0f} µs</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    svg = draw(read_frees(sys.argv[1]))
    with open(sys.argv[2], "w") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
