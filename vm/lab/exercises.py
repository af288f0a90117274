"""Exercises: hollowed-out kernel functions, graded by the stage's tests.

exercises/NN-slug/exercises.toml is the single source of truth. Each
[[exercise]] names a function in the stage tree, the stub that replaces its
body, a hint, and the KTAP results (paths like 'kunit/bpf_lru_list/case')
that prove it. Instead of a function, an exercise may name a span: the
lines between two marker lines, in any kind of file, that hold
'exercise-begin: <span>' and 'exercise-end: <span>' (as comments in the
file's own syntax). The span's lines are replaced by the stub, verbatim,
under a header written with the begin marker's comment prefix. `make exercise` generates exercise/NN-slug from the stage
branch; solutions/NN-slug/*.patch restore the functions and are generated
from the same data (`lab solutions --write`), so nothing is copied by hand.
solutions/NN-slug/wrong/*.patch are plausible mistakes, each a patch on the
solved tree with a header line 'Exercise: <name>' naming the exercise that
must fail.
"""
import dataclasses
import hashlib
import json
import re
import textwrap
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import hints, kbuild, ktap, settings, stages, variants, workflow
from .errors import LabError
from .log import info, warn
from .tree import KernelTree


@dataclass
class Exercise:
    name: str
    file: str
    summary: str
    hint: str
    tests: list
    function: str = ""   # a C function whose body is hollowed, or
    span: str = ""       # the name of a marked span of lines
    stub: str = ""
    hints: list = field(default_factory=list)  # [hints.Hint], keyed to failures

    @property
    def what(self):
        return f"{self.function}()" if self.function else f"the span '{self.span}'"


@dataclass
class ModuleProof:
    """[proof] in exercises.toml: every exercise's tests are results of
    one module (tests is their common prefix) that compiles its own copy
    of the exercised code, so a variant is proven by building that module
    again, with the kernel its stage last built."""
    module: str
    tests: str


@dataclass
class ExerciseSet:
    stage: stages.Stage
    exercises: list
    required: list = field(default_factory=list)  # results every exercise relies on
    proof: "ModuleProof | None" = None

    @property
    def dir(self):
        return settings.EXERCISES_DIR / self.stage.slug

    @property
    def solutions_dir(self):
        return settings.SOLUTIONS_DIR / self.stage.slug

    @property
    def wrong_solutions(self):
        return sorted((self.solutions_dir / "wrong").glob("*.patch"))

    def solution_patch(self, exercise):
        return self.solutions_dir / f"{exercise.name}.patch"


def load(stage):
    path = settings.EXERCISES_DIR / stage.slug / "exercises.toml"
    if not path.exists():
        return None
    data = tomllib.loads(path.read_text())
    try:
        items = [Exercise(**item) for item in data.get("exercise", [])]
    except TypeError as error:
        raise LabError(f"{settings.shown(path)}: {error}") from None
    for item in items:
        item.hints = hints.parse(settings.shown(path), item.name, item.tests, item.hints)
    for item in items:
        if bool(item.function) == bool(item.span):
            raise LabError(f"{settings.shown(path)}: exercise {item.name} needs either "
                           "function or span, not both")
    names = [e.name for e in items]
    if len(set(names)) != len(names):
        raise LabError(f"{settings.shown(path)}: exercise names repeat: {names}")
    return ExerciseSet(stage, items, data.get("required", []),
                       _module_proof(settings.shown(path), data.get("proof"), items))


def _module_proof(where, table, items):
    if table is None:
        return None
    try:
        proof = ModuleProof(**table)
    except TypeError as error:
        raise LabError(f"{where}: [proof]: {error}") from None
    if not proof.module.endswith(".ko") or not proof.tests:
        raise LabError(f"{where}: [proof] needs a module (path/name.ko) and the prefix "
                       "of the tests it runs")
    # The proof builds nothing but the module: a test outside it would
    # grade a kernel that no proof rebuilt.
    outside = [f"{item.name}: {test}" for item in items for test in item.tests
               if not test.startswith(proof.tests)]
    if outside:
        raise LabError(f"{where}: [proof] builds only {proof.module}, but these tests are "
                       f"not among its results ({proof.tests}...): {'; '.join(outside)}")
    return proof


# -- hollowing ---------------------------------------------------------------

def _function_head(source, function):
    head = re.search(rf"^[A-Za-z_][^;{{}}]*?\b{re.escape(function)}\s*\([^;{{}}]*?\)\s*\n\{{\n",
                     source, re.M | re.S)
    if not head:
        raise LabError(f"function {function}() not found (defined in kernel style)")
    return head


def function_head_start(source, function):
    """Where the definition of a top-level C function begins."""
    return _function_head(source, function).start()


def function_body_span(source, function):
    """(start, end) character offsets of the body of a top-level C function
    written in kernel style: the braces on their own lines in column 0."""
    start = _function_head(source, function).end()
    end = source.find("\n}\n", start - 1)
    if end == -1:
        raise LabError(f"the body of {function}() has no closing brace in column 0")
    return start, end + 1


def marked_span(source, span):
    """(start, end, comment prefix) of the lines between the marker lines
    'exercise-begin: SPAN' and 'exercise-end: SPAN'."""
    begin = re.search(rf"^(.*)exercise-begin: {re.escape(span)}[ \t]*\n", source, re.M)
    if not begin:
        raise LabError(f"no line marks 'exercise-begin: {span}'")
    end = re.search(rf"^.*exercise-end: {re.escape(span)}[ \t]*$", source[begin.end():], re.M)
    if not end:
        raise LabError(f"'exercise-begin: {span}' has no 'exercise-end: {span}' after it")
    return begin.end(), begin.end() + end.start(), begin.group(1)


def body_span(source, exercise):
    """(start, end) of what the exercise takes out of the file."""
    if exercise.function:
        return function_body_span(source, exercise.function)
    return marked_span(source, exercise.span)[:2]


def hollow(source, exercise, set_slug):
    if exercise.span:
        start, end, prefix = marked_span(source, exercise.span)
        lines = [f"{prefix}Exercise {exercise.name} ({set_slug}): {exercise.summary}",
                 f"{prefix}Hint: {exercise.hint}",
                 f"{prefix}The task: exercises/{set_slug}/README.md"]
        lines += exercise.stub.splitlines()
        return source[:start] + "\n".join(lines) + "\n" + source[end:]
    start, end = function_body_span(source, exercise.function)
    wrap = textwrap.TextWrapper(width=72, initial_indent="\t * ", subsequent_indent="\t *   ")
    lines = ["\t/*",
             *wrap.wrap(f"Exercise {exercise.name} ({set_slug}): {exercise.summary}"),
             *wrap.wrap(f"Hint: {exercise.hint}"),
             f"\t * The task: exercises/{set_slug}/README.md",
             "\t */"]
    lines += [f"\t{line}" for line in exercise.stub.splitlines() if line.strip()]
    return source[:start] + "\n".join(lines) + "\n" + source[end:]


def hollow_tree(tree_path, exercise_set):
    by_file = {}
    for exercise in exercise_set.exercises:
        by_file.setdefault(exercise.file, []).append(exercise)
    for file, items in by_file.items():
        path = Path(tree_path) / file
        text = path.read_text()
        for exercise in items:
            text = hollow(text, exercise, exercise_set.stage.slug)
        path.write_text(text)


def exercise_commit(tree, exercise_set):
    """The hollowed commit of the stage as the patches and exercises.toml
    make it today, kept under refs/lab/exercise/NN-slug. Its id depends only
    on those inputs (fixed identity and dates), so it is remade only when
    they change; proofs and solutions use it, never a student's branch."""
    stage = exercise_set.stage
    tree.prepare(stage)
    ref = f"refs/lab/exercise/{stage.slug}"
    toml = (exercise_set.dir / "exercises.toml").read_bytes()
    fingerprint = hashlib.sha256(tree.rev(stage.branch).encode() + toml).hexdigest()
    key = f"lab.exercise.{stage.slug}.fingerprint"
    if tree.rev(ref) and tree.git("config", key, check=False).stdout.strip() == fingerprint:
        return tree.rev(ref)
    workshop = tree.reset_workshop(stage.branch)
    hollow_tree(workshop.path, exercise_set)
    names = ", ".join(e.what for e in exercise_set.exercises)
    # --allow-empty: in a hand-out the stage branch is hollowed already.
    workshop.git("commit", "-q", "-a", "--allow-empty", "-m",
                 f"exercise: hollow out {stage.slug}\n\nReplaced by stubs: {names}.\n"
                 f"Generated from exercises/{stage.slug}/exercises.toml.",
                 env={"GIT_AUTHOR_DATE": settings.LAB_IDENT["GIT_COMMITTER_DATE"]})
    tree.git("update-ref", ref, workshop.rev("HEAD"))
    tree.git("config", key, fingerprint)
    return tree.rev(ref)


def make_exercise_branch(tree, exercise_set):
    """exercise/NN-slug for the student; an existing branch may hold their
    commits and is never rewritten."""
    branch = exercise_set.stage.exercise_branch
    if not tree.rev(branch):
        tree.git("branch", branch, exercise_commit(tree, exercise_set))
    return branch


def solution_text(tree, exercise_set, exercise):
    """The patch restoring one function (or span): exercise branch -> stage
    branch, limited to that function's hunk."""
    stage = exercise_set.stage
    hollowed = tree.git("show", f"{exercise_commit(tree, exercise_set)}:{exercise.file}").stdout
    solved = tree.git("show", f"{stage.branch}:{exercise.file}").stdout
    start, end = body_span(hollowed, exercise)
    s_start, s_end = body_span(solved, exercise)
    restored = hollowed[:start] + solved[s_start:s_end] + hollowed[end:]
    return _diff(exercise.file, hollowed, restored, exercise)


def _diff(file, before, after, exercise):
    import difflib
    body = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                        f"a/{file}", f"b/{file}", n=3))
    return (f"Solution to exercise {exercise.name}: restore {exercise.what} as the stage "
            f"has it.\n"
            f"Apply on the exercise branch with: git apply <this file>\n\n"
            f"diff --git a/{file} b/{file}\n" + body)


# -- grading -----------------------------------------------------------------

@dataclass
class Grade:
    rows: list         # (exercise name, ok, detail)
    run: object

    @property
    def ok(self):
        return all(ok for _, ok, _ in self.rows)


def graded_tests(exercise_set):
    """The top-level tests whose results the exercises name."""
    paths = exercise_set.required + [p for e in exercise_set.exercises for p in e.tests]
    return {path.split("/")[0] for path in paths}


def grade(work, exercise_set, out=None, quiet=False, focus=None, build=True,
          extra_cmdline=(), until_failed=False, hinted=False):
    """Only the tests that prove something about the exercises: a stage's
    measurements can take minutes. With `focus` (exercises' names), only
    those exercises are graded and only their tests run, without the
    required results: a wrong solution must be caught by its own
    exercise's tests, and the required ones, often a stage's longest,
    would add guest time to every proof without bearing on its verdict.
    With until_failed, the guest stops once the grade is settled as a
    failure, and its hint too with `hinted` (see settled_failure)."""
    settle = settled_failure(exercise_set, focus, hinted) if until_failed else None
    exercise_set = focused(exercise_set, focus)
    run = workflow.run_tests(work, out=out, quiet=quiet, only=graded_tests(exercise_set),
                             build=build, extra_cmdline=extra_cmdline, settle=settle)
    return Grade(score(exercise_set, run), run)


def focused(exercise_set, focus):
    """The exercise set cut down to the exercises named in focus, without
    its required tests; the whole set when focus is empty."""
    if not focus:
        return exercise_set
    unknown = set(focus) - {e.name for e in exercise_set.exercises}
    if unknown:
        raise LabError(f"no exercise named {', '.join(sorted(unknown))}")
    return dataclasses.replace(
        exercise_set, required=[],
        exercises=[e for e in exercise_set.exercises if e.name in focus])


def settled_failure(exercise_set, focus, hinted):
    """For a proof that the grader rejects a variant: a function of the
    report so far that gives the reason to stop the guest once the grade
    can no longer change, or None. That is once each graded exercise has
    a failed result of its own (a failure cannot turn into a pass) and,
    with `hinted`, nothing still to come can change the hint it gets
    (hints.settled). The tests after that point would only cost time."""
    graded = focused(exercise_set, focus).exercises

    def settle(report):
        first = []
        for exercise in graded:
            failed = hints.failed_paths(report, exercise.tests)
            if not failed or (hinted and exercise.hints
                              and not hints.settled(exercise, report)):
                return None
            first.append(f"{exercise.name}: {failed[-1]} failed")
        return f"stopped once the grade was settled ({'; '.join(first)})"
    return settle


def boots_a_guest(stage, exercise_set, focus=None):
    """True when grading these exercises runs a test in the guest, and so
    needs a kernel: a Kconfig puzzle's grade runs on the host alone."""
    names = graded_tests(focused(exercise_set, focus))
    return any(test.name in names for test in stage.tests)


def score(exercise_set, run):
    rows = []
    crashed = not run.outcome.ok
    for path in exercise_set.required:
        rows.append((f"required: {path}",) + _verdict(run, [path], crashed))
    for exercise in exercise_set.exercises:
        rows.append((exercise.name,) + _verdict(run, exercise.tests, crashed))
    return rows


def _verdict(run, paths, crashed):
    if crashed:
        return False, run.outcome.reason
    bad = []
    for path in paths:
        result = run.report.find(path)
        if result is None:
            bad.append(f"{path} did not run")
        elif not result.ok or result.skipped:
            bad.append(f"{path} {'skipped' if result.skipped else 'failed'}")
    return not bad, "; ".join(bad)


def print_grade(grade_result, title):
    print(f"\n{title}")
    for name, ok, detail in grade_result.rows:
        print(f"  {'PASS' if ok else 'FAIL'}  {name}" + (f"  ({detail})" if detail else ""))
    if not grade_result.run.outcome.ok:
        print("\n" + grade_result.run.outcome.explain())
    print(f"  results in {settings.shown(grade_result.run.out)}")


# -- the proof that graders discriminate (part of make check) ----------------

def prove(stage, beside=None, own_run=None):
    """[(name, ok, detail[, skipped])]: the grader fails on the skeleton,
    passes on the solutions, and fails each wrong solution on the exercise
    it names, which gets the hint the wrong solution names. `beside`, if
    given, runs first in the first workshop, as it holds the stage's build,
    with a guest of the proofs' own while the other workshop proves.

    own_run, if given, returns the stage's own test run (once `beside`
    has ended): the solutions are then graded on its results instead of
    a run of their own. The stage branch is the skeleton with every
    solution applied (the first check below proves the patches are what
    the exercise data makes), and the stage's run has run every test the
    exercises name, on that very kernel."""
    exercise_set = load(stage)
    if not exercise_set:
        return []
    main = KernelTree()
    skeleton_rev = exercise_commit(main, exercise_set)
    checks = []
    stale = [e.name for e in exercise_set.exercises
             if not exercise_set.solution_patch(e).exists()
             or exercise_set.solution_patch(e).read_text() != solution_text(main, exercise_set, e)]
    checks.append(("solutions are generated from the exercise data", not stale,
                   f"stale or missing: {stale}; run `make solutions STAGE={stage.number}`"))
    out_root = settings.BUILD / "results" / stage.slug / "proofs"
    solutions = [exercise_set.solution_patch(e) for e in exercise_set.exercises]
    # A wrong solution is proven on the exercise it names: its grade runs
    # only that exercise's tests. The skeleton and the solutions are proven
    # on every exercise, without the required tests: no proof reads their
    # rows, and the stage's own run has just passed them on the stage
    # branch, whose bodies the solutions restore (checked above).
    wrongs = [(patch, wrong_target(patch)) for patch in exercise_set.wrong_solutions]
    every = [e.name for e in exercise_set.exercises]
    attempts = [("skeleton", skeleton_rev, [], every)]
    if own_run is None:
        attempts.append(("solution", skeleton_rev, solutions, every))
    attempts += [(f"wrong-{patch.stem}", stage.branch, [patch], [target])
                 for patch, target in wrongs]
    _seed_second_workshop(main, stage)
    plan = variants.plan(main, stage, exercise_set, attempts,
                         kbuild.object_dir(main.workshop(1).path, stage.machine.arch))
    if plan:
        # The variants one kernel holds go first, so that each workshop
        # builds that kernel once and grades them all on it.
        attempts.sort(key=lambda attempt: attempt[0] not in plan.numbers)
        info(f"{len(plan.numbers)} of {len(attempts)} proof variants share one kernel "
             f"({', '.join(sorted(plan.files))})")
    results = _prove_attempts(main, stage, exercise_set, out_root, attempts, first=beside,
                              plan=plan)
    if own_run is not None:
        run = own_run()
        results["solution"] = Grade(score(focused(exercise_set, every), run), run) if run \
            else LabError("the stage's own run, whose results grade the solutions, did not end")

    skeleton = results["skeleton"]
    for exercise in exercise_set.exercises:
        ok = not isinstance(skeleton, LabError) and not _row(skeleton, exercise.name)[1]
        checks.append((f"grader rejects the skeleton of {exercise.name}", ok,
                       _why(skeleton, exercise.name, "passed")))
    solved = results["solution"]
    for exercise in exercise_set.exercises:
        ok = not isinstance(solved, LabError) and _row(solved, exercise.name)[1]
        checks.append((f"grader accepts the solution of {exercise.name}", ok,
                       _why(solved, exercise.name, "failed")))
    exercise_named = {e.name: e for e in exercise_set.exercises}
    for patch, target in wrongs:
        result = results[f"wrong-{patch.stem}"]
        ok = not isinstance(result, LabError) and not _row(result, target)[1]
        checks.append((f"grader rejects wrong solution {patch.stem} ({target})", ok,
                       _why(result, target, "passed")))
        if not ok:
            continue
        name = f"wrong solution {patch.stem} gets the hint it names"
        if not exercise_named[target].hints:
            # Reported as a skip, never as a pass: nothing was proven.
            checks.append((name, True, f"exercise {target} has no hints yet", True))
            continue
        keyed, detail = hints.check(exercise_named[target], patch.read_text(),
                                    result.run.report, hints.console_of(result.run.out))
        if not keyed and not result.run.outcome.ok:
            # A run that did not end says why, or the failure is a mystery.
            detail += f"; the guest's run did not end: {result.run.outcome.explain()}"
        checks.append((name, keyed, detail))
    return checks


# One lock per workshop, held while it builds or grades. A workshop whose
# first build is still running when a stage's proofs end goes on building
# beside the next stage, and the next proofs wait for it rather than use
# it half built.
_WORKSHOP_BUSY = {}


def workshop_lock(number):
    return _WORKSHOP_BUSY.setdefault(number, threading.Lock())


def wait_for_workshops():
    """Until no workshop is building: a cold workshop's first build may go
    on after its stage's proofs have ended."""
    for busy in list(_WORKSHOP_BUSY.values()):
        with busy:
            pass


def _is_cold(tree, stage):
    """True when the tree has never been built for the stage's machine."""
    return not kbuild.has_built(tree.path, stage.machine.arch)


def _seed_second_workshop(main, stage):
    """A cold second workshop starts as a copy of the first, which the
    stage's own tests have just built: its first attempt is then a
    recompile and a relink, as every other one."""
    first, second = main.workshop(1), main.workshop(2, checkout=False)
    if _is_cold(second, stage) and not _is_cold(first, stage):
        info("workshop 2 is cold: it starts as a copy of workshop 1")
        main.copy_workshop(2, source=1)


def _prove_attempts(main, stage, exercise_set, out_root, attempts, first=None, plan=None):
    """{label: Grade or LabError} for (label, rev, patches, focus) attempts.
    Two workshops take turns, so that one builds the next variant while
    the other's guest runs, and their guests may run at once
    (settings.proof_guests()): a graded guest under TCG keeps about a
    third of the two cores busy, its tests waiting on timers, pings and
    captures. A third workshop was slower: its builds took the cores from
    the guests (docs/benchmarks.md). A grader that cannot tell a right
    kernel from a wrong one on a busy machine is a flaky grader, and this
    is where it shows.

    Should the second workshop still be cold (prove() copies the first
    into it), its first build is a whole kernel, if from ccache. It makes
    that build before it takes an
    attempt, so that no attempt waits for it while the first workshop
    proves all the others; the proofs end when every attempt has a result,
    whether or not that build has.

    With a variants.Plan, the attempts it names are graded on the one
    kernel that holds them all, which each workshop builds once; should
    that kernel fail to build, every attempt builds its own as before."""
    pending = list(attempts)
    # Per workshop: does its object dir hold the plan's kernel now?
    holds_plan = {1: False, 2: False}
    plan_broken = threading.Event()
    results = {}
    timings = {}
    finished = threading.Condition()
    guests = threading.BoundedSemaphore(settings.proof_guests())
    take = threading.Lock()
    first_done = threading.Event()
    if not first:
        first_done.set()

    def next_attempt():
        with take:
            return pending.pop(0) if pending else None

    def worker(number):
        busy = workshop_lock(number)
        warmed = number == 1  # the stage's own tests were just built in workshop 1
        if number == 1 and first:
            with busy, guests:
                try:
                    first()
                except Exception as error:  # it records its own outcome
                    info(f"workshop 1: the run before the proofs failed: {error}")
                finally:
                    first_done.set()
        while True:
            # Wait for the workshop, but not beyond the last attempt.
            while not busy.acquire(timeout=1):
                with take:
                    if not pending:
                        return
            try:
                if not warmed:
                    warmed = True  # once: if it fails, the attempts built here say why
                    if pending and _is_cold(main.workshop(number), stage):
                        work = workflow.Work(main.reset_workshop(stage.branch, number=number),
                                             stage)
                        workflow.build_kernel(work, quiet=True, nice=10)
                        continue
                attempt = next_attempt()
                if attempt is None:
                    return
                prove_one(number, *attempt)
            except Exception as error:  # only the warm-up: prove_one records its own
                info(f"workshop {number}: its first build failed: {error}")
            finally:
                busy.release()

    def plan_kernel(number):
        """The workshop's Work on the plan's kernel, built if it is not
        there; None when that kernel does not build."""
        tree = main.workshop(number)
        if not holds_plan[number]:
            tree = main.reset_workshop(stage.branch, number=number)
            for path, text in plan.files.items():
                (tree.path / path).write_text(text)
            try:
                workflow.build_kernel(workflow.Work(tree, stage), quiet=True, nice=10)
            except LabError as error:
                plan_broken.set()
                warn(f"workshop {number}: the kernel holding every proof variant does not "
                     f"build, so each variant builds its own: {str(error)[-2000:]}")
                return None
            holds_plan[number] = True
        return workflow.Work(tree, stage)

    def prove_one(number, label, rev, patches, focus):
        clock = {"start": time.monotonic()}
        try:
            work, cmdline = None, ()
            if plan and label in plan.numbers and not plan_broken.is_set():
                clock["reset"] = time.monotonic()  # its build, if any, is the build phase
                work, cmdline = plan_kernel(number), plan.cmdline(label)
            if work is None:
                holds_plan[number] = False
                work = workflow.Work(main.reset_workshop(rev, patches, number=number), stage)
                cmdline = ()
                clock["reset"] = time.monotonic()
            # The guest is what every proof waits for: the build beside
            # it yields the cores to it. A grade on the host needs none.
            if not cmdline and boots_a_guest(stage, exercise_set, focus):
                proof = exercise_set.proof
                if not (proof and workflow.build_module(work, proof.module, quiet=True,
                                                        nice=10)):
                    workflow.build_kernel(work, quiet=True, nice=10)
            clock["built"] = time.monotonic()
            with guests:
                clock["guest"] = time.monotonic()
                # The skeleton and the wrong solutions must fail: their
                # guests stop once they have (the solution's runs whole).
                result = grade(work, exercise_set, out=out_root / label, quiet=True,
                               focus=focus, build=False, extra_cmdline=cmdline,
                               until_failed=label != "solution",
                               hinted=label not in ("solution", "skeleton"))
                clock["graded"] = time.monotonic()
        except LabError as error:
            result = error
        except Exception as error:  # a bug must fail the proof, not hang the check
            result = LabError(f"{type(error).__name__}: {error}")
        with finished:
            results[label] = result
            timings[label] = _phases(clock, number)
            finished.notify_all()

    for number in (1, 2):
        threading.Thread(target=worker, args=(number,), name=f"workshop{number}").start()
    with finished:
        finished.wait_for(lambda: len(results) == len(attempts))
    # The run beside the proofs may outlast them, and the caller goes on
    # to reset the first workshop, whose kernel that run boots.
    first_done.wait()
    # Where a proof's time goes, for docs/benchmarks.md and the check's budget.
    out_root.mkdir(parents=True, exist_ok=True)
    (out_root / "timings.json").write_text(json.dumps(timings, indent=1) + "\n")
    return results


def _phases(clock, workshop):
    """Seconds spent resetting the workshop, building, waiting for the
    other workshop's guest, and grading."""
    phases = {"workshop": workshop}
    for name, before, after in [("reset", "start", "reset"), ("build", "reset", "built"),
                                ("wait", "built", "guest"), ("grade", "guest", "graded")]:
        if before in clock and after in clock:
            phases[name] = round(clock[after] - clock[before], 1)
    return phases


def wrong_target(patch):
    match = re.search(r"^Exercise:\s*(\S+)", patch.read_text(), re.M)
    if not match:
        raise LabError(f"{settings.shown(patch)} lacks an 'Exercise: <name>' line")
    return match.group(1)


def _row(grade_result, name):
    for row in grade_result.rows:
        if row[0] == name:
            return row
    raise LabError(f"no exercise named {name}")


def _why(result, name, bad_word):
    if isinstance(result, LabError):
        return str(result)
    row = _row(result, name)
    return f"it {bad_word} ({row[2] or 'all its tests passed'}); see {settings.shown(result.run.out)}"


# -- verbs ---------------------------------------------------------------------

def _set_for(stage):
    exercise_set = load(stage)
    if not exercise_set:
        raise LabError(f"stage {stage.slug} has no exercises (exercises/{stage.slug}/)")
    return exercise_set


def cmd_exercise(args):
    tree = KernelTree()
    tree.ensure_base()
    stage = stages.resolve(args.stage) if args.stage else stages.default()
    exercise_set = _set_for(stage)
    branch = make_exercise_branch(tree, exercise_set)
    tree.checkout(branch, f"switch {tree} to {branch}")
    info(f"{tree} is on {branch}; the tasks are in exercises/{stage.slug}/README.md; "
         f"`make grade STAGE={stage.number}` grades your tree")


def cmd_grade(args):
    work = workflow.select(args.stage, args.tree)
    exercise_set = _set_for(work.stage)
    result = grade(work, exercise_set)
    print_grade(result, f"grade for {work.stage.slug} ({work.tree})")
    failed = [e for e in exercise_set.exercises if not passed(result, e.name)]
    print_hints(work, failed, result.run.report, result.run.out)
    return 0 if result.ok else 1


def cmd_hint(args):
    """The next rung of the hint keyed to each failure of the last grade or
    test run (or of one exercise's, with --exercise)."""
    work = workflow.select(args.stage, args.tree, switch=False)
    exercise_set = _set_for(work.stage)
    out = workflow.results_dir(work)
    ktap_file = out / "ktap.txt"
    if not ktap_file.exists():
        raise LabError(f"no results in {settings.shown(out)} yet: `make grade` first")
    report = ktap.parse(ktap_file.read_text(errors="replace"))
    chosen = [e for e in exercise_set.exercises if e.name == args.exercise] \
        if args.exercise else exercise_set.exercises
    if not chosen:
        raise LabError(f"no exercise named {args.exercise} in {work.stage.slug}: "
                       f"{', '.join(e.name for e in exercise_set.exercises)}")
    failed = [e for e in chosen if _failed(e, report)]
    if not failed:
        info(f"the last results in {settings.shown(out)} show no failure of "
             f"{args.exercise or 'any exercise'}")
        return 0
    print_hints(work, failed, report, out, climb=True)
    return 0


def passed(grade_result, name):
    return _row(grade_result, name)[1]


def _failed(exercise, report):
    return any(report.find(path) is None for path in exercise.tests) or \
        bool(hints.failed_paths(report, exercise.tests))


def print_hints(work, failed, report, out, climb=False):
    """For each failed exercise, the rung reached (or the next, climbing)
    of the first hint its failure matches."""
    console = hints.console_of(out)
    record = hints.Record.of(work.tree, work.stage)
    for exercise in failed:
        hint = hints.select(exercise, report, console)
        if hint is None:
            print(f"  no hint is keyed to how {exercise.name} failed; its task says: "
                  f"{exercise.hint}")
            continue
        print(hints.format_hint(exercise, hint, record.show(exercise, hint, climb=climb)))


def cmd_solutions(args):
    stage = stages.resolve(args.stage) if args.stage else stages.default()
    exercise_set = _set_for(stage)
    tree = KernelTree()
    tree.ensure_base()
    exercise_set.solutions_dir.mkdir(parents=True, exist_ok=True)
    for exercise in exercise_set.exercises:
        path = exercise_set.solution_patch(exercise)
        path.write_text(solution_text(tree, exercise_set, exercise))
        print(settings.shown(path))


def register(verb):
    verb("exercise", cmd_exercise, "create and check out the exercise branch")
    verb("grade", cmd_grade, "grade the tree's exercises")
    p = verb("hint", cmd_hint, "the next hint for each failure of the last grade")
    p.add_argument("--exercise", default=None)
    verb("solutions", cmd_solutions, "regenerate solutions/NN-slug/*.patch")
