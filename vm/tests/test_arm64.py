"""Another architecture is data: a stage that declares `arch = "arm64"`
gets an arm64 tinyconfig kernel, cross-built by the lab's own kbuild
(ARCH=arm64, Debian's aarch64-linux-gnu-gcc), a guest root with Debian's
arm64 busybox and the stage's programs, built by Debian's cross gcc, and a
boot on qemu-system-aarch64's virt machine under TCG, through the same
workflow as every x86_64 stage. This boots it to the lab's /init and runs
a command in its busybox shell, and the stage's own program."""
import pytest

from lab import settings, stages, workflow
from lab.tree import KernelTree

pytestmark = pytest.mark.kernel


@pytest.fixture
def arm64_stage(tmp_path, monkeypatch):
    declared = tmp_path / "stages" / "00-arm64"
    declared.mkdir(parents=True)
    # A program that can only say what it says if it was built for the
    # guest: the compiler's own idea of the target, from a thread.
    (declared / "where.c").write_text(
        '#include <pthread.h>\n#include <stdio.h>\n'
        'static void *say(void *arg) {\n'
        '#ifdef __aarch64__\n\tputs("built for aarch64");\n#endif\n\treturn arg;\n}\n'
        'int main(void) { pthread_t t; pthread_create(&t, 0, say, 0); '
        'return pthread_join(t, 0); }\n')
    (declared / "stage.toml").write_text(
        'title = "An arm64 guest"\ntimeout = 300\n[machine]\narch = "arm64"\n'
        '[[test]]\nname = "uname"\nrun = "true"\n'
        f'[[program]]\npath = "/usr/bin/where"\nkind = "c"\nsource = "lab:{declared}/where.c"\n')
    # What this proves is the machinery: the arch table, the cross build,
    # the guest root and the boot. Debug info and KUnit are most of the
    # time of a cold arm64 build, and nothing here reads them.
    (declared / "config").write_text(
        "# CONFIG_DEBUG_INFO_DWARF5 is not set\nCONFIG_DEBUG_INFO_NONE=y\n"
        "# CONFIG_GDB_SCRIPTS is not set\n"
        "# CONFIG_KUNIT is not set\n# CONFIG_KUNIT_DEBUGFS is not set\n")
    monkeypatch.setattr(settings, "STAGES_DIR", tmp_path / "stages")
    return stages.resolve("00")


def arm64_work(stage):
    """The arm64 kernel is built from the base commit in a workshop of its
    own, so that what make check builds for it in the background, while
    its guest tier leaves the cores idle, is there when this runs."""
    return workflow.Work(KernelTree().reset_workshop("base", number=3), stage)


@pytest.mark.prebuild
def test_an_arm64_kernel_is_cross_built_into_an_object_dir_of_its_own(arm64_stage):
    work = arm64_work(arm64_stage)
    assert work.obj.name == ".kbuild-arm64"
    workflow.build_kernel(work, quiet=True)
    # An arm64 Image carries the magic "ARM\x64" at offset 56.
    assert work.kernel.name == "Image" and work.kernel.read_bytes()[56:60] == b"ARM\x64"


def test_an_arm64_stage_boots_to_its_shell(arm64_stage):
    work = arm64_work(arm64_stage)
    status = workflow.run_command(
        work, "echo \"$(uname -m) $(busybox | head -1 | cut -d' ' -f1-2)\" > /lab/out/seen; "
        "where > /lab/out/where")
    assert status == 0
    assert (workflow.results_dir(work) / "run" / "where").read_text() == "built for aarch64\n"
    seen = (workflow.results_dir(work) / "run" / "seen").read_text().split()
    assert seen[0] == "aarch64"
    assert seen[1:] == ["BusyBox", seen[2]] and seen[2].startswith("v1.")
    console = (workflow.results_dir(work) / "run" / "console.log").read_text()
    assert "lab: stage 00-arm64" in console and "mode run" in console
