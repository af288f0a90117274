"""Fixtures for the machinery's own tests: a tiny stand-in for the kernel
tree and stages directory, so that branch handling, patch failures and the
refusal to touch uncommitted work are tested on real git, in seconds."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "vm"))

from lab import exercises, settings, stages  # noqa: E402
from lab.tree import KernelTree  # noqa: E402

IDENT = dict(settings.LAB_IDENT, GIT_AUTHOR_DATE="2016-12-14T00:00:00Z")


def git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                          text=True, env=dict(os.environ, **IDENT)).stdout


def pytest_configure(config):
    config.addinivalue_line("markers", "kernel: needs the stage kernel built by the guest tier")
    config.addinivalue_line("markers", "prebuild: make check also runs it in the background, "
                            "niced, during the guest tier, for what it builds")


@pytest.fixture
def fake_lab(tmp_path, monkeypatch):
    """A lab whose 'kernel tree' is one C file, with stages 00-base and
    01-demo; 01-demo's one patch edits that file."""
    tree = tmp_path / "linux"
    tree.mkdir()
    (tree / "lru.c").write_text("int rotate(void)\n{\n\treturn 0;\n}\n")
    git(tree, "init", "-q", "-b", "import")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "base")
    git(tree, "tag", "-a", "base", "-m", "linux-source-6.1 6.1.192-3")
    git(tree, "checkout", "-q", "--detach", "base")

    (tree / "lru.c").write_text("int rotate(void)\n{\n\treturn 1;\n}\n")
    git(tree, "commit", "-q", "-am", "lru: rotate returns one\n\nBecause.\n\nSigned-off-by: A <a@b>")
    patches = tmp_path / "kernel-patches"
    (patches / "01-demo").mkdir(parents=True)
    git(tree, "format-patch", "-q", "-o", str(patches / "01-demo"), "base..HEAD")
    names = sorted(p.name for p in (patches / "01-demo").glob("*.patch"))
    (patches / "01-demo" / "series").write_text("\n".join(names) + "\n")
    git(tree, "checkout", "-q", "--detach", "base")
    git(tree, "branch", "-D", "import")

    stages = tmp_path / "stages"
    for slug, title in (("00-base", "Base"), ("01-demo", "Demo")):
        (stages / slug).mkdir(parents=True)
        (stages / slug / "stage.toml").write_text(f'title = "{title}"\n')
    monkeypatch.setattr(settings, "KERNEL_TREE", tree)
    monkeypatch.setattr(settings, "STAGES_DIR", stages)
    monkeypatch.setattr(settings, "PATCHES_DIR", patches)
    monkeypatch.setattr(settings, "BUILD", tmp_path / "build")
    return tmp_path


@pytest.fixture
def built_obj():
    """The object directory of a teaching kernel built by make check's guest tier."""
    path = Path(os.environ.get("LAB_TEST_OBJ", "/nonexistent"))
    if not (path / "vmlinux").exists():
        pytest.fail("LAB_TEST_OBJ must name a built kernel's object dir "
                    "(make check sets it after the guest tier)")
    return path


SOLVED = "int rotate(void)\n{\n\treturn 1;\n}\n"


@pytest.fixture
def kit_lab(fake_lab, monkeypatch):
    """The fake lab with one exercise: rotate()'s body in lru.c."""
    (fake_lab / "exercises" / "01-demo").mkdir(parents=True)
    (fake_lab / "exercises" / "01-demo" / "exercises.toml").write_text(
        'required = []\n[[exercise]]\nname = "rotate"\nfile = "lru.c"\nfunction = "rotate"\n'
        'summary = "return one"\nhint = "it is one"\nstub = "return 0;"\n'
        'tests = ["demo/rotate"]\n')
    (fake_lab / "stages" / "01-demo" / "stage.toml").write_text(
        'title = "Demo"\n[[test]]\nname = "demo"\nrun = "true"\n')
    monkeypatch.setattr(settings, "EXERCISES_DIR", fake_lab / "exercises")
    monkeypatch.setattr(settings, "SOLUTIONS_DIR", fake_lab / "solutions")
    stage = stages.resolve("01")
    exercise_set = exercises.load(stage)
    tree = KernelTree()
    (fake_lab / "solutions" / "01-demo").mkdir(parents=True)
    exercise_set.solution_patch(exercise_set.exercises[0]).write_text(
        exercises.solution_text(tree, exercise_set, exercise_set.exercises[0]))
    exercises.make_exercise_branch(tree, exercise_set)
    return fake_lab


def student_commit(fake_lab, content, extra=None):
    """A student's tree on the exercise branch with one commit."""
    tree = fake_lab / "linux"
    git(tree, "checkout", "-q", "exercise/01-demo")
    (tree / "lru.c").write_text(content)
    if extra:
        (tree / extra).write_text("something\n")
        git(tree, "add", extra)
    git(tree, "commit", "-q", "-am", "my rotate")
    return git(tree, "rev-parse", "HEAD").strip()
