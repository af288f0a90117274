"""Hints keyed to failures: which hint a failure gets, the ladder a
student climbs, the record that travels in a submission, and the class
report that shows it. A fake lab; the real stages' hints are checked
against their wrong solutions' real failures by make check's proofs."""
import argparse
import csv

import pytest

from conftest import SOLVED, git, student_commit
from lab import classgrade, exercises, hints, ktap, report, settings, stages, submission
from lab.errors import LabError
from lab.tree import KernelTree

HINTED = '''
[[exercise.hints]]
failing = ["demo/rotate_*_end"]
ladder = ["Look at the ends.", "The last one counts too.", "Chapter 1, 'Ranges'."]

[[exercise.hints]]
console = "NULL pointer dereference"
ladder = ["Something was NULL."]
'''

REPORT = """KTAP version 1
1..1
    KTAP version 1
    1..2
    ok 1 rotate_start
    not ok 2 rotate_last_end
not ok 1 demo
"""


@pytest.fixture
def hinted_lab(kit_lab):
    toml = kit_lab / "exercises" / "01-demo" / "exercises.toml"
    toml.write_text(toml.read_text().replace('tests = ["demo/rotate"]', 'tests = ["demo"]')
                    + HINTED)
    return kit_lab


def rotate():
    return exercises.load(stages.resolve("01")).exercises[0]


def test_a_failure_gets_the_first_hint_it_matches(hinted_lab):
    exercise = rotate()
    by_result = hints.select(exercise, ktap.parse(REPORT), console_text="")
    assert by_result.ladder[0] == "Look at the ends."
    passing = ktap.parse(REPORT.replace("not ok 2", "ok 2").replace("not ok 1 demo", "ok 1 demo"))
    by_console = hints.select(exercise, passing, "BUG: kernel NULL pointer dereference, address")
    assert by_console.ladder == ["Something was NULL."]
    assert hints.select(exercise, passing, "all fine") is None


@pytest.mark.parametrize("entry, complaint", [
    ('failing = ["other_test/*"]\nladder = ["x"]', "not under this exercise's tests"),
    ('failing = ["demo/*"]\nladder = []', "needs at least one hint"),
    ('ladder = ["x"]', "say when it shows"),
    ('console = "("\nladder = ["x"]', "console pattern"),
    ('failing = ["demo"]\nladder = ["x"]\nwhen = "always"', "unknown keys"),
])
def test_a_hint_that_could_never_show_is_refused(hinted_lab, entry, complaint):
    toml = hinted_lab / "exercises" / "01-demo" / "exercises.toml"
    toml.write_text(toml.read_text() + f"\n[[exercise.hints]]\n{entry}\n")
    with pytest.raises(LabError, match=complaint):
        rotate()


def test_the_ladder_is_climbed_one_rung_at_a_time_and_remembered(hinted_lab):
    tree, stage, exercise = KernelTree(), stages.resolve("01"), rotate()
    hint = exercise.hints[0]
    record = hints.Record.of(tree, stage)
    assert record.show(exercise, hint) == 1          # a grade shows the first rung
    assert record.show(exercise, hint) == 1          # and again, without climbing
    assert record.show(exercise, hint, climb=True) == 2
    again = hints.Record.of(tree, stage)             # another command, later
    assert again.show(exercise, hint) == 2
    assert again.show(exercise, hint, climb=True) == 3
    assert again.show(exercise, hint, climb=True) == 3  # the ladder's top stays
    assert hints.Record.of(tree, stage).summary() == {"rotate": 3}
    assert "hint 3/3 for rotate: Chapter 1, 'Ranges'." in hints.format_hint(exercise, hint, 3)


def test_make_hint_climbs_for_the_failures_of_the_last_results(hinted_lab, capsys):
    student_commit(hinted_lab, SOLVED)  # the tree is on exercise/01-demo
    hint = argparse.Namespace(stage=None, tree=None, exercise=None)
    with pytest.raises(LabError, match="`make grade` first"):
        exercises.cmd_hint(hint)
    results = settings.BUILD / "results" / "01-demo"
    results.mkdir(parents=True)
    (results / "ktap.txt").write_text(REPORT)
    assert exercises.cmd_hint(hint) == 0
    assert exercises.cmd_hint(hint) == 0
    said = capsys.readouterr().out
    assert "hint 1/3 for rotate: Look at the ends." in said
    assert "hint 2/3 for rotate: The last one counts too." in said
    with pytest.raises(LabError, match="no exercise named rotat "):
        exercises.cmd_hint(argparse.Namespace(stage=None, tree=None, exercise="rotat"))


@pytest.mark.parametrize("form", ["bundle", "patch"])
def test_the_hints_shown_travel_in_the_submission_to_the_class_report(hinted_lab, form, tmp_path):
    student_commit(hinted_lab, SOLVED)
    stage, exercise = stages.resolve("01"), rotate()
    record = hints.Record.of(KernelTree(), stage)
    record.show(exercise, exercise.hints[0])
    record.show(exercise, exercise.hints[0], climb=True)
    path = submission.make(stage, out=hinted_lab / f"alice.{form}", form=form)
    grader = hinted_lab / "grader"
    git(hinted_lab, "clone", "-q", "--no-checkout", str(hinted_lab / "linux"), str(grader))
    git(grader, "branch", "-q", "-f", "stage/01-demo", "origin/stage/01-demo")
    git(grader, "branch", "-q", "-f", "stage/00-base", "origin/stage/00-base")
    tree, exercise_set = KernelTree(grader), exercises.load(stage)
    each = submission.Submission("alice", path)
    commit = submission.import_commit(tree, exercise_set, each)
    assert tree.git("show", f"{commit}:lru.c").stdout == SOLVED  # the work is intact
    shown = submission.hints_seen(tree, exercise_set, each, commit)
    assert shown == {"rotate": 2}

    verdict = classgrade.Verdict("alice", "graded", rows=[["rotate", True, ""]], hints=shown)
    report.write(tmp_path, stage, ["rotate"], [verdict])
    rows = list(csv.DictReader(open(tmp_path / "grades.csv")))
    assert rows[0]["hints shown"] == "rotate 2"
    assert "rotate 2" in (tmp_path / "report.html").read_text()


def test_a_forged_or_garbled_record_is_read_as_what_it_can_be():
    assert hints.read_seen("Lab-Hints-Seen: {\"a\": 2, \"b\": true, \"c\": \"x\"}\n") == {"a": 2}
    assert hints.read_seen("Lab-Hints-Seen: not json\n") == {}
    assert hints.read_seen("no record at all") == {}
