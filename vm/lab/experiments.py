"""Experiments: a stage's kernel with one more patch, and a guest command
whose KTAP says what the change did (`[[experiment]]` in stage.toml).

A chapter that asks "how much of this difference does that constant
explain?" answers it with a kernel that has the other value. The patch is
applied in the first workshop, never in the student's tree, and the
results go to build/results/NN-slug/experiments/<name>/, where the book
reads them. `make check` runs every experiment after the stage's proofs.
"""
from . import exercises, settings, stages, workflow
from .errors import LabError
from .tree import KernelTree

WORKSHOP = 1


def results_dir(stage, experiment):
    return settings.BUILD / "results" / stage.slug / "experiments" / experiment.name


def run(stage, experiment, quiet=True):
    """The TestRun of one experiment; raises LabError if its kernel does
    not build or its patch does not apply."""
    main = KernelTree()
    main.ensure_base()
    main.prepare(stage)
    with exercises.workshop_lock(WORKSHOP):
        work = workflow.Work(main.reset_workshop(stage.branch, [experiment.patch],
                                                 number=WORKSHOP), stage)
        workflow.build_kernel(work, quiet=quiet)
        return workflow.run_tests(work, out=results_dir(stage, experiment), quiet=quiet,
                                  build=False,
                                  tests=[stages.Test(experiment.name, experiment.run)])


def chosen(stage, name=None):
    found = stage.experiments
    if name:
        found = [e for e in found if e.name == name]
        if not found:
            names = ", ".join(e.name for e in stage.experiments) or "none"
            raise LabError(f"stage {stage.slug} has no experiment '{name}' "
                           f"(its experiments: {names})")
    return found


def cmd_experiment(args):
    # The stage checked out, as for every verb; the experiment itself runs
    # in the workshop and leaves the tree as it is.
    stage = stages.resolve(args.stage) if args.stage else \
        (workflow.stage_of_head(KernelTree(args.tree)) or stages.default())
    found = chosen(stage, args.name)
    if not found:
        print(f"stage {stage.slug} has no experiments")
        return 0
    failed = 0
    for experiment in found:
        print(f"experiment {experiment.name}: {experiment.summary}")
        test_run = run(stage, experiment, quiet=False)
        workflow.print_report(f"stage {stage.slug}: experiment {experiment.name}", test_run)
        failed += not test_run.ok
    return 1 if failed else 0


def register(verb):
    parser = verb("experiment", cmd_experiment,
                  "build the stage's kernel with an experiment's patch and run it")
    parser.add_argument("--name", default=None, help="one experiment (default: all)")
