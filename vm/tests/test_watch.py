"""make watch as a student uses it, in a terminal: it grades the tree, a
saved solution is graded again without a word from the student, and
Ctrl-C ends it. And Ctrl-C in an unattended boot ends the guest too.
These use the second workshop, from the stage the guest tier built."""
import os
import subprocess
import time
from pathlib import Path

import pytest

from lab import exercises
from lab.tree import KernelTree
from test_interactive import CTRL_C, Terminal, make, qemu_running

pytestmark = pytest.mark.kernel


@pytest.fixture
def tested_stage():
    tested = KernelTree(Path(os.environ.get("LAB_TEST_TREE", "/nonexistent")))
    if not tested.exists():
        pytest.fail("LAB_TEST_TREE must name the kernel tree make check built in")
    return tested.current_stage()


def test_make_watch_grades_each_saved_change_and_stops_on_ctrl_c(tested_stage):
    exercise_set = exercises.load(tested_stage)
    if not exercise_set:
        pytest.skip(f"stage {tested_stage.slug} has no exercises to watch")
    tree = KernelTree().reset_workshop(exercises.exercise_commit(KernelTree(), exercise_set),
                                       number=2)
    first = exercise_set.exercises[0]
    term = Terminal(make("watch", tree.path, f"STAGE={tested_stage.number}"))
    try:
        graded = term.expect(r"waiting for a change", seconds=900)
        assert f"FAIL  {first.name}".encode() in term.seen  # the skeleton
        failed_at = term.seen.rindex(b"FAIL")
        assert b"hint 1/" in term.seen[failed_at:] or b"no hint is keyed" in term.seen[failed_at:]
        # The student saves the solutions (one alone may not pass: the
        # other hollow functions can stop the tests that grade it).
        for exercise in exercise_set.exercises:
            subprocess.run(["git", "-C", str(tree.path), "apply",
                            str(exercise_set.solution_patch(exercise))], check=True)
        term.expect(rf"PASS  {first.name}\b", seconds=900, since=graded)
        term.expect(r"waiting for a change", seconds=60, since=graded)
        term.send(CTRL_C)
        term.expect(r"watch stopped", seconds=30)
        term.wait(30)  # make itself, interrupted too, ends by the signal
        assert not qemu_running(str(tree.path))
    finally:
        term.close()


def guest_running_a_long_command(stage):
    """make run of a command that outlasts the test, in a terminal, once
    the guest runs it: the terminal and the tree whose QEMU to look for."""
    tree = KernelTree().reset_workshop(stage.branch, number=2)
    term = Terminal(make("run", tree.path, f"STAGE={stage.number}",
                         "CMD=echo lab-run-started; sleep 600"))
    try:
        term.expect(r"lab-run-started", seconds=600)
        assert qemu_running(str(tree.path))
    except BaseException:
        term.close()
        raise
    return term, tree


def test_ctrl_c_in_make_run_ends_the_guest_with_the_lab(tested_stage):
    term, tree = guest_running_a_long_command(tested_stage)
    try:
        term.send(CTRL_C)
        assert term.wait(30) != 0
        assert not qemu_running(str(tree.path)), "QEMU outlived the lab"
    finally:
        term.close()


def test_a_killed_lab_takes_its_guest_with_it(tested_stage):
    """No cleanup runs in a lab killed outright (SIGKILL, or a closed
    terminal's SIGHUP): the kernel ends its guest."""
    term, tree = guest_running_a_long_command(tested_stage)
    term.close()  # SIGKILL to make and the lab
    deadline = time.monotonic() + 10
    while qemu_running(str(tree.path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not qemu_running(str(tree.path)), "QEMU outlived a killed lab"
