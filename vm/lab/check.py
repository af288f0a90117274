"""`make check`: the host tier (tests of the machinery, tools and book), then
every stage booted under QEMU with its guest tests, gdb walkthroughs and
exercise-grader proofs, then the machinery against misbehaving guests and
submissions, and the proof that a hand-out holds no solution. Ends with
exactly one line: 'N passed, N failed, N skipped'. A skip is never
counted as a pass: a test that could not run proves nothing."""
import os
import shutil
import subprocess
import threading
import time
import xml.etree.ElementTree as ET

from . import (classgrade, debugger, exercises, experiments, fixtures, handout, settings,
               stages, submission, workflow)
from .errors import LabError
from .log import info, warn
from .tree import KernelTree, release_workshops

PYTHON = "/usr/bin/python3"  # Debian's, which has python3-pytest


class Tally:
    def __init__(self):
        self.passed, self.failed, self.skipped = [], [], []

    def record(self, name, ok, detail="", skipped=False):
        if skipped and ok:
            self.skipped.append((name, detail))
            print(f"SKIP  {name}" + (f": {detail}" if detail else ""), flush=True)
            return
        (self.passed if ok else self.failed).append((name, detail))
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f": {detail}" if detail and not ok else ""),
              flush=True)

    def record_result(self, name, result):
        """A KTAP result, and each of its skipped subtests as a skip of its
        own: a test passes on what ran, and what did not run is counted."""
        if result.skipped:
            self.record(name, True, result.directive, skipped=True)
            return
        failed = [c.name for c in _leaves(result) if not c.ok]
        self.record(name, result.ok, "; ".join(failed) or result.directive)
        for path, leaf in _leaf_paths(result):
            if leaf.skipped:
                self.record(f"{name}/{path}", True, leaf.directive, skipped=True)


def _leaves(result):
    if not result.children:
        return [result]
    return [leaf for child in result.children for leaf in _leaves(child)]


def _leaf_paths(result, prefix=""):
    for child in result.children:
        path = f"{prefix}{child.name}"
        if child.children and not child.skipped:
            yield from _leaf_paths(child, path + "/")
        else:
            yield path, child


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
        skip = case.find("skipped")
        if skip is not None:
            tally.record(name, True, (skip.get("message") or "")[:500], skipped=True)
            continue
        tally.record(name, problem is None,
                     (problem.get("message") or "")[:500] if problem is not None else "")


def guest_tier(tally, stage):
    """Build and test the stage in the workshop worktree, so that `make check`
    neither needs nor touches the student's tree and build. The stage's
    own tests and walkthroughs take one guest of the proofs' two, beside
    the proofs of its graders: each of them mostly waits."""
    clock = {"start": time.monotonic()}
    exercise_set = exercises.load(stage)
    try:
        main = KernelTree()
        main.ensure_base()
        main.prepare(stage)
        if exercise_set:
            # It makes its commit in the first workshop: not once that
            # workshop holds the build the stage's own run boots.
            exercises.exercise_commit(main, exercise_set)
        work = workflow.Work(main.reset_workshop(stage.branch), stage)
        workflow.build_kernel(work, quiet=True)
    except LabError as error:
        tally.record(f"stage {stage.slug}: build and boot", False, str(error))
        return
    clock["built"] = time.monotonic()

    own = {}

    def own_run():
        results = settings.BUILD / "results" / stage.slug
        try:
            run = own["run"] = workflow.run_tests(work, out=results, quiet=True, build=False)
        except Exception as error:  # a bug must fail the stage, not vanish in a thread
            tally.record(f"stage {stage.slug}: build and boot", False,
                         f"{type(error).__name__}: {error}")
        else:
            for result in run.report.results:
                tally.record_result(f"stage {stage.slug}: {result.name}", result)
            for problem in run.report.problems:
                tally.record(f"stage {stage.slug}: complete run", False, problem)
        for script in stage.gdb_scripts:
            label = f"stage {stage.slug}: gdb {script.name}"
            try:
                missing, out = debugger.run_walkthrough(work, script, quiet=True,
                                                        results=results)
            except Exception as error:  # as above
                tally.record(label, False, f"{type(error).__name__}: {error}")
                continue
            tally.record(label, not missing,
                         f"expected /{missing}/, see {settings.shown(out / 'gdb.log')}")
        clock["own"] = time.monotonic() - clock["built"]

    if stage.runs_alone or not exercise_set:
        own_run()
    if exercise_set:
        beside = None if stage.runs_alone else own_run
        for name, ok, detail, *skipped in exercises.prove(stage, beside=beside,
                                                          own_run=lambda: own.get("run")):
            tally.record(f"stage {stage.slug}: {name}", ok, detail, skipped=bool(skipped))
    clock["proved"] = time.monotonic()
    for experiment in stage.experiments:
        label = f"stage {stage.slug}: experiment {experiment.name}"
        try:
            test_run = experiments.run(stage, experiment)
        except LabError as error:
            tally.record(label, False, str(error))
            continue
        for result in test_run.report.results:
            tally.record_result(label, result)
        for problem in test_run.report.problems:
            tally.record(f"{label}: complete run", False, problem)
    end = time.monotonic()
    info(f"guest tier: stage {stage.slug} took {end - clock['start']:.0f} s: build "
         f"{clock['built'] - clock['start']:.0f} s, tests and walkthroughs "
         f"{clock.get('own', 0):.0f} s"
         + (f"{' then' if stage.runs_alone else ' beside'} grader proofs, which ended "
            f"{clock['proved'] - clock['built']:.0f} s after the build" if exercise_set else "")
         + (f", experiments {end - clock['proved']:.0f} s" if stage.experiments else ""))


def instructor_kit(tally):
    try:
        every_stage = handout_tier(tally)
        handout_shapes_tier(tally, first=every_stage)
    except Exception as error:  # a bug must fail the check, not vanish with the thread
        tally.record("kit: the instructor kit ran to its end", False,
                     f"{type(error).__name__}: {error}")


def handout_tier(tally):
    """The hand-out leaks no solution hunk of any stage; and the check that
    says so finds every hunk once the solutions are put back in."""
    chosen = handout.exercise_stages()
    try:
        made = handout.build(chosen, settings.BUILD / "check" / "handout")
    except LabError as error:
        tally.record("kit: make a hand-out of every stage with exercises", False, str(error))
        return None
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
    return made


# The hand-outs docs/instructors.md promises besides the one of every stage:
# a single later stage (its predecessors solved), a later range, and stages
# with one between them that is not handed out.
HANDOUT_SHAPES = ["02", "06,07", "02,04"]


def handout_shapes_tier(tally, first=None):
    made_shapes = {}
    for names in HANDOUT_SHAPES:
        label = f"kit: make handout STAGES={names}"
        try:
            chosen = handout.chosen_stages(names)
            made = handout.build(chosen, settings.BUILD / "check" / "handout-shapes", book=True)
        except LabError as error:
            tally.record(label, False, str(error))
            continue
        made_shapes[names] = made
        leaks = handout.find_leaks(made.root, chosen)
        tally.record(f"{label}: no solution in it", not leaks,
                     "; ".join(f"{l.solution} {l.hunk} in {l.where}" for l in leaks))
        problem = _replay_handout(made)
        tally.record(f"{label}: its series rebuild the hollowed stages", not problem, problem)
    # The same stage handed out again, once an earlier stage's solution is
    # out: work on the first single-stage shape's stage, begun on the
    # hand-out of every stage, carries over to that later hand-out.
    again = next((names for names in made_shapes if "," not in names), None)
    if first and again:
        problem = _carry_over(first, made_shapes[again], stages.resolve(again))
        tally.record(f"kit: work on stage {again} begun on the first hand-out carries "
                     f"over to STAGES={again} handed out again, and is graded",
                     not problem, problem)


def _student_tree(made, scratch):
    """A student's kernel tree made by the hand-out's own lab: a clone of
    the lab's base, and the hand-out's stage branches."""
    tree = scratch / "linux"
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout",
                    str(KernelTree().path), str(tree)], check=True)
    subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--detach", "base"], check=True)
    env = dict(os.environ, PYTHONPATH=str(made.root / "vm"), BUILD=str(scratch),
               KERNEL_TREE=str(tree))
    return tree, env


def _lab(made, env, *args):
    """None, or what the hand-out's lab said when it failed."""
    result = subprocess.run([PYTHON, "-m", "lab", *args], cwd=made.root, env=env,
                            capture_output=True, text=True)
    return None if result.returncode == 0 else (result.stdout + result.stderr)[-2000:]


def _carry_over(first, later, stage):
    """None if a student's solution of `stage`, committed on the exercise
    branch of the `first` hand-out and sent as a patch series, applies to
    the exercise branch of the `later` hand-out and is taken by the lab's
    grader with the solution's files."""
    scratch = settings.BUILD / "check" / "handout-carry-over"
    shutil.rmtree(scratch, ignore_errors=True)
    exercise_set = exercises.load(stage)
    series = scratch / "work.patch"
    for made, step in ((first, "first"), (later, "later")):
        work = scratch / step
        work.mkdir(parents=True)
        tree, env = _student_tree(made, work)
        said = _lab(made, env, "exercise", "--stage", stage.slug)
        if said:
            return f"make exercise on the {step} hand-out failed: {said}"
        if step == "first":
            for exercise in exercise_set.exercises:
                patch = exercise_set.solution_patch(exercise)
                applied = subprocess.run(["git", "-C", str(tree), "apply", str(patch)],
                                         capture_output=True, text=True)
                if applied.returncode != 0:
                    return f"{settings.shown(patch)} does not apply: {applied.stderr}"
            subprocess.run(["git", "-C", str(tree), "commit", "-q", "-am", "my solution"],
                           check=True, env=dict(os.environ, **settings.LAB_IDENT))
            said = _lab(made, env, "submission", "--stage", stage.slug, "--format", "patch",
                        "--out", str(series))
            if said:
                return f"make submission FORMAT=patch on the first hand-out failed: {said}"
        else:
            applied = subprocess.run(["git", "-C", str(tree), "am", "-q", str(series)],
                                     capture_output=True, text=True,
                                     env=dict(os.environ, **settings.LAB_IDENT))
            if applied.returncode != 0:
                return f"the series does not apply on the later hand-out: {applied.stderr}"
    try:
        commit = submission.import_commit(KernelTree(), exercise_set,
                                          submission.Submission("carried", series))
    except LabError as error:
        return f"the lab's grader refuses the series: {error}"
    main = KernelTree()
    solved = main.rev(stage.branch)
    for path in submission.graded_files(exercise_set):
        got = main.git("show", f"{commit}:{path}").stdout
        if got != main.git("show", f"{solved}:{path}").stdout:
            return f"the graded {path} is not the solved one"
    shutil.rmtree(scratch, ignore_errors=True)
    return None


def _replay_handout(made):
    """None if the hand-out's own lab, on a clone of the kernel tree, makes
    stage branches with the trees of the hand-out's hollowed tips."""
    scratch = settings.BUILD / "check" / "handout-replay"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    tree, env = _student_tree(made, scratch)
    said = _lab(made, env, "branches")
    if said:
        return said
    for slug, tip in made.stage_tips.items():
        def tree_of(repo, rev):
            return subprocess.run(["git", "-C", str(repo), "rev-parse", f"{rev}^{{tree}}"],
                                  capture_output=True, text=True).stdout.strip()
        if tree_of(tree, f"stage/{slug}") != tree_of(KernelTree().path, tip):
            return f"stage/{slug} made from the hand-out differs from its hollowed tip"
    shutil.rmtree(scratch, ignore_errors=True)
    return None


def seed_grading_slot(stage):
    """The kernel tier's class-grading test grades this stage in a slot of
    its own. Made now, as a copy of the workshop that has just built the
    stage, the slot's first grade recompiles a file and relinks; made
    later, it would build a whole kernel (more than 15 minutes of a check)."""
    try:
        classgrade.grading_slots(KernelTree(), stage, 1)
    except (LabError, subprocess.CalledProcessError) as error:
        warn(f"the grading slot stays cold: {error}")


def start_prebuild():
    """The kernel-tier tests marked `prebuild`, run now in the background
    at the lowest priority: a guest under TCG leaves the cores half idle,
    and what those tests build (by content, as every build of the lab is
    kept) is then ready when they run for their verdict after the guest
    tier. Their outcome here is not counted."""
    try:
        KernelTree().ensure_base()
    except LabError:
        return None
    log = settings.BUILD / "check" / "prebuild.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        return subprocess.Popen(["nice", "-n", "19", PYTHON, "-m", "pytest", "-q", "-p",
                                 "no:cacheprovider", "-m", "prebuild",
                                 str(settings.REPO / "vm" / "tests")],
                                cwd=settings.REPO, stdout=out, stderr=subprocess.STDOUT)


def finish_prebuild(prebuild):
    if prebuild.poll() is None:
        info("waiting for the background builds of the kernel-tier tests")
    prebuild.wait()


class Phases:
    """How long each part of the check took, for its last lines: CI shows
    only the end of a run."""
    def __init__(self):
        self.done, self.since = [], time.monotonic()

    def end(self, name):
        now = time.monotonic()
        self.done.append((name, now - self.since))
        self.since = now

    def __str__(self):
        return ", ".join(f"{name} {seconds / 60:.1f} min" for name, seconds in self.done)


def cmd_check(args):
    check_started = time.monotonic()
    tally = Tally()
    phases = Phases()
    book_tests = settings.REPO / "vm" / "tests" / "test_book.py"
    if args.tier in ("host", "all"):
        info("host tier: the machinery's own tests")
        run_pytest(tally, "host", [settings.REPO / "vm" / "tests"],
                   f"--ignore={book_tests}", "-m", "not kernel")
        phases.end("host tier")
    if args.tier in ("guest", "all"):
        prebuild = start_prebuild() if not args.stage else None
        class_stage = fixtures.class_stage() if not args.stage else None
        for stage in [stages.resolve(args.stage)] if args.stage else stages.all_stages():
            info(f"guest tier: stage {stage.slug}")
            guest_tier(tally, stage)
            if class_stage and stage.slug == class_stage.slug:
                seed_grading_slot(stage)
        if prebuild:
            finish_prebuild(prebuild)
        phases.end("stages")
        info("guest tier: the machinery against panicking, hanging, flooding and "
             "disk-filling guests and submissions")
        # The tests break kernels of their own in the second workshop.
        exercises.wait_for_workshops()
        # They run on the default machine's latest stage, whose kernel the
        # first workshop holds; the last stage proven there may have been
        # one of another architecture, and a test that takes the stage
        # the tree is on must find the default one.
        tested = stages.default()
        workshop = KernelTree().reset_workshop(tested.branch)
        os.environ["LAB_TEST_OBJ"] = str(workflow.Work(workshop, tested).obj)
        os.environ["LAB_TEST_TREE"] = str(workshop.path)
        release_workshops()
        # The instructor kit is git work, in trees of its own: it runs
        # beside the kernel-tier tests, whose guests leave a core idle.
        kit = None
        if not args.stage:
            info("instructor kit, beside them: hand-outs checked for solutions")
            kit = threading.Thread(target=instructor_kit, args=(tally,), name="kit")
            kit.start()
        # Grading a class of misbehaving submissions takes minutes: a run
        # for one stage leaves it out.
        class_tests = settings.REPO / "vm" / "tests" / "test_class_fixtures.py"
        run_pytest(tally, "guest-failures", [settings.REPO / "vm" / "tests"],
                   f"--ignore={book_tests}", "-m", "kernel",
                   *([f"--ignore={class_tests}"] if args.stage else []))
        if kit:
            kit.join()
        phases.end("kernel tier and kit")
    if args.tier in ("host", "all") and book_tests.exists():
        info("book: rendering and checking (after the guest tier, so it shows real results)")
        try:
            workflow.prepare_branches()  # the book's listings come from the stage branches
            run_pytest(tally, "book", [book_tests])
        except LabError as error:
            tally.record("book: stage branches for the listings", False, str(error))
        phases.end("book")
    info(f"make check took {(time.monotonic() - check_started) / 60:.1f} min: {phases}")
    if tally.failed:
        print("\nFailures:")
        for name, detail in tally.failed:
            print(f"  {name}" + (f"\n      {detail}".replace("\n", "\n      ") if detail else ""))
    print(f"{len(tally.passed)} passed, {len(tally.failed)} failed, {len(tally.skipped)} skipped")
    return 1 if tally.failed else 0


def register(verb):
    p = verb("check", cmd_check, "run all tests (host tier, then every stage in QEMU)")
    p.add_argument("--tier", choices=["host", "guest", "all"], default="all")
