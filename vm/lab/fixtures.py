"""Submissions that misbehave, made from a stage's solution, for proving that
class grading survives them (make check) and for measuring it (make bench).

Each unsafe fixture is the stage's solution with a few statements put at
the top of one exercise function: a C function of the kernel proper, which
the stage's KUnit suite calls from a kthread, where it may sleep.
"""
import re
from pathlib import Path

from . import exercises, stages
from .errors import LabError
from .tree import KernelTree

PANIC = '\tpanic("lab fixture: a submission that panics\\n");\n'
HANG = "\tfor (;;)\n\t\tschedule_timeout_interruptible(MAX_SCHEDULE_TIMEOUT);\n"
# pr_err: the guest's console shows KERN_ERR and above (loglevel=4).
FLOOD = ('\tfor (;;) {\n\t\tpr_err("lab fixture: a submission that prints without end, "\n'
         '\t\t       "line after line after line after line after line\\n");\n'
         "\t\tcond_resched();\n\t}\n")
# The writer is the first call itself, from the suite's kthread, which may
# sleep (as HANG shows). It never returns, so the guest stays up writing,
# and the other CPUs stay free: an earlier writer, a work item with every
# later call spinning, starved when the suite's racers spun on all of them.
# The suite must run after /init has mounted the share, as a module's does.
FILL_HELPER = r'''
#include <linux/fs.h>
#include <linux/vmalloc.h>

static void lab_fixture_fill(void)
{
	const size_t chunk = 1 << 20;
	char *zeros = vzalloc(chunk);
	struct file *file = filp_open("/lab/out/fill", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	loff_t pos = 0;

	if (!zeros || IS_ERR(file))
		return;
	while (kernel_write(file, zeros, chunk, &pos) > 0)
		cond_resched();
}
'''
FILL = "\tlab_fixture_fill();\n"

UNSAFE = {"panic": (PANIC, "crashed"), "hang": (HANG, "did not finish"),
          "flood": (FLOOD, "printed more than"), "fill": (FILL, "wrote more than")}


def target(exercise_set):
    """The exercise the unsafe fixtures break: a kernel C function."""
    for exercise in exercise_set.exercises:
        if exercise.function and exercise.file.endswith(".c") and \
                not exercise.file.startswith(("tools/", "samples/")):
            return exercise
    raise LabError(f"stage {exercise_set.stage.slug} has no exercise in a kernel C function "
                   "to build unsafe fixtures from")


def class_stage():
    """The stage whose class of unsafe submissions `make check` grades:
    the first with an exercise in a kernel C function."""
    for stage in stages.all_stages():
        exercise_set = exercises.load(stage)
        if exercise_set:
            try:
                target(exercise_set)
                return stage
            except LabError:
                continue
    raise LabError("no stage has an exercise in a kernel C function to build unsafe "
                   "fixtures from")


def solved_file(tree, exercise_set, file):
    return tree.git("show", f"{exercise_set.stage.branch}:{file}").stdout


def as_patch(tree, exercise_set, exercise, after):
    """A patch from the exercise commit's file to `after`."""
    base = exercises.exercise_commit(tree, exercise_set)
    before = tree.git("show", f"{base}:{exercise.file}").stdout
    return exercises._diff(exercise.file, before, after, exercise)


def solution(tree, exercise_set):
    """Every exercise solved, as one patch series (one file per exercise file)."""
    files = sorted({e.file for e in exercise_set.exercises})
    return "".join(as_patch(tree, exercise_set, next(e for e in exercise_set.exercises
                                                    if e.file == f),
                            solved_file(tree, exercise_set, f)) for f in files)


def unsafe(tree, exercise_set, kind):
    """The solution with the `kind` misbehaviour at the top of target()."""
    statements, _ = UNSAFE[kind]
    exercise = target(exercise_set)
    text = solved_file(tree, exercise_set, exercise.file)
    start, _ = exercises.function_body_span(text, exercise.function)
    text = text[:start] + statements + text[start:]
    if kind == "fill":
        head = re.search(rf"^[A-Za-z_][^;{{}}]*?\b{re.escape(exercise.function)}\s*\(",
                         text, re.M)
        text = text[:head.start()] + FILL_HELPER.lstrip("\n") + "\n" + text[head.start():]
    others = [f for f in sorted({e.file for e in exercise_set.exercises}) if f != exercise.file]
    patch = as_patch(tree, exercise_set, exercise, text)
    for file in others:
        owner = next(e for e in exercise_set.exercises if e.file == file)
        patch += as_patch(tree, exercise_set, owner, solved_file(tree, exercise_set, file))
    return patch


def write_class(directory, stage, kinds=("panic", "hang", "flood", "fill"), tree=None,
                solutions=1):
    """A submissions directory: `solutions` solved submissions, then one per
    unsafe kind. Returns {student: expected words in the reason, '' for pass}."""
    tree = tree or KernelTree()
    exercise_set = exercises.load(stage)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    expected = {}
    for number in range(1, solutions + 1):
        name = f"solved-{number:03d}"
        (directory / f"{name}.patch").write_text(solution(tree, exercise_set))
        expected[name] = ""
    for kind in kinds:
        (directory / f"{kind}.patch").write_text(unsafe(tree, exercise_set, kind))
        expected[kind] = UNSAFE[kind][1]
    return expected


def wrong(tree, exercise_set, patch):
    """A wrong solution (a patch on the solved stage) as a submission: the
    solved files with the mistake in them, against the exercise commit."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory(prefix="lab-wrong-") as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        tree.git("read-tree", exercise_set.stage.branch, env=env)
        tree.git("apply", "--cached", str(patch), env=env)
        result = tree.git("write-tree", env=env).stdout.strip()
    files = sorted({e.file for e in exercise_set.exercises})
    return "".join(as_patch(tree, exercise_set, next(e for e in exercise_set.exercises
                                                    if e.file == f),
                            tree.git("show", f"{result}:{f}").stdout) for f in files)


def write_realistic_class(directory, stage, tree=None):
    """What a class hands in, as far as the lab can make one up: the
    solution, and each wrong solution of the stage (all different code, so
    each grade compiles something)."""
    tree = tree or KernelTree()
    exercise_set = exercises.load(stage)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "solved.patch").write_text(solution(tree, exercise_set))
    for patch in exercise_set.wrong_solutions:
        (directory / f"{patch.stem}.patch").write_text(wrong(tree, exercise_set, patch))
    return sorted(p.stem for p in directory.iterdir())
