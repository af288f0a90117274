# A probed CBZ, taken and not taken: the selftest's first case
# plants a uprobe on `cbz x0` in its own text and calls it with x0 = 0,
# then with x0 = 5. The walkthrough stops in simulate_cbz_cbnz() at each
# hit, decodes the opcode the probe keeps, reads x0 from the registers
# the task will return to, and finishes the call to see where it put the
# PC: on the branch's target, or past the branch.
#
# run: uprobe_simulation
# expect: hit 1 on CPU \d: cbz x0, offset \+12, at 0x[0-9a-f]+, called from arch_uprobe_skip_sstep\(\); x0 = 0x0
# expect: hit 1: the PC went from 0x[0-9a-f]+ to 0x[0-9a-f]+ \(\+12\): taken
# expect: hit 2 on CPU \d: cbz x0, offset \+12, at 0x[0-9a-f]+, called from arch_uprobe_skip_sstep\(\); x0 = 0x5
# expect: hit 2: the PC went from 0x[0-9a-f]+ to 0x[0-9a-f]+ \(\+4\): not taken
# expect: verdict: the probed cbz went where it goes unprobed, without a step out of line

python
import os

OUT = os.environ.get("LAB_OUT")
seen = []


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def value(expression):
    return int(gdb.parse_and_eval(expression))


def decode(opcode):
    """'cbz x0' and the branch's offset in bytes, from the opcode."""
    name = "cbnz" if opcode & (1 << 24) else "cbz"
    register = ("x" if opcode & (1 << 31) else "w") + str(opcode & 0x1f)
    offset = ((opcode >> 5) & 0x7ffff) << 2
    if offset & (1 << 20):
        offset -= 1 << 21
    return f"{name} {register}", offset


def at_simulate():
    n = len(seen) + 1
    opcode, addr = value("opcode") & 0xffffffff, value("addr") & (2**64 - 1)
    regs = value("(unsigned long) regs")
    text, offset = decode(opcode)
    caller = gdb.selected_frame().older().name()
    reg = value(f"((struct pt_regs *) {regs})->regs[{opcode & 0x1f}]") & (2**64 - 1)
    say(f"hit {n} on CPU {gdb.selected_thread().num - 1}: {text}, offset {offset:+d}, "
        f"at {addr:#x}, called from {caller}(); x{opcode & 0x1f} = {reg:#x}")
    gdb.execute("finish", to_string=True)
    pc = value(f"((struct pt_regs *) {regs})->pc") & (2**64 - 1)
    moved = pc - addr
    say(f"hit {n}: the PC went from {addr:#x} to {pc:#x} ({moved:+d}): "
        f"{'taken' if moved == offset else 'not taken' if moved == 4 else 'somewhere else'}")
    seen.append((reg, moved, offset))


def verdict():
    if len(seen) == 2 and all(m == (o if r == 0 else 4) for r, m, o in seen):
        say("verdict: the probed cbz went where it goes unprobed, without a step out of line")
end

# Only the probed instructions of user tasks reach it: nothing sets a
# kprobe in this kernel. The file names the function as its debug
# information does: the symbol alone also matches the two NOPs that
# ftrace patches in front of it, where no argument can be read.
break simulate-insn.c:simulate_cbz_cbnz
continue
python at_simulate()
continue
python at_simulate()
python verdict()
delete

# Let the other cases run; the guest powers off.
continue
