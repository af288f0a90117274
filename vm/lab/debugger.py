"""gdb against a paused guest: interactively (`make debug`) or as batch
walkthroughs that assert on their own output (`make gdb-test`).

A walkthrough is a gdb script whose comments declare what it needs:
    # run: <guest command>     what the guest runs while gdb watches
                               (default: the stage's test list)
    # expect: <regex>          must appear in gdb's output, in this order
gdb gets the walkthrough's results directory (beside gdb.log; the guest's
/lab/out) in $LAB_OUT, so that what it writes there is kept with the run.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass

from . import arches, kbuild, qemu, settings
from .errors import LabError
from .log import info
from .workflow import build_guest, build_kernel, fresh_dir, results_dir

GDB_PORT = 1234


def gdb_command(work, port, batch=False):
    arch = arches.ARCHES[work.stage.machine.arch]
    if not shutil.which(arch.gdb):
        raise LabError(f"{arch.gdb} is missing: install {arch.gdb_package} (make deps does it)")
    cmd = [arch.gdb, "-q", "-nx",
           "-iex", "set pagination off",
           "-iex", "set confirm off",
           "-iex", f"add-auto-load-safe-path {work.obj}",
           "-iex", f"set substitute-path {kbuild.DEBUG_TREE} {work.tree.path.resolve()}",
           "-ex", f"target remote 127.0.0.1:{port}"]
    if batch:
        cmd.insert(1, "-batch")
    return cmd


def debug(work, command=None):
    build_kernel(work)
    mode = "run" if command else "shell"
    initrd = build_guest(work, mode, command)
    out = fresh_dir(results_dir(work) / "debug")
    sock = settings.BUILD / "console.sock"
    sock.unlink(missing_ok=True)
    port = qemu.free_port(GDB_PORT)
    boot = qemu.Boot(work.kernel, initrd, mode, out, work.stage, gdb_port=port, paused=True)
    # The console goes to a socket (and a log) so that gdb can own this terminal.
    cmd = boot.command("chardev:con") + [
        "-chardev", f"socket,id=con,path={sock},server=on,wait=off,logfile={out / 'console.log'}"]
    # A session of its own: the terminal's Ctrl-C, meant for gdb, never
    # reaches QEMU.
    vm = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True)
    _wait_for_port(port, vm)
    info(f"QEMU is paused with its gdb stub on 127.0.0.1:{port} (kernel booted with nokaslr).")
    info("The guest console is not on this terminal: in another terminal run "
         "`make console` (Ctrl-] leaves it). Its log is "
         f"{settings.shown(out / 'console.log')}.")
    info("In gdb: `continue` boots; Ctrl-C stops; lx-dmesg, lx-ps, lx-bpf-maps and the "
         "other lx- helpers are loaded. Quitting gdb stops the guest.")
    try:
        return run_owning_the_terminal(gdb_command(work, port) + [str(work.vmlinux)])
    finally:
        vm.kill()
        vm.wait()
        sock.unlink(missing_ok=True)


def run_owning_the_terminal(cmd):
    """Run cmd as the terminal's foreground process group, alone, as a
    shell runs a job. Ctrl-C then interrupts only cmd (gdb stops the
    target), while make and the lab, now in the background, wait for it.
    Without a terminal, cmd just runs."""
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return subprocess.run(cmd).returncode
    try:
        ours = os.tcgetpgrp(tty)
    except OSError:
        os.close(tty)
        return subprocess.run(cmd).returncode

    def take_the_terminal():
        # The child's own group first; SIGTTOU is ignored while a process
        # outside the foreground group takes the terminal, then restored
        # so that gdb starts with default dispositions.
        os.setpgid(0, 0)
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        os.tcsetpgrp(tty, os.getpgrp())
        signal.signal(signal.SIGTTOU, signal.SIG_DFL)

    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        proc = subprocess.Popen(cmd, preexec_fn=take_the_terminal, pass_fds=(tty,))
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:
                continue  # the terminal was not ours yet: gdb handles it
    finally:
        try:
            os.tcsetpgrp(tty, ours)
        except OSError:
            pass
        signal.signal(signal.SIGTTOU, previous)
        os.close(tty)


def _wait_for_port(port, vm, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if vm.poll() is not None:
            raise LabError(f"QEMU exited (status {vm.returncode}) before its gdb stub came up")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise LabError(f"QEMU's gdb stub did not come up on port {port}")


@dataclass
class Walkthrough:
    path: object
    command: str
    expectations: list

    @classmethod
    def load(cls, path):
        command, expectations = None, []
        for line in path.read_text().splitlines():
            if m := re.match(r"^#\s*run:\s*(.+)$", line):
                command = m.group(1).strip()
            elif m := re.match(r"^#\s*expect:\s*(.+)$", line):
                expectations.append(re.compile(m.group(1).strip()))
        if not expectations:
            raise LabError(f"{settings.shown(path)} declares no '# expect:' lines; a "
                           "walkthrough that asserts nothing proves nothing")
        return cls(path, command, expectations)

    def check(self, output):
        """The first expectation that is not met, in order, or None."""
        position = 0
        for pattern in self.expectations:
            match = pattern.search(output, position)
            if not match:
                return pattern.pattern
            position = match.end()
        return None


def run_walkthrough(work, script, quiet=False, results=None):
    walk = Walkthrough.load(script)
    mode = "run" if walk.command else "test"
    initrd = build_guest(work, mode, walk.command)
    out = fresh_dir((results or results_dir(work)) / "gdb" / script.stem)
    port = qemu.free_port(GDB_PORT)
    boot = qemu.Boot(work.kernel, initrd, mode, out, work.stage, gdb_port=port, paused=True)
    console = open(out / "console.log", "wb")
    vm = subprocess.Popen(boot.command("stdio"), stdin=subprocess.DEVNULL, stdout=console,
                          stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, vm)
        cmd = gdb_command(work, port, batch=True) + ["-x", str(script), str(work.vmlinux)]
        try:
            result = subprocess.run(cmd, capture_output=True, text=True,
                                    env=dict(os.environ, LAB_OUT=str(out)),
                                    timeout=work.stage.timeout)
            output = result.stdout + result.stderr
        except subprocess.TimeoutExpired as e:
            output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
                else (e.stdout or "")
            output += f"\n[lab: gdb did not finish within {work.stage.timeout} s]\n"
    finally:
        vm.kill()
        vm.wait()
        console.close()
    (out / "gdb.log").write_text(output)
    if not quiet:
        print(output)
    missing = walk.check(output)
    return missing, out
