"""`make check`: the host tier (tests of the machinery, tools and book), then
every stage booted under QEMU with its guest tests, gdb walkthroughs and
exercise-grader proofs, then the machinery against misbehaving guests and
submissions, and the proof that a hand-out holds no solution. Ends with
exactly one line: 'N passed, N failed'."""
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

from . import debugger, exercises, handout, settings, stages, workflow
from .errors import LabError
from .log import info
from .tree import KernelTree

PYTHON = "/usr/bin/python3"  # Debian's, which has python3-pytest


class Tally:
    def __init__(self):
        self.passed, self.failed = [], []

    def record(self, name, ok, detail=""):
        (self.passed if ok else self.failed).append((name, detail))
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f": {detail}" if detail and not ok else ""),
              flush=True)


def run_pytest(tally, label, paths, *extra):
    report = settings.BUILD / "check" / f"{label}.xml"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    cmd = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
           *map(str, paths), *extra]
    result = subprocess.run(cmd, cwd=settings.REPO, capture_output=True, text=True)
    if not report.exists():
        tally.record(f"{label}: pytest", False, (result.stdout + result.stderr)[-2000:])
        return
    for case in ET.parse(report).iter("testcase"):
        name = f"{label}: {case.get('classname', '')}.{case.get('name')}"
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        if case.find("skipped") is not None:
            continue
        tally.record(name, problem is None,
                     (problem.get("message") or "")[:500] if problem is not None else "")


def guest_tier(tally, stage):
    """Build and test the stage in the workshop worktree, so that `make check`
    neither needs nor touches the student's tree and build."""
    try:
        main = KernelTree()
        main.ensure_base()
        main.prepare(stage)
        work = workflow.Work(main.reset_workshop(stage.branch), stage)
        results = settings.BUILD / "results" / stage.slug
        run = workflow.run_tests(work, out=results, quiet=True)
    except LabError as error:
        tally.record(f"stage {stage.slug}: build and boot", False, str(error))
        return
    for result in run.report.results:
        detail = "; ".join(c.name for c in result.children if not c.ok) or result.directive
        tally.record(f"stage {stage.slug}: {result.name}", result.ok, detail)
    for problem in run.report.problems:
        tally.record(f"stage {stage.slug}: complete run", False, problem)
    for script in stage.gdb_scripts:
        missing, out = debugger.run_walkthrough(work, script, quiet=True, results=results)
        tally.record(f"stage {stage.slug}: gdb {script.name}", not missing,
                     f"expected /{missing}/, see {settings.shown(out / 'gdb.log')}")
    for name, ok, detail in exercises.prove(stage):
        tally.record(f"stage {stage.slug}: {name}", ok, detail)


def handout_tier(tally):
    """The hand-out leaks no solution hunk of any stage; and the check that
    says so finds every hunk once the solutions are put back in."""
    chosen = handout.exercise_stages()
    try:
        made = handout.build(chosen, settings.BUILD / "check" / "handout")
    except LabError as error:
        tally.record("kit: make a hand-out of every stage with exercises", False, str(error))
        return
    leaks = handout.find_leaks(made.root, chosen)
    for stage in chosen:
        mine = [l for l in leaks if f"/{stage.slug}/" in l.solution]
        tally.record(f"kit: the hand-out holds no solution of {stage.slug}", not mine,
                     "; ".join(f"{l.solution} {l.hunk} in {l.where}" for l in mine))
    bare = handout.unverifiable_hunks(chosen)
    tally.record("kit: every solution hunk has text the leak check can find", not bare,
                 "; ".join(bare))
    planted = made.root / "planted"
    shutil.copytree(settings.SOLUTIONS_DIR, planted)
    try:
        found = {(l.solution, l.hunk) for l in handout.find_leaks(made.root, chosen)}
    finally:
        shutil.rmtree(planted)
    every = {(settings.shown(patch), header) for stage in chosen
             for patch, header, _, _ in handout.solution_hunks(stage)}
    missed = sorted(every - found)
    tally.record("kit: the leak check finds every solution hunk planted in a hand-out",
                 not missed, "; ".join(f"{a} {b}" for a, b in missed))


def cmd_check(args):
    tally = Tally()
    book_tests = settings.REPO / "vm" / "tests" / "test_book.py"
    if args.tier in ("host", "all"):
        info("host tier: the machinery's own tests")
        run_pytest(tally, "host", [settings.REPO / "vm" / "tests"],
                   f"--ignore={book_tests}", "-m", "not kernel")
    if args.tier in ("guest", "all"):
        for stage in [stages.resolve(args.stage)] if args.stage else stages.all_stages():
            info(f"guest tier: stage {stage.slug}")
            guest_tier(tally, stage)
        info("guest tier: the machinery against panicking, hanging, flooding and "
             "disk-filling guests and submissions")
        workshop = KernelTree().workshop()
        os.environ["LAB_TEST_OBJ"] = str(workflow.Work(workshop, stages.latest()).obj)
        # Grading a class of misbehaving submissions takes minutes: a run
        # for one stage leaves it out.
        class_tests = settings.REPO / "vm" / "tests" / "test_class_fixtures.py"
        run_pytest(tally, "guest-failures", [settings.REPO / "vm" / "tests"],
                   f"--ignore={book_tests}", "-m", "kernel",
                   *([f"--ignore={class_tests}"] if args.stage else []))
    if args.tier in ("guest", "all") and not args.stage:
        info("instructor kit: a hand-out of every stage with exercises, checked for solutions")
        handout_tier(tally)
    if args.tier in ("host", "all") and book_tests.exists():
        info("book: rendering and checking (after the guest tier, so it shows real results)")
        try:
            workflow.prepare_branches()  # the book's listings come from the stage branches
            run_pytest(tally, "book", [book_tests])
        except LabError as error:
            tally.record("book: stage branches for the listings", False, str(error))
    if tally.failed:
        print("\nFailures:")
        for name, detail in tally.failed:
            print(f"  {name}" + (f"\n      {detail}".replace("\n", "\n      ") if detail else ""))
    print(f"{len(tally.passed)} passed, {len(tally.failed)} failed")
    return 1 if tally.failed else 0


def register(verb):
    p = verb("check", cmd_check, "run all tests (host tier, then every stage in QEMU)")
    p.add_argument("--tier", choices=["host", "guest", "all"], default="all")
