"""Booting a teaching kernel under QEMU, interactively or under a watchdog."""
import ctypes
import dataclasses
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

from . import arches, autopsy, settings, stages
from .errors import LabError
from .log import info

# Lines after which a guest is not going to finish its job.
FATAL = re.compile(r"Kernel panic - not syncing|\bOops\b|BUG: |general protection fault|"
                   r"Unable to handle kernel|watchdog: BUG: soft lockup|INFO: task .* blocked")
# A test that provokes an oops on purpose (lkdtm's stray accesses) says so
# on the console, through the kernel log, before and after: a crash
# report between the two is what the test asked for and judges itself,
# not a crash of the guest. vm/guest/lab/bin/lab-expect-oops prints them.
OOPS_EXPECTED_BEGIN = re.compile(r"lab-expect-oops: begin\b")
OOPS_EXPECTED_END = re.compile(r"lab-expect-oops: end\b")
# The kernel's own hang detectors: after their reports the guest runs on,
# stuck, until the timeout. It is stopped once the report that
# follows had STALL_GRACE seconds to reach the console, and read as a hang.
STALL = re.compile(r"rcu: INFO: rcu_\w+ (self-)?detected (expedited )?stall|"
                   r"watchdog: BUG: soft lockup|"
                   r"INFO: task .* blocked for more than")
STALL_GRACE = 3
# A kernel that crashed has failed its run already; one that then prints
# nothing for this long is stuck (say, spinning on a lock a corrupted
# list left taken, with interrupts off: no hang detector ever reports),
# and is stopped instead of waiting for the timeout.
CRASH_SILENCE = 30
TAIL_LINES = 40
# What one unattended boot may leave on the host. A guest that prints or
# writes without end (a runaway loop in a student's kernel) would otherwise
# fill the disk of whoever grades it before the timeout stops it. The
# longest console of a real run is under 30 KiB; a flood passes 1 MiB in
# seconds, where 8 MiB took most of a grade's 90 s under a slow TCG.
CONSOLE_LIMIT = 2**20
SHARE_LIMIT = 128 * 2**20
# A guest writes hundreds of MiB a second into the share: look often.
POLL_SECONDS = 0.25
# What is kept of each file a guest wrote past SHARE_LIMIT, to look at.
KEPT_OF_A_RUNAWAY_FILE = 2**20


def accelerator(arch=None, modules_file="/proc/modules", kvm_device="/dev/kvm"):
    """'kvm' only for a guest of the host's own architecture, where a real
    KVM module is loaded and /dev/kvm is usable.
    A /dev/kvm backed by anything else (this project's CI machines expose a
    paravirtual one) hangs a stock guest after the firmware banner."""
    if arch is not None and arch.name != os.uname().machine:
        return "tcg"  # KVM runs guests of the host's own architecture only
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


OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")


@dataclass
class Boot:
    """One boot of a teaching kernel on the machine its stage declares
    (stages/NN-slug/stage.toml, [machine]); without a stage, the default
    machine."""
    kernel: Path
    initrd: Path
    mode: str
    out_dir: Path
    stage: object = None
    extra_cmdline: list = field(default_factory=list)
    gdb_port: int = None
    paused: bool = False
    # The kernel's vmlinux and sources (autopsy.Symbols): with them, an
    # unattended boot that hangs or crashes gets an autopsy.
    symbols: object = None

    @property
    def machine(self):
        return self.stage.machine if self.stage else stages.Machine()

    @property
    def arch(self):
        return arches.ARCHES[self.machine.arch]

    def command(self, serial):
        machine, arch = self.machine, self.arch
        if not self.kernel.exists():
            raise LabError(f"{self.kernel} does not exist: build it with `make kernel`")
        if not shutil.which(arch.qemu):
            raise LabError(f"{arch.qemu} is missing: install {arch.qemu_package} "
                           "(make deps does it)")
        accel = accelerator(arch)
        # reboot=t: a triple fault, which -no-reboot turns into QEMU's exit;
        # the usual reset through the keyboard controller needs the i8042.
        cmdline = [f"console={arch.console}", "panic=-1", "oops=panic", "loglevel=4",
                   "reboot=t", "nokaslr" if self.gdb_port else "", *machine.cmdline,
                   *self.extra_cmdline]
        if accel == "tcg" and arch.name == "x86_64":
            # TCG's vCPUs share one virtual TSC, but its CPU model lacks
            # constant_tsc, so the kernel would call the TSCs unsynchronized
            # and keep time with the HPET, an emulated device slow to read.
            cmdline.insert(0, "tsc=reliable")
        # On x86, q35 rather than the older pc (i440FX): its ACPI tables give
        # PCI interrupt routing as a fixed table, where i440FX's build it in
        # an AML loop that the kernel interprets, for a tenth of a second
        # under TCG, as virtio-pci enables its device. No PS/2 controller:
        # the console is serial, and probing the controller's mouse costs a
        # third of a second.
        virtio = arch.virtio
        cmd = [arch.qemu, "-machine", arch.machine,
               "-accel", accel, "-cpu", "host" if accel == "kvm" else arch.cpu_tcg,
               "-smp", str(machine.cpus), "-m", machine.memory,
               "-nodefaults", "-no-reboot", "-display", "none", "-no-user-config",
               "-kernel", str(self.kernel), "-initrd", str(self.initrd),
               "-append", " ".join(c for c in cmdline if c),
               "-serial", serial,
               "-fsdev", f"local,id=labout,path={self.out_dir},security_model=none",
               "-device", f"virtio-9p-{virtio},fsdev=labout,mount_tag=labout"]
        if machine.firmware == "ovmf":
            cmd += self._ovmf()
        elif arch.bios and Path(arch.bios).exists():
            cmd += ["-bios", arch.bios]
        if machine.rng:
            cmd += ["-object", "rng-random,id=rng,filename=/dev/urandom",
                    "-device", f"virtio-rng-{virtio},rng=rng"]
        for disk, image in zip(machine.disks, self.make_disks()):
            cmd += ["-drive", f"file={image},if=none,id=disk-{disk.name},format=raw,"
                              "cache=unsafe",
                    "-device", ",".join(p for p in (f"virtio-blk-{virtio}",
                                                    f"drive=disk-{disk.name}",
                                                    f"serial={disk.name}",
                                                    disk.properties) if p)]
        if self.gdb_port:
            # Bound to loopback: QEMU's plain -s listens on every interface.
            cmd += ["-gdb", f"tcp:127.0.0.1:{self.gdb_port}"]
        if self.paused:
            cmd.append("-S")
        return cmd

    @property
    def disk_dir(self):
        """Beside the results share, not in it: the guest writes its disks
        through QEMU, up to their size, and that is not results."""
        return self.out_dir.with_name(self.out_dir.name + ".disks")

    def make_disks(self):
        """The stage's disks, made afresh for every boot, so that no run
        depends on what an earlier one wrote."""
        images = []
        if self.machine.disks:
            self.disk_dir.mkdir(parents=True, exist_ok=True)
        for disk in self.machine.disks:
            image = self.disk_dir / f"disk-{disk.name}.img"
            image.unlink(missing_ok=True)
            subprocess.run(["truncate", "-s", disk.size, str(image)], check=True)
            if disk.filesystem:
                mkfs = shutil.which(f"mkfs.{disk.filesystem}") or \
                    shutil.which(f"/sbin/mkfs.{disk.filesystem}")
                if not mkfs:
                    raise LabError(f"mkfs.{disk.filesystem} is missing for disk {disk.name}: "
                                   "list its Debian package in the stage's packages")
                args = [mkfs, "-q"]
                if disk.files:
                    # mkfs.ext4 -d fills the filesystem from a directory,
                    # without root and without mounting anything.
                    args += ["-d", str(self.stage.path / disk.files)]
                result = subprocess.run([*args, str(image)], capture_output=True, text=True)
                if result.returncode != 0:
                    raise LabError(f"making disk {disk.name} failed: {result.stderr.strip()}")
            images.append(image)
        return images

    def _ovmf(self):
        """UEFI firmware, with an EFI variable store of the stage's own that
        outlives the boot: a second boot sees what the first one wrote."""
        if not OVMF_CODE.exists():
            raise LabError(f"{OVMF_CODE} is missing: install ovmf (make deps does it)")
        store = settings.BUILD / "efivars" / f"{self.stage.slug if self.stage else 'default'}.fd"
        if not store.exists():
            store.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(OVMF_VARS, store)
        return ["-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={OVMF_CODE}",
                "-drive", f"if=pflash,format=raw,unit=1,file={store}"]


@dataclass
class Outcome:
    ok: bool
    reason: str
    tail: list
    seconds: float
    autopsy: str = ""  # the short form of autopsy.txt: where each vCPU or trace was

    def explain(self):
        tail = "".join(self.tail)
        found = f"\nautopsy (autopsy.txt has the rest): {self.autopsy}" if self.autopsy else ""
        return f"{self.reason}; the last console lines were:\n{tail}{found}"


def run_interactive(boot):
    """The guest console on this terminal; Ctrl-A X quits QEMU. The
    terminal's own signals are off (signal=off), so Ctrl-C is a key the
    guest's shell gets, to stop its foreground command, not a SIGINT that
    would kill QEMU (and make) with the guest in it."""
    boot.out_dir.mkdir(parents=True, exist_ok=True)
    console = ["-chardev", "stdio,id=console,mux=on,signal=off",
               "-mon", "chardev=console,mode=readline"]
    return subprocess.run(boot.command("chardev:console") + console).returncode


def run_watched(boot, timeout, console_log, echo=False, started=None, stop_when=None):
    """Boot, stream the console to console_log, and stop the guest on a panic,
    an oops, after `timeout` seconds, or once it has printed more than
    CONSOLE_LIMIT bytes or written more than SHARE_LIMIT bytes into its
    results share; or when stop_when(), asked every second, gives a
    reason. Returns an Outcome."""
    boot.out_dir.mkdir(parents=True, exist_ok=True)
    # The gdb stub, on a free loopback port, is how a hung guest is read
    # before it is killed; gdb reads only guests of the host's own kind.
    if boot.symbols and boot.gdb_port is None and boot.arch.name == os.uname().machine:
        boot = dataclasses.replace(boot, gdb_port=free_port(0))
    tail = deque(maxlen=TAIL_LINES)
    fatal = []
    stall = []
    printed = [0]
    last_line = [time.monotonic()]
    share_before = disk_usage(boot.out_dir)
    begin = time.monotonic()
    begin_wall = time.time()
    proc = subprocess.Popen(boot.command("stdio"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, preexec_fn=die_with_the_lab)
    if started:
        started(proc)

    def pump():
        expected = False
        with open(console_log, "wb") as log:
            for raw in proc.stdout:
                printed[0] += len(raw)
                last_line[0] = time.monotonic()
                if printed[0] <= CONSOLE_LIMIT:
                    log.write(raw)
                    log.flush()
                line = raw.decode(errors="replace")
                tail.append(line)
                if echo:
                    print(line, end="", flush=True)
                if OOPS_EXPECTED_BEGIN.search(line):
                    expected = True
                elif OOPS_EXPECTED_END.search(line):
                    expected = False
                elif FATAL.search(line) and not fatal and not expected:
                    fatal.append(line.strip())
                if STALL.search(line) and not stall:
                    report = re.sub(r"^\[ *[0-9.]+\] ", "", line.strip())
                    stall.append((time.monotonic(), report))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    stopped = found = None
    asked = begin
    try:
        while proc.poll() is None:
            now = time.monotonic()
            settled = None
            if stop_when and now - asked >= 1:
                asked = now
                settled = stop_when()
            stalled = stall and now - stall[0][0] > STALL_GRACE
            silent = fatal and now - last_line[0] > CRASH_SILENCE
            hung = not settled and (stalled or silent or now - begin > timeout)
            if settled:
                stopped = settled
            elif stalled:
                stopped = f"the kernel reported a hang: {stall[0][1]}"
            elif silent:
                stopped = (f"the guest crashed: {fatal[0]}; then it printed nothing "
                           f"for {CRASH_SILENCE} s (hung?)")
            elif hung:
                stopped = f"the guest did not finish within {timeout} s (hang?)"
            elif printed[0] > CONSOLE_LIMIT:
                stopped = (f"the guest printed more than {CONSOLE_LIMIT // 2**20} MiB on its "
                           "console (output without end?)")
            elif disk_usage(boot.out_dir) - share_before > SHARE_LIMIT:
                stopped = (f"the guest wrote more than {SHARE_LIMIT // 2**20} MiB into its "
                           "results share (filling the disk?)")
            if stopped:
                if hung and boot.symbols and boot.gdb_port:
                    found = autopsy.of_hang(boot.symbols, boot.gdb_port, boot.arch.gdb)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                if "results share" in stopped:
                    truncate_runaway_files(boot.out_dir, begin_wall, console_log)
                break
            try:
                proc.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                pass
    except BaseException:
        # Ctrl-C (or a bug) in the lab: QEMU is in a session of its own,
        # out of the terminal's reach, so it must not outlive the lab.
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        raise
    finally:
        # An unattended boot's disks are made again by the next one.
        shutil.rmtree(boot.disk_dir, ignore_errors=True)
    reader.join(timeout=5)
    seconds = time.monotonic() - begin
    if fatal and boot.symbols and not found:
        with open(console_log, errors="replace") as log:
            found = autopsy.of_crash(boot.symbols, log.readlines())
    short = ""
    if found:
        (boot.out_dir / "autopsy.txt").write_text(found.text + "\n")
        short = found.short()
    if stopped:
        return Outcome(False, stopped, list(tail), seconds, short)
    if fatal:
        return Outcome(False, f"the guest crashed: {fatal[0]}", list(tail), seconds, short)
    if proc.returncode != 0:
        return Outcome(False, f"QEMU exited with status {proc.returncode}", list(tail), seconds)
    return Outcome(True, "the guest finished", list(tail), seconds)


def die_with_the_lab():
    """In a QEMU child, before exec: the kernel kills it when the lab's
    thread that started it dies, however that happens (SIGKILL, SIGHUP
    from a closed terminal): a guest in a session of its own would
    otherwise run on, out of everyone's reach."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


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
