#!/usr/bin/env python3
"""Draw writeback throttling's depth and the reads' latency of a real run (SVG).

Reads the trace that wbt-trace saved (the wbt events and the lab's
markers, as trace_pipe printed them) and draws, on one time line:

  - the depth that buffered writeback may use (max= of every wbt_step
    event, on a scale of powers of two), with the phases the lab's
    markers name;
  - the read latency wbt saw: the fastest read of each window that it
    reported (wbt_stat's rmin=) and every latency it found over the
    target (wbt_lat), on a logarithmic scale.

Usage: wbt_depth_svg.py TRACE SVG
"""
import html
import math
import re
import sys

EVENT = re.compile(r"\]\s+\S+\s+(\d+\.\d+): (\w+): (.*)")
STEP = re.compile(r"step=(-?\d+), window=\d+us, background=\d+, normal=\d+, max=(\d+)")
STAT = re.compile(r"rmin=(\d+),.*rsamples=(\d+)")
LAT = re.compile(r"latency (\d+)us")
PHASE = re.compile(r"lab (phase|quiet) (\S+)")

WIDTH, LEFT, RIGHT = 760, 70, 20
DEPTH_TOP, DEPTH_HEIGHT = 60, 140
LAT_TOP, LAT_HEIGHT = 240, 150


def read_trace(path):
    steps, reads, phases = [], [], []
    with open(path, errors="replace") as f:
        for line in f:
            m = EVENT.search(line)
            if not m:
                continue
            ts, name, args = float(m.group(1)), m.group(2), m.group(3)
            if name == "wbt_step" and (s := STEP.search(args)):
                steps.append((ts, int(s.group(1)), int(s.group(2))))
            elif name == "wbt_stat" and (s := STAT.search(args)) and int(s.group(2)):
                reads.append((ts, int(s.group(1)) / 1000, "fastest read of a window"))
            elif name == "wbt_lat" and (s := LAT.search(args)):
                reads.append((ts, int(s.group(1)), "over the target"))
            elif name == "tracing_mark_write" and (s := PHASE.search(args)):
                phases.append((ts, s.group(1), s.group(2)))
    if not steps:
        sys.exit(f"{path}: no wbt_step events in it")
    return steps, reads, phases


def draw(steps, reads, phases, default_depth=16):
    start = min([p[0] for p in phases] + [s[0] for s in steps])
    end = max([p[0] for p in phases] + [s[0] for s in steps] + [r[0] for r in reads])
    span = max(end - start, 1e-3)

    def x(ts):
        return LEFT + (ts - start) / span * (WIDTH - LEFT - RIGHT)

    top_depth = max(s[2] for s in steps)
    log_top = math.log2(max(top_depth, 2))

    def y_depth(depth):
        return DEPTH_TOP + DEPTH_HEIGHT * (1 - math.log2(depth) / log_top)

    latencies = [r[1] for r in reads] or [1]
    lo = math.floor(math.log10(max(min(latencies), 1)))
    hi = max(math.ceil(math.log10(max(latencies))), lo + 1)

    def y_lat(us):
        return LAT_TOP + LAT_HEIGHT * (1 - (math.log10(max(us, 1)) - lo) / (hi - lo))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="430" '
           'font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{LEFT}" y="20" font-size="13">Writeback throttling on /dev/vda: '
           'the depth of buffered writeback, and the reads it watches</text>']
    for ts, kind, name in phases:
        if kind == "phase":
            out.append(f'<line x1="{x(ts):.1f}" y1="{DEPTH_TOP - 8}" x2="{x(ts):.1f}" '
                       f'y2="{LAT_TOP + LAT_HEIGHT}" stroke="#999" stroke-dasharray="4,3"/>')
            target = "target 1 us" if name == "exceeded" else "target 10 s"
            out.append(f'<text x="{x(ts) + 3:.1f}" y="{DEPTH_TOP - 10}">{html.escape(name)} '
                       f'({target})</text>')
        elif name != "over":
            # A second without I/O, up to the marker that ends it.
            over = min((t for t, k, n in phases if n == "over" and t > ts), default=end)
            out.append(f'<rect x="{x(ts):.1f}" y="{DEPTH_TOP - 4}" width="{x(over) - x(ts):.1f}" '
                       f'height="{LAT_TOP + LAT_HEIGHT - DEPTH_TOP + 4}" fill="#eee"/>')
            out.append(f'<text x="{x(over):.1f}" y="{LAT_TOP - 8}" fill="#666" '
                       'text-anchor="end">no I/O</text>')
    # The depth axis, in powers of two, and the depth as steps.
    depth = 1
    while depth <= top_depth:
        out.append(f'<text x="{LEFT - 8}" y="{y_depth(depth) + 4:.1f}" text-anchor="end">{depth}</text>')
        depth *= 2
    out.append(f'<text x="12" y="{DEPTH_TOP + DEPTH_HEIGHT / 2:.0f}" '
               f'transform="rotate(-90 12 {DEPTH_TOP + DEPTH_HEIGHT / 2:.0f})">max depth</text>')
    points, current = [], (start, default_depth)
    for ts, step, max_depth in steps:
        points += [(current[0], current[1]), (ts, current[1])]
        current = (ts, max_depth)
    points += [(current[0], current[1]), (end, current[1])]
    path = " ".join(f"{x(t):.1f},{y_depth(d):.1f}" for t, d in points)
    out.append(f'<polyline points="{path}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    # The latencies, on a log scale.
    for decade in range(lo, hi + 1):
        label = f"{10 ** decade:g} us" if decade < 3 else f"{10 ** (decade - 3):g} ms"
        out.append(f'<text x="{LEFT - 8}" y="{y_lat(10 ** decade) + 4:.1f}" '
                   f'text-anchor="end">{label}</text>')
    out.append(f'<text x="12" y="{LAT_TOP + LAT_HEIGHT / 2:.0f}" '
               f'transform="rotate(-90 12 {LAT_TOP + LAT_HEIGHT / 2:.0f})">read latency</text>')
    colours = {"fastest read of a window": "#2ca02c", "over the target": "#d62728"}
    # wbt_lat usually repeats the window's fastest read: a ring around it.
    def mark(cx, cy, kind):
        if kind == "over the target":
            return (f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4.5" fill="none" '
                    f'stroke="{colours[kind]}" stroke-width="1.2"/>')
        return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.5" fill="{colours[kind]}"/>'

    for ts, us, kind in sorted(reads, key=lambda r: r[2] == "over the target"):
        out.append(mark(x(ts), y_lat(us), kind))
    for n, kind in enumerate(colours):
        out.append(mark(LEFT + 10 + 230 * n, LAT_TOP + LAT_HEIGHT + 25, kind))
        out.append(f'<text x="{LEFT + 18 + 230 * n}" y="{LAT_TOP + LAT_HEIGHT + 29}">{kind} '
                   f'(wbt_{"stat" if n == 0 else "lat"})</text>')
    out.append(f'<text x="{WIDTH - RIGHT}" y="{LAT_TOP + LAT_HEIGHT + 29}" text-anchor="end">'
               f'{span:.1f} s</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    steps, reads, phases = read_trace(sys.argv[1])
    with open(sys.argv[2], "w") as f:
        f.write(draw(steps, reads, phases))


if __name__ == "__main__":
    main()
