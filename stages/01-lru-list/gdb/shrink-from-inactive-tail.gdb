# One insert into a full LRU hash map, stopped at every step of
# bpf_lru_pop_free().
#
# lru_overfill_by_one (stages/01-lru-list/lru_overfill_by_one.c) fills the
# 256-entry map "lab_overfill" on CPU 0, references some keys from BPF and
# inserts key 256. The first breakpoint stops only in the pop that has to
# shrink: the pop into lab_overfill whose CPU has an empty local free list
# while the global free list is empty too. From there the walkthrough stops
# after the flush (entry of __bpf_lru_list_rotate), after the rotation (entry
# of __bpf_lru_list_shrink), after the shrink (finish) and when
# bpf_lru_pop_free() returns. At every stop lx-bpf-lru dumps the lists, and
# the dump is checked against the step before. The lab gives gdb the
# walkthrough's results directory in $LAB_OUT (build/results/01-lru-list/gdb/
# shrink-from-inactive-tail/); each stop leaves there its full dump (N-STEP.txt),
# a line per list in lists.txt and a drawing of the lists (N-STEP.dot); the
# verdicts are collected in verdicts.txt. The guest adds overfill-trace.txt,
# the bpf_lru trace events of the same insert, and overfill-evicted.txt.
#
# run: lru_overfill_by_one /lab/out
# expect: Breakpoint 1, bpf_lru_pop_free \(lru=
# expect: \d+ +lru_hash +256 +0x[0-9a-f]+ +lab_overfill
# expect: cpu 0 local_free: 0 nodes
# expect: verdict: the flush moved [1-9]\d* referenced pending nodes to the active list and [1-9]\d* others to the inactive list
# expect: verdict: the rotation gave [1-9]\d* referenced active nodes a second chance, demoted [1-9]\d* others and promoted [1-9]\d* referenced inactive nodes
# expect: Value returned is \$\d+ = [1-9]\d*
# expect: verdict: the shrink freed the [1-9]\d* unreferenced nodes nearest the inactive tail, oldest first, to the head of cpu 0's local free list
# expect: verdict: the old inactive tail, node 0x[0-9a-f]+ \(key \d+\), is on cpu 0's local free list
# expect: Value returned is \$\d+ = \(struct bpf_lru_node \*\) 0x[0-9a-f]+
# expect: verdict: bpf_lru_pop_free\(\) returned node 0x[0-9a-f]+, the last node the shrink freed \(it held key \d+\)

python
import os
import re

from linux import bpf, cpus, utils

MAP_NAME = "lab_overfill"
LIST_LINE = re.compile(r"^(?:cpu (\d+) )?(active|inactive|free|local_free|pending): \d+ nodes")
NODE_LINE = re.compile(r"^\s+node (0x[0-9a-f]+) type=\S+ ref=(\d) cpu=\d+ hash=\S+"
                       r"(?: elem=\S+ key=([0-9a-f]+))?")
ROTATION_LINE = re.compile(r"^next_inactive_rotation: (?:head|node (0x[0-9a-f]+))")


class Lists:
    """The lists of one lx-bpf-lru dump, each as [(node, key, ref)] from
    head to tail. Per-CPU lists are named like "cpu0 pending"."""

    def __init__(self, dump):
        self.lists, self.rotation, current = {}, None, None
        for line in dump.splitlines():
            if m := LIST_LINE.match(line):
                name = m.group(2) if m.group(1) is None else f"cpu{m.group(1)} {m.group(2)}"
                current = self.lists.setdefault(name, [])
            elif (m := NODE_LINE.match(line)) and current is not None:
                key = int.from_bytes(bytes.fromhex(m.group(3)), "little") if m.group(3) else None
                current.append((int(m.group(1), 16), key, int(m.group(2))))
            elif m := ROTATION_LINE.match(line):
                self.rotation = int(m.group(1), 16) if m.group(1) else None

    def where(self, node):
        for name, nodes in self.lists.items():
            if any(n == node for n, _, _ in nodes):
                return name
        return None

    def key(self, node):
        return next(k for nodes in self.lists.values() for n, k, _ in nodes if n == node)


def runs(nodes):
    """Cut a list into runs of nodes with consecutive keys and the same ref bit."""
    out = []
    for node, key, ref in nodes:
        run = out[-1] if out else None
        if (run and key is not None and run["ref"] == ref and abs(key - run["last"]) == 1
                and run["step"] in (0, key - run["last"])):
            run.update(step=key - run["last"], last=key)
            run["nodes"].append(node)
        else:
            out.append(dict(first=key, last=key, ref=ref, step=0, nodes=[node]))
    return out


def run_text(run):
    if run["first"] == run["last"]:
        return str(run["first"])
    return f"{run['first']}-{run['last']}"


def draw(lists, marks):
    """A Graphviz table: one row per list, head on the left, one box per run
    of keys, its width growing with the run's length. Referenced runs are
    shaded; marks maps a node to a note shown in its box."""
    rows = []
    for name, nodes in lists.lists.items():
        if not nodes and not name.startswith(("active", "inactive", "free", "cpu0")):
            continue
        boxes = []
        for run in runs(nodes):
            count = len(run["nodes"])
            keys = ("held " if name.endswith("free") else "") + run_text(run)
            notes = [f"{count} node{'s' * (count != 1)}"]
            notes += [marks[n] for n in run["nodes"] if n in marks]
            if lists.rotation in run["nodes"]:
                notes.append(f"next rotation: {lists.key(lists.rotation)}")
            text = keys + "".join(f"<br/><font point-size='9'>{note}</font>" for note in notes)
            style = "bgcolor='#f6c89f'" if run["ref"] else "bgcolor='#ffffff'"
            if len(notes) > 1:
                style += " color='#c0392b' border='2'"
            # Wide enough for the text (DejaVu Sans: about 7 px a character
            # at 11 points, 6 at 9) and 3 px a node, so lengths compare.
            fit = max([7 * len(keys)] + [6 * len(note) for note in notes]) + 14
            boxes.append((max(fit, 3 * count), len(notes) + 1, f"{style}>{text}"))
        if len(boxes) > 9:
            boxes = boxes[:4] + [(90, 1, f"border='0'>... {len(boxes) - 8} runs ...")] + boxes[-4:]
        if not boxes:
            boxes = [(60, 1, "border='0'><i>empty</i>")]
        rows.append((name.replace("cpu0 ", "cpu 0 "), len(nodes), boxes))
    # Every row is its own table of fixed-size cells, padded to the widest
    # row: Graphviz stretches a table that is narrower than its cell.
    spacing = 2
    widths = [sum(w + spacing for w, _, _ in boxes) for _, _, boxes in rows]
    height = 14 * max(lines for _, _, boxes in rows for _, lines, _ in boxes) + 6
    lines = []
    for (name, count, boxes), row_width in zip(rows, widths):
        if row_width < max(widths):
            boxes = boxes + [(max(widths) - row_width - spacing, 1, "border='0'>")]
        cells = "".join(f"<td fixedsize='true' width='{w}' height='{height}' {body}</td>"
                        for w, _, body in boxes)
        lines.append(f"<tr><td align='left'><b>{name}</b>&nbsp;({count})</td><td>"
                     f"<table border='0' cellborder='1' cellspacing='{spacing}'>"
                     f"<tr>{cells}</tr></table></td></tr>")
    return ("digraph lru {\n"
            "  node [shape=plaintext, fontname=\"DejaVu Sans\", fontsize=11];\n"
            "  lists [label=<<table border='0' cellborder='0' cellspacing='2'>"
            "<tr><td></td><td align='left'><font point-size='9'>head ... tail;"
            " numbers are keys; shaded: ref bit set</font></td></tr>\n"
            + "\n".join(lines) + "</table>>];\n}\n")


def say(text):
    gdb.write(text + "\n")


class Walk:
    """What the walkthrough has seen so far, one snapshot per stop. Each
    snapshot is kept in $LAB_OUT as the raw dump (STEP.txt), a summary
    (lists.txt) and a drawing (STEP.dot); the verdicts go to verdicts.txt."""

    def __init__(self):
        self.lru = None
        self.seen = {}
        self.marks = {}
        self.out = os.environ.get("LAB_OUT")
        if not self.out:
            say("LAB_OUT is not set: the walkthrough keeps no files")

    def save(self, name, text, mode="w"):
        if self.out:
            with open(os.path.join(self.out, name), mode) as f:
                f.write(text)

    def snapshot(self, step, title):
        gdb.execute(f"lx-bpf-lru -n 3 {self.lru}")
        dump = gdb.execute(f"lx-bpf-lru {self.lru}", to_string=True)
        self.save(f"{step}.txt", dump)
        lists = self.seen[step] = Lists(dump)
        summary = f"{step}: {title}\n"
        for name, nodes in lists.lists.items():
            if nodes or name.startswith(("active", "inactive", "free", "cpu0")):
                text = " | ".join(run_text(r) + (" ref" if r["ref"] else "")
                                  for r in runs(nodes))
                summary += f"  {name:<16} {len(nodes):>3}  {text or 'empty'}\n"
        self.save("lists.txt", summary, "a")
        return lists

    def draw(self, step):
        self.save(f"{step}.dot", draw(self.seen[step], self.marks))

    def verdict(self, ok, good, bad):
        line = "verdict: " + (good if ok else "NOT AS DESIGNED: " + bad)
        say(line)
        self.save("verdicts.txt", line + "\n", "a")

    def at_pop_entry(self):
        self.lru = hex(int(gdb.parse_and_eval("lru")))
        self.snapshot("1-pop-entry", "bpf_lru_pop_free() entered for key 256")
        self.draw("1-pop-entry")

    def after_flush(self):
        before = self.seen["1-pop-entry"].lists["cpu0 pending"]
        after = self.snapshot("2-flushed", "pending list flushed (entry of __bpf_lru_list_rotate)")
        self.draw("2-flushed")
        moved = {n: after.where(n) for n, _, _ in before}
        to_active = [n for n, _, ref in before if ref and moved[n] == "active"]
        to_inactive = [n for n, _, ref in before if not ref and moved[n] == "inactive"]
        self.verdict(len(to_active) + len(to_inactive) == len(before) and to_active and to_inactive,
                     f"the flush moved {len(to_active)} referenced pending nodes to the active "
                     f"list and {len(to_inactive)} others to the inactive list",
                     f"of {len(before)} pending nodes only {len(to_active)} referenced ones went "
                     f"to active and {len(to_inactive)} others to inactive")

    def after_rotation(self):
        before = self.seen["2-flushed"]
        after = self.snapshot("3-rotated", "lists rotated (entry of __bpf_lru_list_shrink)")
        ref_now = {n: ref for nodes in after.lists.values() for n, _, ref in nodes}
        second = [n for n, _, ref in before.lists["active"]
                  if ref and after.where(n) == "active" and not ref_now[n]]
        demoted = [n for n, _, ref in before.lists["active"]
                   if not ref and after.where(n) == "inactive"]
        promoted = [n for n, _, ref in before.lists["inactive"]
                    if ref and after.where(n) == "active" and not ref_now[n]]
        self.verdict(second and demoted and promoted,
                     f"the rotation gave {len(second)} referenced active nodes a second chance, "
                     f"demoted {len(demoted)} others and promoted {len(promoted)} referenced "
                     "inactive nodes",
                     f"second chances {len(second)}, demoted {len(demoted)}, "
                     f"promoted {len(promoted)}")
        self.old_tail = after.lists["inactive"][-1][0]
        self.marks[self.old_tail] = f"old inactive tail: {after.key(self.old_tail)}"
        self.draw("3-rotated")
        say(f"the inactive tail before the shrink is node {self.old_tail:#x} "
            f"(key {after.key(self.old_tail)})")

    def after_shrink(self):
        before = self.seen["3-rotated"]
        after = self.snapshot("4-shrunk", "inactive list shrunk (__bpf_lru_list_shrink returned)")
        self.draw("4-shrunk")
        freed = [n for n, _, _ in reversed(before.lists["inactive"])
                 if after.where(n) == "cpu0 local_free"]
        oldest_unref = [n for n, _, ref in reversed(before.lists["inactive"]) if not ref]
        local_free = [n for n, _, _ in after.lists["cpu0 local_free"]]
        self.verdict(freed and freed == oldest_unref[:len(freed)]
                     and local_free[:len(freed)] == freed[::-1],
                     f"the shrink freed the {len(freed)} unreferenced nodes nearest the inactive "
                     "tail, oldest first, to the head of cpu 0's local free list",
                     f"the {len(freed)} nodes it freed are not the oldest unreferenced ones in "
                     "the order the design gives")
        self.freed = freed
        self.verdict(after.where(self.old_tail) == "cpu0 local_free",
                     f"the old inactive tail, node {self.old_tail:#x} "
                     f"(key {before.key(self.old_tail)}), is on cpu 0's local free list",
                     f"the old inactive tail is on the {after.where(self.old_tail)} list")

    def select_pop_frame(self):
        frame = gdb.newest_frame()
        while frame.type() == gdb.INLINE_FRAME or frame.name() != "bpf_lru_pop_free":
            frame = frame.older()
        frame.select()

    def after_return(self, node):
        before = self.seen["3-rotated"]
        after = self.snapshot("5-returned", "bpf_lru_pop_free() returned")
        self.marks[node] = "handed out for key 256"
        self.draw("5-returned")
        self.verdict(node == self.freed[-1] and after.where(node) == "cpu0 pending",
                     f"bpf_lru_pop_free() returned node {node:#x}, the last node the shrink "
                     f"freed (it held key {before.key(node)})",
                     f"bpf_lru_pop_free() returned node {node:#x}, which is not the last node "
                     "the shrink freed")


class ShrinkingPop(gdb.Breakpoint):
    """bpf_lru_pop_free() for lab_overfill, when both the CPU's local free
    list and the global free list are empty: the refill must shrink."""

    def stop(self):
        lru = gdb.parse_and_eval("lru")
        if lru["percpu"]:
            return False
        common = lru["common_lru"]
        if int(common["lru_list"]["counts"][int(gdb.parse_and_eval("BPF_LRU_LIST_T_FREE"))]):
            return False
        local = cpus.per_cpu(common["local_list"], cpus.get_current_cpu())
        local_free = local["lists"][0]  # LOCAL_FREE_LIST_IDX
        if int(local_free["next"]) != int(local_free.address):
            return False
        # KUnit's LRUs, tested at boot, belong to no map: match the map.
        htab_ptr = bpf.bpf_htab_type.get_type().pointer()
        for bpf_map in bpf.each_map():
            htab = utils.container_of(bpf_map, htab_ptr, "map")
            if int(htab["lru"].address) == int(lru):
                return bpf.map_name(bpf_map) == MAP_NAME
        return False


walk = Walk()
shrinking_pop = ShrinkingPop("bpf_lru_pop_free")
# The KUnit suite pops thousands of nodes while the kernel boots, and gdb
# would check every one of them through the stub: minutes under TCG. As in
# the chapter's hand-driven walk, the breakpoint waits until the guest's
# user space first calls bpf().
shrinking_pop.enabled = False
end

tbreak __sys_bpf
continue
python shrinking_pop.enabled = True
continue
backtrace 3
lx-bpf-maps
python
shrinking_pop.enabled = False
walk.at_pop_entry()
end

tbreak __bpf_lru_list_rotate
continue
python walk.after_flush()

tbreak __bpf_lru_list_shrink
continue
python walk.after_rotation()
finish
python walk.after_shrink()

# The shrink returned into bpf_lru_list_pop_free_to_local() and
# bpf_common_lru_pop_free(), both inlined into bpf_lru_pop_free(): select
# the frame of bpf_lru_pop_free() itself, so that finish returns from it.
python walk.select_pop_frame()
finish
python walk.after_return(int(gdb.history(0)))

# Let the guest finish: it prints the keys it lost and powers off.
delete
continue
