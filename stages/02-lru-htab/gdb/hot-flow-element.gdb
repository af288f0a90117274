# The hot flow of the exercise's grader, as the LRU hash map holds it: its
# struct htab_elem, the bpf_lru_node inside it, and who writes the node's
# ref bit and the flow's counter.
#
# lru-flows (stages/02-lru-htab/lru_flows.c) sends 2048 cold flows through
# the stage's tc program (lru_flow_count.c, solved), then a hot flow of
# source port 5000 with one packet after every cold flow. The first
# breakpoint stops in htab_lru_map_update_elem() only for that flow's key,
# when its first packet inserts it. After the insert, the walkthrough finds
# the flow's element in lx-bpf-lru's dump of the map and prints it. Then
# two hardware watchpoints show what no counter or trace shows: the
# program's next lookup of the flow, inlined by the verifier into the JITed
# program, setting the node's ref bit, and the program's atomic add
# bumping the counter. A third watch on the ref bit catches the LRU list
# clearing it again when it moves the node to the active list (off the
# pending list when the next refill flushes it), the second chance that
# keeps the hot flow in the table.
#
# run: lru-flows
# expect: Breakpoint 1, htab_lru_map_update_elem \(map=0x[0-9a-f]+, key=0x[0-9a-f]+
# expect: inserting into map flows: saddr 10\.99\.0\.1 daddr 10\.99\.0\.2 sport 5000 dport 9 protocol 17
# expect: Value returned is \$\d+ = 0
# expect: lru_node = \{
# expect: hot flow: struct htab_elem 0x[0-9a-f]+, its bpf_lru_node at 0x[0-9a-f]+: cpu 0, type pending, ref 0, count 1
# expect: Hardware watchpoint \d+: -location
# expect: Old value = 0 '\\000'\s+New value = 1 '\\001'
# expect: verdict: the ref bit was set by the JITed program count_udp_flows \(bpf_prog_[0-9a-f]+_count_udp_flows\+0x[0-9a-f]+\), not by a kernel function
# expect: Old value = 1\s+New value = 2
# expect: verdict: the counter went from 1 to 2 in the JITed program count_udp_flows, by a locked add
# expect: Old value = 1 '\\001'\s+New value = 0 '\\000'
# expect: verdict: the LRU list cleared the ref bit in [a-z_]+\(\) while moving the node from the (pending|inactive) list to the active list

python
import os
import re

from linux import bpf, utils

HOT_KEY = bytes.fromhex("0a630001" "0a630002" "1388" "0009" "11" "000000")
NODE_TYPES = ["active", "inactive", "free", "local free", "pending"]


OUT = os.environ.get("LAB_OUT")


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def show(command, keep=True):
    """Run a gdb command; keep its output in walkthrough.txt too, or only
    print it (the long lx-bpf-lru dumps)."""
    text = gdb.execute(command, to_string=True).rstrip("\n")
    if keep:
        say(text)
    else:
        gdb.write(text + "\n")


def read(addr, size):
    return bytes(gdb.selected_inferior().read_memory(addr, size))


def jit_symbol(pc):
    """name and offset of the JITed BPF program that holds pc, or None."""
    sym = gdb.lookup_static_symbol("prog_idr")
    for _, entry in bpf.idr_for_each(sym.value() if sym else gdb.parse_and_eval("prog_idr")):
        prog = gdb.Value(entry).cast(gdb.lookup_type("struct bpf_prog").pointer())
        start, size = int(prog["bpf_func"]), int(prog["jited_len"])
        if start <= pc < start + size:
            tag = bytes(int(prog["tag"][i]) & 0xff for i in range(8)).hex()
            name = prog["aux"]["name"].string()
            return name, f"bpf_prog_{tag}_{name}+{pc - start:#x}", start
    return None


def previous_insn(start, pc):
    """The instruction that ends at pc, disassembled from start on."""
    last = None
    for insn in gdb.selected_inferior().architecture().disassemble(start, pc):
        if insn["addr"] >= pc:
            break
        last = insn
    return last["asm"] if last else "?"


class HotFlow:
    def __init__(self):
        self.map = self.elem = self.node = None

    def at_insert(self):
        self.map = gdb.parse_and_eval("map")
        key = read(int(gdb.parse_and_eval("key")), 16)
        say(f"inserting into map {bpf.map_name(self.map)}: saddr {'.'.join(map(str, key[0:4]))} "
            f"daddr {'.'.join(map(str, key[4:8]))} sport {int.from_bytes(key[8:10], 'big')} "
            f"dport {int.from_bytes(key[10:12], 'big')} protocol {key[12]}")

    def after_insert(self):
        dump = gdb.execute(f"lx-bpf-lru {int(self.map['id'])}", to_string=True)
        hot = next(line for line in dump.splitlines() if f"key={HOT_KEY.hex()}" in line)
        self.elem = int(re.search(r"elem=(0x[0-9a-f]+)", hot).group(1), 16)
        gdb.execute(f"set $elem = (struct htab_elem *) {self.elem:#x}")
        gdb.execute("set $node = &$elem->lru_node")
        gdb.execute("set $count = (unsigned long long *) ($elem->key + 16)")
        show("print *$elem")
        node = gdb.parse_and_eval("$node")
        say(f"hot flow: struct htab_elem {self.elem:#x}, its bpf_lru_node at {int(node):#x}: "
            f"cpu {int(node['cpu'])}, type {NODE_TYPES[int(node['type'])]}, "
            f"ref {int(node['ref'])}, count {int(gdb.parse_and_eval('*$count'))}")
        show(f"lx-bpf-lru -n 2 {int(self.map['id'])}", keep=False)

    def where(self):
        return jit_symbol(int(gdb.parse_and_eval("$pc")))

    def ref_set(self):
        found = self.where()
        self.type_before = NODE_TYPES[int(gdb.parse_and_eval("$node->type"))]
        if found:
            say(f"verdict: the ref bit was set by the JITed program {found[0]} ({found[1]}), "
                "not by a kernel function")
        else:
            say(f"verdict: NOT AS DESIGNED: the ref bit was set at {gdb.parse_and_eval('$pc')}")

    def count_bumped(self):
        found = self.where()
        pc = int(gdb.parse_and_eval("$pc"))
        insn = previous_insn(found[2], pc) if found else "?"
        say(f"the instruction that wrote the counter: {insn}")
        count = int(gdb.parse_and_eval("*$count"))
        if found and count == 2 and insn.startswith("lock"):
            say(f"verdict: the counter went from 1 to 2 in the JITed program {found[0]}, "
                "by a locked add")
        else:
            say(f"verdict: NOT AS DESIGNED: count {count} at {pc:#x}, by {insn}")

    def ref_cleared(self):
        kind = NODE_TYPES[int(gdb.parse_and_eval("$node->type"))]
        names, frame = [], gdb.selected_frame()
        while frame is not None:
            names.append(str(frame.name()))
            frame = frame.older()
        say("cleared in: " + " <- ".join(names[:8]))
        mover = next((n for n in names if "move" in n), names[0])
        if kind == "active":
            say(f"verdict: the LRU list cleared the ref bit in {mover}() while moving the "
                f"node from the {self.type_before} list to the active list")
        else:
            say(f"verdict: NOT AS DESIGNED: the node is on the {kind} list after "
                f"{names[0]}() cleared its ref bit")


hot = HotFlow()
end

# Only the hot flow's insert: its key's source port, 5000, at bytes 8 and 9.
break htab_lru_map_update_elem if ((unsigned char *) key)[8] == 0x13 && ((unsigned char *) key)[9] == 0x88
continue
python hot.at_insert()
delete
finish
python hot.after_insert()

# The next packet of the hot flow: its lookup sets the ref bit...
watch -l $node->ref
continue
python hot.ref_set()
delete
# ... and its atomic add bumps the counter.
watch -l *$count
continue
python hot.count_bumped()
delete

# A later insert's refill flushes cpu 0's pending list: a referenced node
# goes to the active list, and loses its ref bit on the way.
watch -l $node->ref
continue
python hot.ref_cleared()
delete
# The node is counted on the active list but not yet linked there: let
# list_move() run before dumping the lists.
next
python show(f"lx-bpf-lru -n 3 {int(hot.map['id'])}", keep=False)

# Let the grader finish; the guest powers off.
continue
