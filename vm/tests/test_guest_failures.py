"""A guest that panics or hangs fails within the timeout, with the console
tail; it never leaves the lab waiting. These boot a real teaching kernel,
so `make check` runs them after the guest tier has built one."""
import time

import pytest

from lab import initramfs, qemu

pytestmark = pytest.mark.kernel


def boot(obj, initrd, tmp_path, timeout, extra=()):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return qemu.run_watched(qemu.Boot(obj / "vmlinux", initrd, "test", out,
                                      extra_cmdline=list(extra)), timeout, out / "console.log")


def test_a_panicking_guest_fails_fast_with_the_console_tail(built_obj, tmp_path):
    initrd = initramfs.one_line_archive(tmp_path / "bare", "/bin/busybox reboot -f")
    begin = time.monotonic()
    outcome = boot(built_obj, initrd, tmp_path, 60, extra=["rdinit=/no/such/init"])
    assert not outcome.ok
    assert "Kernel panic" in outcome.reason
    assert time.monotonic() - begin < 60
    assert any("Kernel panic" in line for line in outcome.tail)
    assert "last console lines" in outcome.explain()


def test_a_hanging_guest_is_stopped_at_the_timeout(built_obj, tmp_path):
    initrd = initramfs.one_line_archive(tmp_path / "bare",
                                        "echo lab-hang-marker; /bin/busybox sleep 600")
    begin = time.monotonic()
    outcome = boot(built_obj, initrd, tmp_path, 10)
    elapsed = time.monotonic() - begin
    assert not outcome.ok
    assert "did not finish within 10 s" in outcome.reason
    assert 10 <= elapsed < 25
    assert any("lab-hang-marker" in line for line in outcome.tail)


def test_a_guest_that_powers_off_is_a_clean_finish(built_obj, tmp_path):
    initrd = initramfs.one_line_archive(tmp_path / "bare", "/bin/busybox reboot -f")
    outcome = boot(built_obj, initrd, tmp_path, 60)
    assert outcome.ok, outcome.explain()
