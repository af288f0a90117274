"""Another architecture is data: a stage that declares `arch = "arm64"`
gets an arm64 tinyconfig kernel, cross-built by the lab's own kbuild
(ARCH=arm64, Debian's aarch64-linux-gnu-gcc), a guest root with Debian's
arm64 busybox, and a boot on qemu-system-aarch64's virt machine under TCG,
through the same workflow as every x86_64 stage. This boots it to the
lab's /init and runs a command in its busybox shell."""
import os

import pytest

from lab import settings, stages, workflow
from lab.tree import KernelTree

pytestmark = pytest.mark.kernel


@pytest.fixture
def arm64_stage(tmp_path, monkeypatch):
    declared = tmp_path / "stages" / "00-arm64"
    declared.mkdir(parents=True)
    (declared / "stage.toml").write_text(
        'title = "An arm64 guest"\ntimeout = 300\n[machine]\narch = "arm64"\n'
        '[[test]]\nname = "uname"\nrun = "true"\n')
    # What this proves is the machinery: the arch table, the cross build,
    # the guest root and the boot. Debug info and KUnit are most of the
    # time of a cold arm64 build, and nothing here reads them.
    (declared / "config").write_text(
        "# CONFIG_DEBUG_INFO_DWARF5 is not set\nCONFIG_DEBUG_INFO_NONE=y\n"
        "# CONFIG_GDB_SCRIPTS is not set\n"
        "# CONFIG_KUNIT is not set\n# CONFIG_KUNIT_DEBUGFS is not set\n")
    monkeypatch.setattr(settings, "STAGES_DIR", tmp_path / "stages")
    return stages.resolve("00")


def test_an_arm64_stage_builds_and_boots_to_its_shell(arm64_stage, built_obj):
    # Any tree of the lab builds for arm64: the workshop, where make check
    # built the x86_64 kernel, gets an object dir of its own for arm64.
    tree = KernelTree(os.environ["LAB_TEST_TREE"])
    work = workflow.Work(tree, arm64_stage)
    assert work.obj.name.endswith("-arm64") and work.obj != built_obj
    status = workflow.run_command(
        work, "echo \"$(uname -m) $(busybox | head -1 | cut -d' ' -f1-2)\" > /lab/out/seen")
    assert status == 0
    seen = (workflow.results_dir(work) / "run" / "seen").read_text().split()
    assert seen[0] == "aarch64"
    assert seen[1:] == ["BusyBox", seen[2]] and seen[2].startswith("v1.")
    console = (workflow.results_dir(work) / "run" / "console.log").read_text()
    assert "lab: stage 00-arm64" in console and "mode run" in console
