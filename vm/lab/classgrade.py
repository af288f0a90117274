"""`make grade-class`: grade every submission of a class, the way `make grade`
grades one tree.

Each submission is graded by a child process (`lab grade-one`) in a slot: a
worktree of the kernel tree with its own object directory, used by one grade
at a time. The slot is reset to the exercise commit and the submission's
exercise files before each build, so what a previous submission left behind
is only make's up-to-date objects, which kbuild's dependency tracking keeps
correct; keeping them is what makes a grade an incremental build. The
parent bounds each child in time and output and turns anything that goes
wrong (a build error, a panic, a hang, a flood, a full share, a crash of the
grader itself) into a failed grade with a reason, then goes on.

Results live in OUT/<student>/grade.json, written last and atomically: a
re-run skips a student whose submission and grader are unchanged, and
grades again one that was interrupted.
"""
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import exercises, kbuild, report, settings, stages, submission, workflow
from .errors import LabError
from .log import info
from .tree import KernelTree, copy_built_tree

# A grade needs a guest (1 GiB), QEMU around it, and a compiler.
MEMORY_PER_GRADE = 2 * 2**30
# A cold build on one core takes a quarter of an hour; a grade is warm.
BUILD_ALLOWANCE = 1800
LOG_LIMIT = 16 * 2**20


@dataclass
class Verdict:
    student: str
    status: str                  # "graded" or "failed": failed means no usable run
    reason: str = ""
    rows: list = field(default_factory=list)   # [exercise, ok, detail]
    notes: list = field(default_factory=list)
    console_tail: str = ""
    submission_digest: str = ""
    grader: str = ""
    seconds: float = 0.0
    hints: dict = field(default_factory=dict)  # {exercise: hint rungs the student was shown}

    @property
    def passed(self):
        return sum(1 for _, ok, _ in self.rows if ok)

    def result_of(self, name):
        for row_name, ok, _ in self.rows:
            if row_name == name:
                return ok
        return False

    @classmethod
    def load(cls, path):
        try:
            return cls(**json.loads(Path(path).read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def save(self, path):
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(asdict(self), indent=1) + "\n")
        os.replace(partial, path)


def grader_fingerprint(tree, exercise_set):
    """What a grade depends on besides the submission: the exercise commit,
    the exercise data and the guest tests. A change to any regrades all."""
    import hashlib
    digest = hashlib.sha256(exercises.exercise_commit(tree, exercise_set).encode())
    for path in (exercise_set.dir / "exercises.toml", exercise_set.stage.path / "tests"):
        if path.exists():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def row_names(exercise_set):
    return ([f"required: {path}" for path in exercise_set.required]
            + [exercise.name for exercise in exercise_set.exercises])


def failed(student, reason, exercise_set, tail=""):
    rows = [[name, False, reason] for name in row_names(exercise_set)]
    return Verdict(student, "failed", reason, rows, console_tail=tail)


# -- how many at once ------------------------------------------------------------

def memory_available():
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return MEMORY_PER_GRADE


def parallel_grades(requested=None):
    """As many as asked, but never more than cores or memory carry."""
    cores = os.cpu_count() or 1
    by_memory = max(1, memory_available() // MEMORY_PER_GRADE)
    return max(1, min(requested or cores, cores, by_memory))


# -- one grade, in a child process -------------------------------------------------

def slot_tree(main, stage, number, seed=None):
    """Slot N: a worktree of the kernel tree at build/grading/slot-N. A new
    slot made with a `seed`, a built worktree of the same kernel tree,
    starts as its copy: the slot's first grade is then an incremental
    build, not a whole kernel."""
    path = settings.BUILD / "grading" / f"slot-{number}"
    if not (path / ".git").exists():
        main.git("worktree", "prune")
        path.parent.mkdir(parents=True, exist_ok=True)
        main.git("worktree", "add", "-q", "--detach", *(["--no-checkout"] if seed else []),
                 str(path), stage.branch)
        if seed:
            info(f"grading slot {number} starts as a copy of {settings.shown(seed.path)}")
            copy_built_tree(seed, KernelTree(path))
    return KernelTree(path)


def remove_slots(main):
    """Every grading slot, gone: the next class starts in new ones."""
    for path in sorted((settings.BUILD / "grading").glob("slot-*")):
        main.git("worktree", "remove", "--force", str(path), check=False)
        shutil.rmtree(path, ignore_errors=True)
    main.git("worktree", "prune")


def grading_slots(main, stage, count):
    """Slots 1 to count. A new slot starts as a copy of a built tree, so
    that its first grade is not a whole kernel (ccache misses under the
    slot's own path, and objtool runs on every object anyway): slot 1 from
    the workshop, if no other lab command is working in it, else from the
    kernel tree itself; every later slot from slot 1."""
    arch = stage.machine.arch
    with main.borrowed_workshop(1) as workshop:
        seeds = [tree for tree in (workshop, main) if tree and kbuild.has_built(tree.path, arch)]
        first = slot_tree(main, stage, 1, seed=seeds[0] if seeds else None)
    built = first if kbuild.has_built(first.path, arch) else None
    return [first] + [slot_tree(main, stage, number, seed=built) for number in range(2, count + 1)]


def with_timeout(stage, seconds):
    """The stage, with its boots limited to `seconds` instead of stage.conf's."""
    if not seconds:
        return stage

    class Limited(type(stage)):
        @property
        def timeout(self):
            return seconds
    return Limited(stage.slug, stage.path)


def grade_one(stage, commit, slot, out, boot_timeout=None):
    """Build and grade `commit`'s exercise files in the slot; write
    out/result.json. Runs in the child: the parent watches it."""
    exercise_set = exercises.load(stage)
    tree = KernelTree(slot)
    base = exercises.exercise_commit(KernelTree(), exercise_set)
    tree.git("checkout", "-q", "-f", "--detach", base)
    tree.git("clean", "-q", "-fdx", *kbuild.KEEP_ON_CLEAN)
    tree.git("checkout", "-q", commit, "--", *submission.graded_files(exercise_set))
    work = workflow.Work(tree, with_timeout(stage, boot_timeout))
    result = {"status": "graded", "reason": "", "rows": [], "tail": ""}
    try:
        workflow.build_kernel(work, quiet=True)
    except LabError as error:
        result.update(status="failed", reason="the kernel did not build",
                      tail=str(error)[-4000:])
        (Path(out) / "result.json").write_text(json.dumps(result))
        return
    graded = exercises.grade(work, exercise_set, out=Path(out) / "run", quiet=True)
    result["rows"] = [list(row) for row in graded.rows]
    if not graded.run.outcome.ok:
        result.update(reason=graded.run.outcome.reason, tail="".join(graded.run.outcome.tail))
    elif not graded.ok:
        result["tail"] = "".join(graded.run.outcome.tail)
    (Path(out) / "result.json").write_text(json.dumps(result))


def child_command(stage, commit, slot, out, boot_timeout):
    return [sys.executable, "-m", "lab", "grade-one", "--stage", stage.slug, "--commit", commit,
            "--slot", str(slot), "--out", str(out)] + \
        (["--boot-timeout", str(boot_timeout)] if boot_timeout else [])


def watch_child(command, log_path, limit_seconds, env=None):
    """Run the child in its own session; kill the whole group when it takes
    longer than limit_seconds or prints more than LOG_LIMIT (its output goes
    through this process, so the log never grows past that). The reason, or ''."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            env=env, cwd=settings.REPO)
    printed = [0]

    def pump():
        with open(log_path, "wb") as log:
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):
                if printed[0] < LOG_LIMIT:
                    log.write(chunk[:LOG_LIMIT - printed[0]])
                printed[0] += len(chunk)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    begin = time.monotonic()
    reason = ""
    while proc.poll() is None:
        if time.monotonic() - begin > limit_seconds:
            reason = f"grading took longer than {limit_seconds} s"
        elif printed[0] > LOG_LIMIT:
            reason = f"grading printed more than {LOG_LIMIT // 2**20} MiB"
        if reason:
            break
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
    if not reason and proc.returncode != 0:
        reason = f"the grader exited with status {proc.returncode}"
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the child, or whatever it left running
    except ProcessLookupError:
        pass
    proc.wait()
    reader.join(timeout=5)
    return reason


# -- the class -----------------------------------------------------------------------

@dataclass
class ClassRun:
    stage: stages.Stage
    submissions_dir: Path
    out: Path
    jobs: int = None
    boot_timeout: int = None
    regrade: bool = False


def grade_class(run, command_for=child_command):
    """Grade every submission; returns the verdicts, in the students' order.
    command_for(stage, commit, slot, out, boot_timeout) is the child to run
    (tests put a stand-in there)."""
    exercise_set = exercises.load(run.stage)
    if not exercise_set:
        raise LabError(f"stage {run.stage.slug} has no exercises to grade")
    found = submission.find(run.submissions_dir)
    main = KernelTree()
    main.ensure_base()
    main.prepare(run.stage)
    grader = grader_fingerprint(main, exercise_set)
    run.out.mkdir(parents=True, exist_ok=True)

    verdicts, pending = {}, []
    for each in found:
        digest = each.digest()
        previous = Verdict.load(run.out / each.student / "grade.json")
        if (not run.regrade and previous and previous.submission_digest == digest
                and previous.grader == grader):
            verdicts[each.student] = previous
            continue
        try:
            commit = submission.import_commit(main, exercise_set, each)
            notes = submission.ignored_changes(main, exercise_set, commit)
            shown = submission.hints_seen(main, exercise_set, each, commit)
        except submission.BadSubmission as error:
            verdict = failed(each.student, str(error), exercise_set)
            _finish(run, verdict, digest, grader, 0.0)
            verdicts[each.student] = verdict
            continue
        pending.append((each, digest, commit, notes, shown))
    skipped = len(found) - len(pending)
    jobs = parallel_grades(run.jobs)
    info(f"{run.stage.slug}: {len(found)} submissions, {skipped} already graded or "
         f"refused, {len(pending)} to grade, {jobs} at a time")

    slots = queue.Queue()
    for slot in grading_slots(main, run.stage, min(jobs, max(1, len(pending)))):
        slots.put(slot)
    env = dict(os.environ, PYTHONPATH=str(settings.REPO / "vm"),
               BUILD=str(settings.BUILD), KERNEL_TREE=str(settings.KERNEL_TREE),
               # A shared machine may ask for less with BUILD_JOBS.
               JOBS=os.environ.get("BUILD_JOBS") or str(max(1, (os.cpu_count() or 1) // jobs)))
    limit = (run.boot_timeout or run.stage.timeout) + BUILD_ALLOWANCE

    def grade_pending(item):
        each, digest, commit, notes, shown = item
        slot = slots.get()
        try:
            out = workflow.fresh_dir(run.out / each.student)
            begin = time.monotonic()
            reason = watch_child(command_for(run.stage, commit, slot.path, out, run.boot_timeout),
                                 out / "grader.log", limit, env)
            verdict = _verdict_from(each.student, out, reason, exercise_set)
            verdict.notes = ([f"ignored changes outside the exercise files: {', '.join(notes)}"]
                             if notes else [])
            verdict.hints = shown
            _finish(run, verdict, digest, grader, time.monotonic() - begin)
            return verdict
        finally:
            slots.put(slot)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for verdict in pool.map(grade_pending, pending):
            verdicts[verdict.student] = verdict
    ordered = [verdicts[each.student] for each in found]
    report.write(run.out, run.stage, row_names(exercise_set), ordered)
    return ordered


def _verdict_from(student, out, reason, exercise_set):
    result_file = out / "result.json"
    if reason or not result_file.exists():
        log = out / "grader.log"
        tail = log.read_bytes()[-4000:].decode(errors="replace") if log.exists() else ""
        return failed(student, reason or "the grader left no result", exercise_set, tail)
    result = json.loads(result_file.read_text())
    if result["status"] == "failed":
        return failed(student, result["reason"], exercise_set, result["tail"])
    return Verdict(student, "graded", result["reason"], result["rows"],
                   console_tail=result["tail"])


def _finish(run, verdict, digest, grader, seconds):
    verdict.submission_digest, verdict.grader = digest, grader
    verdict.seconds = round(seconds, 1)
    verdict.save(run.out / verdict.student / "grade.json")
    print(f"{'PASS' if verdict.status == 'graded' and all(ok for _, ok, _ in verdict.rows) else 'FAIL'}"
          f"  {verdict.student}: {verdict.passed}/{len(verdict.rows)}"
          + (f"  ({verdict.reason})" if verdict.reason else "")
          + (f"  [{seconds:.0f} s]" if seconds else ""), flush=True)


# -- verbs -----------------------------------------------------------------------------

def cmd_grade_class(args):
    if not args.stage:
        raise LabError("name the stage: make grade-class STAGE=NN SUBMISSIONS=dir/")
    if not args.submissions:
        raise LabError("name the submissions: make grade-class STAGE=NN SUBMISSIONS=dir/")
    stage = stages.resolve(args.stage)
    out = Path(args.out) if args.out else settings.BUILD / "class" / stage.slug
    verdicts = grade_class(ClassRun(stage, Path(args.submissions), out.resolve(),
                                    args.jobs, args.boot_timeout, args.regrade))
    print(f"\n{len(verdicts)} graded; results in {settings.shown(out / 'grades.csv')} "
          f"and {settings.shown(out / 'report.html')}")
    return 0


def cmd_grade_one(args):
    stage = stages.resolve(args.stage)
    grade_one(stage, args.commit, Path(args.slot), Path(args.out), args.boot_timeout)


def register(verb):
    p = verb("grade-class", cmd_grade_class, "grade a directory of submissions")
    p.add_argument("--submissions", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--boot-timeout", type=int, default=None)
    p.add_argument("--regrade", action="store_true", help="grade even unchanged submissions")
    p = verb("grade-one", cmd_grade_one, "grade one imported submission in a slot (internal)")
    p.add_argument("--commit", required=True)
    p.add_argument("--slot", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--boot-timeout", type=int, default=None)
