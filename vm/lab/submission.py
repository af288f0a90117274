"""Submissions: a student's work on an exercise branch, as one file.

A submission is either a git bundle of the student's commits on top of the
exercise commit, or a patch series (`git format-patch` output, one mbox
file, or a directory of *.patch files) against it. The exercise commit has
the same id on every machine (fixed identity and dates, see exercises.py),
so a bundle made by any student names a prerequisite the grader has.

Only the files the stage's exercises name are taken from a submission:
a student's edits to tests, Makefiles or anything else would otherwise
decide their own grade, or make the grader's build do arbitrary work.
"""
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import exercises, hints, settings, stages
from .errors import LabError
from .log import info
from .tree import KernelTree

SIZE_LIMIT = 20 * 2**20
STUDENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
BUNDLE_SIGNATURES = (b"# v2 git bundle", b"# v3 git bundle")


class BadSubmission(LabError):
    """A submission the grader cannot use; it becomes a failed grade."""


@dataclass(frozen=True)
class Submission:
    student: str
    path: Path

    @property
    def files(self):
        if self.path.is_dir():
            return sorted(self.path.glob("*.patch"))
        return [self.path]

    def digest(self):
        """What the submission holds, so that a re-run knows it changed."""
        digest = hashlib.sha256()
        for file in self.files:
            digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
        return digest.hexdigest()

    def size(self):
        return sum(file.stat().st_size for file in self.files)

    @property
    def is_bundle(self):
        if self.path.is_dir():
            return False
        with open(self.path, "rb") as head:
            return head.read(16).startswith(BUNDLE_SIGNATURES)


def find(directory):
    """The submissions in a directory, one per student, by name. A student is
    a file's name without its extension, or a directory holding *.patch."""
    directory = Path(directory)
    if not directory.is_dir():
        raise LabError(f"no submissions directory {directory}: give SUBMISSIONS=dir/ "
                       "holding one bundle, patch file or patch directory per student")
    found = {}
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith("."):
            continue
        student = entry.name if entry.is_dir() else entry.name.split(".")[0]
        if not STUDENT_NAME.match(student):
            raise LabError(f"{entry}: a student's name is letters, digits, '.', '_' and '-'")
        if student in found:
            raise LabError(f"two submissions for {student}: {found[student].path.name} "
                           f"and {entry.name}")
        found[student] = Submission(student, entry)
    if not found:
        raise LabError(f"{directory} holds no submissions")
    return list(found.values())


def graded_files(exercise_set):
    return sorted({exercise.file for exercise in exercise_set.exercises})


# -- making one (student side) -------------------------------------------------

def make(stage, tree_path=None, out=None, form="bundle"):
    """The student's commits since the exercise commit, as one file."""
    exercise_set = exercises.load(stage)
    if not exercise_set:
        raise LabError(f"stage {stage.slug} has no exercises")
    if form not in ("bundle", "patch"):
        raise LabError(f"FORMAT={form}: use FORMAT=bundle or FORMAT=patch")
    tree = KernelTree(tree_path)
    if not tree.exists():
        raise LabError(f"no kernel tree at {tree}: `make exercise STAGE={stage.number}` makes one")
    base = exercises.exercise_commit(tree, exercise_set)
    if not tree.is_ancestor(base):
        raise LabError(f"HEAD of {tree} does not start from the exercise commit "
                       f"{base[:12]} of {stage.slug}; check out your work on "
                       f"{stage.exercise_branch} (or rebase it onto {base[:12]})")
    if tree.dirty_files():
        raise LabError(f"{tree} has uncommitted changes; commit them first, they are "
                       f"your submission:\n    git -C {tree} commit -am 'exercise {stage.number}'")
    head = tree.rev("HEAD")
    if head == base:
        raise LabError(f"nothing to submit: HEAD of {tree} is the exercise commit itself; "
                       "commit your work first")
    # The hints the student was shown travel with the work, for the
    # class report: as a commit of no change on top (a bundle), or a line
    # before the first patch, which git apply ignores.
    shown = hints.Record.of(tree, stage).summary()
    if shown and form == "bundle":
        head = tree.git("commit-tree", f"{head}^{{tree}}", "-p", head,
                        "-m", "lab: the hints this work was shown",
                        "-m", hints.seen_line(shown)).stdout.strip()
    suffix = "bundle" if form == "bundle" else "patch"
    out = Path(out) if out else settings.BUILD / f"submission-{stage.slug}.{suffix}"
    out.parent.mkdir(parents=True, exist_ok=True)
    if form == "bundle":
        ref = f"refs/lab/submission/{stage.slug}"
        tree.git("update-ref", ref, head)
        tree.git("bundle", "create", "-q", str(out.resolve()), f"{base}..{ref}")
    else:
        series = tree.git("format-patch", "--stdout", f"{base}..{head}").stdout
        out.write_text((hints.seen_line(shown) + "\n" if shown else "") + series)
    info(f"{settings.shown(out)}: {stage.slug}, your commits on top of {base[:12]}")
    return out


# -- taking one in (grader side) -----------------------------------------------

def import_commit(tree, exercise_set, submission):
    """The commit the submission makes of the exercise commit, kept under
    refs/lab/class/NN-slug/<student>. Raises BadSubmission with the reason."""
    base = exercises.exercise_commit(tree, exercise_set)
    if submission.size() > SIZE_LIMIT:
        raise BadSubmission(f"the submission is {submission.size() // 2**20} MiB, more than "
                            f"the {SIZE_LIMIT // 2**20} MiB a submission may be")
    ref = f"refs/lab/class/{exercise_set.stage.slug}/{submission.student}"
    if submission.is_bundle:
        commit = _from_bundle(tree, base, submission)
    else:
        commit = _from_patches(tree, base, submission)
    if not tree.is_ancestor(base, commit):
        raise BadSubmission(f"the submission does not build on the exercise commit {base[:12]}")
    tree.git("update-ref", ref, commit)
    return commit


def _from_bundle(tree, base, submission):
    path = str(submission.path.resolve())
    verify = tree.git("bundle", "verify", "-q", path, check=False)
    if verify.returncode != 0:
        said = (verify.stderr or verify.stdout).strip().splitlines()
        missing = [line for line in said if "lacks these prerequisite" in line or
                   re.match(r"^[0-9a-f]{40}", line)]
        if missing:
            raise BadSubmission("the bundle was made against another exercise commit than "
                                f"{base[:12]} (git: {' '.join(said[-2:])})")
        raise BadSubmission(f"malformed bundle: {' '.join(said[-3:]) or 'git cannot read it'}")
    heads = [line.split()[0] for line in
             tree.git("bundle", "list-heads", path).stdout.splitlines() if line.strip()]
    if len(set(heads)) != 1:
        raise BadSubmission(f"the bundle holds {len(set(heads))} branch tips; a submission "
                            "is one branch (make submission makes one)")
    fetch = tree.git("fetch", "-q", "--no-tags", path, f"{heads[0]}", check=False)
    if fetch.returncode != 0:
        raise BadSubmission(f"malformed bundle: {fetch.stderr.strip()}")
    return heads[0]


def _from_patches(tree, base, submission):
    """Apply the series to the exercise commit in a scratch index, so that no
    worktree's files change, and commit the result on top of it."""
    text = b"".join(file.read_bytes() for file in submission.files)
    if not re.search(rb"^diff --git ", text, re.M):
        raise BadSubmission("neither a git bundle nor a patch series (no 'diff --git' in it)")
    with tempfile.TemporaryDirectory(prefix="lab-submission-") as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        tree.git("read-tree", base, env=env)
        series = os.path.join(scratch, "series")
        with open(series, "wb") as out:
            out.write(text)
        applied = tree.git("apply", "--cached", "--whitespace=nowarn", series,
                           check=False, env=env)
        if applied.returncode != 0:
            raise BadSubmission("the patch series does not apply to the exercise commit "
                                f"{base[:12]}: {applied.stderr.strip()[:500]}")
        result = tree.git("write-tree", env=env).stdout.strip()
    return tree.git("commit-tree", result, "-p", base, "-m",
                    f"submission of {submission.student}").stdout.strip()


def hints_seen(tree, exercise_set, submission, commit):
    """{exercise: rungs shown} as the submission records it."""
    if submission.is_bundle:
        base = exercises.exercise_commit(tree, exercise_set)
        text = tree.git("log", "--format=%B", f"{base}..{commit}").stdout
    else:
        text = b"".join(file.read_bytes() for file in submission.files).decode(errors="replace")
    return hints.read_seen(text)


def ignored_changes(tree, exercise_set, commit):
    """Files the submission changed that grading does not take."""
    base = exercises.exercise_commit(tree, exercise_set)
    changed = tree.git("diff", "--name-only", base, commit).stdout.split()
    return sorted(set(changed) - set(graded_files(exercise_set)))


def cmd_submission(args):
    stage = stages.resolve(args.stage) if args.stage else None
    if stage is None:
        from . import workflow
        stage = workflow.stage_of_head(KernelTree(args.tree))
        if stage is None:
            raise LabError("name the stage: make submission STAGE=NN")
    path = make(stage, args.tree, args.out, args.format)
    print(path)


def register(verb):
    p = verb("submission", cmd_submission, "pack your exercise commits as one file")
    p.add_argument("--out", default=None, help="where to write it")
    p.add_argument("--format", default="bundle", help="bundle (default) or patch")
