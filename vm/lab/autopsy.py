"""What a failed guest was doing, in terms of the kernel's own sources.

A guest that hangs is stopped through QEMU's gdb stub before it is
killed, and each vCPU's backtrace is read, with the kernel log's tail.
A guest that oopsed or panicked left a call trace on its console, which
the kernel's scripts/decode_stacktrace.sh turns into files and lines.
Either way the autopsy names, for each vCPU or trace, the first frame
that is not the kernel's own machinery (locks, the scheduler, the idle
loop, arch code): where a student's change is most likely to be.
"""
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import kbuild

# Frames in these places are how the kernel waits, schedules and traps,
# rarely where a bug is.
MACHINERY = ("kernel/locking/", "kernel/sched/", "kernel/time/", "kernel/irq/",
             "kernel/panic.c", "kernel/entry/", "arch/", "include/", "lib/", "mm/",
             "drivers/tty/", "kernel/printk/")
IDLE = re.compile(r"\b(default_idle|do_idle|cpu_startup_entry|native_safe_halt|"
                  r"acpi_idle|cpuidle_enter|mwait_idle)\b")
WAITING = re.compile(r"spin_lock|queued_.*lock|_raw_.*lock|mutex_lock|down_|"
                     r"rwsem|schedule\b|wait_for_completion")
GDB_SECONDS = 60
DMESG_LINES = 15


@dataclass(frozen=True)
class Symbols:
    """Where an autopsy reads the kernel: its vmlinux (with debug info)
    and the source tree it was built from."""
    vmlinux: Path
    tree: Path
    cross_compile: str = ""  # the prefix of the binutils that read it


@dataclass
class Autopsy:
    summary: list   # one line per vCPU or call trace: the frame to look at
    text: str       # everything read, for autopsy.txt

    def short(self):
        return "; ".join(self.summary)


@dataclass
class Frame:
    function: str
    place: str      # "kernel/bpf/bpf_lru_list.c:352", or "" when unknown

    def __str__(self):
        return f"{self.function} ({self.place})" if self.place else self.function


def source_path(path):
    """A path as the tree names it: the debug info's are under
    kbuild.DEBUG_TREE, through the object dir (".../.kbuild/../kernel/x.c")."""
    path = os.path.normpath(path)
    root = kbuild.DEBUG_TREE.rstrip("/") + "/"
    if path.startswith(root):
        path = path[len(root):]
    while path.startswith("../"):
        path = path[3:]
    return path


def is_machinery(frame):
    return not frame.place or frame.place.startswith(MACHINERY)


def culprit(frames):
    """The innermost frame outside the kernel's machinery, or None."""
    for frame in frames:
        if not is_machinery(frame):
            return frame
    return None


# -- a hung guest, read through the gdb stub -----------------------------------

THREAD = re.compile(r"^Thread (\d+) \(Thread \d+\.(\d+)")
GDB_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+) \(.*?\)(?: at (\S+):(\d+))?")


def of_hang(symbols, port, gdb="gdb"):
    """Stop the guest on the gdb stub at 127.0.0.1:port and read every
    vCPU's backtrace and the kernel log's tail. The guest stays stopped."""
    commands = ["set pagination off", "set confirm off", "set print frame-arguments none",
                "set print entry-values no", "set width 0",
                f"set substitute-path {kbuild.DEBUG_TREE} {Path(symbols.tree).resolve()}",
                f"target remote 127.0.0.1:{port}",
                "echo lab-autopsy: threads\\n", "thread apply all bt 25",
                "echo lab-autopsy: dmesg\\n", "lx-dmesg"]
    args = [gdb, "-q", "-nx", "-batch",
            "-iex", f"add-auto-load-safe-path {Path(symbols.vmlinux).parent}"]
    for command in commands:
        args += ["-ex", command]
    args.append(str(symbols.vmlinux))
    try:
        result = subprocess.run(args, capture_output=True, text=True, errors="replace",
                                timeout=GDB_SECONDS, stdin=subprocess.DEVNULL)
        output = result.stdout + result.stderr
    except FileNotFoundError:
        return Autopsy([f"no autopsy: {gdb} is not installed"], "")
    except subprocess.TimeoutExpired:
        return Autopsy([f"no autopsy: gdb did not read the guest within {GDB_SECONDS} s"], "")
    threads, dmesg = read_gdb(output)
    if not threads:
        return Autopsy(["no autopsy: gdb read no vCPU from the stub"], output)
    summary = [describe_vcpu(cpu, frames) for cpu, frames in threads]
    text = "\n".join(["What each vCPU was doing when the guest was stopped:", *summary,
                      "", "The kernel log's last lines:", *dmesg[-DMESG_LINES:],
                      "", "gdb's full output:", output])
    return Autopsy(summary, text)


def read_gdb(output):
    """[(vCPU number, [Frame])] and the lx-dmesg lines, from gdb's output."""
    threads, dmesg, part = [], [], None
    for line in output.splitlines():
        if line.startswith("lab-autopsy: "):
            part = line.split(": ", 1)[1]
            continue
        if part == "threads":
            thread = THREAD.match(line)
            if thread:
                threads.append((int(thread.group(2)) - 1, []))
                continue
            frame = GDB_FRAME.match(line)
            if frame and threads:
                function, path, number = frame.groups()
                place = f"{source_path(path)}:{number}" if path else ""
                threads[-1][1].append(Frame(function, place))
        elif part == "dmesg" and line.strip() and not line.startswith("[Inferior"):
            dmesg.append(line)
    threads.sort()
    return threads, dmesg


def describe_vcpu(cpu, frames):
    if not frames:
        return f"vCPU {cpu}: no backtrace"
    if any(IDLE.search(f.function) for f in frames[:6]):
        return f"vCPU {cpu}: idle"
    if frames[0].function in ("??",) or frames[0].function.startswith("0x"):
        return f"vCPU {cpu}: in user space"
    suspect = culprit(frames)
    if suspect is None:
        return f"vCPU {cpu}: in {frames[0]}"
    waiting = next((f for f in frames if WAITING.search(f.function)), None)
    how = f", waiting in {waiting.function}" if waiting and frames.index(waiting) < \
        frames.index(suspect) else ""
    return f"vCPU {cpu}: in {suspect}{how}"


# -- a crashed guest, from its console -----------------------------------------

# x86's BUG() says "kernel BUG at file:line!" and then "invalid opcode":
# the list checks' reports under CONFIG_BUG_ON_DATA_CORRUPTION look so.
TRACE_START = re.compile(r"BUG: |Oops|general protection fault|Kernel panic|"
                         r"Unable to handle kernel|WARNING: |kernel BUG at ")
TRACE_END = re.compile(r"---\[ end trace|Kernel panic")
# "RIP: 0010:bpf_lru_pop_free+0x163/0x4dd" and " ? func+0x1c/0x1c" (a
# leftover on the stack, not a caller: skipped).
SYMBOL_OFFSET = re.compile(r"(RIP: \w+:|pc : |\s)(\?\s+)?([\w.$]+)\+(0x[0-9a-f]+)/0x[0-9a-f]+")


def of_crash(symbols, console_lines):
    """The console's first oops or panic: its summary from its RIP and
    call trace, each address resolved to files and lines through its
    inlined functions; its text decoded by scripts/decode_stacktrace.sh."""
    start = first_report(console_lines)
    if start is None:
        return None
    report = console_lines[start:]
    what = re.sub(r"^\[\s*[\d.]+\]\s*", "", report[0].strip())
    frames = resolve(symbols, trace_addresses(report))
    suspect, first = culprit(frames), (frames[0] if frames else None)
    if suspect is None:
        summary = f"{what}: no frame outside the kernel's machinery" + \
            (f"; it stopped in {first}" if first else "")
    else:
        summary = f"{what}: in {suspect}" + \
            (f", stopped in {first}" if first and first != suspect else "")
    return Autopsy([summary], "\n".join([
        "Where the trace's frames are, innermost first (inlined functions included):",
        *[f"  {frame}" for frame in frames], "",
        "The console's report, decoded:", decode(symbols, "".join(report))]))


def first_report(console_lines):
    """The index of the line that begins the console's first crash report."""
    return next((i for i, line in enumerate(console_lines) if TRACE_START.search(line)), None)


def trace_addresses(report):
    """[(symbol, offset, is_the_faulting_address)] of the report's first trace."""
    found = []
    for line in report[1:]:
        if TRACE_END.search(line):
            break
        match = SYMBOL_OFFSET.search(line)
        if match and not match.group(2):
            found.append((match.group(3), int(match.group(4), 16),
                          not match.group(1).isspace()))
    return found


def tool(symbols, name):
    return f"{symbols.cross_compile}{name}"


def resolve(symbols, addresses):
    """Frames, innermost first, for symbol+offset addresses. A return
    address is resolved one byte back, to the call it returns from."""
    try:
        table = subprocess.run([tool(symbols, "nm"), str(symbols.vmlinux)], capture_output=True,
                               text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    where = {}
    for line in table.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            where.setdefault(parts[2], int(parts[0], 16))
    wanted = [where[name] + offset - (0 if faulting else 1)
              for name, offset, faulting in addresses if name in where]
    if not wanted:
        return []
    output = subprocess.run([tool(symbols, "addr2line"), "-a", "-f", "-i", "-e",
                             str(symbols.vmlinux), *[hex(a) for a in wanted]],
                            capture_output=True, text=True).stdout.splitlines()
    frames = []
    lines = iter(output)
    for line in lines:
        if line.startswith("0x"):
            continue
        place = next(lines, "")
        path, _, number = place.partition(":")
        number = number.split()[0] if number else ""
        known = path and path != "??" and number.isdigit()
        frames.append(Frame(line, f"{source_path(path)}:{number}" if known else ""))
    return frames


def decode(symbols, report):
    """The kernel's own decoding of a report, with paths as the tree names
    them; the report as it was if that fails."""
    script = Path(symbols.tree) / "scripts" / "decode_stacktrace.sh"
    try:
        result = subprocess.run(["bash", str(script), str(symbols.vmlinux),
                                 kbuild.DEBUG_TREE + "/"],
                                input=report, capture_output=True, text=True,
                                errors="replace", timeout=GDB_SECONDS,
                                env=dict(os.environ, CROSS_COMPILE=symbols.cross_compile))
    except (OSError, subprocess.TimeoutExpired):
        return report
    if result.returncode != 0 or not result.stdout.strip():
        return report
    return re.sub(re.escape(kbuild.DEBUG_TREE) + r"/(?:[^ ()/]+/\.\./)?", "", result.stdout)
