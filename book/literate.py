#!/usr/bin/env python3
"""Source extraction for the book's code inclusions.

The Lua filter ``book/filters/literate.lua`` collects every inclusion block of
a chapter and sends them here in one batch (one request per line on stdin);
this module answers each one with the text to show, its first line number,
its language and a caption. Everything is read from git objects, so what is
checked out in the kernel tree does not matter:

    git -C $KERNEL_TREE show stage/NN-slug:path

A request is a line of tab-separated ``key=value`` fields, the attributes of
the fenced block plus ``chapter=`` (for error messages). An answer is

    OK <nbytes> <first-line> <lang> <solutions>\t<caption>\n<nbytes of text>
    [STUB <nbytes> <first-line>\n<nbytes of text>]     when solutions is not -
    ERR <nbytes>\n<nbytes of message>

A listing that shows an exercise's answer is marked as a solution: the
``<solutions>`` field of the answer is ``-`` or ``name@NN-slug,...`` (see
"Exercised code" below). book/build.py folds such listings away.

The module is also a small command line tool for chapter writers:

    python3 book/literate.py show kernel/bpf/bpf_lru_list.c fn=NAME stage=01
"""

from __future__ import annotations

import bisect
import functools
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(os.environ.get("BOOK_ROOT") or Path(__file__).resolve().parent.parent)

# What a block may select from a source file, and how the caption names it.
SYMBOL_KINDS = {
    "fn": "{}()",
    "struct": "struct {}",
    "union": "union {}",
    "enum": "enum {}",
    "define": "#define {}",
    "var": "{}",
    "kconfig": "config {}",
}

LANG_BY_SUFFIX = {
    ".c": "c", ".h": "c", ".S": "c",
    ".sh": "bash", ".bash": "bash",
    ".py": "python",
    ".patch": "diff", ".diff": "diff",
    ".mk": "makefile",
    ".json": "json", ".yaml": "yaml", ".yml": "yaml",
    ".gdb": "text", ".txt": "text", ".rst": "text", ".config": "text",
}
LANG_BY_NAME = {"Makefile": "makefile", "Kbuild": "makefile", "Kconfig": "text"}


def md_code(s: str) -> str:
    """Markdown inline code for a caption."""
    fence = "``" if "`" in s else "`"
    return f"{fence}{s}{fence}" if fence == "`" else f"{fence} {s} {fence}"


def md_text(s: str) -> str:
    """Markdown-escaped plain text for a caption."""
    return re.sub(r"([\\`*_{}\[\]<>#$@~^|!])", r"\\\1", s)


class BookError(Exception):
    """A problem a chapter writer has to fix; the message says which."""


# --------------------------------------------------------------------------
# Where things live

def kernel_tree() -> Path:
    tree = os.environ.get("KERNEL_TREE") or "build/linux"
    path = Path(tree)
    return path if path.is_absolute() else ROOT / path


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(kernel_tree()), *args],
                          capture_output=True, text=True)


@dataclass(frozen=True)
class Stage:
    slug: str       # "01-lru-list", or "base"
    ref: str        # "stage/01-lru-list", or "base"


_stage_cache: dict[str, Stage] = {}


def resolve_stage(spec: str) -> Stage:
    """``01``, ``01-lru-list`` or ``base`` to a stage and its git ref."""
    spec = spec.strip()
    if spec in _stage_cache:
        return _stage_cache[spec]
    tree = kernel_tree()
    if not (tree / ".git").exists() and not (tree / "HEAD").exists():
        raise BookError(f"no kernel tree at {tree} (set KERNEL_TREE, or build the "
                        f"lab's tree first)")
    if spec == "base":
        stage = Stage("base", "base")
    elif re.fullmatch(r"\d\d", spec):
        dirs = sorted(p.name for p in (ROOT / "stages").glob(f"{spec}-*") if p.is_dir())
        if len(dirs) == 1:
            slug = dirs[0]
        else:
            out = git("for-each-ref", "--format=%(refname:short)", f"refs/heads/stage/{spec}-*")
            refs = out.stdout.split()
            if len(refs) != 1:
                why = "several" if refs or dirs else "no"
                raise BookError(f"stage {spec}: {why} stages/{spec}-* directory and "
                                f"{why} stage/{spec}-* branch in {tree}")
            slug = refs[0].removeprefix("stage/")
        stage = Stage(slug, f"stage/{slug}")
    elif re.fullmatch(r"\d\d-[A-Za-z0-9._-]+", spec):
        stage = Stage(spec, f"stage/{spec}")
    else:
        raise BookError(f"stage '{spec}' is not NN, NN-slug or base")
    if git("rev-parse", "--verify", "-q", f"{stage.ref}^{{commit}}").returncode != 0:
        raise BookError(f"stage {stage.slug}: branch {stage.ref} does not exist in {tree}")
    _stage_cache[spec] = stage
    return stage


_file_cache: dict[tuple[str, str], str] = {}


def read_stage_file(stage: Stage, path: str) -> str:
    key = (stage.ref, path)
    if key not in _file_cache:
        out = git("show", f"{stage.ref}:{path}")
        if out.returncode != 0:
            raise BookError(f"file {path} does not exist at stage {stage.slug}")
        _file_cache[key] = out.stdout
    return _file_cache[key]


def language_for(path: str) -> str:
    name = Path(path).name
    if name in LANG_BY_NAME or name.startswith("Kconfig"):
        return LANG_BY_NAME.get(name, "text")
    return LANG_BY_SUFFIX.get(Path(path).suffix, "text")


# --------------------------------------------------------------------------
# C source: find definitions by name

def mask_c(src: str) -> str:
    """Same-length copy of ``src`` in which comments, string and character
    literals are blanked and each preprocessor directive is blanked except
    for a '#' where it starts (a boundary for the backward walk). Newlines
    are kept so offsets and line numbers carry over."""
    out = list(src)
    n = len(src)
    i = 0
    line_start = True

    def blank(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if line_start and c == "#":
            j = i
            while j < n:
                if src.startswith("/*", j):
                    end = src.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                    continue
                if src[j] == "\n" and src[j - 1] != "\\":
                    break
                j += 1
            blank(i + 1, j)
            i = j
            continue
        line_start = False
        if src.startswith("/*", i):
            end = src.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif src.startswith("//", i):
            end = src.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            end = min(j + 1, n)
            blank(i, end)
            i = end
        else:
            i += 1
    return "".join(out)


class CSource:
    def __init__(self, text: str):
        self.text = text
        self.masked = mask_c(text)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        depth = 0
        self.depth = []     # brace depth before each character
        for ch in self.masked:
            self.depth.append(depth)
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth = max(depth - 1, 0)

    def line_of(self, pos: int) -> int:
        """0-based line number of offset pos."""
        return bisect.bisect_right(self.line_starts, pos) - 1

    def match_forward(self, pos: int, open_: str, close: str) -> int:
        """Offset just past the bracket matching the one at pos."""
        level = 0
        m = self.masked
        for k in range(pos, len(m)):
            if m[k] == open_:
                level += 1
            elif m[k] == close:
                level -= 1
                if level == 0:
                    return k + 1
        raise BookError("unbalanced brackets")

    def skip_space(self, pos: int) -> int:
        m = self.masked
        while pos < len(m) and m[pos].isspace():
            pos += 1
        return pos

    def body_after_params(self, pos: int) -> int | None:
        """pos is just past a parameter list: skip annotations such as
        ``__releases(x)`` or ``__attribute__((...))`` and return the offset of
        the opening brace of a body, or None for a declaration."""
        m = self.masked
        while True:
            pos = self.skip_space(pos)
            if pos >= len(m):
                return None
            if m[pos] == "{":
                return pos
            word = re.compile(r"[A-Za-z_]\w*").match(m, pos)
            if not word:
                return None
            pos = self.skip_space(word.end())
            if pos < len(m) and m[pos] == "(":
                pos = self.match_forward(pos, "(", ")")

    def decl_start(self, pos: int) -> int:
        """Walk back from pos to the start of the declaration it belongs to:
        the first code line after the previous ';', '}' or directive at file
        level. Comments in between are not part of the declaration."""
        m = self.masked
        k = pos - 1
        while k >= 0 and m[k] not in ";{}#":  # all of it is at file level
            k -= 1
        k += 1
        while k < pos and m[k].isspace():
            k += 1
        return self.line_starts[self.line_of(k)]

    def with_leading_comment(self, start_line: int) -> int:
        """Extend a span upwards over a comment that sits right above it."""
        lines = self.text.split("\n")
        mlines = self.masked.split("\n")
        line = start_line
        while line > 0 and lines[line - 1].strip() and not mlines[line - 1].strip():
            line -= 1
        return line

    def span(self, start: int, end: int) -> tuple[int, int]:
        """0-based first and last line of the offsets [start, end)."""
        return self.line_of(start), self.line_of(max(end - 1, start))

    def find_function(self, name: str) -> tuple[int, int]:
        m = self.masked
        word = re.escape(name)
        for hit in re.finditer(rf"\b{word}\s*\(", m):
            if self.depth[hit.start()] != 0:
                continue
            brace = self.body_after_params(self.match_forward(hit.end() - 1, "(", ")"))
            if brace is None:
                continue
            return self.span(self.decl_start(hit.start()), self.match_forward(brace, "{", "}"))
        # Functions defined through a macro: BPF_CALL_2(name, ...), SYSCALL_DEFINE3(name, ...)
        for hit in re.finditer(rf"\b[A-Z][A-Z0-9_]*\s*\(\s*{word}\s*[,)]", m):
            if self.depth[hit.start()] != 0:
                continue
            paren = m.index("(", hit.start())
            brace = self.body_after_params(self.match_forward(paren, "(", ")"))
            if brace is None:
                continue
            return self.span(self.decl_start(hit.start()), self.match_forward(brace, "{", "}"))
        raise LookupError

    def find_aggregate(self, keyword: str, name: str) -> tuple[int, int]:
        m = self.masked
        for hit in re.finditer(rf"\b{keyword}\s+{re.escape(name)}\b", m):
            if self.depth[hit.start()] != 0:
                continue
            brace = self.skip_space(hit.end())
            if brace >= len(m) or m[brace] != "{":
                continue
            end = self.match_forward(brace, "{", "}")
            semi = m.find(";", end)
            end = end if semi < 0 else semi + 1
            return self.span(self.decl_start(hit.start()), end)
        raise LookupError

    def find_variable(self, name: str) -> tuple[int, int]:
        m = self.masked
        for hit in re.finditer(rf"\b{re.escape(name)}\s*(\[[^\]]*\]\s*)*=(?!=)", m):
            if self.depth[hit.start()] != 0:
                continue
            k = hit.end()
            while k < len(m) and not (m[k] == ";" and self.depth[k] == 0):
                k += 1
            return self.span(self.decl_start(hit.start()), k + 1)
        raise LookupError

    def find_define(self, name: str) -> tuple[int, int]:
        hit = re.search(rf"^[ \t]*#[ \t]*define[ \t]+{re.escape(name)}\b", self.text, re.M)
        if not hit:
            raise LookupError
        first = self.line_of(hit.start())
        lines = self.text.split("\n")
        last = first
        while last + 1 < len(lines) and lines[last].rstrip().endswith("\\"):
            last += 1
        return first, last


def find_kconfig(text: str, name: str) -> tuple[int, int]:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if re.fullmatch(rf"\s*(menu)?config\s+{re.escape(name)}\s*", line):
            last = i
            for j in range(i + 1, len(lines)):
                if lines[j].strip() and not lines[j][0].isspace():
                    break
                if lines[j].strip():
                    last = j
            return i, last
    raise LookupError


def extract(text: str, kind: str, name: str, comment: bool = False) -> tuple[int, str]:
    """Return (1-based first line, text) of the definition of ``name``.
    Raises LookupError when there is none."""
    if kind == "kconfig":
        first, last = find_kconfig(text, name)
    else:
        src = CSource(text)
        if kind == "fn":
            first, last = src.find_function(name)
        elif kind in ("struct", "union", "enum"):
            first, last = src.find_aggregate(kind, name)
        elif kind == "define":
            first, last = src.find_define(name)
        elif kind == "var":
            first, last = src.find_variable(name)
        else:
            raise BookError(f"unknown selector {kind}=")
        if comment:
            first = src.with_leading_comment(first)
    lines = text.split("\n")
    return first + 1, "\n".join(lines[first:last + 1])


def select_lines(text: str, spec: str) -> tuple[int, str]:
    m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d*))?", spec.strip())
    if not m:
        raise BookError(f"lines={spec}: expected A-B, A- or A")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    first = int(m.group(1))
    last = first if m.group(2) is None else int(m.group(2) or len(lines))
    if not 1 <= first <= last <= len(lines):
        raise BookError(f"lines={spec} is outside the file's {len(lines)} lines")
    return first, "\n".join(lines[first - 1:last])


def anchored_lines(text: str, start: str, end: str) -> str:
    """from=START to=END as a lines= range: from the first line that starts
    with START to the first one, from there on, that starts with END
    (leading blanks aside). An excerpt of a file that changes keeps to its
    lines where numbers would drift."""
    lines = [line.lstrip() for line in text.split("\n")]
    first = next((i for i, line in enumerate(lines) if line.startswith(start)), None)
    if first is None:
        raise BookError(f"from={start}: no line starts with it")
    last = next((i for i in range(first, len(lines)) if lines[i].startswith(end)), None)
    if last is None:
        raise BookError(f"to={end}: no line from the from= line on starts with it")
    return f"{first + 1}-{last + 1}"


# --------------------------------------------------------------------------
# Patches from kernel-patches/

@dataclass
class FileDiff:
    path: str
    header: list[str]       # diff --git, index, ---, +++ lines
    hunks: list[list[str]]  # each starts with its @@ line


@dataclass
class Patch:
    subject: str
    message: str
    files: list[FileDiff]


def resolve_patch(spec: str) -> Path:
    """``01-lru-list/0001-bpf-lru-list.patch``, or short forms such as
    ``01/0001``: directory by exact name or NN prefix, file by prefix."""
    base = ROOT / "kernel-patches"
    if "/" not in spec:
        raise BookError(f"patch={spec}: expected DIR/FILE, e.g. 01-lru-list/0001")
    dname, fname = spec.split("/", 1)
    dirs = [base / dname] if (base / dname).is_dir() else sorted(
        p for p in base.glob(f"{dname}-*") if p.is_dir())
    if len(dirs) != 1:
        raise BookError(f"patch={spec}: no single kernel-patches/{dname}* directory")
    if (dirs[0] / fname).is_file():
        return dirs[0] / fname
    files = sorted(dirs[0].glob(f"{fname}*.patch"))
    if len(files) != 1:
        raise BookError(f"patch={spec}: {'several' if files else 'no'} "
                        f"{dirs[0].relative_to(ROOT)}/{fname}*.patch")
    return files[0]


def parse_patch(text: str) -> Patch:
    lines = text.split("\n")
    i = 0
    subject = ""
    # mail headers (format-patch) up to the first blank line
    if lines and (lines[0].startswith("From ") or re.match(r"[\w-]+: ", lines[0])):
        while i < len(lines) and lines[i].strip():
            if lines[i].startswith("Subject:"):
                subject = lines[i][len("Subject:"):].strip()
                while i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t"):
                    i += 1
                    subject += " " + lines[i].strip()
            i += 1
    subject = re.sub(r"^\[[^\]]*\]\s*", "", subject)
    body: list[str] = []
    while i < len(lines) and not lines[i].startswith("diff --git "):
        body.append(lines[i])
        i += 1
    if "---" in body:                      # drop the diffstat
        body = body[:body.index("---")]
    message = "\n".join(body).strip("\n")
    if not subject:
        first = message.split("\n\n", 1)
        subject, message = first[0].strip(), (first[1] if len(first) > 1 else "")
    files: list[FileDiff] = []
    while i < len(lines) and lines[i].startswith("diff --git "):
        m = re.match(r"diff --git a/(\S+) b/(\S+)", lines[i])
        fd = FileDiff(m.group(2) if m else lines[i], [lines[i]], [])
        i += 1
        while i < len(lines) and not lines[i].startswith(("@@", "diff --git ")):
            fd.header.append(lines[i])
            i += 1
        while i < len(lines) and lines[i].startswith("@@"):
            h = re.match(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", lines[i])
            if not h:
                raise BookError(f"malformed hunk header: {lines[i]}")
            old = int(h.group(1) or 1)
            new = int(h.group(2) or 1)
            hunk = [lines[i]]
            i += 1
            while (old > 0 or new > 0) and i < len(lines):
                line = lines[i]
                tag = line[:1]
                if tag not in (" ", "", "-", "+", "\\"):
                    raise BookError(f"hunk '{hunk[0]}' of {fd.path} is shorter than its "
                                    f"header says")
                if tag == "\\":
                    pass
                elif tag in (" ", ""):
                    old -= 1
                    new -= 1
                elif tag == "-":
                    old -= 1
                elif tag == "+":
                    new -= 1
                hunk.append(line)
                i += 1
            while i < len(lines) and lines[i].startswith("\\"):  # \ No newline
                hunk.append(lines[i])
                i += 1
            fd.hunks.append(hunk)
        files.append(fd)
    return Patch(subject, message, files)


def patch_excerpt(req: dict) -> tuple[str, str, str, list]:
    """(text, language, caption, solutions) for a patch= block."""
    path = resolve_patch(req["patch"])
    try:
        stages = [resolve_stage(path.parent.name)]
    except BookError:
        stages = []
    found: list[Exercised] = []
    patch = parse_patch(path.read_text())
    rel = path.relative_to(ROOT)
    caption = md_code(str(rel))
    if patch.subject:
        caption += f" “{md_text(patch.subject)}”"
    if req.get("part") == "message":
        return (f"{patch.subject}\n\n{patch.message}".strip(), "text",
                f"Commit message of {caption}", [])
    if req.get("part") not in (None, "diff"):
        raise BookError(f"part={req['part']}: expected message or diff")
    files = patch.files
    if "file" in req:
        files = [f for f in files if f.path == req["file"]]
        if not files:
            raise BookError(f"{rel} does not touch {req['file']}")
        caption += f" · {md_code(req['file'])}"
    elif "hunk" in req:
        raise BookError("hunk= needs file= to say which file's hunks")
    out: list[str] = []
    for fd in files:
        hunks = list(enumerate(fd.hunks, 1))
        if "hunk" in req:
            try:
                wanted = {int(x) for x in req["hunk"].split(",")}
            except ValueError:
                raise BookError(f"hunk={req['hunk']}: expected numbers such as 2 or 1,3")
            missing = wanted - {n for n, _ in hunks}
            if missing:
                raise BookError(f"{rel}: {fd.path} has {len(hunks)} hunks, "
                                f"no hunk {min(missing)}")
            hunks = [(n, h) for n, h in hunks if n in wanted]
        if "match" in req:
            hunks = [(n, h) for n, h in hunks if any(req["match"] in line for line in h)]
        if not hunks:
            continue
        out += [line for line in fd.header if line.startswith(("---", "+++"))]
        for _, h in hunks:
            added = [line[1:] for line in h[1:] if line.startswith("+")]
            found += solutions_in_hunk(fd.path, added, stages)
            # keep the diff's one-column prefix out of the tab stops
            out += [line[:1] + line[1:].expandtabs(8) for line in h]
    if not out:
        raise BookError(f"{rel}: no hunk contains '{req.get('match')}'")
    if "hunk" in req:
        caption += f" · hunk {req['hunk']}"
    if "match" in req:
        caption += f" · hunks with {md_code(req['match'])}"
    return "\n".join(out), "diff", caption, found


# --------------------------------------------------------------------------
# Exercised code: which listings show an exercise's answer
#
# exercises/NN-slug/exercises.toml is the only list of what is exercised: a
# function whose body, or a marked span of lines, is hollowed out of a file.
# A listing of that file, at any stage, that overlaps the body or span is a
# solution of that exercise; so is a patch hunk that adds lines of it. The
# body and span are found by the lab's own code (vm/lab/exercises.py), so
# the book folds exactly what `make exercise` takes out. A body that is
# already the hollowed stub (a hand-out's book) is not a solution. Code that
# gives an answer away without being the body, such as a grader's reference
# formula, is marked in the chapter with solution=NAME.

@dataclass(frozen=True)
class Exercised:
    name: str
    stage: str      # "01-lru-list": the stage whose exercise it is
    file: str
    function: str
    span: str
    item: tuple = ()    # the [[exercise]] table, as sorted (key, value) pairs

    def lab_exercise(self):
        """The same exercise as vm/lab/exercises.py loads it."""
        lab_exercises, _ = _lab_exercises()
        return lab_exercises.Exercise(**dict(self.item))

    @property
    def tag(self) -> str:
        return f"{self.name}@{self.stage}"


@functools.cache
def exercised() -> tuple[Exercised, ...]:
    found = []
    for toml in sorted((ROOT / "exercises").glob("[0-9][0-9]-*/exercises.toml")):
        try:
            data = tomllib.loads(toml.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise BookError(f"{toml.relative_to(ROOT)}: {exc}") from None
        for item in data.get("exercise", []):
            found.append(Exercised(item.get("name", ""), toml.parent.name, item.get("file", ""),
                                   item.get("function", ""), item.get("span", ""),
                                   # What a listing's folding needs; the hints
                                   # (tables) are for failed grades only.
                                   tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                                for k, v in item.items() if k != "hints"))))
    return tuple(found)


@functools.cache
def _lab_exercises():
    """vm/lab/exercises.py of the repository this book belongs to."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "vm"))
    from lab import exercises as lab_exercises
    from lab.errors import LabError
    return lab_exercises, LabError


def body_lines(text: str, ex: Exercised) -> tuple[int, int] | None:
    """1-based first and last line of what the exercise takes out of this
    version of its file, or None when the file has no such body (or has the
    stub in its place)."""
    lab_exercises, LabError = _lab_exercises()
    try:
        if ex.function:
            start, end = lab_exercises.function_body_span(text, ex.function)
        else:
            start, end = lab_exercises.marked_span(text, ex.span)[:2]
    except LabError:
        return None
    body = text[start:end]
    if not body.strip() or f"Exercise {ex.name} (" in body:
        return None
    return text.count("\n", 0, start) + 1, text.count("\n", 0, max(end - 1, start)) + 1


def solutions_in_lines(path: str, text: str, first: int, last: int) -> list[Exercised]:
    """Exercises whose body in ``text`` (the file ``path``) overlaps lines first..last."""
    hits = []
    for ex in exercised():
        if ex.file != path:
            continue
        span = body_lines(text, ex)
        if span and span[0] <= last and first <= span[1]:
            hits.append(ex)
    return hits


def hollowed(text: str, found: list[Exercised]) -> str:
    """The file as the exercise branch has it: these exercises' bodies
    replaced by their stubs, by the lab's own hollow()."""
    lab_exercises, _ = _lab_exercises()
    for ex in dict.fromkeys(found):
        item = ex.lab_exercise()
        item.tests = list(item.tests)
        text = lab_exercises.hollow(text, item, ex.stage)
    return text


def _significant(lines) -> list[str]:
    return [line.strip() for line in lines if len(re.findall(r"\w", line)) >= 4]


def _pairs(lines: list[str]) -> set[tuple[str, ...]]:
    if len(lines) < 2:
        return {tuple(lines)} if lines else set()
    return {tuple(lines[i:i + 2]) for i in range(len(lines) - 1)}


def solutions_in_hunk(path: str, added: list[str], stages: list[Stage]) -> list[Exercised]:
    """Exercises whose body, at one of these stages or at the exercise's own,
    shares two consecutive significant lines (or its only one) with the
    lines a hunk of ``path`` adds."""
    mine = _pairs(_significant(added))
    hits = []
    for ex in exercised():
        if ex.file != path or not mine:
            continue
        for stage in [*stages, ex.stage]:
            try:
                if isinstance(stage, str):
                    stage = resolve_stage(stage)
                text = read_stage_file(stage, path)
            except BookError:
                continue
            span = body_lines(text, ex)
            if not span:
                continue
            body = _significant(text.split("\n")[span[0] - 1:span[1]])
            # a hunk that adds one line of the body gives that line away
            if mine & _pairs(body) or any(len(one) == 1 and one[0] in body for one in mine):
                hits.append(ex)
                break
    return hits


def named_solutions(req: dict) -> list[Exercised]:
    """solution=NAME[,NAME]: code the chapter says gives these exercises away."""
    names = [n.strip() for n in req.get("solution", "").split(",") if n.strip()]
    by_name = {ex.name: ex for ex in exercised()}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise BookError(f"solution={','.join(unknown)}: no such exercise in "
                        f"exercises/*/exercises.toml")
    return [by_name[n] for n in names]


def solutions_field(found: list[Exercised]) -> str:
    tags = list(dict.fromkeys(ex.tag for ex in found))
    return ",".join(tags) if tags else "-"


# --------------------------------------------------------------------------
# One request

def answer(req: dict) -> tuple[str, int, str, str, str, tuple[int, str] | None]:
    """(text, first line or 0, language, caption, solutions, stub) for one
    inclusion block; solutions is "-" or "name@NN-slug,..." (see
    solutions_field), and stub is None or (first line, text): the same
    selection from the file as the exercise branch has it."""
    named = named_solutions(req)
    if "patch" in req:
        text, lang, caption, found = patch_excerpt(req)
        return text, 0, lang, caption, solutions_field(found + named), None
    if "src" in req:                  # a file of this repository, as it is now
        path = req["src"]
        full = (ROOT / path).resolve()
        if not full.is_relative_to(ROOT.resolve()) or not full.is_file():
            raise BookError(f"file {path} does not exist in the lab repository")
        text = full.read_text()
        where = "lab repository"
    else:
        path = req.get("include", "")
        if not path:
            raise BookError("an inclusion block needs include=PATH, src=PATH or patch=DIR/FILE")
        stage = resolve_stage(req.get("stage") or req.get("default-stage") or "base")
        text = read_stage_file(stage, path)
        where = f"stage {stage.slug}"
    if "from" in req:
        if "lines" in req:
            raise BookError("give lines= or from=, not both")
        req = {**req, "lines": anchored_lines(text, req["from"], req.get("to", req["from"]))}
    kinds = [k for k in SYMBOL_KINDS if k in req]
    if len(kinds) + ("lines" in req) > 1:
        raise BookError("give one of " + ", ".join(f"{k}=" for k in [*SYMBOL_KINDS, "lines"]))
    if kinds:
        kind = kinds[0]
        name = req[kind]
        try:
            first, body = extract(text, kind, name, req.get("comment") in ("1", "yes", "true"))
        except LookupError:
            label = {"fn": "function", "var": "variable", "define": "macro",
                     "kconfig": "Kconfig symbol"}.get(kind, kind)
            raise BookError(f"{label} '{name}' not found in {path} at {where}") from None
        caption = f"{md_code(path)} · {md_code(SYMBOL_KINDS[kind].format(name))} · {where}"
    elif "lines" in req:
        first, body = select_lines(text, req["lines"])
        caption = f"{md_code(path)} · lines {first}–{first + body.count(chr(10))} · {where}"
    else:
        first, body = 1, text.rstrip("\n")
        caption = f"{md_code(path)} · {where}"
    last = first + body.count("\n")
    found = [] if "src" in req else solutions_in_lines(path, text, first, last)
    stub = None
    if found:
        hollow = hollowed(text, found)
        if kinds:
            stub = extract(hollow, kinds[0], req[kinds[0]],
                           req.get("comment") in ("1", "yes", "true"))
        elif "lines" in req:
            # lines after the bodies move up by what hollowing took out
            delta = hollow.count("\n") - text.count("\n")
            ends = [body_lines(text, ex)[1] for ex in found]
            stub = select_lines(hollow, f"{first}-{max(first, last + delta if last > max(ends) else last)}")
        else:
            stub = 1, hollow.rstrip("\n")
    lang = req.get("lang") or language_for(path)
    # Tabs become spaces at the kernel's 8 columns: browsers, e-readers and the
    # line-number gutter disagree on where tab stops are.
    body = "\n".join(line.expandtabs(8) for line in body.split("\n"))
    if stub:
        stub = stub[0], "\n".join(line.expandtabs(8) for line in stub[1].split("\n"))
    return body, first, lang, caption, solutions_field(found + named), stub


def describe(req: dict) -> str:
    what = req.get("include") or req.get("src") or f"kernel-patches/{req.get('patch', '?')}"
    sym = next((f"{k}={req[k]}" for k in [*SYMBOL_KINDS, "lines", "file", "hunk"] if k in req), "")
    stage = req.get("stage") or req.get("default-stage") or ""
    return f"{req.get('chapter', '?')}: inclusion of {what}" + (f" {sym}" if sym else "") + \
        (f" (stage {stage})" if stage and "include" in req else "")


def serve(inp, out) -> None:
    for raw in inp:
        raw = raw.rstrip("\n")
        if not raw:
            continue
        req = dict(f.split("=", 1) for f in raw.split("\t") if "=" in f)
        try:
            text, first, lang, caption, solutions, stub = answer(req)
            data = text.encode()
            out.write(f"OK {len(data)} {first} {lang} {solutions}\t{caption}\n".encode() + data)
            if solutions != "-":
                stub_first, stub_text = stub or (0, "")
                data = stub_text.encode()
                out.write(f"STUB {len(data)} {stub_first}\n".encode() + data)
        except (BookError, OSError) as exc:
            data = f"{describe(req)}: {exc}".encode()
            out.write(f"ERR {len(data)}\n".encode() + data)
        out.flush()


def main(argv: list[str]) -> int:
    if argv[1:2] == ["serve"]:
        serve(sys.stdin, sys.stdout.buffer)
        return 0
    if argv[1:2] == ["show"] and len(argv) > 2:
        req = {"include": argv[2], "chapter": "command line"}
        if "=" in argv[2]:
            req = {"chapter": "command line"}
            argv = argv[:2] + ["", *argv[2:]]
        req.update(a.split("=", 1) for a in argv[3:])
        try:
            text, first, lang, caption, solutions, stub = answer(req)
        except BookError as exc:
            print(f"error: {describe(req)}: {exc}", file=sys.stderr)
            return 1
        print(f"# {caption} (from line {first}, {lang})" if first else f"# {caption}")
        if solutions != "-":
            print(f"# solution of exercise(s) {solutions}: folded in the book"
                  + (", after the listing as the exercise branch has it:" if stub else ""))
            if stub:
                print(stub[1])
                print(f"# the folded solution (from line {first}):")
        print(text)
        return 0
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
