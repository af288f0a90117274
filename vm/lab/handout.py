"""`make handout`: what a student receives for some stages, and the proof
that it holds no solution.

The hand-out is this repository as committed, without solutions/ (the
solution patches and the wrong-solution fixtures) and without the stages
after the last one chosen. A stage's patch series is where its solutions
come from (a stage branch holds the very bodies its exercises take out),
so each chosen stage's series is replaced by the same patches replayed
with every chosen exercise hollowed after each one: in the hand-out, the
stage branch is the exercise tree. Stages before the first chosen one stay
solved (their deadline has passed). The chapters are rendered as HTML from
those hollowed branches, so their listings show the stubs.

It is delivered as a tarball and as a git bundle of a one-commit
repository (the lab's own history holds the solutions, so it is not part
of it).

The leak check compares every hunk of every chosen stage's solution patches
with every file of the hand-out (HTML with its markup removed): a hunk
leaks if any WINDOW consecutive lines it adds appear there, once lines that
are in the exercise branch anyway (the stub, the code around the body) are
set aside. Patch files count by the lines they add: their context and
removed lines are the tree they apply to, which for the first stage is
Debian's linux-source-6.1, public and on the student's machine.
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

# Three lines matched the BPF packet-access preamble every sample shares.
WINDOW = 4
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
    stage_tips: dict  # slug -> the hand-out's (hollowed) stage commit


def build(chosen, out_dir, book=True):
    tree = KernelTree()
    tree.ensure_base()
    last = chosen[-1]
    tree.prepare(last)
    included = stages.upto(last)
    name = "lab-handout-" + "-".join(s.number for s in chosen)
    out_dir = Path(out_dir)
    root = out_dir / name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    _repository(root, [s for s in stages.all_stages() if s not in included])
    tips = _hollowed_series(tree, root, chosen)
    if book:
        # The stages before the first chosen one stay solved in the series,
        # but the book does not print them with the chosen bodies either:
        # the introduction lists upstream's versions from stage 00.
        shown = dict(tips)
        sets = [exercises.load(s) for s in chosen]
        for stage in included:
            if stage.slug not in shown:
                real = tree.rev(stage.branch)
                shown[stage.slug] = _hollowed_commit(tree, real, sets, real)
        _book(root, tree, shown)
    _readme(root, chosen)
    handout = Handout(name, root, out_dir / f"{name}.tar.gz", out_dir / f"{name}.bundle", tips)
    _tarball(root, handout.tarball)
    _git_bundle(root, handout.bundle, chosen)
    return handout


def _repository(root, later):
    """This repository as committed, without solutions/ and without the
    stages after the last one handed out (their patch series are their
    solutions)."""
    dirty = subprocess.run(["git", "-C", str(settings.REPO), "status", "--porcelain"],
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        warn("the hand-out holds the repository as committed; uncommitted changes are left out")
    left_out = ["solutions"]
    for stage in later:
        left_out += [f"stages/{stage.slug}", f"kernel-patches/{stage.slug}",
                     f"exercises/{stage.slug}", f"chapters/{stage.slug}.md"]
    archive = subprocess.run(["git", "-C", str(settings.REPO), "archive", "--format=tar", "HEAD"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = [m for m in tar.getmembers()
                   if not any(m.name == p or m.name.startswith(p + "/") for p in left_out)]
        tar.extractall(root, members=members)  # our own committed files


def _hollowed_files(tree, commit, exercise_sets):
    """{path: (mode, text)} of the files of `commit` that hold an exercise
    by now, with every such exercise hollowed."""
    files = {}
    for exercise_set in exercise_sets:
        for exercise in exercise_set.exercises:
            if exercise.file not in files:
                listed = tree.git("ls-tree", commit, "--", exercise.file).stdout.split()
                if not listed:
                    continue
                text = tree.git("show", f"{commit}:{exercise.file}").stdout
                files[exercise.file] = (listed[0], text)
            mode, text = files[exercise.file]
            try:
                exercises.body_span(text, exercise)
            except LabError:
                continue
            files[exercise.file] = (mode, exercises.hollow(text, exercise,
                                                           exercise_set.stage.slug))
    return files


def _hollowed_commit(tree, commit, exercise_sets, parent):
    """`commit` with these exercises hollowed, as a child of `parent`. Made
    in a scratch index, without a worktree: no checkout, and no workshop
    another part of the lab may be building in."""
    with tempfile.TemporaryDirectory(prefix="lab-hollow-") as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        tree.git("read-tree", commit, env=env)
        for path, (mode, text) in _hollowed_files(tree, commit, exercise_sets).items():
            body = Path(scratch) / "body"
            body.write_text(text)
            blob = tree.git("hash-object", "-w", str(body)).stdout.strip()
            tree.git("update-index", "--cacheinfo", f"{mode},{blob},{path}", env=env)
        hollowed_tree = tree.git("write-tree", env=env).stdout.strip()
    # The lab's identity and fixed dates make the same ids everywhere.
    date, message = tree.git("log", "-1", "--format=%aI%x00%B", commit).stdout.split("\0", 1)
    return tree.git("commit-tree", hollowed_tree, "-p", parent, "-m", message.strip(),
                    env={"GIT_AUTHOR_DATE": date}).stdout.strip()


def _hollowed_series(tree, root, chosen):
    """Replace the series of every stage from the first chosen one on by the
    same patches replayed with every chosen exercise hollowed after each one,
    so that no patch adds a body the student is to write. A stage between
    two chosen ones is replayed too (its own exercises stay solved), because
    its patches now apply to a hollowed parent. Stages before the first
    chosen one keep their series: their deadline has passed. Returns
    {slug: tip} of the replayed stages."""
    chosen_sets = [exercises.load(s) for s in chosen]
    included = stages.upto(chosen[-1])
    first = included.index(chosen[0])
    tips, tip = {}, None
    for position, stage in enumerate(included):
        if position < first:
            continue
        previous = included[position - 1] if position else None
        real_parent = tree.rev(previous.branch) if previous else tree.rev("base")
        tip = tip or real_parent
        sets = [e for e in chosen_sets if e.stage.number <= stage.number]
        base_of_series = tip
        commits = tree.git("rev-list", "--reverse", f"{real_parent}..{stage.branch}").stdout.split()
        for commit in commits:
            tip = _hollowed_commit(tree, commit, sets, tip)
        series_dir = root / "kernel-patches" / stage.slug
        shutil.rmtree(series_dir, ignore_errors=True)
        series_dir.mkdir(parents=True)
        tree.git("format-patch", "-q", "--zero-commit", "--no-signature", "-o", str(series_dir),
                 f"{base_of_series}..{tip}")
        names = sorted(p.name for p in series_dir.glob("*.patch"))
        (series_dir / "series").write_text("\n".join(names) + ("\n" if names else ""))
        tips[stage.slug] = tip
    return tips


def _book(root, tree, tips):
    """The chapters as HTML, their listings read from the hand-out's own
    stage branches: a bare clone sharing the tree's objects, whose chosen
    stage branches point at the hollowed tips."""
    with tempfile.TemporaryDirectory(prefix="lab-handout-") as scratch:
        view = Path(scratch) / "kernel.git"
        git(settings.REPO, "clone", "-q", "--bare", "--shared", str(tree.path), str(view))
        for slug, tip in tips.items():
            git(view, "update-ref", f"refs/heads/stage/{slug}", tip)
        env = dict(os.environ, KERNEL_TREE=str(view),
                   BOOK_RESULTS=str(settings.BUILD / "results"))
        result = subprocess.run(["/usr/bin/python3", str(root / "book" / "build.py"), "--root",
                                 str(root), "--out", str(root / "book-html"), "--formats",
                                 "html", "--quiet"], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise LabError("rendering the chapters for the hand-out failed:\n"
                       + (result.stdout + result.stderr)[-3000:])
    shutil.rmtree(root / "book-html" / ".work", ignore_errors=True)


def _readme(root, chosen):
    lines = ["# Your hand-out", "",
             "This is the Linux 4.10 Merge Window Lab up to stage "
             f"{chosen[-1].slug}, without its solutions. Start with `README.md`;",
             "the chapters are in `book-html/index.html`.", "",
             "In this hand-out the patch series of the stages below",
             "(`kernel-patches/NN-slug/`) build the stage with its exercises",
             "hollowed out: the stage branch is your starting point.", ""]
    for stage in chosen:
        lines.append(f"- {stage.slug}: `make exercise STAGE={stage.number}`, then the tasks in "
                     f"`exercises/{stage.slug}/README.md`")
    lines += ["", "When you are done, `make submission STAGE=NN FORMAT=patch` packs your",
              "commits into one patch file for your instructor.", ""]
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


def handout_texts(root):
    """{hand-out file: its lines as a student reads them}."""
    texts = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        rel = str(path.relative_to(root))
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


def find_leaks(root, solution_stages, tree=None):
    """[Leak] for every solution hunk of these stages found in the hand-out."""
    tree = tree or KernelTree()
    texts = handout_texts(Path(root))
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
    leaks = find_leaks(handout.root, chosen)
    if leaks:
        handout.tarball.unlink(missing_ok=True)
        handout.bundle.unlink(missing_ok=True)
        shown = "\n".join(f"  {l.solution} {l.hunk}\n      in {l.where}: {l.line}" for l in leaks)
        raise LabError(f"the hand-out would give solutions away; nothing delivered:\n{shown}")
    info(f"no solution hunk of {', '.join(s.slug for s in chosen)} is in the hand-out")
    print(handout.tarball)
    print(handout.bundle)


def register(verb):
    p = verb("handout", cmd_handout, "what a student receives for some stages, without solutions")
    p.add_argument("--stages", default=None, help="comma-separated: 01,02")
    p.add_argument("--out", default=None)
