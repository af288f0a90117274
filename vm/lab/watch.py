"""`make watch`: grade the tree again each time its sources change.

The exercise files are looked at twice a second and the whole tree every
few seconds, as git sees them (kbuild.source_state: what a build would
take). A change is graded once the tree has stayed the same for a
moment, so an editor's half-written save is never built, and what is
built is what is on disk then. Ctrl-C stops it, guest and all.
"""
import time

from . import exercises, kbuild, submission, workflow
from .errors import LabError
from .log import info

EXERCISE_FILES_SECONDS = 0.5
WHOLE_TREE_SECONDS = 5.0
SETTLE_SECONDS = 1.0


class Sources:
    """The tree's sources as git sees them, read cheaply where a student
    most likely edits and fully now and then."""

    def __init__(self, tree, exercise_files):
        self.tree, self.files = tree, exercise_files
        self.whole_read = 0.0
        self.whole = self.edited = None

    def changed(self):
        """Whether the sources differ from when this was last true (or
        from the start)."""
        now = time.monotonic()
        edited = kbuild.source_state(self.tree.path, self.files)
        if edited != self.edited:
            self.edited = edited
            return True
        if now - self.whole_read >= WHOLE_TREE_SECONDS:
            self.whole_read = now
            whole = kbuild.source_state(self.tree.path)
            if whole != self.whole:
                self.whole = whole
                return True
        return False

    def settle(self):
        """Wait until the whole tree reads the same twice, SETTLE_SECONDS
        apart: an editor or a git command is done writing."""
        before = kbuild.source_state(self.tree.path)
        while True:
            time.sleep(SETTLE_SECONDS)
            after = kbuild.source_state(self.tree.path)
            if after == before:
                self.whole, self.whole_read = after, time.monotonic()
                self.edited = kbuild.source_state(self.tree.path, self.files)
                return
            before = after


def grade_once(work, exercise_set):
    stamp = time.strftime("%H:%M:%S")
    print(f"\n[{stamp}] grading {work.stage.slug} in {work.tree} ...", flush=True)
    try:
        result = exercises.grade(work, exercise_set, quiet=True)
    except LabError as error:
        # A build that fails is a verdict too: the compiler's complaint.
        print(f"[{time.strftime('%H:%M:%S')}] not graded: {error}", flush=True)
        return
    exercises.print_grade(result, f"[{time.strftime('%H:%M:%S')}] grade for {work.stage.slug}")
    failed = [e for e in exercise_set.exercises if not exercises.passed(result, e.name)]
    exercises.print_hints(work, failed, result.run.report, result.run.out)
    print("\nwaiting for a change (Ctrl-C stops)", flush=True)


def cmd_watch(args):
    work = workflow.select(args.stage, args.tree, switch=False)
    exercise_set = exercises.load(work.stage)
    if not exercise_set:
        raise LabError(f"stage {work.stage.slug} has no exercises to grade")
    sources = Sources(work.tree, submission.graded_files(exercise_set))
    info(f"watching {work.tree} ({work.stage.slug}): every saved change is graded; "
         "Ctrl-C stops")
    try:
        while True:
            if sources.changed():
                sources.settle()
                grade_once(work, exercise_set)
            time.sleep(EXERCISE_FILES_SECONDS)
    except KeyboardInterrupt:
        print()
        info("watch stopped")
        return 0


def register(verb):
    verb("watch", cmd_watch, "grade the tree again each time a file is saved")
