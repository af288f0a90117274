"""run_watched reads a guest's console as it comes: a kernel that reports
a hang is stopped a few seconds after the report, not at the timeout.
A shell script stands in for QEMU here; the kernel-tier tests boot real
guests."""
import time
from types import SimpleNamespace

import pytest

from lab import qemu


class ScriptedGuest(SimpleNamespace):
    """A boot whose 'QEMU' prints `console` and then waits, as a stuck
    guest does, or exits when `then_exit`; `every` seconds apart if set."""

    def command(self, serial):
        end = "exit 0" if self.then_exit else "exec sleep 120"
        pace = f"sleep {self.every}; " if self.every else ""
        return ["bash", "-c", f"for line; do printf '%s\\n' \"$line\"; {pace}done; {end}",
                "guest", *self.console]


def watch(tmp_path, console, timeout, then_exit=False, every=0):
    boot = ScriptedGuest(console=console, then_exit=then_exit, out_dir=tmp_path / "out",
                         disk_dir=tmp_path / "out.disks",
                         symbols=None, gdb_port=None, every=every)
    begin = time.monotonic()
    outcome = qemu.run_watched(boot, timeout, tmp_path / "console.log")
    return outcome, time.monotonic() - begin


@pytest.mark.parametrize("report", [
    "rcu: INFO: rcu_sched detected stalls on CPUs/tasks:",
    "rcu: INFO: rcu_preempt self-detected stall on CPU",
    "rcu: INFO: rcu_sched detected expedited stalls on CPUs/tasks: { 0-... } 21004 jiffies",
    "watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [test_lru_map:93]",
    "INFO: task kworker/0:1:12 blocked for more than 30 seconds.",
])
def test_a_reported_hang_stops_the_guest_after_its_grace(tmp_path, report):
    outcome, seconds = watch(tmp_path, ["lab-run-started", f"[   25.104000] {report}",
                                        "[   25.104100] the stack dump"], timeout=60)
    assert not outcome.ok
    assert outcome.reason == f"the kernel reported a hang: {report}"
    assert qemu.STALL_GRACE <= seconds < qemu.STALL_GRACE + 10
    assert any("the stack dump" in line for line in outcome.tail)


def test_lines_that_only_mention_rcu_do_not_stop_the_guest(tmp_path):
    outcome, _ = watch(tmp_path, ["rcu: Hierarchical RCU implementation.",
                                  "rcu: RCU calculated value of scheduler-enlistment delay"],
                       timeout=60, then_exit=True)
    assert outcome.ok, outcome.reason


def test_a_silent_hang_still_ends_at_the_timeout(tmp_path):
    outcome, seconds = watch(tmp_path, ["lab-run-started"], timeout=3)
    assert outcome.reason == "the guest did not finish within 3 s (hang?)"
    assert 3 <= seconds < 13


OOPS = "[    1.976000] BUG: unable to handle page fault for address: 0000000000000008"


def test_a_crashed_guest_that_goes_silent_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(qemu, "CRASH_SILENCE", 2)
    outcome, seconds = watch(tmp_path, ["lab-run-started", OOPS, "[    1.977000] ---[ end trace ]---"],
                             timeout=60)
    assert outcome.reason == (f"the guest crashed: {OOPS}; then it printed nothing "
                              "for 2 s (hung?)")
    assert 2 <= seconds < 12


def test_a_crashed_guest_that_goes_on_printing_runs_to_its_end(tmp_path, monkeypatch):
    monkeypatch.setattr(qemu, "CRASH_SILENCE", 2)
    outcome, seconds = watch(tmp_path, [OOPS, "not ok 1 rotate", "not ok 2 shrink",
                                        "ok 3 flush", "lab-run-finished"],
                             timeout=60, then_exit=True, every=1)
    assert outcome.reason == f"the guest crashed: {OOPS.strip()}"
    assert seconds >= 4 and any("lab-run-finished" in line for line in outcome.tail)


def test_an_unattended_boot_takes_its_disks_away_when_it_ends(tmp_path):
    (tmp_path / "out.disks").mkdir()
    (tmp_path / "out.disks" / "disk-data.img").write_bytes(b"\0" * 4096)
    outcome, _ = watch(tmp_path, ["lab: done"], timeout=30, then_exit=True)
    assert not (tmp_path / "out.disks").exists()


def test_an_oops_a_test_provokes_on_purpose_is_not_a_crash(tmp_path):
    outcome, _ = watch(tmp_path, [
        "[    8.800000] lab-expect-oops: begin",
        "[    8.884126] Unable to handle kernel access to user memory outside uaccess routines",
        "[    8.900000] Internal error: Oops: 0000000096000005 [#1] SMP",
        "[    9.000000] lab-expect-oops: end"], timeout=60, then_exit=True)
    assert outcome.ok, outcome.reason


def test_an_oops_outside_the_markers_is_still_a_crash(tmp_path):
    outcome, _ = watch(tmp_path, [
        "[    8.800000] lab-expect-oops: begin",
        "[    9.000000] lab-expect-oops: end",
        "[    9.100000] Internal error: Oops: 0000000096000005 [#2] SMP"],
        timeout=60, then_exit=True)
    assert outcome.reason == ("the guest crashed: [    9.100000] Internal error: Oops: "
                              "0000000096000005 [#2] SMP")
