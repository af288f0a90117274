"""The kernel tree: Debian's linux-source-6.1 in git, with one branch per stage.

A stage branch is the previous stage plus that stage's patch series applied
with `git am`. The lab never discards work: anything that would rewrite the
working tree first checks that it is clean.
"""
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from . import kbuild, settings, stages as stage_data
from .errors import LabError
from .log import info, warn


OBJECT_DIR_EXCLUDES = "# the lab's object dirs (vm/lab/kbuild.py)\n/.kbuild\n/.kbuild-*\n"


def git(tree, *args, check=True, env=None):
    full_env = dict(os.environ, **settings.LAB_IDENT, **(env or {}))
    result = subprocess.run(["git", "-C", str(tree), *args], capture_output=True,
                            text=True, env=full_env)
    if check and result.returncode != 0:
        raise LabError(f"git {' '.join(args)} failed in {tree}:\n{result.stderr.strip()}")
    return result


def installed_source_version():
    result = subprocess.run(["dpkg-query", "-W", "-f=${Version}", settings.SOURCE_PACKAGE],
                            capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


class KernelTree:
    def __init__(self, path=None):
        self.path = Path(path or settings.KERNEL_TREE)

    def __str__(self):
        return str(self.path)

    def exists(self):
        return (self.path / ".git").exists()

    def git(self, *args, **kwargs):
        return git(self.path, *args, **kwargs)

    # -- the base commit ---------------------------------------------------

    def ensure_base(self):
        if self.exists():
            self._warn_on_drift()
            self._exclude_object_dirs()
            return
        if self.path.exists() and any(self.path.iterdir()):
            raise LabError(f"{self.path} exists but is not a git tree; move it away "
                           "or point KERNEL_TREE= somewhere else")
        tarball = settings.SOURCE_TARBALL
        if not tarball.exists():
            raise LabError(f"{tarball} is missing: install {settings.SOURCE_PACKAGE} "
                           "(make deps does it)")
        version = installed_source_version() or "unknown"
        info(f"extracting {tarball} ({settings.SOURCE_PACKAGE} {version}) into {self.path}")
        partial = self.path.with_name(self.path.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        subprocess.run(["tar", "-C", str(partial), "-xf", str(tarball)], check=True)
        (source,) = partial.iterdir()
        _drop_debian_ignore_all(source / ".gitignore")
        git(source, "init", "-q", "-b", "base-import")
        git(source, "add", "-A")
        message = (f"Debian {settings.SOURCE_PACKAGE} {version}\n\n"
                   f"Imported from {tarball}. Debian's .gitignore ignores the whole\n"
                   "top level, because Debian's packaging repository holds only\n"
                   "debian/; that block is dropped so that git tracks the source.\n")
        git(source, "commit", "-q", "--no-verify", "-m", message,
            env={"GIT_AUTHOR_DATE": settings.LAB_IDENT["GIT_COMMITTER_DATE"]})
        git(source, "tag", "-a", "base", "-m", f"{settings.SOURCE_PACKAGE} {version}")
        git(source, "checkout", "-q", "--detach", "base")
        git(source, "branch", "-q", "-D", "base-import")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        source.rename(self.path)
        shutil.rmtree(partial)
        self._exclude_object_dirs()

    def source_version(self):
        """The Debian package version the base commit was made from, as its
        tag records it (clones of the tree carry the tag along)."""
        message = self.git("tag", "-l", "--format=%(contents)", "base", check=False).stdout
        prefix = settings.SOURCE_PACKAGE + " "
        return message.strip()[len(prefix):] if message.startswith(prefix) else ""

    def _warn_on_drift(self):
        made_from = self.source_version()
        installed = installed_source_version()
        if installed and made_from and installed != made_from:
            warn(f"{self.path} was made from {settings.SOURCE_PACKAGE} {made_from}, but "
                 f"{installed} is installed now. To start over from the new source, "
                 f"save your work and remove {self.path}.")

    def _exclude_object_dirs(self):
        """The object dirs live in the tree (kbuild.object_dir). The
        kernel's .gitignore already ignores them, as dot files; saying so
        in the repository's own exclude file too keeps git status clean
        whatever a student does to .gitignore."""
        common = self.git("rev-parse", "--git-common-dir", check=False).stdout.strip()
        if not common:
            return
        exclude = (self.path / common / "info" / "exclude").resolve()
        text = exclude.read_text() if exclude.exists() else ""
        if OBJECT_DIR_EXCLUDES in text:
            return
        exclude.parent.mkdir(parents=True, exist_ok=True)
        exclude.write_text(text + ("" if text.endswith("\n") or not text else "\n")
                           + OBJECT_DIR_EXCLUDES)

    # -- state ---------------------------------------------------------------

    def dirty_files(self):
        out = self.git("status", "--porcelain", "--untracked-files=normal").stdout
        return [line for line in out.splitlines() if line.strip()]

    def head_branch(self):
        out = self.git("symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip()
        return out or None

    def rev(self, ref):
        result = self.git("rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False)
        return result.stdout.strip() or None

    def is_ancestor(self, ancestor, descendant="HEAD"):
        return self.git("merge-base", "--is-ancestor", ancestor, descendant,
                        check=False).returncode == 0

    def current_stage(self):
        """The latest stage whose branch is contained in HEAD, or None."""
        if not self.exists():
            return None
        found = None
        for stage in stage_data.all_stages():
            if self.rev(stage.branch) and self.is_ancestor(stage.branch):
                found = stage
        return found

    def refuse_if_dirty(self, action):
        dirty = self.dirty_files()
        if not dirty:
            return
        shown = "\n".join("    " + line for line in dirty[:10])
        more = f"\n    ... and {len(dirty) - 10} more" if len(dirty) > 10 else ""
        raise LabError(
            f"refusing to {action}: the kernel tree {self.path} has uncommitted changes "
            f"on {self.head_branch() or 'a detached HEAD'}:\n{shown}{more}\n"
            f"Keep them first, either with a commit:\n"
            f"    git -C {self.path} commit -am 'my work'\n"
            f"or in the stash:\n"
            f"    git -C {self.path} stash\n"
            f"(targets that only build or boot, like `make kernel`, use the tree as it is.)")

    def checkout(self, ref, action):
        if self.head_branch() == ref:
            return
        self.refuse_if_dirty(action)
        self.git("checkout", "-q", ref)

    # -- stage branches --------------------------------------------------------

    def _fingerprint(self, stage, parent_rev):
        digest = hashlib.sha256(parent_rev.encode())
        for patch in stage.patches:
            digest.update(patch.name.encode() + b"\0" + patch.read_bytes())
        return digest.hexdigest()

    def _recorded(self, stage, key):
        return self.git("config", f"lab.stage.{stage.slug}.{key}", check=False).stdout.strip()

    def _record(self, stage, key, value):
        self.git("config", f"lab.stage.{stage.slug}.{key}", value)

    def stage_is_current(self, stage):
        """True when the stage branch exists and was built from today's patches."""
        previous = _previous(stage)
        parent_rev = self.rev(previous.branch if previous else "base")
        tip = self.rev(stage.branch)
        return bool(parent_rev and tip
                    and self._recorded(stage, "fingerprint") == self._fingerprint(stage, parent_rev)
                    and self._recorded(stage, "tip") == tip)

    def prepare(self, stage):
        """Make stage/NN-slug (and the stages before it) up to date; no checkout."""
        self.ensure_base()
        for each in stage_data.upto(stage):
            if not self.stage_is_current(each):
                self._build_branch(each)

    def main_tree(self):
        """The tree whose .git holds this one's branches: itself, or for a
        worktree of it (`TREE=` a `git worktree add` of build/linux) the
        tree it was added from. Stage branches and their records live there."""
        common = self.git("rev-parse", "--path-format=absolute", "--git-common-dir",
                          check=False).stdout.strip()
        if common and Path(common).name == ".git":
            return Path(common).parent
        return self.path

    def _workshop_path(self, number):
        main = self.main_tree()
        return main.with_name(main.name + ".workshop" + ("" if number == 1 else str(number)))

    @contextlib.contextmanager
    def borrowed_workshop(self, number=1):
        """The workshop, or None when it does not exist or another lab
        command is working in it; its lock, if taken here, is given back
        on leaving."""
        path = self._workshop_path(number)
        held = path in _workshop_locks
        if not (path / ".git").exists() or not _hold_workshop_lock(path, wait=False):
            yield None
            return
        try:
            yield KernelTree(path)
        finally:
            if not held:
                _workshop_locks.pop(path).close()

    def workshop(self, number=1, checkout=True):
        """A lab-owned worktree beside the tree (build/linux.workshop) where
        branches are made and graders are proven. The student's working tree
        is never used for that, so its files and checkout stay as they are.
        Every worktree of one repository shares the one workshop (and its
        lock), because they share the stage branches it makes. Grader
        proofs also use a second one (build/linux.workshop2), to build one
        variant while another boots. checkout=False makes a missing one
        empty, for copy_workshop to fill."""
        path = self._workshop_path(number)
        _hold_workshop_lock(path)
        if not (path / ".git").exists():
            self.git("worktree", "prune")
            self.git("worktree", "add", "-q", "--detach",
                     *([] if checkout else ["--no-checkout"]), str(path), "base")
        return KernelTree(path)

    def copy_workshop(self, number, source=1):
        """Make workshop `number` a copy of workshop `source` (copy_built_tree)."""
        return copy_built_tree(self.workshop(source), self.workshop(number, checkout=False))

    def reset_workshop(self, rev, patches=(), number=1):
        workshop = self.workshop(number)
        workshop.git("checkout", "-q", "-f", "--detach", rev)
        workshop.git("clean", "-q", "-fdx", *kbuild.KEEP_ON_CLEAN)
        for patch in patches:
            result = workshop.git("apply", str(patch), check=False)
            if result.returncode != 0:
                raise LabError(f"{settings.shown(patch)} does not apply on {rev}:\n"
                               f"{result.stderr.strip()}")
        return workshop

    def set_branch(self, branch, rev):
        """Point a branch at rev; a checkout of it here follows only if clean."""
        checked_out = self.head_branch() == branch
        if checked_out:
            self.refuse_if_dirty(f"move {branch} to new patches")
        self.git("update-ref", f"refs/heads/{branch}", rev)
        if checked_out:
            self.git("reset", "-q", "--hard", rev)

    def _build_branch(self, stage):
        previous = _previous(stage)
        parent = previous.branch if previous else "base"
        parent_rev = self.rev(parent)
        tip = self.rev(stage.branch)
        recorded_tip = self._recorded(stage, "tip")
        if tip and recorded_tip and tip != recorded_tip:
            raise LabError(
                f"{stage.branch} has commits the lab did not make. Stage branches are "
                f"rebuilt from kernel-patches/; keep your commits on a branch of your own:\n"
                f"    git -C {self.path} branch -m {stage.branch} my-{stage.slug}")
        info(f"preparing {stage.branch}: {parent} + {len(stage.patches)} patch(es)")
        new_tip = parent_rev
        if stage.patches:
            workshop = self.reset_workshop(parent_rev)
            result = workshop.git("am", "-q", "--no-3way", "--committer-date-is-author-date",
                                  *map(str, stage.patches), check=False)
            if result.returncode != 0:
                failure = describe_am_failure(workshop, result)
                workshop.git("am", "--abort", check=False)
                raise LabError(failure)
            new_tip = workshop.rev("HEAD")
        self.set_branch(stage.branch, new_tip)
        self._record(stage, "fingerprint", self._fingerprint(stage, parent_rev))
        self._record(stage, "tip", new_tip)


_workshop_locks = {}


def _hold_workshop_lock(path, wait=True):
    """One lab process at a time works in a workshop: a second one (say a
    `make solutions` during a `make check`) would check files out under the
    first one's build. The lock is held until the process exits. With
    wait=False, False when another process holds it."""
    if path in _workshop_locks:
        return True
    lock = open(path.with_name(path.name + ".lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if not wait:
            lock.close()
            return False
        info(f"waiting for another lab command to finish with {path}")
        fcntl.flock(lock, fcntl.LOCK_EX)
    _workshop_locks[path] = lock
    return True


def copy_built_tree(origin, copy):
    """Make `copy`, another worktree of the same repository, a copy of
    `origin`: its files and object dirs with their times, so that the
    copy's next build is an incremental one and not a whole kernel. With
    every object a ccache hit, a cold build still runs objtool on each of
    them, and took 10 to 20 minutes of a busy check. The command lines
    kbuild records name the tree they ran in (the debug prefix map, and
    objtool's own build, which uses absolute paths): they are rewritten to
    name the copy, or kbuild would see every command changed and rebuild
    everything."""
    for entry in copy.path.iterdir():
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() \
                else entry.unlink()
    # Not .git: the origin may be the kernel tree, whose .git is the repository.
    entries = sorted(str(e) for e in origin.path.iterdir() if e.name != ".git")
    subprocess.run(["cp", "-a", *entries, f"{copy.path}/"], check=True)
    old = f"{origin.path.resolve()}/".encode()
    new = f"{copy.path.resolve()}/".encode()
    for obj in copy.path.glob(".kbuild*"):
        for record in [*obj.rglob(".*.cmd"), *obj.rglob(".*.d")]:
            text = record.read_bytes()
            if old in text:
                times = record.stat()
                record.write_bytes(text.replace(old, new))
                os.utime(record, ns=(times.st_atime_ns, times.st_mtime_ns))
    # The index takes the origin's commit and the copied files' state.
    copy.git("reset", "-q", "--soft", origin.rev("HEAD"))
    copy.git("reset", "-q")
    return copy


def release_workshops():
    """Give up this process's workshop locks, for a child process (make
    check's kernel-tier tests) that works in a workshop; the next use here
    takes them again."""
    for path in list(_workshop_locks):
        _workshop_locks.pop(path).close()


def _previous(stage):
    earlier = stage_data.upto(stage)[:-1]
    return earlier[-1] if earlier else None


def _drop_debian_ignore_all(gitignore):
    text = gitignore.read_text()
    marker = text.find("# Debian packaging")
    if marker != -1:
        start = text.rfind("#\n", 0, marker)
        gitignore.write_text(text[:start if start != -1 else marker].rstrip("\n") + "\n")


def describe_am_failure(tree, result):
    """Name the patch and the hunk that did not apply, from git am's output."""
    output = (result.stdout + result.stderr).strip()
    patch_file = None
    git_dir = Path(tree.git("rev-parse", "--git-dir").stdout.strip())
    current = (git_dir if git_dir.is_absolute() else tree.path / git_dir) / "rebase-apply"
    try:
        number = int((current / "next").read_text())
        patch_file = sorted(p for p in current.iterdir() if re.fullmatch(r"\d{4}", p.name))[number - 1]
    except (OSError, ValueError, IndexError):
        pass
    subject = re.search(r"Patch failed at \d+ (.*)", output)
    where = re.search(r"error: patch failed: (.+):(\d+)", output)
    lines = [f"a patch no longer applies to this source ({installed_source_version()}; "
             f"the series was tested on {settings.TESTED_SOURCE_VERSION})."]
    if subject:
        lines.append(f"patch: {subject.group(1)}")
    if where:
        path, line = where.group(1), int(where.group(2))
        lines.append(f"failing hunk: {path} at line {line}")
        hunk = _find_hunk(patch_file, path, line) if patch_file else None
        if hunk:
            lines.append(hunk)
    lines.append("git am said:\n" + "\n".join("    " + l for l in output.splitlines()[-12:]))
    return "\n".join(lines)


def _find_hunk(patch_file, path, line):
    text = patch_file.read_text(errors="replace")
    section = re.split(r"^diff --git ", text, flags=re.M)
    for part in section:
        if not part.startswith(f"a/{path} "):
            continue
        for hunk in re.split(r"(?=^@@ )", part, flags=re.M)[1:]:
            start = re.match(r"@@ -(\d+)", hunk)
            if start and int(start.group(1)) == line:
                body = hunk.splitlines()[:12]
                return "\n".join("    " + l for l in body)
    return None
