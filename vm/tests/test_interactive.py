"""The interactive verbs as a student meets them: in a real terminal (a
pseudo-terminal here), with Ctrl-C pressed. The interrupt character goes
to the terminal's foreground process group; it must stop only what the
student is talking to (gdb's target, or the guest shell's command), never
QEMU, make or the lab. These boot the teaching kernel that make check's
guest tier built, in the lab's workshop tree."""
import fcntl
import os
import re
import select
import signal
import subprocess
import termios
import time
from pathlib import Path

import pytest

from lab import settings

pytestmark = pytest.mark.kernel

CTRL_C = b"\x03"
CTRL_A_X = b"\x01x"
CTRL_RIGHT_BRACKET = b"\x1d"


class Terminal:
    """A command on a pseudo-terminal of its own, as its controlling
    terminal: what a tmux pane gives a student."""

    def __init__(self, cmd):
        master, slave = os.openpty()

        def controlling_terminal():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            # As a login shell's would: a check started in the background
            # (nohup make check &) passes on an ignored SIGINT otherwise.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGQUIT, signal.SIG_DFL)

        self.proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave,
                                     preexec_fn=controlling_terminal, cwd=settings.REPO,
                                     env=dict(os.environ, TERM="dumb"))
        os.close(slave)
        self.master = master
        self.seen = b""

    def send(self, data):
        os.write(self.master, data)

    def _read(self, seconds):
        ready, _, _ = select.select([self.master], [], [], seconds)
        if ready:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the other side closed
                return False
            self.seen += chunk
            return bool(chunk)
        return True

    def expect(self, pattern, seconds=60, since=0):
        regex = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            match = regex.search(self.seen, since)
            if match:
                return match.end()
            if not self._read(0.2) and self.proc.poll() is not None:
                break
        tail = self.seen[-3000:].decode(errors="replace")
        raise AssertionError(f"did not see /{regex.pattern.decode()}/ within {seconds} s; "
                             f"the terminal showed:\n{tail}")

    def wait(self, seconds=60):
        deadline = time.monotonic() + seconds
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        if self.proc.poll() is None:
            raise AssertionError("the command did not exit; the terminal showed:\n"
                                 + self.seen[-3000:].decode(errors="replace"))
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        os.close(self.master)


@pytest.fixture
def workshop(built_obj):
    """The kernel tree make check's guest tier built the teaching kernel in
    (LAB_TEST_TREE)."""
    tree = Path(os.environ.get("LAB_TEST_TREE", "/nonexistent"))
    if not (tree / ".git").exists():
        pytest.fail("LAB_TEST_TREE must name the kernel tree make check built in")
    return tree


def make(verb, tree, *args):
    # STAGE= empty: a `make check STAGE=NN` above passes its STAGE down
    # through MAKEFLAGS, and these verbs must take the tree's own stage.
    return ["make", "-s", verb, f"TREE={tree}", f"BUILD={settings.BUILD}", "STAGE=", *args]


def qemu_running(marker):
    """Whether a QEMU whose command line names marker is alive (read from
    /proc: a minimal Debian has no pgrep)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if words and b"qemu-system" in words[0] and any(marker.encode() in w for w in words):
            return True
    return False


def test_ctrl_c_in_make_debug_stops_the_guest_in_gdb_and_keeps_it(workshop):
    term = Terminal(make("debug", workshop))
    sock = str(settings.BUILD / "console.sock")
    try:
        at = term.expect(r"\(gdb\) ", seconds=240)
        term.send(b"continue\n")
        at = term.expect(r"Continuing\.", since=at)
        time.sleep(4)  # let the guest get well into its boot
        term.send(CTRL_C)
        at = term.expect(r"received signal SIGINT", since=at)
        at = term.expect(r"\(gdb\) ", since=at)
        assert qemu_running(sock), "QEMU died on the Ctrl-C meant for gdb"
        assert term.proc.poll() is None, "make died on the Ctrl-C meant for gdb"
        term.send(b"p/x $pc\n")
        at = term.expect(r"= 0xffffffff8[0-9a-f]+", since=at)
        term.send(b"continue\n")
        at = term.expect(r"Continuing\.", since=at)
        time.sleep(2)
        term.send(CTRL_C)
        at = term.expect(r"received signal SIGINT", since=at)
        term.expect(r"\(gdb\) ", since=at)
        assert qemu_running(sock)
        term.send(b"quit\n")
        assert term.wait(60) == 0
        shown = term.seen.decode(errors="replace")
        # make's own "*** [Makefile:NN: debug] Interrupt" means it was killed.
        for bad in ("terminating on signal", "Remote communication error", "] Interrupt"):
            assert bad not in shown, f"the terminal showed '{bad}':\n{shown[-2000:]}"
        assert not qemu_running(sock), "QEMU outlived gdb"
    finally:
        term.close()


def test_make_console_reaches_the_debugged_guest_and_ctrl_c_stays_in_it(workshop):
    debug = Terminal(make("debug", workshop))
    try:
        at = debug.expect(r"\(gdb\) ", seconds=240)
        debug.send(b"continue\n")
        debug.expect(r"Continuing\.", since=at)
        console = Terminal(["make", "-s", "console", f"BUILD={settings.BUILD}"])
        try:
            console.expect(r"guest console")
            # The guest may still be booting: what is typed before its shell
            # reads the console is lost, in part. Type again until the shell
            # has run the command (42 is its output; the echo of the typed
            # line says nothing).
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and b"lab-console-42" not in console.seen:
                console.send(b"echo lab-console-$((6 * 7))\n")
                time.sleep(1)
                console._read(0.5)
            at = console.expect(r"lab-console-42")
            console.send(b"sleep 60\n")
            time.sleep(1)
            console.send(CTRL_C)
            console.send(b"echo after-$((1 + 1))\n")
            console.expect(r"after-2", seconds=20, since=at)
            assert debug.proc.poll() is None and console.proc.poll() is None
            console.send(CTRL_RIGHT_BRACKET)
            console.wait(20)
        finally:
            console.close()
        debug.send(CTRL_C)
        debug.expect(r"received signal SIGINT")
        debug.send(b"quit\n")
        assert debug.wait(60) == 0
    finally:
        debug.close()


@pytest.mark.parametrize("leave", ["exit", "ctrl-a x"])
def test_make_boot_passes_ctrl_c_to_the_guest_shell(workshop, leave):
    term = Terminal(make("boot", workshop))
    try:
        at = term.expect(r"this is the guest's shell", seconds=240)
        term.send(b"sleep 60\n")
        time.sleep(1)
        term.send(CTRL_C)
        term.send(b"echo alive-$((6 * 7))\n")
        at = term.expect(r"alive-42", seconds=20, since=at)
        assert term.proc.poll() is None
        term.send(b"exit\n" if leave == "exit" else CTRL_A_X)
        assert term.wait(60) == 0
        assert b"terminating on signal" not in term.seen
    finally:
        term.close()
