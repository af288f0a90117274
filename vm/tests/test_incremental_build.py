"""What a build does for the files changed since the last one: nothing
for a file no kbuild command read, the objects that read it and the
links for a file only objects of vmlinux or of a module read, and
kbuild's whole build for anything else. The object dir here is made of
kbuild's own kinds of records: .cmd files, a thin vmlinux.a,
modules.order and .mod lists."""
import subprocess
import time

import pytest

from conftest import git
from lab import incremental, kbuild, workflow


def record(obj, target, reads):
    path = obj / target
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF")
    text = f"cmd_{target} := gcc -c -o {target} ../{reads[0]}\n"
    text += f"source_{target} := ../{reads[0]}\n\ndeps_{target} := \\\n"
    text += "".join(f"  ../{header} \\\n" for header in reads[1:]) + "\n"
    (path.parent / f".{path.name}.cmd").write_text(text)


@pytest.fixture
def obj(tmp_path):
    """An object dir: two objects of vmlinux (in kernel/bpf and net/core),
    a module, a generated assembler file, and a module an earlier stage
    built that this build's modules.order no longer lists."""
    obj = tmp_path / ".kbuild"
    record(obj, "kernel/bpf/lru.o", ["kernel/bpf/lru.c", "include/linux/lru.h"])
    record(obj, "net/core/rules.o", ["net/core/rules.c", "include/linux/shared.h"])
    record(obj, "samples/leds/blink.o", ["samples/leds/blink.c", "include/linux/shared.h"])
    record(obj, "arch/x86/kernel/asm-offsets.s", ["arch/x86/kernel/asm-offsets.c",
                                                  "include/linux/offsets.h"])
    record(obj, "drivers/old/gone.o", ["drivers/old/gone.c"])
    for archive, members in (("kernel/bpf/built-in.a", ["kernel/bpf/lru.o"]),
                             ("kernel/built-in.a", ["kernel/bpf/built-in.a"]),
                             ("net/built-in.a", ["net/core/rules.o"]),
                             ("built-in.a", ["kernel/built-in.a", "net/built-in.a"]),
                             ("vmlinux.a", ["built-in.a"])):
        subprocess.run(["ar", "cDPrST", archive, *members], cwd=obj, check=True)
    (obj / "modules.order").write_text("samples/leds/blink.ko\n")
    (obj / "samples/leds/blink.mod").write_text("samples/leds/blink.o\n")
    (obj / "drivers/old/gone.mod").write_text("drivers/old/gone.o\n")
    return obj


@pytest.fixture
def tree(tmp_path, obj):
    """A source tree holding every file the tests name."""
    tree = tmp_path / "linux"
    for name in ("tools/testing/selftests/bpf/progs/flow.c", "Documentation/lru.rst",
                 "tools/leds/uledbar.c", "tools/lib/bpf/btf.c", "tools/include/linux/list.h",
                 "kernel/bpf/lru.c", "include/linux/lru.h", "samples/leds/blink.c",
                 "include/linux/shared.h", "kernel/bpf/Makefile", "net/Kconfig",
                 "drivers/Kbuild", "scripts/link-vmlinux.sh", "tools/objtool/check.c",
                 "arch/x86/Makefile.um", "scripts/Makefile.build", "include/linux/offsets.h",
                 "drivers/old/gone.c"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text("")
    return tree


def test_a_file_no_command_read_needs_no_build(obj, tree):
    assert incremental.plan(obj, {"tools/testing/selftests/bpf/progs/flow.c",
                                  "tools/leds/uledbar.c",
                                  "Documentation/lru.rst"}, tree) == (set(), set())
    assert incremental.plan(obj, set(), tree) == (set(), set())


def test_a_source_of_vmlinux_recompiles_its_object_and_relinks(obj, tree):
    assert incremental.plan(obj, {"kernel/bpf/lru.c"}, tree) == ({"kernel/bpf/lru.o"},
                                                           {"kernel/bpf/lru.o"})
    assert incremental.plan(obj, {"include/linux/lru.h"}, tree) == ({"kernel/bpf/lru.o"},
                                                              {"kernel/bpf/lru.o"})


def test_a_source_of_a_module_recompiles_its_object_only(obj, tree):
    assert incremental.plan(obj, {"samples/leds/blink.c"}, tree) == ({"samples/leds/blink.o"}, set())


def test_a_header_read_by_both_recompiles_every_reader(obj, tree):
    objects, builtin = incremental.plan(obj, {"include/linux/shared.h"}, tree)
    assert objects == {"net/core/rules.o", "samples/leds/blink.o"}
    assert builtin == {"net/core/rules.o"}


@pytest.mark.parametrize("changed", [
    "kernel/bpf/Makefile", "net/Kconfig", "drivers/Kbuild", "scripts/link-vmlinux.sh",
    "tools/objtool/check.c", "tools/lib/bpf/btf.c", "tools/include/linux/list.h",
    "arch/x86/Makefile.um", "scripts/Makefile.build",
    "include/linux/offsets.h", "drivers/old/gone.c"])
def test_the_build_system_generated_files_and_stale_objects_need_kbuild(obj, tree, changed):
    assert incremental.plan(obj, {changed, "kernel/bpf/lru.c"}, tree) is None


def test_without_kbuild_records_only_kbuild_will_do(obj, tree):
    (obj / "vmlinux.a").unlink()
    assert incremental.plan(obj, {"Documentation/lru.rst"}, tree) is None


def test_a_deleted_source_needs_kbuild(obj, tree):
    (tree / "kernel/bpf/lru.c").unlink()
    assert incremental.plan(obj, {"kernel/bpf/lru.c"}, tree) is None


def test_the_archives_above_an_object_are_marked_deepest_first(obj):
    assert incremental.archives_above(obj, {"kernel/bpf/lru.o", "net/core/rules.o"}) == [
        obj / "kernel/bpf/built-in.a", obj / "kernel/built-in.a", obj / "net/built-in.a",
        obj / "built-in.a", obj / "vmlinux.a"]


def test_the_changes_between_snapshots(fake_lab):
    tree = fake_lab / "linux"
    (tree / "other.c").write_text("int other;\n")
    git(tree, "add", "other.c")
    git(tree, "commit", "-q", "-m", "other")
    clean = incremental.snapshot(tree)
    (tree / "lru.c").write_text("int rotate(void) { return 7; }\n")
    (tree / "new.c").write_text("int new;\n")
    (tree / "other.c").unlink()
    edited = incremental.snapshot(tree)
    assert edited["files"]["other.c"] == incremental.GONE
    assert incremental.changed_paths(tree, clean, edited) == {"lru.c", "new.c", "other.c"}
    assert incremental.changed_paths(tree, edited, edited) == set()
    git(tree, "checkout", "-q", "--", "lru.c", "other.c")
    (tree / "new.c").unlink()
    assert incremental.changed_paths(tree, edited, incremental.snapshot(tree)) == \
        {"lru.c", "new.c", "other.c"}, "an edit undone is a change from the edit"
    (tree / "lru.c").write_text("int rotate(void) { return 8; }\n")
    git(tree, "commit", "-q", "-am", "eight")
    eight = incremental.snapshot(tree)
    assert incremental.changed_paths(tree, clean, eight) == {"lru.c"}
    git(tree, "checkout", "-q", "--detach", "HEAD~")
    (tree / "lru.c").write_text("int rotate(void) { return 8; }\n")
    assert incremental.changed_paths(tree, eight, incremental.snapshot(tree)) == set(), \
        "the same files on another commit"
    assert incremental.snapshot(tree.parent) is None, "not a git tree"


def test_a_change_to_the_kernel_release_is_a_change(fake_lab):
    tree = fake_lab / "linux"
    git(tree, "checkout", "-q", "--detach", "base")
    tagged = incremental.snapshot(tree)
    assert tagged["release"] == ""
    (tree / "lru.c").write_text("int rotate(void) { return 7; }\n")
    assert incremental.changed_paths(tree, tagged, incremental.snapshot(tree)) is None, \
        "-dirty"
    git(tree, "commit", "-q", "-am", "seven")
    untagged = incremental.snapshot(tree)
    assert untagged["release"] == "+"
    assert incremental.changed_paths(tree, tagged, untagged) is None


@pytest.fixture
def recorded_build(fake_lab, monkeypatch, obj):
    """kbuild.build on the fake lab, its object dir the fabricated one,
    with configure and make replaced by stand-ins that record each make."""
    runs = []
    work = workflow.prepare_stage("01")
    (obj / ".config").write_text("CONFIG_DEMO=y\n")
    monkeypatch.setattr(kbuild, "configure", lambda tree, obj, stage_list: obj / ".config")
    monkeypatch.setattr(kbuild, "base_key", lambda *args: "base")

    def make(tree, obj, *targets, **kwargs):
        runs.append(targets)
        if "vmlinux" in targets:
            (obj / "vmlinux").write_text(f"linked {len(runs)}\n")
        (obj / "lab-modules").mkdir(exist_ok=True)

    monkeypatch.setattr(kbuild, "make", make)

    def build(edit=None):
        if edit:
            path = work.tree.path / edit
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"/* {len(runs)} */\n")
        runs.clear()
        kbuild.build(work.tree.path, obj, work.stage_list, quiet=True)
        return [run for run in runs if run[0] != "modules_install"]

    return build


def test_a_build_makes_only_what_changed_files_need(recorded_build, obj):
    build = recorded_build
    assert build() == [("vmlinux", "modules", "scripts_gdb")], "no record: kbuild's build"
    assert build("tools/testing/selftests/bpf/progs/flow.c") == []
    before = time.time_ns()
    assert build("kernel/bpf/lru.c") == [
        ("kernel/bpf/lru.o",),
        (f"build-dir={obj / incremental.NO_WALK_DIR}", "vmlinux", "modules", "scripts_gdb")]
    archives = incremental.archives_above(obj, {"kernel/bpf/lru.o"})
    times = [a.stat().st_mtime_ns for a in archives]
    assert times == sorted(times) and times[0] >= before, \
        "each archive newer than the object, and no older than the one it holds"
    assert build("samples/leds/blink.c")[0] == ("samples/leds/blink.o",)
    assert build("kernel/bpf/Makefile") == [("vmlinux", "modules", "scripts_gdb")]


def test_a_foreign_build_or_a_new_config_means_kbuild_again(recorded_build, obj):
    build = recorded_build
    build()
    (obj / "vmlinux").write_text("made by hand\n")
    assert build("kernel/bpf/lru.c") == [("vmlinux", "modules", "scripts_gdb")]
    (obj / ".config").write_text("CONFIG_DEMO=m\n")
    assert build("samples/leds/blink.c") == [("vmlinux", "modules", "scripts_gdb")]
