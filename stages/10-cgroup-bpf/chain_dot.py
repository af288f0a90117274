#!/usr/bin/env python3
"""chain_dot.py UAPI-EXAMPLE.txt OUT.dot: the chain of cgroups of
include/uapi/linux/bpf.h's example as cgroup_effective left it, drawn
twice: with every program attached, and after three detaches. Each
cgroup shows its attach mode (while it holds programs), the programs
attached to it, and its effective array as BPF_PROG_QUERY listed it,
in the order they run.

Fails, naming what is missing, unless both steps list the five cgroups:
an incomplete picture would mislead."""
import re
import sys

LINE = re.compile(r"^(attached|detached) (L\d) (\S+) ([^|]*)\|(.*)$")
STEPS = {"attached": "every program attached",
         "detached": "after detaching F, D and E"}


def main(src, out):
    steps = {step: [] for step in STEPS}
    for line in open(src):
        if m := LINE.match(line.rstrip("\n")):
            step, cgroup, mode, attached, effective = m.groups()
            steps[step].append((cgroup, mode, attached.split(), effective.split()))
    for step, chain in steps.items():
        if [c for c, *_ in chain] != [f"L{i}" for i in range(1, 6)]:
            sys.exit(f"{src}: step '{step}' lists {[c for c, *_ in chain]}, not L1 to L5")
    lines = ["digraph uapi_example {", "  rankdir=TB;",
             '  node [shape=record, fontname="monospace"];']
    for step, chain in steps.items():
        lines.append(f'  subgraph "cluster_{step}" {{')
        lines.append(f'    label="{STEPS[step]}"; fontname="sans";')
        for cgroup, mode, attached, effective in chain:
            # A cgroup whose last program went keeps no flags either.
            shown = f"{cgroup}  ({mode})" if attached else cgroup
            label = (f"{shown}|attached: {' '.join(attached) or '-'}"
                     f"|runs: {' '.join(effective) or '-'}")
            lines.append(f'    "{step}_{cgroup}" [label="{{{label}}}"];')
        for parent, child in zip(chain, chain[1:]):
            lines.append(f'    "{step}_{parent[0]}" -> "{step}_{child[0]}";')
        lines.append("  }")
    lines.append("}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
