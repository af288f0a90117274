"""Every command that README.md and docs/*.md show a reader is run by a
test, or is listed here as not run, with the reason. A new command in the
documentation fails this test until someone says which test runs it: a
documented command that fails is the first defect a student or an
instructor meets."""
import re

from conftest import REPO

DOCUMENTS = ["README.md", "docs/design.md", "docs/instructors.md", "book/README.md"]

# The documented command, as written, and the test that runs it: a test
# function (file::name) or a tier of `make check` (vm/lab/check.py::name).
RUN_BY = {
    "make boot": "vm/tests/test_interactive.py::test_make_boot_passes_ctrl_c_to_the_guest_shell",
    "make check": ".ci/run",
    "make debug": "vm/tests/test_interactive.py::test_ctrl_c_in_make_debug_stops_the_guest_in_gdb_and_keeps_it",
    "make stage STAGE=01": "vm/tests/test_stages_and_tree.py::test_stage_branch_is_previous_stage_plus_series",
    "make test": "vm/lab/check.py::guest_tier",
    "make exercise STAGE=01": "vm/lab/check.py::guest_tier",
    "make grade": "vm/lab/check.py::guest_tier",
    "make watch": "vm/tests/test_watch.py::test_make_watch_grades_each_saved_change_and_stops_on_ctrl_c",
    "make hint": "vm/tests/test_hints.py::test_make_hint_climbs_for_the_failures_of_the_last_results",
    "make book": "vm/tests/test_book.py::test_real_book_builds_all_formats_without_warnings",
    "make handout STAGES=01,02": "vm/lab/check.py::handout_tier",
    "make handout STAGES=02 OUT=/tmp/ho": "vm/lab/check.py::handout_shapes_tier",
    "make submission STAGE=01":
        "vm/tests/test_instructor_kit.py::test_a_submission_carries_the_students_commits_onto_the_exercise_commit",
    "make submission STAGE=01 FORMAT=patch":
        "vm/tests/test_instructor_kit.py::test_a_submission_carries_the_students_commits_onto_the_exercise_commit",
    "make grade-class STAGE=01 SUBMISSIONS=inbox/ [JOBS=N] [OUT=dir]":
        "vm/tests/test_class_fixtures.py::test_every_submission_gets_a_verdict",
}

NOT_RUN = {}


def documented_commands():
    """{command: document} for every `make` line of a fenced code block."""
    found = {}
    for name in DOCUMENTS:
        inside = False
        for line in (REPO / name).read_text().splitlines():
            if line.startswith("```"):
                inside = not inside
                continue
            command = line.split("#", 1)[0].strip()
            if inside and command.startswith("make "):
                found[command] = name
    return found


def test_every_documented_command_is_run_by_a_test_or_says_why_not():
    found = documented_commands()
    assert found, "no documented commands found: has the documentation moved?"
    unaccounted = sorted(set(found) - set(RUN_BY) - set(NOT_RUN))
    assert not unaccounted, ("documented, but no test runs it and NOT_RUN does not say why: "
                             + "; ".join(f"{c} ({found[c]})" for c in unaccounted))
    stale = sorted((set(RUN_BY) | set(NOT_RUN)) - set(found))
    assert not stale, f"listed here, but no longer documented: {stale}"


def test_the_tests_named_exist():
    for command, where in RUN_BY.items():
        path, _, name = where.partition("::")
        text = (REPO / path).read_text()
        if name:
            assert re.search(rf"^def {re.escape(name)}\(", text, re.M), \
                f"{command}: {where} does not exist"
        else:
            assert command in text or "make check" in text, f"{command}: {path} does not run it"
