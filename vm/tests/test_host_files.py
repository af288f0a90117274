"""Host tools and data files go into the guest at their host paths, and a
host tool wins over a busybox applet of the same name: busybox's nsenter
and unshare would run busybox's own ip, which knows no uid selectors."""
import os
import re
import shutil

import pytest

from lab import initramfs


def test_a_host_tool_replaces_the_busybox_applet_at_its_path(tmp_path):
    tool = shutil.which("nsenter")
    if not tool:
        pytest.skip("util-linux's nsenter is not installed")
    real = os.path.realpath(tool)
    applet = tmp_path / real.lstrip("/")
    applet.parent.mkdir(parents=True)
    applet.symlink_to("/bin/busybox")
    initramfs._copy_host_file(tool, tmp_path)
    assert not applet.is_symlink()
    assert applet.read_bytes() == open(real, "rb").read()


def test_a_host_data_file_keeps_its_path(tmp_path):
    initramfs._copy_host_file("/etc/protocols", tmp_path)
    copied = (tmp_path / "etc/protocols").read_text()
    assert re.search(r"^tcp\s+6\s", copied, re.M)
