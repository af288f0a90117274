"""Class grading against real kernels: submissions made from a stage's
solution that panic, hang, print without end and fill the results share
each become a failed grade with the reason, the run goes on, and the same
submission graded twice (once after the misbehaving ones, in the same
slot) gets the same result. `make check` runs this after its guest tier."""
import os

import pytest

from lab import classgrade, fixtures, qemu, settings

pytestmark = pytest.mark.kernel

# A graded boot of stage 01 takes well under a minute; the hang is stopped here.
BOOT_TIMEOUT = 90


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    stage = fixtures.class_stage()
    directory = tmp_path_factory.mktemp("class")
    expected = fixtures.write_class(directory, stage, solutions=2)
    out = settings.BUILD / "check" / "class" / stage.slug
    run = classgrade.ClassRun(stage, directory, out, jobs=1, boot_timeout=BOOT_TIMEOUT,
                              regrade=True)
    verdicts = {v.student: v for v in classgrade.grade_class(run)}
    return run, expected, verdicts


def test_every_submission_gets_a_verdict(graded):
    run, expected, verdicts = graded
    assert sorted(verdicts) == sorted(expected)
    assert (run.out / "grades.csv").exists() and (run.out / "report.html").exists()


@pytest.mark.parametrize("kind", sorted(fixtures.UNSAFE))
def test_an_unsafe_submission_is_a_failed_grade_with_its_reason(graded, kind):
    run, expected, verdicts = graded
    verdict = verdicts[kind]
    assert verdict.passed == 0, verdict
    assert expected[kind] in verdict.reason, verdict.reason
    assert verdict.console_tail or kind == "hang"
    log = run.out / kind / "run" / "console.log"
    assert log.stat().st_size <= qemu.CONSOLE_LIMIT + 65536
    left = sum(f.stat().st_blocks * 512 for f in (run.out / kind).rglob("*") if f.is_file())
    assert left < 32 * 2**20, f"{kind} left {left >> 20} MiB on the grading machine"


def test_the_solution_passes_and_grading_it_twice_gives_the_same_result(graded):
    _, _, verdicts = graded
    first, second = verdicts["solved-001"], verdicts["solved-002"]
    assert first.status == "graded" and first.passed == len(first.rows), first
    assert first.rows == second.rows


def test_a_rerun_grades_nothing_and_reports_the_same(graded):
    run, _, verdicts = graded
    again = classgrade.ClassRun(run.stage, run.submissions_dir, run.out, jobs=1,
                                boot_timeout=BOOT_TIMEOUT)
    before = {s: os.stat(run.out / s / "grade.json").st_mtime_ns for s in verdicts}
    rerun = {v.student: v for v in classgrade.grade_class(again)}
    assert {s: os.stat(run.out / s / "grade.json").st_mtime_ns for s in verdicts} == before
    assert {s: v.rows for s, v in rerun.items()} == {s: v.rows for s, v in verdicts.items()}
