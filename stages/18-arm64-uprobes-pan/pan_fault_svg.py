#!/usr/bin/env python3
"""Draw a stray read of user memory under emulated PAN (SVG), from the
kernel's report of a real one (lkdtm's ACCESS_USERSPACE, as pan-faults
saved it).

Two walks of the same address, side by side: the one the CPU made,
from TTBR0_EL1, which the kernel had pointed at its reserved, empty
table, and which ended in the translation fault the ESR names; and the
task's own tables, which show_pte() walked for the report, down to a
valid entry for a user page. Below them, what the fault handler read
to tell the two apart: the PAN bit of the saved PSTATE.

Usage: pan_fault_svg.py REPORT SVG
"""
import html
import re
import sys

WIDTH = 800
ENTRY_BITS = (  # (bit, set, clear) of a stage 1 page descriptor, as arm64 names them
    (0, "valid", "invalid"),
    (6, "EL0 may access (AP[1])", "EL1 only (AP[1] clear)"),
    (7, "read-only (AP[2])", "writable (AP[2] clear)"),
    (10, "accessed (AF)", "not accessed"),
    (53, "EL1 may not execute (PXN)", "EL1 may execute"),
    (54, "EL0 may not execute (UXN)", "EL0 may execute"),
)


def read_report(path):
    text = open(path, errors="replace").read()

    def find(pattern, what):
        m = re.search(pattern, text, re.M)
        if not m:
            sys.exit(f"{path}: no {what} in it")
        return m

    fault = find(r"Unable to handle kernel (.*) at virtual address ([0-9a-f]+)$", "fault line")
    esr = find(r"ESR = (0x[0-9a-f]+)", "ESR")
    ec = find(r"EC = (0x[0-9a-f]+): (.*?), IL", "exception class")
    fsc = find(r"FSC = (0x[0-9a-f]+): (.*)$", "fault status")
    wnr = find(r"WnR = (\d)", "WnR")
    tables = find(r"user pgtable: (.*), pgdp=([0-9a-f]+)", "user page table line")
    walk = find(r"\[([0-9a-f]{8,})\] (pgd=.*)$", "page table walk")
    pstate = find(r"pstate: ([0-9a-f]+) \((.*)\)", "PSTATE")
    levels = re.findall(r"(\w+)=([0-9a-f]+)", walk.group(2))
    return {
        "what": fault.group(1), "address": fault.group(2), "esr": esr.group(1),
        "ec": f"{ec.group(1)}: {ec.group(2)}", "fsc": f"{fsc.group(1)}: {fsc.group(2)}",
        "write": wnr.group(1) == "1", "tables": tables.group(1), "pgdp": tables.group(2),
        "levels": levels, "pstate": pstate.group(1), "flags": pstate.group(2),
    }


def text(x, y, s, size=12, weight="normal", anchor="start", fill="#222"):
    return (f'<text x="{x}" y="{y}" font-size="{size}" font-weight="{weight}" '
            f'text-anchor="{anchor}" fill="{fill}">{html.escape(s)}</text>')


def box(x, y, w, h, fill, stroke="#555"):
    return f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="4" fill="{fill}" stroke="{stroke}"/>'


def arrow(x1, y1, x2, y2):
    return (f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#555" '
            f'marker-end="url(#head)"/>')


def draw(r):
    out = []
    # The CPU's walk: TTBR0_EL1 on the reserved table.
    left, right, top, w = 20, 420, 70, 360
    out.append(text(left, 50, "What the CPU walked", 14, "bold"))
    out.append(box(left, top, w, 40, "#eef"))
    out.append(text(left + 10, top + 25, "TTBR0_EL1: the kernel's reserved table"))
    out.append(arrow(left + w // 2, top + 40, left + w // 2, top + 70))
    out.append(box(left, top + 70, w, 40, "#fdd"))
    out.append(text(left + 10, top + 95, "an empty entry: no translation"))
    out.append(arrow(left + w // 2, top + 110, left + w // 2, top + 140))
    out.append(box(left, top + 140, w, 58, "#fdd"))
    out.append(text(left + 10, top + 160, f"ESR {r['esr']}, EC {r['ec']}", 11))
    out.append(text(left + 10, top + 178, f"FSC {r['fsc']}"))
    out.append(text(left + 10, top + 194, "a write" if r["write"] else "a read (WnR = 0)"))
    # The task's own tables, as show_pte() walked them.
    out.append(text(right, 50, "The task's own tables (show_pte)", 14, "bold"))
    out.append(box(right, top, w, 40, "#efe"))
    out.append(text(right + 10, top + 25, f"{r['tables']}"))
    y = top + 40
    entries = [(name, value) for name, value in r["levels"]]
    step = min(42, (190 - 10) // max(1, len(entries)))
    previous = None
    for name, value in entries:
        out.append(arrow(right + w // 2, y, right + w // 2, y + step - 30))
        y += step - 30
        out.append(box(right, y, w, 26, "#efe"))
        # A level this configuration folds away repeats the one above it.
        folded = " (folded)" if value == previous else ""
        out.append(text(right + 10, y + 18, f"{name} = {value}{folded}", 12))
        previous = value
        y += 26
    pte = int(entries[-1][1], 16) if entries else 0
    described = [(on if pte >> bit & 1 else off) for bit, on, off in ENTRY_BITS]
    y += 20
    out.append(text(right, y, "the last entry, a user page:", 12, "bold"))
    for i in range(0, len(described), 2):
        y += 16
        out.append(text(right, y, ", ".join(described[i:i + 2]), 12))
    bottom = max(y + 40, top + 230)
    # What the fault handler read, and what it concluded.
    out.append(text(left, bottom, f"Address {r['address']}: a page of the task's, mapped and "
                    "valid; the fault came from the table TTBR0_EL1 pointed at.", 12))
    out.append(text(left, bottom + 22, f"Saved PSTATE {r['pstate']}: {r['flags']}", 12))
    out.append(text(left, bottom + 40, "+PAN: set by the exception entry, because TTBR0 was "
                    "the reserved table (the CPU has no PAN of its own)", 12))
    out.append(text(left, bottom + 62, f"Verdict of the fault handler: {r['what']}", 13, "bold"))
    height = bottom + 85
    head = ('<defs><marker id="head" markerWidth="8" markerHeight="8" refX="6" refY="4" '
            'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#555"/></marker></defs>')
    title = text(WIDTH / 2, 24, "A stray read of user memory under emulated PAN", 15, "bold",
                 "middle")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, sans-serif">'
            f'<rect width="100%" height="100%" fill="white"/>{head}{title}'
            + "".join(out) + "</svg>\n")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    report = read_report(sys.argv[1])
    with open(sys.argv[2], "w") as f:
        f.write(draw(report))


if __name__ == "__main__":
    main()
