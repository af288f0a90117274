"""A build with nothing changed skips configuring and kbuild, and any
change that goes into the kernel builds again: an edit to a tracked file,
a new file, a commit of other files, a tag that changes the kernel's
release, a changed fragment, or an object dir that something else built
in. An edit undone, or an empty commit, is the same sources again."""
import subprocess

import pytest

from conftest import git
from lab import kbuild, settings, stages, workflow
from lab.tree import KernelTree


@pytest.fixture
def fragment(fake_lab, monkeypatch):
    """The fake lab's base fragment, and an empty one for its architecture."""
    path = fake_lab / "base.config"
    path.write_text("CONFIG_DEMO=y\n")
    monkeypatch.setattr(settings, "BASE_CONFIG", path)
    monkeypatch.setattr(settings, "ARCH_CONFIG_DIR", fake_lab)
    (fake_lab / "x86_64.config").write_text("")
    return path


@pytest.fixture
def counted_build(fake_lab, fragment, monkeypatch):
    """workflow.build_kernel on the fake lab, with kbuild's configure and
    make replaced by stand-ins that count the runs and write products."""
    runs = []

    def configure(tree, obj, stage_list):
        obj.mkdir(parents=True, exist_ok=True)
        (obj / ".config").write_text("CONFIG_DEMO=y\n")

    def make(tree, obj, *targets, **kwargs):
        runs.append(targets)
        (obj / "vmlinux").write_text(f"built {len(runs)}\n")
        (obj / "lab-modules").mkdir(exist_ok=True)

    monkeypatch.setattr(kbuild, "configure", configure)
    monkeypatch.setattr(kbuild, "make", make)
    work = workflow.prepare_stage("01")

    def builds():
        before = len([r for r in runs if "vmlinux" in r])
        workflow.build_kernel(work, quiet=True)
        return len([r for r in runs if "vmlinux" in r]) - before

    return work, builds, fragment


def test_nothing_changed_builds_nothing(counted_build):
    work, builds, _ = counted_build
    assert builds() == 1
    assert builds() == 0
    assert builds() == 0


def test_a_tracked_edit_and_its_undoing_are_seen(counted_build):
    work, builds, _ = counted_build
    builds()
    source = work.tree.path / "lru.c"
    committed = source.read_text()
    source.write_text(committed.replace("return 1;", "return 2;"))
    assert builds() == 1
    assert builds() == 0
    source.write_text(committed)
    assert builds() == 1, "the objects were built from the edit, not from the commit"
    assert builds() == 0


def test_a_new_file_and_its_content_are_seen(counted_build):
    work, builds, _ = counted_build
    builds()
    new = work.tree.path / "extra.c"
    new.write_text("int a;\n")
    assert builds() == 1
    new.write_text("int b;\n")
    assert builds() == 1


def test_a_commit_a_fragment_and_a_foreign_build_are_seen(counted_build):
    work, builds, fragment = counted_build
    builds()
    (work.tree.path / "lru.c").write_text("int rotate(void) { return 3; }\n")
    git(work.tree.path, "commit", "-q", "-am", "student: three")
    assert builds() == 1
    git(work.tree.path, "commit", "-q", "--allow-empty", "-m", "student: nothing")
    assert builds() == 0, "the same files on another commit are the same kernel"
    git(work.tree.path, "tag", "-a", "v-demo", "-m", "an annotated tag, as setlocalversion reads")
    assert builds() == 1, "a tag changes the release setlocalversion gives the kernel"
    fragment.write_text("CONFIG_DEMO=m\n")
    assert builds() == 1
    (work.obj / ".config").write_text("CONFIG_DEMO=n\n")
    assert builds() == 1, "a config changed by hand in the object dir"
    (work.obj / "vmlinux").unlink()
    assert builds() == 1


def test_the_state_of_a_tree_outside_git_is_unknown_and_always_builds(tmp_path):
    assert kbuild.source_state(tmp_path) is None
    assert KernelTree(tmp_path).exists() is False


def test_the_config_is_made_again_only_when_what_kconfig_reads_changed(fake_lab, fragment):
    work = workflow.prepare_stage("01")
    tree = work.tree.path
    (tree / "Kconfig").write_text("config DEMO\n\tbool \"demo\"\n")
    git(tree, "add", "Kconfig")
    git(tree, "commit", "-q", "-m", "Kconfig")
    key = lambda: kbuild.config_key(tree, work.stage_list)  # noqa: E731
    first = key()
    (tree / "lru.c").write_text("int rotate(void) { return 9; }\n")
    assert key() == first, "a C file is not something Kconfig reads"
    (tree / "Kconfig").write_text("config DEMO\n\ttristate \"demo\"\n")
    assert key() != first
    git(tree, "checkout", "-q", "Kconfig")
    assert key() == first
    (tree / "drivers").mkdir()
    (tree / "drivers" / "Kconfig.new").write_text("config NEW\n\tbool\n")
    assert key() != first, "an untracked Kconfig file"
    (tree / "drivers" / "Kconfig.new").unlink()
    fragment.write_text("CONFIG_DEMO=m\n")
    assert key() != first


def test_object_dirs_live_in_their_tree_out_of_git_s_sight(fake_lab, tmp_path):
    tree = KernelTree()
    tree.ensure_base()
    obj = kbuild.object_dir(tree.path)
    assert obj == tree.path.resolve() / ".kbuild"
    assert kbuild.object_dir(tree.path, "arm64").name == ".kbuild-arm64"
    (obj / "kernel").mkdir(parents=True)
    (obj / "kernel" / "built.o").write_text("object\n")
    (tree.path / ".kbuild-arm64").mkdir()
    assert tree.dirty_files() == [], "the object dirs are not the student's changes"
    tree.ensure_base()
    exclude = (tree.path / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/.kbuild\n") == 1, "said once, however often the lab starts"
    work = workflow.prepare_stage("01")
    KernelTree().reset_workshop("stage/01-demo")
    workshop_obj = kbuild.object_dir(KernelTree().workshop().path)
    (workshop_obj / "vmlinux").parent.mkdir(parents=True)
    (workshop_obj / "vmlinux").write_text("kept\n")
    KernelTree().reset_workshop("stage/00-base")
    assert (workshop_obj / "vmlinux").exists(), "resetting the workshop keeps its objects"


def test_the_debug_info_names_one_path_for_every_tree(tmp_path):
    tree = tmp_path / "linux"
    tree.mkdir()
    args = kbuild.debug_prefix_map(tree, kbuild.object_dir(tree))
    assert any(a.startswith("KCFLAGS=") and
               f"-fdebug-prefix-map={tree.resolve()}/.kbuild={kbuild.DEBUG_TREE}/.kbuild" in a
               for a in args)
    assert kbuild.debug_prefix_map(tree, tmp_path / "elsewhere") == [], \
        "an object dir outside the tree compiles with absolute paths: nothing to map"


def test_a_module_alone_is_built_over_the_stages_build_and_the_next_build_runs_kbuild(
        counted_build, monkeypatch, tmp_path):
    """A proof that builds one module keeps vmlinux, and stages the module
    where the guest takes it from; the build's record no longer holds."""
    work, builds, fragment = counted_build
    module = "kernel/demo_test.ko"
    assert workflow.build_module(work, module, quiet=True) is False, "nothing was built yet"
    builds()
    (work.obj / "include" / "config").mkdir(parents=True)
    (work.obj / "include" / "config" / "kernel.release").write_text("6.1.0-demo\n")
    staged = work.obj / "lab-modules" / "lib" / "modules" / "6.1.0-demo" / "kernel" / module
    staged.parent.mkdir(parents=True)
    staged.write_text("the stage's module\n")
    vmlinux = (work.obj / "vmlinux").read_text()
    source = tmp_path / "demo.c"
    source.write_text("int demo_variant = 7;\n")
    made = []

    def make(tree, obj, *targets, **kwargs):
        made.append(targets)
        (obj / module).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["gcc", "-g", "-c", "-o", str(obj / module), str(source)], check=True)

    real_make = kbuild.make
    monkeypatch.setattr(kbuild, "make", make)
    assert workflow.build_module(work, module, quiet=True) is True
    assert made == [(module,)]
    assert (work.obj / "vmlinux").read_text() == vmlinux
    assert b"demo_variant" in staged.read_bytes(), "the new module is staged"
    assert b".debug_info" not in staged.read_bytes(), "stripped, as modules_install strips"
    monkeypatch.setattr(kbuild, "make", real_make)
    assert builds() == 1, "the build is no longer the one its record describes"
    fragment.write_text("CONFIG_DEMO=m\n")
    monkeypatch.setattr(kbuild, "make", make)
    assert workflow.build_module(work, module, quiet=True) is False, \
        "the object dir holds a build of other fragments"
