"""`make handout`: what a student receives for some stages, and the proof
that it holds no solution.

The hand-out is this repository as committed, without solutions/ (the
solution patches and the wrong-solution fixtures); the exercise branch of
each chosen stage as a git bundle of the kernel tree (its prerequisite is
the stage branch, which `make stage` makes with the same commit id
everywhere); and the chapters rendered as HTML. The book lists kernel
functions from the stage branches, and a stage branch holds the very
bodies the exercises take out, so the book is rendered against a view of
the kernel tree in which every stage with exercises points at its exercise
commit: the chapters then show the stubs the student will fill in.

It is delivered as a tarball and as a git bundle of a one-commit
repository (the lab's own history holds the solutions, so it is not part
of it).

The leak check compares every hunk of every solution patch with every file
of the hand-out (HTML with its markup removed, the bundles' new files):
a hunk leaks if any WINDOW consecutive lines it adds appear there, once
lines that are in the exercise branch anyway (the stub, the code around the
body) are set aside. Kernel patch files count by the lines they add: their
context and removed lines are the student's own kernel source, which is
Debian's linux-source-6.1 and public.
"""
import html
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import exercises, settings, stages
from .errors import LabError
from .log import info, warn
from .tree import KernelTree, git

WINDOW = 3
# A line says something once it has this many letters, digits or '_':
# braces, 'i++;' and 'x = y;' alone would match half the kernel.
SIGNIFICANT_CHARACTERS = 4
TEXT_SUFFIXES = {".md", ".html", ".txt", ".patch", ".c", ".h", ".py", ".lua", ".toml", ".conf",
                 ".sh", ".gdb", ".css", ".js", ".json", ".svg", ".yml", ".yaml", "", ".cfg",
                 ".config", ".mk", ".bpf", ".tsv", ".csv"}


def chosen_stages(names):
    """The stages named in STAGES=01,02, each of which must have exercises."""
    if not names:
        raise LabError("name the stages: make handout STAGES=01,02")
    chosen = []
    for name in [n.strip() for n in names.split(",") if n.strip()]:
        stage = stages.resolve(name)
        if not exercises.load(stage):
            raise LabError(f"stage {stage.slug} has no exercises to hand out")
        if stage not in chosen:
            chosen.append(stage)
    return sorted(chosen, key=lambda s: s.number)


def exercise_stages():
    return [s for s in stages.all_stages() if exercises.load(s)]


# -- building it -------------------------------------------------------------------

@dataclass
class Handout:
    name: str
    root: Path        # the unpacked hand-out
    tarball: Path
    bundle: Path
    exercise_commits: dict


def build(chosen, out_dir, book=True):
    tree = KernelTree()
    tree.ensure_base()
    tree.prepare(stages.latest())
    commits = {s: exercises.exercise_commit(tree, exercises.load(s)) for s in exercise_stages()}
    name = "lab-handout-" + "-".join(s.number for s in chosen)
    out_dir = Path(out_dir)
    root = out_dir / name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    _repository(root)
    with tempfile.TemporaryDirectory(prefix="lab-handout-") as scratch:
        view = _exercise_view(tree, commits, Path(scratch) / "kernel.git")
        bundles = root / "exercise-branches"
        bundles.mkdir()
        for stage in chosen:
            git(view, "bundle", "create", "-q", str(bundles / f"{stage.slug}.bundle"),
                f"{stage.branch}..{stage.exercise_branch}")
        if book:
            _book(root, view)
    _readme(root, chosen, commits)
    handout = Handout(name, root, out_dir / f"{name}.tar.gz", out_dir / f"{name}.bundle",
                      {s.slug: commits[s] for s in chosen})
    _tarball(root, handout.tarball)
    _git_bundle(root, handout.bundle, chosen)
    return handout


def _repository(root):
    """This repository as committed, without solutions/."""
    dirty = subprocess.run(["git", "-C", str(settings.REPO), "status", "--porcelain"],
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        warn("the hand-out holds the repository as committed; uncommitted changes are left out")
    archive = subprocess.run(["git", "-C", str(settings.REPO), "archive", "--format=tar", "HEAD"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = [m for m in tar.getmembers()
                   if m.name != "solutions" and not m.name.startswith("solutions/")]
        tar.extractall(root, members=members)  # our own committed files


def _exercise_view(tree, commits, path):
    """A bare clone sharing the tree's objects, whose stage/NN-slug branches
    of stages with exercises point at their exercise commits, and whose
    exercise/NN-slug branches are those commits."""
    git(settings.REPO, "clone", "-q", "--bare", "--shared", str(tree.path), str(path))
    for stage, commit in commits.items():
        git(path, "update-ref", f"refs/heads/{stage.exercise_branch}", commit)
    # The bundles need the solved stage branch as their prerequisite, so the
    # book reads its listings through separate refs: see _book.
    return path


def _book(root, view):
    """The chapters as HTML, their listings read from the exercise commits."""
    book_view = view.with_name("book.git")
    git(settings.REPO, "clone", "-q", "--bare", "--shared", str(view), str(book_view))
    for stage in exercise_stages():
        commit = git(view, "rev-parse", stage.exercise_branch).stdout.strip()
        git(book_view, "update-ref", f"refs/heads/{stage.branch}", commit)
    env = dict(os.environ, KERNEL_TREE=str(book_view),
               BOOK_RESULTS=str(settings.BUILD / "results"))
    result = subprocess.run(["/usr/bin/python3", str(root / "book" / "build.py"), "--root",
                             str(root), "--out", str(root / "book-html"), "--formats", "html",
                             "--quiet"], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise LabError("rendering the chapters for the hand-out failed:\n"
                       + (result.stdout + result.stderr)[-3000:])
    shutil.rmtree(root / "book-html" / ".work", ignore_errors=True)


def _readme(root, chosen, commits):
    lines = ["# Your hand-out", "",
             "This is the Linux 4.10 Merge Window Lab for the stages below, without",
             "its solutions. Start with `README.md`; the chapters are in",
             "`book-html/index.html`.", "",
             "| Stage | Exercise commit | Start with |", "| --- | --- | --- |"]
    for stage in chosen:
        lines.append(f"| {stage.slug} | `{commits[stage]}` | `make exercise STAGE={stage.number}` |")
    lines += ["", "`make exercise` makes the exercise branch in `build/linux`; it has the",
              "commit id above. `exercise-branches/NN-slug.bundle` holds the same",
              "branch, to compare with or to fetch after `make stage STAGE=NN`:", "",
              "    git -C build/linux fetch ../exercise-branches/NN-slug.bundle \\",
              "        exercise/NN-slug:exercise/NN-slug", "",
              "When you are done, `make submission STAGE=NN` packs your commits into",
              "one file for your instructor.", ""]
    (root / "HANDOUT.md").write_text("\n".join(lines))


def _tarball(root, path):
    """Same contents, same bytes: sorted names, fixed times and owners."""
    def normalise(info_):
        info_.mtime = 1481673600  # 2016-12-14, the lab's commit date
        info_.uid = info_.gid = 0
        info_.uname = info_.gname = ""
        return info_
    with open(path, "wb") as raw:
        with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            for file in sorted(root.rglob("*")):
                tar.add(file, arcname=str(Path(root.name) / file.relative_to(root)),
                        recursive=False, filter=normalise)


def _git_bundle(root, path, chosen):
    with tempfile.TemporaryDirectory(prefix="lab-handout-git-") as scratch:
        env = {"GIT_DIR": str(Path(scratch) / "git"), "GIT_WORK_TREE": str(root),
               "GIT_AUTHOR_DATE": settings.LAB_IDENT["GIT_COMMITTER_DATE"]}
        git(scratch, "init", "-q", "-b", "main", env=env)
        git(scratch, "add", "-A", "-f", env=env)
        git(scratch, "commit", "-q", "--no-verify", "-m",
            f"Hand-out for stages {', '.join(s.slug for s in chosen)}", env=env)
        if path.exists():
            path.unlink()
        git(scratch, "bundle", "create", "-q", str(path.resolve()), "main", env=env)


# -- the leak check ------------------------------------------------------------------

@dataclass
class Leak:
    solution: str     # solutions/NN-slug/name.patch
    hunk: str         # its @@ line
    where: str        # the hand-out file holding it
    line: str         # the first line of the window found there


def significant(lines):
    return [line.strip() for line in lines
            if len(re.findall(r"\w", line)) >= SIGNIFICANT_CHARACTERS]


def windows(lines, size=WINDOW):
    """Every run of `size` consecutive lines; a shorter list is one run."""
    if len(lines) < size:
        return {tuple(lines)} if lines else set()
    return {tuple(lines[i:i + size]) for i in range(len(lines) - size + 1)}


def solution_hunks(stage):
    """[(patch, @@ line, file, added lines)] of a stage's solutions."""
    exercise_set = exercises.load(stage)
    hunks = []
    for exercise in exercise_set.exercises:
        patch = exercise_set.solution_patch(exercise)
        if not patch.exists():
            raise LabError(f"{settings.shown(patch)} is missing: make solutions STAGE={stage.number}")
        file, header, added = None, None, []
        for line in patch.read_text().splitlines() + ["@@ end"]:
            if line.startswith("+++ b/"):
                file = line[6:]
            elif line.startswith("@@"):
                if header:
                    hunks.append((patch, header, file, added))
                header, added = line, []
            elif line.startswith("+") and not line.startswith("+++"):
                added.append(line[1:])
    return hunks


def handout_texts(root, tree):
    """{hand-out file: its lines as a student reads them}."""
    texts = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        rel = str(path.relative_to(root))
        if path.suffix == ".bundle":
            texts.update(_bundle_texts(path, rel, tree))
            continue
        if path.suffix not in TEXT_SUFFIXES:
            continue
        raw = path.read_bytes()
        if b"\0" in raw[:8192]:
            continue
        text = raw.decode(errors="replace")
        if path.suffix == ".html" or path.suffix == ".svg":
            text = html.unescape(re.sub(r"<[^>]+>", "", text))
        if path.suffix == ".patch":
            lines = [l[1:] for l in text.splitlines() if l.startswith("+") and not l.startswith("+++")]
        else:
            lines = text.splitlines()
        texts[rel] = lines
    return texts


def _bundle_texts(path, rel, tree):
    """The files an exercise bundle brings that its prerequisite lacks."""
    heads = git(tree.path, "bundle", "list-heads", str(path)).stdout.split()
    prereq = [l.lstrip("-").split()[0] for l in
              git(tree.path, "bundle", "verify", str(path), check=False).stdout.splitlines()
              if re.match(r"^-?[0-9a-f]{40}", l)]
    texts = {}
    if not heads:
        return texts
    head = heads[0]
    base = prereq[0] if prereq else f"{head}^"
    for file in git(tree.path, "diff", "--name-only", base, head).stdout.split():
        shown = git(tree.path, "show", f"{head}:{file}", check=False).stdout
        texts[f"{rel}:{file}"] = shown.splitlines()
    return texts


def find_leaks(root, solution_stages, tree=None):
    """[Leak] for every solution hunk of these stages found in the hand-out."""
    tree = tree or KernelTree()
    texts = handout_texts(Path(root), tree)
    index = {}
    for rel, lines in texts.items():
        for window in windows(significant(lines)):
            index.setdefault(window, rel)
    leaks = []
    for stage in solution_stages:
        exercise_set = exercises.load(stage)
        commit = exercises.exercise_commit(tree, exercise_set)
        public = {}
        for patch, header, file, added in solution_hunks(stage):
            if file not in public:
                shown = tree.git("show", f"{commit}:{file}").stdout.splitlines()
                public[file] = windows(significant(shown))
            for window in sorted(windows(significant(added)) - public[file]):
                if window in index:
                    leaks.append(Leak(settings.shown(patch), header, index[window], window[0]))
                    break
    return leaks


def unverifiable_hunks(solution_stages, tree=None):
    """Solution hunks with nothing the check could find: all their added
    lines are in the exercise branch too. Such a hunk would always pass."""
    tree = tree or KernelTree()
    bare = []
    for stage in solution_stages:
        commit = exercises.exercise_commit(tree, exercises.load(stage))
        for patch, header, file, added in solution_hunks(stage):
            shown = tree.git("show", f"{commit}:{file}").stdout.splitlines()
            if not windows(significant(added)) - windows(significant(shown)):
                bare.append(f"{settings.shown(patch)} {header}")
    return bare


# -- the verb -------------------------------------------------------------------------

def cmd_handout(args):
    chosen = chosen_stages(args.stages)
    out = Path(args.out).resolve() if args.out else settings.BUILD / "handout"
    handout = build(chosen, out)
    leaks = find_leaks(handout.root, exercise_stages())
    if leaks:
        handout.tarball.unlink(missing_ok=True)
        handout.bundle.unlink(missing_ok=True)
        shown = "\n".join(f"  {l.solution} {l.hunk}\n      in {l.where}: {l.line}" for l in leaks)
        raise LabError(f"the hand-out would give solutions away; nothing delivered:\n{shown}")
    info(f"no solution hunk of {len(exercise_stages())} stages is in the hand-out")
    print(handout.tarball)
    print(handout.bundle)


def register(verb):
    p = verb("handout", cmd_handout, "what a student receives for some stages, without solutions")
    p.add_argument("--stages", default=None, help="comma-separated: 01,02")
    p.add_argument("--out", default=None)
