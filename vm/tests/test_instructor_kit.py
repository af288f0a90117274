"""The instructor kit on a fake lab: submissions in and out, a class graded
by stand-in graders that pass, fail, hang and flood, resuming, the report,
the leak check, and the CI files. Real kernels are in test_class_fixtures.py."""
import csv
import re
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, SOLVED, git, student_commit
from lab import classgrade, exercises, handout, stages, submission
from lab.errors import LabError
from lab.tree import KernelTree

# -- submissions -------------------------------------------------------------------

@pytest.mark.parametrize("form", ["bundle", "patch"])
def test_a_submission_carries_the_students_commits_onto_the_exercise_commit(kit_lab, form):
    student_commit(kit_lab, SOLVED, extra="notes.txt")
    stage = stages.resolve("01")
    path = submission.make(stage, out=kit_lab / f"alice.{form}", form=form)
    # The grader's side: a fresh clone that has only the exercise commit.
    grader = kit_lab / "grader"
    git(kit_lab, "clone", "-q", "--no-checkout", str(kit_lab / "linux"), str(grader))
    tree = KernelTree(grader)
    git(grader, "branch", "-q", "-f", "stage/01-demo", "origin/stage/01-demo")
    git(grader, "branch", "-q", "-f", "stage/00-base", "origin/stage/00-base")
    exercise_set = exercises.load(stage)
    commit = submission.import_commit(tree, exercise_set, submission.Submission("alice", path))
    assert tree.git("show", f"{commit}:lru.c").stdout == SOLVED
    assert submission.ignored_changes(tree, exercise_set, commit) == ["notes.txt"]


def test_make_submission_refuses_uncommitted_work_and_an_empty_branch(kit_lab):
    tree = kit_lab / "linux"
    stage = stages.resolve("01")
    git(tree, "checkout", "-q", "exercise/01-demo")
    with pytest.raises(LabError, match="nothing to submit"):
        submission.make(stage)
    (tree / "lru.c").write_text(SOLVED)
    with pytest.raises(LabError, match="uncommitted changes"):
        submission.make(stage)
    assert (tree / "lru.c").read_text() == SOLVED  # the work is still there


def test_bad_submissions_are_refused_with_the_reason(kit_lab, tmp_path):
    tree = KernelTree()
    exercise_set = exercises.load(stages.resolve("01"))

    def refused(name, content):
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(submission.BadSubmission) as error:
            submission.import_commit(tree, exercise_set, submission.Submission("x", path))
        return str(error.value)

    assert "malformed bundle" in refused("a.bundle", b"# v2 git bundle\ngarbage\n")
    assert "neither a git bundle nor a patch" in refused("b.patch", b"my homework\n")
    assert "does not apply" in refused("c.patch", b"diff --git a/lru.c b/lru.c\n--- a/lru.c\n"
                                       b"+++ b/lru.c\n@@ -1,1 +1,1 @@\n-no such line\n+x\n")
    # A bundle of a commit that does not start from the exercise commit.
    git(kit_lab / "linux", "checkout", "-q", "-b", "elsewhere", "stage/01-demo")
    git(kit_lab / "linux", "commit", "-q", "--allow-empty", "-m", "off the stage branch")
    git(kit_lab / "linux", "bundle", "create", "-q", str(tmp_path / "d.bundle"),
        "stage/01-demo..elsewhere")
    reason = refused("d.bundle", (tmp_path / "d.bundle").read_bytes())
    assert "another exercise commit" in reason or "does not build on" in reason


def test_the_submissions_directory_is_checked(kit_lab, tmp_path):
    with pytest.raises(LabError, match="no submissions directory"):
        submission.find(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LabError, match="holds no submissions"):
        submission.find(tmp_path / "empty")
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "bob.bundle").write_text("x")
    (tmp_path / "two" / "bob.patch").write_text("x")
    with pytest.raises(LabError, match="two submissions for bob"):
        submission.find(tmp_path / "two")


# -- grading a class, with stand-in graders ----------------------------------------------

# What each stand-in student's grader does: the real child is a kernel build
# and a boot; these do what such a child can do to the parent.
STAND_IN = r'''
import json, pathlib, sys, time
out = pathlib.Path(sys.argv[1]); student = out.name
with open(out.parent / "calls", "a") as calls: calls.write(student + "\n")
if student.startswith("hang"): time.sleep(600)
if student.startswith("flood"):
    while True: print("x" * 1000, flush=True)
if student.startswith("crash"): sys.exit(3)
ok = not student.startswith("wrong")
out.joinpath("result.json").write_text(json.dumps(
    {"status": "graded", "reason": "", "tail": "" if ok else "<script>x</script> rotate failed",
     "rows": [["rotate", ok, "" if ok else "demo/rotate failed"]]}))
'''


def stand_in(stage, commit, slot, out, boot_timeout):
    return [sys.executable, "-c", STAND_IN, str(out)]


def class_dir(kit_lab, students):
    student_commit(kit_lab, SOLVED)
    stage = stages.resolve("01")
    directory = kit_lab / "class"
    directory.mkdir(exist_ok=True)
    for name in students:
        submission.make(stage, out=directory / f"{name}.bundle")
    return directory


def test_a_class_run_turns_every_misbehaving_grader_into_a_failed_grade(kit_lab, monkeypatch):
    monkeypatch.setattr(classgrade, "BUILD_ALLOWANCE", 3)
    monkeypatch.setattr(classgrade, "LOG_LIMIT", 2**20)
    directory = class_dir(kit_lab, ["alice", "crash", "flood", "hang", "wrong"])
    (directory / "broken.bundle").write_bytes(b"# v2 git bundle\nnonsense\n")
    out = kit_lab / "results"
    run = classgrade.ClassRun(stages.resolve("01"), directory, out, jobs=2, boot_timeout=1)
    verdicts = {v.student: v for v in classgrade.grade_class(run, stand_in)}
    assert verdicts["alice"].status == "graded" and verdicts["alice"].passed == 1
    assert verdicts["wrong"].status == "graded" and verdicts["wrong"].passed == 0
    assert "malformed bundle" in verdicts["broken"].reason
    assert "exited with status 3" in verdicts["crash"].reason
    assert "longer than 4 s" in verdicts["hang"].reason
    assert "printed more than 1 MiB" in verdicts["flood"].reason
    assert (out / "flood" / "grader.log").stat().st_size < 8 * 2**20
    for name in ("broken", "crash", "flood", "hang"):
        assert verdicts[name].status == "failed" and verdicts[name].passed == 0

    rows = list(csv.DictReader(open(out / "grades.csv")))
    assert [r["student"] for r in rows] == ["alice", "broken", "crash", "flood", "hang", "wrong"]
    assert [r["rotate"] for r in rows] == ["PASS", "FAIL", "FAIL", "FAIL", "FAIL", "FAIL"]
    page = (out / "report.html").read_text()
    assert "<tfoot><tr><th>pass rate</th><td></td><td>17%</td>" in page
    assert "&lt;script&gt;x&lt;/script&gt; rotate failed" in page and "<script>" not in page


def test_a_rerun_grades_only_what_changed(kit_lab):
    directory = class_dir(kit_lab, ["alice", "bob"])
    out = kit_lab / "results"
    run = classgrade.ClassRun(stages.resolve("01"), directory, out, jobs=1)
    first = classgrade.grade_class(run, stand_in)
    assert sorted((out / "calls").read_text().split()) == ["alice", "bob"]
    second = classgrade.grade_class(run, stand_in)
    assert sorted((out / "calls").read_text().split()) == ["alice", "bob"]
    assert [v.rows for v in first] == [v.rows for v in second]
    # bob sends a new version: only bob is graded again.
    student_commit(kit_lab, "int rotate(void)\n{\n\treturn 2 - 1;\n}\n")
    submission.make(stages.resolve("01"), out=directory / "bob.bundle")
    classgrade.grade_class(run, stand_in)
    assert sorted((out / "calls").read_text().split()) == ["alice", "bob", "bob"]


def test_a_grade_interrupted_before_its_verdict_is_graded_again(kit_lab):
    directory = class_dir(kit_lab, ["alice"])
    out = kit_lab / "results"
    run = classgrade.ClassRun(stages.resolve("01"), directory, out, jobs=1)
    classgrade.grade_class(run, stand_in)
    (out / "alice" / "grade.json").unlink()   # what a kill before the end leaves
    classgrade.grade_class(run, stand_in)
    assert (out / "calls").read_text().split() == ["alice", "alice"]


def test_grades_at_once_are_bounded_by_cores_and_memory(monkeypatch):
    monkeypatch.setattr(classgrade.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(classgrade, "memory_available", lambda: 5 * 2**30)
    assert classgrade.parallel_grades(16) == 2
    assert classgrade.parallel_grades(1) == 1
    monkeypatch.setattr(classgrade, "memory_available", lambda: 64 * 2**30)
    assert classgrade.parallel_grades(16) == 8
    assert classgrade.parallel_grades(None) == 8


def test_an_unknown_stage_or_one_without_exercises_is_refused(kit_lab):
    with pytest.raises(LabError, match="unknown stage"):
        handout.chosen_stages("42")
    with pytest.raises(LabError, match="has no exercises"):
        handout.chosen_stages("00")
    run = classgrade.ClassRun(stages.resolve("00"), kit_lab, kit_lab / "out")
    with pytest.raises(LabError, match="has no exercises"):
        classgrade.grade_class(run, stand_in)


# -- the leak check --------------------------------------------------------------------

def test_the_leak_check_finds_a_solution_hunk_anywhere_a_student_reads_it(kit_lab, tmp_path):
    stage = stages.resolve("01")
    hunks = handout.solution_hunks(stage)
    assert hunks and hunks[0][3] == ["\treturn 1;"]
    root = tmp_path / "handout"
    (root / "book").mkdir(parents=True)
    (root / "README.md").write_text("Nothing to see.\n")
    assert handout.find_leaks(root, [stage]) == []
    # Set in HTML markup, the way the book highlights code.
    (root / "book" / "ch.html").write_text('<pre><span class="kw">return</span> 1;</pre>')
    leaks = handout.find_leaks(root, [stage])
    assert [(l.where, l.line) for l in leaks] == [("book/ch.html", "return 1;")]


@pytest.fixture
def empty_handout(kit_lab, tmp_path):
    """Stage 01 of the fake lab, and an empty hand-out directory to plant in."""
    root = tmp_path / "handout"
    root.mkdir()
    return stages.resolve("01"), root


def test_a_kernel_patch_leaks_what_it_adds_not_its_context(kit_lab, empty_handout):
    stage, root = empty_handout
    (root / "0001-x.patch").write_text("@@ -1,3 +1,3 @@\n \treturn 1;\n-a\n+b\n")
    assert handout.find_leaks(root, [stage]) == []
    (root / "0001-x.patch").write_text("@@ -1,3 +1,3 @@\n-a\n+\treturn 1;\n")
    assert len(handout.find_leaks(root, [stage])) == 1


def test_lines_the_exercise_branch_shows_anyway_are_not_secret(kit_lab, empty_handout):
    stage, root = empty_handout
    # The function's signature is in the hand-out's own kernel tree.
    (root / "notes.txt").write_text("int rotate(void)\n")
    assert handout.find_leaks(root, [stage]) == []
    assert handout.unverifiable_hunks([stage]) == []


def test_significant_lines_skip_braces_and_keep_code():
    assert handout.significant(["}", "\t{", "", "\tbreak;", "\treturn 1;", "x = y;", "i++;"]) == \
        ["break;", "return 1;"]


# -- the CI files ------------------------------------------------------------------------

def run_local_command():
    text = (REPO / "vm" / "ci" / "run-local.sh").read_text()
    return re.search(r"sh -c '([^']+)'", text).group(1)


def test_the_github_workflow_grades_with_the_local_command():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "grade.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads `on` as true
    assert "push" in triggers and "workflow_dispatch" in triggers
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    steps = job["steps"]
    assert all(("uses" in s) != ("run" in s) for s in steps)
    runs = [s["run"] for s in steps if "run" in s]
    assert len(runs) == 1 and f"sh -c '{run_local_command()}'" in runs[0]
    assert "--device /dev/kvm" in runs[0] and "debian:bookworm" in runs[0]


def test_the_gitlab_job_grades_with_the_local_command():
    config = yaml.safe_load((REPO / ".gitlab-ci.yml").read_text())
    job = config["grade"]
    assert job["image"] == "debian:bookworm"
    assert " && ".join(job["before_script"] + job["script"]) == run_local_command()
    assert "grade-*.txt" in job["artifacts"]["paths"]


def test_the_ci_scripts_are_valid_shell():
    for script in ("grade-fork.sh", "run-local.sh"):
        subprocess.run(["sh", "-n", str(REPO / "vm" / "ci" / script)], check=True)
