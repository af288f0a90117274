"""The lab's verbs on one stage: pick the tree and stage, build, boot, test.

Targets that only read the tree build whatever is in it, uncommitted edits
included. They switch the tree to another stage only when it is clean.
"""
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import arches, autopsy, initramfs, kbuild, ktap, qemu, settings, stages
from .errors import LabError
from .log import info, warn
from .tree import KernelTree


@dataclass
class Work:
    tree: KernelTree
    stage: stages.Stage

    @property
    def obj(self):
        return kbuild.object_dir(self.tree.path, self.stage.machine.arch)

    @property
    def stage_list(self):
        return stages.machine_lineage(self.stage)

    @property
    def kernel(self):
        """The image the stage's machine boots."""
        machine = self.stage.machine
        return self.obj / arches.boot_image(arches.ARCHES[machine.arch], machine.firmware)

    @property
    def vmlinux(self):
        return self.obj / "vmlinux"

    @property
    def symbols(self):
        arch = arches.ARCHES[self.stage.machine.arch]
        return autopsy.Symbols(self.vmlinux, self.tree.path, arch.cross_compile)


def stage_of_head(tree):
    """The stage HEAD belongs to: by branch name for the lab's own branches
    (stage/NN-slug, exercise/NN-slug), else by ancestry."""
    branch = tree.head_branch() or ""
    kind, _, slug = branch.partition("/")
    if kind in ("stage", "exercise"):
        try:
            return stages.resolve(slug)
        except LabError:
            pass
    return tree.current_stage()


def select(stage_name=None, tree_path=None, switch=True):
    """The tree and stage a target works on. With no stage named, the stage
    checked out now (or, for a new tree, stages.default())."""
    named = stages.resolve(stage_name) if stage_name else None  # a bad name fails first
    tree = KernelTree(tree_path)
    tree.ensure_base()
    here = stage_of_head(tree)
    stage = named or here or stages.default()
    if here == stage:
        if not tree.stage_is_current(stage) and tree.head_branch() == stage.branch:
            warn(f"{stage.branch} predates kernel-patches/{stage.slug}; "
                 f"`make stage STAGE={stage.number}` brings it up to date")
        return Work(tree, stage)
    if not switch:
        raise LabError(f"the tree at {tree} is not on stage {stage.slug}")
    tree.refuse_if_dirty(f"switch {tree} to {stage.branch}")
    tree.prepare(stage)
    tree.checkout(stage.branch, f"switch {tree} to {stage.branch}")
    info(f"kernel tree {tree} is on {stage.branch}: {stage.title}")
    return Work(tree, stage)


def prepare_stage(stage_name=None):
    """`make stage`: bring the stage branch up to date and check it out."""
    stage = stages.resolve(stage_name) if stage_name else stages.default()
    tree = KernelTree()
    tree.ensure_base()
    tree.prepare(stage)
    tree.checkout(stage.branch, f"switch {tree} to {stage.branch}")
    info(f"kernel tree {tree} is on {stage.branch}: {stage.title}")
    return Work(tree, stage)


def build_kernel(work, quiet=False, nice=0):
    """nice: the build's scheduling niceness, for builds that run beside a
    guest whose timing matters more."""
    return kbuild.build(work.tree.path, work.obj, work.stage_list, quiet=quiet, nice=nice)


def build_module(work, module, quiet=False, nice=0):
    """One module alone, with the kernel the stage last built: see
    kbuild.build_module. False when that kernel is not there."""
    return kbuild.build_module(work.tree.path, work.obj, work.stage_list, module,
                               quiet=quiet, nice=nice)


def build_guest(work, mode, command=None, tests=None):
    """The guest's initramfs; tests (the stage's own by default) are those
    a test run runs."""
    initramfs.build(work.tree.path, work.obj, work.stage, work.stage_list)
    return initramfs.run_archive(work.obj, mode, command,
                                 work.stage.tests if tests is None else tests)


def results_dir(work, name=None):
    if name:
        return settings.BUILD / "results" / name
    if work.tree.path.resolve() == settings.KERNEL_TREE.resolve():
        return settings.BUILD / "results" / work.stage.slug
    return work.obj / "results" / work.stage.slug


def fresh_dir(path, keep=()):
    """An empty directory, except for the subdirectories named in keep."""
    if path.is_dir():
        for entry in path.iterdir():
            if entry.name in keep:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    path.mkdir(parents=True, exist_ok=True)
    return path


# What other runs keep in a stage's results: a test run leaves them alone.
OTHER_RUNS = ("gdb", "proofs", "run", "shell", "debug")


def boot_shell(work):
    build_kernel(work)
    initrd = build_guest(work, "shell")
    out = fresh_dir(results_dir(work) / "shell")
    info(f"booting {work.stage.slug}; 'exit' or Ctrl-A X leaves the guest")
    return qemu.run_interactive(qemu.Boot(work.kernel, initrd, "shell", out, work.stage))


def run_command(work, command, timeout=None):
    build_kernel(work)
    initrd = build_guest(work, "run", command)
    out = fresh_dir(results_dir(work) / "run")
    outcome = qemu.run_watched(qemu.Boot(work.kernel, initrd, "run", out, work.stage,
                                         symbols=work.symbols),
                               timeout or work.stage.timeout, out / "console.log", echo=True)
    if not outcome.ok:
        raise LabError(outcome.explain())
    status = out / "status"
    return int(status.read_text()) if status.exists() else 1


@dataclass
class TestRun:
    report: ktap.Report
    outcome: qemu.Outcome
    out: Path

    @property
    def ok(self):
        return self.outcome.ok and self.report.ok


def run_tests(work, out=None, quiet=False, build=True, extra_cmdline=(), only=None,
              tests=None, settle=None):
    """The stage's host tests, then a boot with its guest test list; one
    report of both. With `only` (a set of test names), just those tests
    run, and no host reports: grading needs no measurements. With `tests`,
    exactly those guest tests run, and nothing on the host. With `settle`,
    a function of the report so far, the guest is stopped as soon as it
    gives a reason: the report is then what the guest had reported, the
    running test's subtests included."""
    out = fresh_dir(out or results_dir(work), keep=OTHER_RUNS)
    if tests is not None:
        only = {t.name for t in tests}
    pick = (lambda chosen: chosen) if only is None else \
        (lambda chosen: [t for t in chosen if t.name in only])
    host_tests = pick(work.stage.host_tests) if tests is None else []
    host = run_host_tests(work, out, quiet, host_tests) if host_tests else None
    guest_tests = pick(work.stage.tests) if tests is None else list(tests)
    if only is not None and not guest_tests:
        # A grade whose tests all run on the host (a Kconfig puzzle) needs
        # no kernel and no boot.
        outcome = qemu.Outcome(True, "no guest test chosen", [], 0.0)
        report = ktap.parse("")
    else:
        if build:
            build_kernel(work, quiet=quiet)
        initrd = build_guest(work, "test", tests=guest_tests)
        boot = qemu.Boot(work.kernel, initrd, "test", out, work.stage,
                         extra_cmdline=list(extra_cmdline), symbols=work.symbols)
        settled = []

        def stop_when():
            reason = settle(report_so_far(out))
            if reason:
                settled.append(reason)
            return reason
        outcome = qemu.run_watched(boot, work.stage.timeout_for(guest_tests),
                                   out / "console.log", echo=not quiet,
                                   stop_when=stop_when if settle else None)
        # A run cut short, by a settled grade or by a crash or hang, keeps
        # what the test it was running had reported: the failures a hint
        # is keyed to often come before the crash they lead to.
        report = report_so_far(out)
    if not outcome.ok:
        report.problems.append(outcome.explain())
    if host:
        report.results[:0] = host.results
        report.problems[:0] = host.problems
    if work.stage.host_reports and outcome.ok and only is None:
        after = run_host_tests(work, out, quiet, work.stage.host_reports, "host-reports")
        report.results += after.results
        report.problems += after.problems
    return TestRun(report, outcome, out)


def _read(path):
    return path.read_text(errors="replace") if path.exists() else ""


def report_so_far(out):
    """What a guest running its tests has reported into out: the results
    of the tests it finished, and the subtests of the one it is running."""
    return ktap.with_live(ktap.parse(_read(out / "ktap.txt")), _read(out / "live.txt"))


def run_host_tests(work, out, quiet, tests=None, name="host"):
    """Host tests follow the guest runner's rules: exit 0 passes, 4 skips,
    KTAP output nests. They run in the stage tree with LAB_OBJ, LAB_REPO
    and LAB_RESULTS (this run's results directory) set."""
    tests = work.stage.host_tests if tests is None else tests
    lines = ["KTAP version 1", f"1..{len(tests)}"]
    env = dict(os.environ, LAB_OBJ=str(work.obj), LAB_REPO=str(settings.REPO),
               LAB_RESULTS=str(out))
    for number, test in enumerate(tests, 1):
        try:
            result = subprocess.run(["sh", "-c", test.command], cwd=work.tree.path, env=env,
                                    capture_output=True, text=True, errors="replace",
                                    timeout=work.stage.timeout)
            output, status = result.stdout + result.stderr, result.returncode
        except subprocess.TimeoutExpired:
            output, status = f"timed out after {work.stage.timeout} s\n", 124
        if not quiet:
            print(output, end="")
        nested = any(ktap.VERSION.match(l.strip()) for l in output.splitlines())
        prefix = "    " if nested else "# "
        lines += [prefix + l for l in output.splitlines()]
        verdict = {0: "ok", 4: "ok"}.get(status, "not ok")
        lines.append(f"{verdict} {number} {test.name}" +
                     (" # SKIP" if status == 4 else f" # exit status {status}" if status else ""))
    text = "\n".join(lines) + "\n"
    (out / f"{name}-ktap.txt").write_text(text)
    return ktap.parse(text)


def print_report(title, run):
    print(f"\n{title}")
    for result in run.report.results:
        print(f"  {result.status}  {result.name}" +
              (f"  ({result.directive})" if result.directive else ""))
        if not result.ok:
            for child in result.children:
                if not child.ok:
                    print(f"          FAIL  {child.name}")
    for problem in run.report.problems:
        print("  problem: " + problem.replace("\n", "\n           "))
    print(f"  results in {settings.shown(run.out)}")


def prepare_branches():
    """Every stage branch up to date, nothing checked out: what the book
    reads its listings from."""
    tree = KernelTree()
    tree.ensure_base()
    tree.prepare(stages.latest())
