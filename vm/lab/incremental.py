"""The least kbuild must do for the files changed since the last build.

kbuild finds what is out of date by walking every directory of the
kernel and reading the record of every object (its .cmd file): with
nothing to do, that walk alone takes 10 to 15 s, and a grader proof's
variant, like most of a student's edits, changes one C file. When the
last build recorded which sources it was built from, the files changed
since are looked up in those same records:

- a file that no kbuild command read (a selftest, a BPF sample, a user
  space tool, the book) needs no build at all;
- a file read only by objects that vmlinux or a module is made of needs
  those objects compiled again, by kbuild's own single-target build
  (which walks only their directories), the thin archives above them
  marked newer, and the links run without the walk;
- anything else (a Makefile, a Kconfig file, scripts/, a header that an
  assembler file or a generated file reads, a deleted file) needs the
  whole build.

kbuild remains the judge: the objects are compiled with the commands it
records, and a whole build afterwards finds nothing to do.
"""
import json
import os
import re
import subprocess
from pathlib import Path

# Files the build system itself reads, which no .cmd file names, and the
# sources of the tools it builds and runs on every object (objtool) or on
# vmlinux (resolve_btfids).
BUILD_SYSTEM = re.compile(r"(^|/)(Makefile|Kbuild|Kconfig)[^/]*$|\.mk$"
                          r"|^(scripts|usr|include/config)/|^arch/[^/]+/tools/"
                          r"|^tools/(objtool|build|include|arch|lib|scripts|bpf/resolve_btfids)/")

# Beyond this many objects, kbuild's own walk is as quick as ours.
MOST_OBJECTS = 40

# An empty directory the links "descend" into instead of the whole tree.
NO_WALK_DIR = "lab-no-walk"

RECORD = "lab-build.sources"

# A deleted file's content in a snapshot.
GONE = "deleted"


def _git(tree, *args, stdin=None):
    result = subprocess.run(["git", "-C", str(tree), *args], input=stdin,
                            capture_output=True)
    return result.stdout if result.returncode == 0 else None


def snapshot(tree):
    """The sources as git sees them: HEAD, and the content of every file
    that differs from it (GONE when it was deleted). None when unknown."""
    head = _git(tree, "rev-parse", "HEAD")
    status = _git(tree, "status", "--porcelain=v1", "-z", "--untracked-files=all",
                  "--no-renames")
    if head is None or status is None:
        return None
    paths = [entry[3:].decode(errors="surrogateescape")
             for entry in status.split(b"\0") if entry]
    present = [p for p in paths if (Path(tree) / p).is_file()]
    hashes = _git(tree, "hash-object", "--stdin-paths",
                  stdin="".join(p + "\n" for p in present).encode()) if present else b""
    if hashes is None:
        return None
    files = dict.fromkeys(paths, GONE)
    files.update(zip(present, hashes.decode().split()))
    # What scripts/setlocalversion adds to the kernel's release (with
    # LOCALVERSION_AUTO unset): "+" off a tag, "-dirty" on one with edits.
    tagged = _git(tree, "describe", "--exact-match", "HEAD") is not None
    edited = any(not entry.startswith(b"??") for entry in status.split(b"\0") if entry)
    return {"head": head.decode().strip(), "files": files,
            "release": ("-dirty" if edited else "") if tagged else "+"}


def _committed(tree, head, paths):
    """{path: blob} of these paths in commit head (GONE where it has none)."""
    if not paths:
        return {}
    out = _git(tree, "cat-file", "--batch-check=%(objectname)",
               stdin="".join(f"{head}:{path}\n" for path in paths).encode())
    if out is None:
        return None
    blobs = {}
    for path, line in zip(paths, out.decode().splitlines()):
        blobs[path] = GONE if line.endswith("missing") else line.strip()
    return blobs


def changed_paths(tree, before, after):
    """The paths whose content differs between two snapshots; None when
    that cannot be known. Content, not history: a branch whose files are
    another's, edits included, is no change."""
    if before.get("release") != after.get("release"):
        return None
    candidates = set(before["files"]) | set(after["files"])
    if before["head"] != after["head"]:
        diff = _git(tree, "diff", "--name-only", "-z", "--no-renames",
                    before["head"], after["head"])
        if diff is None:
            return None
        candidates |= set(filter(None, diff.decode(errors="surrogateescape").split("\0")))
    contents = []
    for snap in (before, after):
        unedited = sorted(candidates - set(snap["files"]))
        committed = _committed(tree, snap["head"], unedited)
        if committed is None:
            return None
        contents.append({**committed, **snap["files"]})
    old, new = contents
    return {path for path in candidates if old[path] != new[path]}


def _readers(obj, paths):
    """The targets whose kbuild record names any of these source paths."""
    needles = [arg for path in paths for arg in ("-e", f"/{path}")]
    result = subprocess.run(["grep", "-rlF", "--include=.*.cmd", *needles, "."],
                            cwd=obj, capture_output=True, text=True)
    if result.returncode not in (0, 1):
        return None
    targets = set()
    for record in result.stdout.split():
        record = Path(record)
        targets.add(str(record.parent / record.name[1:-len(".cmd")]).removeprefix("./"))
    return targets


def _module_objects(obj):
    """The objects of the modules this build made (modules.order), not
    those an earlier stage's build left behind."""
    objects = set()
    order = obj / "modules.order"
    for module in order.read_text().split() if order.exists() else ():
        listing = obj / (module.removesuffix(".ko") + ".mod")
        if listing.exists():
            objects.update(listing.read_text().split())
    return objects


def _vmlinux_objects(obj):
    result = subprocess.run(["ar", "t", "vmlinux.a"], cwd=obj, capture_output=True, text=True)
    return set(result.stdout.split()) if result.returncode == 0 else None


def plan(obj, changed, tree):
    """(objects, builtin) to compile again for these changed paths: no
    objects when no build is needed; None when only kbuild's whole build
    will do."""
    if not changed:
        return set(), set()
    if not (obj / "vmlinux.a").exists():
        return None
    if not all((Path(tree) / path).exists() for path in changed):
        return None
    if any(BUILD_SYSTEM.search(path) for path in changed):
        return None
    readers = _readers(obj, sorted(changed))
    if readers is None or len(readers) > MOST_OBJECTS:
        return None
    in_vmlinux = _vmlinux_objects(obj)
    if in_vmlinux is None:
        return None
    in_modules = _module_objects(obj) if readers - in_vmlinux else set()
    if any(reader not in in_vmlinux and reader not in in_modules for reader in readers):
        return None
    return readers, readers & in_vmlinux


def archives_above(obj, objects):
    """The thin archives that hold these objects, deepest first, then
    vmlinux.a: a thin archive names its members, so an object compiled
    again is in them already, and only their times must say so."""
    archives = []
    for name in sorted(objects):
        directory = Path(name).parent
        while True:
            archive = obj / directory / "built-in.a"
            if archive.exists() and archive not in archives:
                archives.append(archive)
            if directory == Path("."):
                break
            directory = directory.parent
    archives.sort(key=lambda a: -len(a.relative_to(obj).parts))
    return archives + [obj / "vmlinux.a"]


def mark_newer(paths):
    for path in paths:
        os.utime(path)


def no_walk_dir(obj):
    """build-dir= for the top Makefile: the links without the walk."""
    directory = obj / NO_WALK_DIR
    directory.mkdir(exist_ok=True)
    (directory / "Kbuild").touch()
    return directory


def recorded(obj):
    try:
        return json.loads((obj / RECORD).read_text())
    except (OSError, ValueError):
        return None


def record(obj, base, products, sources):
    (obj / RECORD).write_text(json.dumps({"base": base, "products": products,
                                          "sources": sources}))


def forget(obj):
    (obj / RECORD).unlink(missing_ok=True)
