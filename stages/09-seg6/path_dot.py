#!/usr/bin/env python3
"""path_dot.py SRV6-PATH.txt OUT.dot: the captures of srv6-path, drawn
as the packet's path: a node per namespace, an edge per link it crossed,
labelled with its destination and its SRH on that link (segments_left,
and the segment list with the active segment marked), and the number of
End passes at the router.

Fails, naming what is missing, when the captures do not show the packet
on both links: an incomplete picture would mislead."""
import re
import sys

LINK = re.compile(r"^(\S+) (\S+) -> (\S+) (\S+): seq=\d+ hlim=(\d+) dst=(\S+) "
                  r"srh=.*sl:(\d+),fs:(\d+),.*segs:(.*),tlv:")
PASSES = re.compile(r"^(\S+) End passes: (\d+)")


def edge_label(hlim, dst, sl, segs):
    rows = [f"dst {dst}, hop limit {hlim}", f"segments_left {sl}"]
    for i, seg in enumerate(segs):
        rows.append(f"[{i}] {seg}" + ("  <- active" if i == sl else ""))
    return "\\l".join(rows) + "\\l"


def main(src, out):
    hops, passes = [], {}
    for line in open(src):
        if m := LINK.match(line):
            hops.append(m.groups())
        elif m := PASSES.match(line):
            passes[m.group(1)] = int(m.group(2))
    if len(hops) != 2:
        sys.exit(f"{src}: the packet was captured on {len(hops)} links, not 2")
    lines = ["digraph srv6_path {", "  rankdir=LR;",
             '  node [shape=box, fontname="monospace"];',
             '  edge [fontname="monospace", fontsize=10];']
    nodes = []
    for src_ns, _, dst_ns, _, *_ in hops:
        nodes += [n for n in (src_ns, dst_ns) if n not in nodes]
    for ns in nodes:
        extra = f"\\nEnd x {passes[ns]}" if ns in passes else ""
        lines.append(f'  "{ns}" [label="{ns}{extra}"];')
    for src_ns, src_link, dst_ns, dst_link, hlim, dst, sl, _, segs in hops:
        label = f"{src_link} -> {dst_link}\\l" + edge_label(hlim, dst, int(sl), segs.split(","))
        lines.append(f'  "{src_ns}" -> "{dst_ns}" [label="{label}"];')
    lines.append("}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
