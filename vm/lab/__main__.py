"""Command line of the lab's machinery; the Makefile is its front door."""
import argparse
import sys

from . import (bench, check, classgrade, debugger, exercises, experiments, handout, settings,
               stages, submission, watch, workflow)
from .errors import LabError


def cmd_stages(args):
    for stage in stages.all_stages():
        print(f"{stage.number}  {stage.slug:<22} {stage.title}")


def cmd_packages(args):
    """The Debian packages the stages' declarations need (vm/deps.sh)."""
    needed = []
    for stage in stages.all_stages():
        needed += [p for p in stage.host_packages if p not in needed]
    print(" ".join(needed))


def cmd_stage(args):
    workflow.prepare_stage(args.stage)


def cmd_branches(args):
    workflow.prepare_branches()


def cmd_kernel(args):
    work = workflow.select(args.stage, args.tree)
    workflow.build_kernel(work)
    print(work.kernel)


def cmd_boot(args):
    return workflow.boot_shell(workflow.select(args.stage, args.tree))


def cmd_run(args):
    if not args.command:
        raise LabError("give the guest command: make run CMD='uname -a'")
    return workflow.run_command(workflow.select(args.stage, args.tree), args.command)


def cmd_test(args):
    work = workflow.select(args.stage, args.tree)
    run = workflow.run_tests(work)
    workflow.print_report(f"stage {work.stage.slug}: guest tests", run)
    return 0 if run.ok else 1


def cmd_debug(args):
    return debugger.debug(workflow.select(args.stage, args.tree), args.command)


def cmd_gdb_test(args):
    work = workflow.select(args.stage, args.tree)
    scripts, on_host = work.stage.gdb_scripts, work.stage.host_walkthroughs
    if not scripts and not on_host:
        print(f"stage {work.stage.slug} has no gdb walkthroughs")
        return 0
    failed = 0
    if scripts:
        workflow.build_kernel(work)
    for script in scripts:
        missing, out = debugger.run_walkthrough(work, script)
        if missing:
            failed += 1
            print(f"FAIL  {script.name}: expected /{missing}/ in {out / 'gdb.log'}")
        else:
            print(f"PASS  {script.name}")
    if on_host:
        # Where `make test` leaves them: the host walkthroughs write under
        # their results directory's gdb/, as the guest's do.
        out = workflow.results_dir(work)
        out.mkdir(parents=True, exist_ok=True)
        report = workflow.run_host_tests(work, out, True, on_host, "gdb-host")
        for result in report.results:
            failed += not result.ok
            print(f"{result.status}  {result.name} (on the host)"
                  + ("" if result.ok else f": see {settings.shown(out / 'gdb-host-ktap.txt')}"))
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="lab", description=__doc__)
    sub = parser.add_subparsers(dest="verb", required=True)

    def verb(name, func, help_text, command=False):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--stage", default=None, help="NN or slug (default: the checked-out one)")
        p.add_argument("--tree", default=None, help="kernel tree (default: build/linux)")
        if command:
            p.add_argument("--command", default=None)
        p.set_defaults(func=func)
        return p

    verb("stages", cmd_stages, "list the stages")
    verb("packages", cmd_packages, "the Debian packages the stages' declarations need")
    verb("stage", cmd_stage, "prepare and check out a stage branch")
    verb("branches", cmd_branches, "bring every stage branch up to date, checking out nothing")
    verb("kernel", cmd_kernel, "build the stage's kernel")
    verb("boot", cmd_boot, "boot to a guest shell")
    verb("run", cmd_run, "boot and run one command", command=True)
    verb("test", cmd_test, "run the stage's guest tests")
    verb("debug", cmd_debug, "boot paused with gdb attached", command=True)
    verb("gdb-test", cmd_gdb_test, "run the stage's gdb walkthroughs")
    for module in (check, exercises, experiments, watch, bench, submission, classgrade,
                   handout):
        module.register(verb)

    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except LabError as error:
        print(f"lab: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
