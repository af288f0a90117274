"""`make bench`: build and boot figures for docs/benchmarks.md.

Wall-clock seconds on a shared machine drift, so boot figures are also given
as ratios against a bare QEMU boot of the same kernel whose /init is one
line; the ratio says what the lab's own guest costs."""
import os
import platform
import re
import select
import shutil
import signal
import statistics
import subprocess
import time
from datetime import date

from . import initramfs, kbuild, qemu, settings, stages, workflow
from .errors import LabError
from .log import info
from .tree import KernelTree

ROUNDS = 5
# The lab's shell banner, then busybox's prompt waiting for input.
SHELL_PROMPT = re.compile(rb"this is the guest's shell.*\n[^\n]*[#$] ", re.S)


def timed(func):
    begin = time.monotonic()
    func()
    return time.monotonic() - begin


def machine():
    model = "unknown CPU"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{model}, {os.cpu_count()} cores, {mem:.0f} GiB, {platform.platform()}"


def boot_seconds(work, initrd, rounds=ROUNDS):
    out = workflow.fresh_dir(settings.BUILD / "bench" / "boot")
    times = []
    for _ in range(rounds):
        outcome = qemu.run_watched(qemu.Boot(work.kernel, initrd, "run", out, work.stage), 120,
                                   out / "console.log")
        if not outcome.ok:
            raise LabError(outcome.explain())
        times.append(outcome.seconds)
    return statistics.median(times)


def shell_seconds(work, initrd, rounds=ROUNDS, timeout=60):
    """Seconds from starting QEMU to the guest shell's first prompt: what a
    student waits for after `make boot`. The shell is then told to exit."""
    out = workflow.fresh_dir(settings.BUILD / "bench" / "shell")
    times = []
    for _ in range(rounds):
        boot = qemu.Boot(work.kernel, initrd, "shell", out, work.stage)
        begin = time.monotonic()
        proc = subprocess.Popen(boot.command("stdio"), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        seen = b""
        try:
            while not SHELL_PROMPT.search(seen):
                ready, _, _ = select.select([proc.stdout], [], [],
                                            max(0, timeout - (time.monotonic() - begin)))
                chunk = os.read(proc.stdout.fileno(), 4096) if ready else b""
                if not chunk:
                    raise LabError("the guest shell never showed its prompt; console tail:\n"
                                   + seen[-2000:].decode(errors="replace"))
                seen += chunk
            times.append(time.monotonic() - begin)
            proc.stdin.write(b"exit\n")
            proc.stdin.flush()
            proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return statistics.median(times)


def cmd_bench(args):
    rows = []
    main = KernelTree()
    main.ensure_base()
    stage = stages.resolve(args.stage) if args.stage else stages.all_stages()[0]
    main.prepare(stages.latest())
    # The workshop worktree, like make check: the student's tree stays as it is.
    work = workflow.Work(main.reset_workshop(stage.branch), stage)
    all_stages = stages.all_stages()

    info("cold build: a fresh object directory, ccache off")
    cold_obj = settings.BUILD / "bench" / "kbuild-cold"
    shutil.rmtree(cold_obj, ignore_errors=True)
    os.environ["LAB_CCACHE"] = "0"
    try:
        seconds = timed(lambda: kbuild.build(work.tree.path, cold_obj, work.stage_list, quiet=True))
    finally:
        os.environ.pop("LAB_CCACHE")
        shutil.rmtree(cold_obj, ignore_errors=True)
    rows.append(("cold kernel build (`-j%d`, no ccache)" % settings.jobs(), f"{seconds:.0f} s", ""))

    following = [s for s in all_stages if s.number > work.stage.number]
    if following:
        workflow.build_kernel(work, quiet=True)
        nxt = following[0]
        info(f"stage switch: {work.stage.slug} -> {nxt.slug}, incremental rebuild")
        switched = workflow.Work(main.reset_workshop(nxt.branch), nxt)
        seconds = timed(lambda: workflow.build_kernel(switched, quiet=True))
        rows.append((f"rebuild after switching {work.stage.number} -> {nxt.number}",
                     f"{seconds:.0f} s", "target: at most 60 s"))
        main.reset_workshop(stage.branch)
    workflow.build_kernel(work, quiet=True)

    info("boot figures, median of %d" % ROUNDS)
    bare_guest = initramfs.one_line_archive(work.obj / "lab-bare", "/bin/busybox reboot -f")
    bare = boot_seconds(work, bare_guest)
    lab_init = boot_seconds(work, workflow.build_guest(work, "run", "true"))
    rows.append(("bare QEMU boot, one-line `/init` that powers off", f"{bare:.2f} s", "reference"))
    rows.append(("boot to the lab's `/init`, run `true`, power off", f"{lab_init:.2f} s",
                 f"{lab_init / bare:.2f} x bare"))
    shell = shell_seconds(work, workflow.build_guest(work, "shell"))
    rows.append(("boot to the guest shell's prompt", f"{shell:.2f} s",
                 f"{shell / bare:.2f} x bare; target: at most 1.5 s"))
    first = work.stage.tests[0]
    test = boot_seconds(work, workflow.build_guest(work, "run", first.command), rounds=3)
    rows.append((f"boot, run the stage's first test (`{first.command}`), power off",
                 f"{test:.2f} s", f"{test / bare:.2f} x bare"))

    info("the student's loop: make run CMD=true with nothing changed")
    loop = []
    for _ in range(3):
        begin = time.monotonic()
        subprocess.run(["make", "-s", "-C", str(settings.REPO), "run", "CMD=true",
                        f"TREE={work.tree.path}", f"STAGE={work.stage.number}"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        loop.append(time.monotonic() - begin)
    loop = statistics.median(loop)
    rows.append(("`make run CMD=true`, nothing changed", f"{loop:.2f} s",
                 f"{loop - lab_init:.2f} s above the boot; target: at most 1.0 s above"))

    rows += grade_loop_rows(main)
    rows += watch_rows(main)

    latest = stages.default()
    if latest.number != work.stage.number:
        # What `make boot` boots: every stage's fragment, patches and tests.
        info(f"the latest stage, {latest.slug}: the kernel and initramfs `make boot` uses")
        newest = workflow.Work(main.reset_workshop(latest.branch), latest)
        workflow.build_kernel(newest, quiet=True)
        shell = shell_seconds(newest, workflow.build_guest(newest, "shell"))
        rows.append((f"stage {latest.number}: boot to the guest shell's prompt", f"{shell:.2f} s",
                     "`make boot`'s default stage; target: at most 1.5 s"))
        main.reset_workshop(stage.branch)

    accel = qemu.accelerator()
    table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    section = (f"## Build and boot ({date.today().isoformat()}, stage {work.stage.slug})\n\n"
               f"Machine: {machine()}; accelerator: {accel}.\n\n"
               f"| Measurement | Figure | Note |\n| --- | --- | --- |\n{table}\n")
    write_section(section, "## Build and boot")
    print(section)


def grade_loop_rows(main):
    """The student's other loop: one exercised function changed, then
    `make grade`, on the first stage with exercises. The change is one of
    its wrong solutions, so that the verdict is a real one."""
    from . import exercises
    stage = next((s for s in stages.all_stages() if exercises.load(s)), None)
    if stage is None:
        return []
    exercise_set = exercises.load(stage)
    wrong = exercise_set.wrong_solutions[0]
    work = workflow.Work(main.reset_workshop(stage.branch), stage)
    info(f"the grading loop: {stage.slug} built, then {wrong.name} applied and graded")
    exercises.grade(work, exercise_set, quiet=True)
    main.reset_workshop(stage.branch, [wrong])
    begin = time.monotonic()
    result = exercises.grade(work, exercise_set, quiet=True)
    seconds = time.monotonic() - begin
    verdict = "fails, as it must" if not result.ok else "PASSES: the grader missed it"
    return [(f"`make grade STAGE={stage.number}` after one exercised function changed "
             f"({wrong.stem}, whose grade {verdict})", f"{seconds:.1f} s",
             "target: at most 12 s")]


def watch_rows(main):
    """make watch's latency: from a saved change (one of the first graded
    stage's wrong solutions) to its verdict on the terminal."""
    from . import exercises
    stage = next((s for s in stages.all_stages() if exercises.load(s)), None)
    if stage is None:
        return []
    wrong = exercises.load(stage).wrong_solutions[0]
    tree = main.reset_workshop(stage.branch)
    info(f"make watch: {stage.slug} graded, then {wrong.name} saved")
    watcher = subprocess.Popen(
        ["make", "-s", "-C", str(settings.REPO), "watch", f"TREE={tree.path}",
         f"STAGE={stage.number}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)

    def next_verdict():
        for line in watcher.stdout:
            if "waiting for a change" in line:
                return
        raise LabError("make watch ended before its verdict")
    try:
        next_verdict()
        begin = time.monotonic()
        tree.git("apply", str(wrong))
        next_verdict()
        seconds = time.monotonic() - begin
    finally:
        os.killpg(watcher.pid, signal.SIGINT)
        watcher.wait()
    main.reset_workshop(stage.branch)
    return [(f"`make watch STAGE={stage.number}`: a saved change to its verdict",
             f"{seconds:.1f} s", "the grade plus at most 1.5 s to see the save settle")]


def write_section(section, heading):
    """Replace the section that starts with `heading` in docs/benchmarks.md."""
    path = settings.REPO / "docs" / "benchmarks.md"
    text = path.read_text() if path.exists() else "# Benchmarks\n\nMeasured by `make bench`.\n"
    start = text.find(heading)
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section.rstrip("\n") + "\n" + (text[end:] if end != -1 else "")
    path.write_text(text)


def cmd_bench_class(args):
    """Grade a made-up class of the first stage with exercises, one grade at
    a time, after one grade that warms the slot and ccache up."""
    from . import classgrade, exercises, fixtures
    stage = stages.resolve(args.stage) if args.stage else \
        next(s for s in stages.all_stages() if exercises.load(s))
    root = settings.BUILD / "bench" / "class"
    shutil.rmtree(root, ignore_errors=True)
    inbox = root / "inbox"
    names = fixtures.write_realistic_class(inbox, stage)
    warm_inbox = root / "warm"
    warm_inbox.mkdir()
    shutil.copy2(inbox / "solved.patch", warm_inbox / "warm.patch")
    info("class bench: the first grade in a new slot, which warms it up")
    classgrade.remove_slots(KernelTree())
    first = timed(lambda: classgrade.grade_class(
        classgrade.ClassRun(stage, warm_inbox, root / "warm-out", jobs=1)))
    jobs = classgrade.parallel_grades(args.jobs)
    info(f"class bench: {len(names)} submissions, {jobs} at a time")
    begin = time.monotonic()
    verdicts = classgrade.grade_class(classgrade.ClassRun(stage, inbox, root / "out", jobs=jobs))
    seconds = time.monotonic() - begin
    singles = sorted(v.seconds for v in verdicts)
    per_hour = len(verdicts) * 3600 / seconds
    rows = [(f"{len(verdicts)} chapter-{int(stage.number)} submissions (the solution and "
             f"{len(verdicts) - 1} wrong ones), {jobs} at a time", f"{seconds:.0f} s",
             f"{per_hour:.0f} submissions/hour; target: 60"),
            ("warm grade of one submission: reset, incremental build, boot, tests "
             "(median)", f"{statistics.median(singles):.0f} s",
             f"min {singles[0]:.0f} s, max {singles[-1]:.0f} s; target: under 60 s"),
            ("first grade in a new slot: a copy of a built tree, then as above",
             f"{first:.0f} s", "the copy included; target: at most 90 s")]
    table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    section = (f"## Class grading ({date.today().isoformat()}, stage {stage.slug})\n\n"
               f"Measured by `make bench-class`. Machine: {machine()}; accelerator: "
               f"{qemu.accelerator()}; ccache on.\n\n"
               f"| Measurement | Figure | Note |\n| --- | --- | --- |\n{table}\n")
    write_section(section, "## Class grading")
    print(section)


def register(verb):
    verb("bench", cmd_bench, "measure build and boot times into docs/benchmarks.md")
    p = verb("bench-class", cmd_bench_class, "measure class grading into docs/benchmarks.md")
    p.add_argument("--jobs", type=int, default=None)
