"""Booting a teaching kernel under QEMU, interactively or under a watchdog."""
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from .errors import LabError
from .log import info

QEMU = "qemu-system-x86_64"
QBOOT = Path("/usr/share/qemu/qboot.rom")
# Lines after which a guest is not going to finish its job.
FATAL = re.compile(r"Kernel panic - not syncing|\bOops\b|BUG: |general protection fault|"
                   r"Unable to handle kernel|watchdog: BUG: soft lockup|INFO: task .* blocked")
TAIL_LINES = 40
# What one unattended boot may leave on the host. A guest that prints or
# writes without end (a runaway loop in a student's kernel) would otherwise
# fill the disk of whoever grades it before the timeout stops it.
CONSOLE_LIMIT = 8 * 2**20
SHARE_LIMIT = 128 * 2**20
# A guest writes hundreds of MiB a second into the share: look often.
POLL_SECONDS = 0.25
# What is kept of each file a guest wrote past SHARE_LIMIT, to look at.
KEPT_OF_A_RUNAWAY_FILE = 2**20


def accelerator(modules_file="/proc/modules", kvm_device="/dev/kvm"):
    """'kvm' only where a real KVM module is loaded and /dev/kvm is usable.
    A /dev/kvm backed by anything else (this project's CI machines expose a
    paravirtual one) hangs a stock guest after the firmware banner."""
    forced = os.environ.get("ACCEL")
    if forced:
        if forced not in ("kvm", "tcg"):
            raise LabError(f"ACCEL={forced}: use ACCEL=kvm or ACCEL=tcg")
        return forced
    try:
        with open(modules_file) as modules_list:
            modules = {line.split()[0] for line in modules_list if line.strip()}
    except OSError:
        modules = set()
    real = modules & {"kvm_intel", "kvm_amd"}
    if real and os.access(kvm_device, os.R_OK | os.W_OK):
        return "kvm"
    reason = ("/dev/kvm is not usable" if real else
              "neither kvm_intel nor kvm_amd is loaded")
    if reason not in _said:
        _said.add(reason)
        info(f"using TCG (software emulation): {reason}; ACCEL=kvm overrides")
    return "tcg"


_said = set()  # say why TCG was chosen once per run, not once per boot


@dataclass
class Boot:
    kernel: Path
    initrd: Path
    mode: str
    out_dir: Path
    cpus: int = 2
    memory: str = "1G"
    extra_cmdline: list = field(default_factory=list)
    gdb_port: int = None
    paused: bool = False

    def command(self, serial):
        if not self.kernel.exists():
            raise LabError(f"{self.kernel} does not exist: build it with `make kernel`")
        if not shutil.which(QEMU):
            raise LabError(f"{QEMU} is missing: install qemu-system-x86 (make deps does it)")
        accel = accelerator()
        # reboot=t: a triple fault, which -no-reboot turns into QEMU's exit;
        # the usual reset through the keyboard controller needs the i8042.
        cmdline = ["console=ttyS0", "panic=-1", "oops=panic", "loglevel=4",
                   "reboot=t", "nokaslr" if self.gdb_port else "", *self.extra_cmdline]
        if accel == "tcg":
            # TCG's vCPUs share one virtual TSC, but its CPU model lacks
            # constant_tsc, so the kernel would call the TSCs unsynchronized
            # and keep time with the HPET, an emulated device slow to read.
            cmdline.insert(0, "tsc=reliable")
        # q35, not the older pc (i440FX): its ACPI tables give PCI interrupt
        # routing as a fixed table, where i440FX's build it in an AML loop
        # that the kernel interprets, for a tenth of a second under TCG, as
        # virtio-pci enables its device. No PS/2 controller: the console is
        # serial, and probing the controller's mouse costs a third of a second.
        cmd = [QEMU, "-machine", "q35,i8042=off",
               "-accel", accel, "-cpu", "host" if accel == "kvm" else "max",
               "-smp", str(self.cpus), "-m", self.memory,
               "-nodefaults", "-no-reboot", "-display", "none", "-no-user-config",
               "-kernel", str(self.kernel), "-initrd", str(self.initrd),
               "-append", " ".join(c for c in cmdline if c),
               "-serial", serial,
               "-fsdev", f"local,id=labout,path={self.out_dir},security_model=none",
               "-device", "virtio-9p-pci,fsdev=labout,mount_tag=labout"]
        if QBOOT.exists():
            cmd += ["-bios", str(QBOOT)]
        if self.gdb_port:
            # Bound to loopback: QEMU's plain -s listens on every interface.
            cmd += ["-gdb", f"tcp:127.0.0.1:{self.gdb_port}"]
        if self.paused:
            cmd.append("-S")
        return cmd


@dataclass
class Outcome:
    ok: bool
    reason: str
    tail: list
    seconds: float

    def explain(self):
        tail = "".join(self.tail)
        return f"{self.reason}; the last console lines were:\n{tail}"


def run_interactive(boot):
    """The guest console on this terminal; Ctrl-A X quits QEMU."""
    boot.out_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.run(boot.command("mon:stdio")).returncode


def run_watched(boot, timeout, console_log, echo=False, started=None):
    """Boot, stream the console to console_log, and stop the guest on a panic,
    an oops, after `timeout` seconds, or once it has printed more than
    CONSOLE_LIMIT bytes or written more than SHARE_LIMIT bytes into its
    results share. Returns an Outcome."""
    boot.out_dir.mkdir(parents=True, exist_ok=True)
    tail = deque(maxlen=TAIL_LINES)
    fatal = []
    printed = [0]
    share_before = disk_usage(boot.out_dir)
    begin = time.monotonic()
    begin_wall = time.time()
    proc = subprocess.Popen(boot.command("stdio"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    if started:
        started(proc)

    def pump():
        with open(console_log, "wb") as log:
            for raw in proc.stdout:
                printed[0] += len(raw)
                if printed[0] <= CONSOLE_LIMIT:
                    log.write(raw)
                    log.flush()
                line = raw.decode(errors="replace")
                tail.append(line)
                if echo:
                    print(line, end="", flush=True)
                if FATAL.search(line) and not fatal:
                    fatal.append(line.strip())

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    stopped = None
    while proc.poll() is None:
        if time.monotonic() - begin > timeout:
            stopped = f"the guest did not finish within {timeout} s (hang?)"
        elif printed[0] > CONSOLE_LIMIT:
            stopped = (f"the guest printed more than {CONSOLE_LIMIT // 2**20} MiB on its "
                       "console (output without end?)")
        elif disk_usage(boot.out_dir) - share_before > SHARE_LIMIT:
            stopped = (f"the guest wrote more than {SHARE_LIMIT // 2**20} MiB into its "
                       "results share (filling the disk?)")
        if stopped:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if "results share" in stopped:
                truncate_runaway_files(boot.out_dir, begin_wall, console_log)
            break
        try:
            proc.wait(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
    reader.join(timeout=5)
    seconds = time.monotonic() - begin
    if stopped:
        return Outcome(False, stopped, list(tail), seconds)
    if fatal:
        return Outcome(False, f"the guest crashed: {fatal[0]}", list(tail), seconds)
    if proc.returncode != 0:
        return Outcome(False, f"QEMU exited with status {proc.returncode}", list(tail), seconds)
    return Outcome(True, "the guest finished", list(tail), seconds)


def truncate_runaway_files(directory, since, keep):
    """Give the disk back: cut each large file written during the boot to
    its first KEPT_OF_A_RUNAWAY_FILE bytes."""
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            try:
                status = os.lstat(path)
                if (path != str(keep) and status.st_mtime >= since - 1
                        and status.st_size > KEPT_OF_A_RUNAWAY_FILE):
                    os.truncate(path, KEPT_OF_A_RUNAWAY_FILE)
            except OSError:
                pass


def disk_usage(directory):
    """Bytes of disk the files under directory take (sparse files count
    what they occupy, not their length)."""
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass  # removed while we looked
    return total


def free_port(preferred=1234):
    for port in [preferred, 0]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return s.getsockname()[1]
            except OSError:
                continue
    raise LabError("no free TCP port on 127.0.0.1 for the gdb stub")
