#!/usr/bin/env python3
"""Build the lab's book: an HTML site, an EPUB and a PDF.

    python3 book/build.py [--out build/book] [--formats html,epub,pdf]
    python3 book/build.py --check-includes      # resolve every inclusion, write nothing

Chapters are chapters/NN-slug.md. Each one goes through pandoc once with
book/filters/literate.lua (code, patch and results inclusions, diagrams,
links); the resulting pandoc ASTs are then written out as one HTML page per
chapter, and merged into one document for the EPUB and the PDF (HTML printed
by WeasyPrint). Pandoc warnings fail the build. See book/README.md.

Environment: KERNEL_TREE (default build/linux), BOOK_RESULTS (default
build/results), BOOK_RUN=1 to run the make commands that produce missing
results before building (same as --run-missing).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

BOOK = Path(__file__).resolve().parent
MARKER = ".book-build"
EPUB_NAME = "linux-4.10-lab.epub"
PDF_NAME = "linux-4.10-lab.pdf"
SEARCH_TEXT_LIMIT = 3000      # characters of text per section in the search index


class BuildError(Exception):
    pass


@dataclass
class Chapter:
    slug: str
    source: Path
    number: int
    ast: dict = field(default_factory=dict)
    title: str = ""
    title_id: str = ""
    sections: list[tuple[str, str]] = field(default_factory=list)   # (id, title) of ## headings

    @property
    def page(self) -> str:
        return f"{self.slug}.html"


# --------------------------------------------------------------------------
# Small helpers over pandoc's JSON AST

def stringify(node) -> str:
    parts: list[str] = []

    def go(n):
        if isinstance(n, list):
            for x in n:
                go(x)
        elif isinstance(n, dict) and "t" in n:
            t, c = n["t"], n.get("c")
            if t == "Str":
                parts.append(c)
            elif t in ("Space", "SoftBreak", "LineBreak"):
                parts.append(" ")
            elif t in ("Code", "CodeBlock", "Math"):
                parts.append(c[1] if t != "Math" else c[1])
                if t == "CodeBlock":
                    parts.append("\n")
            elif t in ("RawInline", "RawBlock"):
                pass
            elif t in ("Link", "Image"):
                go(c[1])
            else:
                go(c)
                if t in ("Para", "Plain", "Header"):
                    parts.append("\n")
    go(node)
    return re.sub(r"[ \t]+", " ", "".join(parts)).strip()


ATTR_POS = {"Header": 1, "CodeBlock": 0, "Div": 0, "Span": 0, "Code": 0,
            "Link": 0, "Image": 0, "Table": 0}


def walk(node, fn) -> None:
    """Call fn on every element (dict with "t") of a JSON AST, depth first."""
    if isinstance(node, list):
        for x in node:
            walk(x, fn)
    elif isinstance(node, dict):
        if "t" in node:
            fn(node)
        for v in node.values():
            if isinstance(v, (list, dict)):
                walk(v, fn)


def md_escape(s: str) -> str:
    return re.sub(r"([\\`*_{}\[\]<>#$@~^|!])", r"\\\1", s)


# --------------------------------------------------------------------------
# Solutions: listings that show an exercise's answer
#
# book/literate.py marks a listing that overlaps an exercised body (as
# exercises/NN-slug/exercises.toml defines them) as a Div of class
# "solution" with data-exercises="name@NN-slug,...". A reader meets it
# folded: on a web page behind a <details> disclosure that says which
# exercise to try first; in the EPUB and PDF as a pointer to the appendix
# "Solutions" at the end of the book. The search index leaves them out.

def is_solution(block) -> bool:
    return (isinstance(block, dict) and block.get("t") == "Div"
            and "solution" in block["c"][0][1])


def solution_exercises(block) -> list[tuple[str, str]]:
    """[(exercise name, NN-slug)] of a solution Div."""
    tags = dict(block["c"][0][2]).get("data-exercises", "")
    return [tuple(t.split("@", 1)) for t in tags.split(",") if "@" in t]


def replace_solutions(node, fn) -> None:
    """Replace, in place and at any depth, every solution Div by the list of
    blocks fn(div) returns."""
    if isinstance(node, list):
        out = []
        for x in node:
            if is_solution(x):
                out.extend(fn(x))
            else:
                replace_solutions(x, fn)
                out.append(x)
        node[:] = out
    elif isinstance(node, dict):
        for v in node.values():
            if isinstance(v, (list, dict)):
                replace_solutions(v, fn)


def try_first_text(exercises: list[tuple[str, str]]) -> tuple[str, str]:
    """("exercise a" / "exercises a and b", "make exercise STAGE=NN ...")."""
    names = [n for n, _ in exercises]
    what = ("exercise " if len(names) == 1 else "exercises ") + \
        (" and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1])
    stages = list(dict.fromkeys(slug[:2] for _, slug in exercises))
    return what, "; ".join(f"make exercise STAGE={nn}" for nn in stages)


def listed_symbol(div) -> str:
    """What a listing shows, from its caption: `path` · `symbol()` · stage."""
    codes = [i["c"][1] for i in caption_inlines(div) if i["t"] == "Code"]
    return codes[1] if len(codes) > 1 else codes[0] if codes else ""


def details_open(block) -> dict:
    exercises = solution_exercises(block)
    what, how = try_first_text(exercises)
    tags = html.escape(",".join(f"{n}@{s}" for n, s in exercises))
    symbol = listed_symbol(block)
    of = f" <code>{html.escape(symbol)}</code>" if symbol else ""
    return {"t": "RawBlock", "c": ["html",
            f'<details class="solution" data-exercises="{tags}">'
            f'<summary><span class="solution-label">Solution{of}</span> — try '
            f'{html.escape(what)} first '
            f'<span class="solution-how">(<code>{html.escape(how)}</code>)</span></summary>']}


DETAILS_CLOSE = {"t": "RawBlock", "c": ["html", "</details>"]}


def folded_for_web(blocks: list) -> list:
    """A copy of a chapter's blocks with each solution behind a disclosure."""
    blocks = json.loads(json.dumps(blocks))
    replace_solutions(blocks, lambda div: [details_open(div), div, DETAILS_CLOSE])
    return blocks


def without_solutions(blocks: list) -> list:
    blocks = json.loads(json.dumps(blocks))
    replace_solutions(blocks, lambda div: [])
    return blocks


def caption_inlines(div) -> list:
    for child in div["c"][1]:
        if child["t"] == "Div" and "listing-caption" in child["c"][0][1]:
            for block in child["c"][1]:
                if block["t"] in ("Plain", "Para"):
                    return block["c"]
    return [{"t": "Str", "c": "a listing"}]


def text_inlines(text: str) -> list:
    out: list = []
    for i, word in enumerate(text.split(" ")):
        if i:
            out.append({"t": "Space"})
        out.append({"t": "Str", "c": word})
    return out


# --------------------------------------------------------------------------

def stage_chapters(root: Path) -> list:
    """The written chapters: the one each stage declares (its stage.toml's
    `chapter`, by default chapters/<slug>.md), in stage order. Adding a
    stage adds its chapter; there is no list of chapters to keep."""
    chapters = []
    for stage in sorted(p for p in (root / "stages").glob("[0-9][0-9]-*") if p.is_dir()):
        declaration = stage / "stage.toml"
        data = tomllib.loads(declaration.read_text()) if declaration.exists() else {}
        path = root / data.get("chapter", f"chapters/{stage.name}.md")
        if not path.exists():
            raise SystemExit(f"book: stage {stage.name} declares the chapter "
                             f"{path.relative_to(root)}, which does not exist")
        chapters.append(Chapter(path.stem, path, int(stage.name[:2])))
    return chapters


class Book:
    def __init__(self, root: Path, out: Path, formats: set[str], run_missing: bool,
                 verbose: bool):
        self.root = root
        self.out = out
        self.formats = formats
        self.run_missing = run_missing
        self.verbose = verbose
        self.work = out / ".work"
        self.data = tomllib.loads((BOOK / "features.toml").read_text())
        self.title = self.data["book"]["title"]
        self.subtitle = self.data["book"].get("subtitle", "")
        tree = os.environ.get("KERNEL_TREE") or "build/linux"
        self.kernel_tree = Path(tree) if Path(tree).is_absolute() else root / tree
        results = os.environ.get("BOOK_RESULTS") or "build/results"
        self.results = Path(results) if Path(results).is_absolute() else root / results
        self.chapters = stage_chapters(root)
        self.planned = [c["slug"] for c in self.data.get("chapter", [])]

    def log(self, msg: str) -> None:
        if self.verbose:
            print(f"book: {msg}", file=sys.stderr)

    # ---------------------------------------------------------------- running

    def env(self) -> dict:
        env = dict(os.environ)
        env.update(
            BOOK_ROOT=str(self.root),
            BOOK_OUT=str(self.out),
            BOOK_RESULTS=str(self.results),
            BOOK_PYTHON=sys.executable,
            BOOK_HELPER=str(BOOK / "literate.py"),
            BOOK_CHAPTERS=" ".join(c.slug for c in self.chapters),
            BOOK_PLANNED=" ".join(self.planned),
            KERNEL_TREE=str(self.kernel_tree),
        )
        return env

    def pandoc(self, *args: str, what: str) -> None:
        cmd = ["pandoc", "--fail-if-warnings", *args]
        proc = subprocess.run(cmd, cwd=self.root, env=self.env(),
                              capture_output=True, text=True)
        if proc.returncode != 0 or proc.stderr.strip():
            msg = proc.stderr.strip() or f"pandoc exited with {proc.returncode}"
            raise BuildError(f"{what}:\n{msg}")

    def prepare_out(self) -> None:
        if self.out.exists() and any(self.out.iterdir()) and not (self.out / MARKER).exists():
            raise BuildError(f"{self.out} is not empty and was not made by book/build.py; "
                             f"refusing to clean it")
        if self.out.exists():
            shutil.rmtree(self.out)
        for sub in ("", ".work", "figures", "results", "img", "assets"):
            (self.out / sub).mkdir(parents=True, exist_ok=True)
        (self.out / MARKER).write_text("made by book/build.py; removed by the next build\n")

    # ------------------------------------------------- pass 1: literate filter

    def literate(self, chapters: list[Chapter]) -> None:
        """Run literate.lua over the chapters (in parallel) into JSON ASTs."""
        def one(ch: Chapter) -> str | None:
            dest = self.work / f"{ch.slug}.json"
            try:
                self.pandoc(str(ch.source.relative_to(self.root)), "-f", "markdown",
                            "-t", "json", "--lua-filter", str(BOOK / "filters/literate.lua"),
                            "-o", str(dest), what=f"chapters/{ch.source.name}")
            except BuildError as exc:
                return str(exc)
            ch.ast = json.loads(dest.read_text())
            return None

        with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
            errors = [e for e in pool.map(one, chapters) if e]
        if errors:
            raise BuildError("\n\n".join(errors))
        for ch in chapters:
            self.read_outline(ch)

    def read_outline(self, ch: Chapter) -> None:
        for block in ch.ast["blocks"]:
            if block["t"] == "Header":
                level, (ident, _, _), inlines = block["c"]
                if level == 1:
                    ch.title = stringify(inlines)
                    ch.title_id = ident
                elif level == 2:
                    ch.sections.append((ident, stringify(inlines)))

    def missing_results(self) -> list[tuple[str, str, str]]:
        path = self.work / "missing.tsv"
        if not path.exists():
            return []
        rows = [tuple(line.split("\t")) for line in path.read_text().splitlines() if line]
        return sorted(set(rows))

    def produce_missing(self) -> None:
        missing = self.missing_results()
        commands = sorted({cmd for _, _, cmd in missing})
        for cmd in commands:
            print(f"book: results missing, running: {cmd}", file=sys.stderr)
            subprocess.run(cmd, shell=True, cwd=self.root, check=False)
        (self.work / "missing.tsv").unlink(missing_ok=True)
        affected = {chapter for chapter, _, _ in missing}
        redo = [c for c in self.chapters if f"chapters/{c.source.name}" in affected]
        for ch in redo:
            ch.sections.clear()
        self.literate(redo)

    # ------------------------------------------------------------- front page

    def state(self) -> dict[str, dict]:
        """What exists for each planned or written chapter, read from the repository."""
        titles = {c["slug"]: c.get("title", c["slug"]) for c in self.data.get("chapter", [])}
        written = {c.slug: c for c in self.chapters}
        state = {}
        for slug in list(dict.fromkeys([*self.planned, *written])):
            tests = self.root / "stages" / slug / "tests"
            ntests = 0
            if tests.is_file():
                ntests = sum(1 for line in tests.read_text().splitlines()
                             if line.strip() and not line.lstrip().startswith("#"))
            state[slug] = {
                "title": written[slug].title if slug in written else titles.get(slug, slug),
                "written": slug in written,
                "tests": tests.is_file(),
                "ntests": ntests,
                "exercises": (self.root / "exercises" / slug).is_dir(),
                "stage": (self.root / "stages" / slug).is_dir(),
            }
        return state

    def feature_map_md(self) -> str:
        state = self.state()
        yes, no = "✓", "—"
        rows = ["| Feature | Area | Chapter | Written | Stage tests | Exercises |",
                # dashes set the relative column widths when rows are long
                "| " + "-" * 30 + " | " + "-" * 12 + " | " + "-" * 28 + " | :" + "-" * 8 +
                ": | :" + "-" * 8 + ": | :" + "-" * 8 + ": |"]
        uncovered = []
        for feat in self.data.get("feature", []):
            slug = feat.get("chapter")
            if not slug:
                uncovered.append(feat["name"])
                continue
            st = state.get(slug, {"title": slug, "written": False, "tests": False,
                                  "ntests": 0, "exercises": False})
            label = f"{int(slug[:2])}. {md_escape(st['title'])}"
            chapter = f"[{label}]({slug}.html)" if st["written"] else f"{label} *(planned)*"
            tests = f"{yes} {st['ntests']}" if st["tests"] else no
            rows.append(f"| {feat['name']} | {feat.get('area', '')} | {chapter} | "
                        f"{yes if st['written'] else no} | {tests} | "
                        f"{yes if st['exercises'] else no} |")
        text = "\n".join(rows) + "\n"
        text += ("\n: Features of the 4.10 merge window and where the lab covers them. "
                 "“Stage tests” counts the tests in `stages/NN-slug/tests`; the columns are "
                 "read from the repository when the book is built.\n")
        if uncovered:
            text += ("\nAlso in the article, and not covered by the lab: "
                     + "; ".join(uncovered) + ".\n")
        return text

    def chapters_md(self) -> str:
        lines = []
        for ch in self.chapters:
            lines.append(f"{ch.number}. [{md_escape(ch.title)}]({ch.page})")
        return "\n".join(lines) + "\n"

    def front_md(self, for_print: bool) -> str:
        text = (BOOK / "front.md").read_text()
        drop = "web-only" if for_print else "print-only"
        text = re.sub(rf"<!-- {drop} -->\n.*?<!-- end -->\n", "", text, flags=re.S)
        text = re.sub(r"<!-- (web|print)-only -->\n|<!-- end -->\n", "", text)
        downloads = []
        if not for_print:
            if "epub" in self.formats:
                downloads.append(f"[EPUB]({EPUB_NAME})")
            if "pdf" in self.formats:
                downloads.append(f"[PDF]({PDF_NAME})")
        text = text.replace("<!-- title -->", md_escape(self.title))
        text = text.replace("<!-- feature-map -->", self.feature_map_md())
        text = text.replace("<!-- chapters -->", self.chapters_md())
        text = text.replace("<!-- downloads -->",
                            ("The whole book is also available as " + " and ".join(downloads) + ".")
                            if downloads else "")
        text = text.replace("<!-- date -->", date.today().isoformat())
        return text

    def contents_md(self) -> str:
        lines = ["# Contents", ""]
        for ch in self.chapters:
            lines.append(f"{ch.number}. [{md_escape(ch.title)}]({ch.page})")
            for ident, title in ch.sections:
                lines.append(f"    - [{md_escape(title)}]({ch.page}#{ident})")
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------ HTML

    def page_args(self, kind: str, pagetitle: str) -> list[str]:
        return ["-t", "html5", "--standalone", "--wrap=none",
                "--template", str(BOOK / "templates/page.html"),
                "--lua-filter", str(BOOK / "filters/anchors.lua"),
                "-M", f"pagetitle={pagetitle}",
                "-V", f"book-title={html.escape(self.title)}",
                "-V", f"page-kind={kind}"]

    def nav_args(self, prev: tuple[str, str] | None, nxt: tuple[str, str] | None) -> list[str]:
        args = []
        if prev:
            args += ["-V", f"prev-href={prev[0]}", "-V", f"prev-title={html.escape(prev[1])}"]
        if nxt:
            args += ["-V", f"next-href={nxt[0]}", "-V", f"next-title={html.escape(nxt[1])}"]
        return args

    def build_html(self) -> None:
        for name in ("book.css", "search.js"):
            shutil.copy(BOOK / "assets" / name, self.out / "assets" / name)
        pages = [("index.html", self.title), ("contents.html", "Contents")] + \
                [(c.page, c.title) for c in self.chapters]
        nav = {}
        for i, (page, _) in enumerate(pages):
            nav[page] = (pages[i - 1] if i > 0 else None,
                         pages[i + 1] if i + 1 < len(pages) else None)

        front = self.work / "index.md"
        front.write_text(self.front_md(for_print=False))
        self.pandoc(str(front), "-f", "markdown", *self.page_args("front", self.title),
                    *self.nav_args(*nav["index.html"]), "-o", str(self.out / "index.html"),
                    what="front page")
        contents = self.work / "contents.md"
        contents.write_text(self.contents_md())
        self.pandoc(str(contents), "-f", "markdown",
                    *self.page_args("contents", f"Contents — {self.title}"),
                    *self.nav_args(*nav["contents.html"]),
                    "-o", str(self.out / "contents.html"), what="table of contents")

        def one(ch: Chapter) -> None:
            page = self.work / f"{ch.slug}.page.json"
            page.write_text(json.dumps(dict(ch.ast, blocks=folded_for_web(ch.ast["blocks"]))))
            self.pandoc(str(page), "-f", "json",
                        *self.page_args("chapter", f"{ch.title} — {self.title}"),
                        "--toc", "--toc-depth=2", *self.nav_args(*nav[ch.page]),
                        "-o", str(self.out / ch.page), what=f"HTML of chapters/{ch.source.name}")

        with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
            list(pool.map(one, self.chapters))
        self.write_search_index()

    def write_search_index(self) -> None:
        entries = []
        for ch in self.chapters:
            current = {"u": ch.page, "p": ch.title, "s": ch.title, "t": []}
            sections = [current]
            for block in without_solutions(ch.ast["blocks"]):
                if block["t"] == "Header" and block["c"][0] in (2, 3):
                    ident = block["c"][1][0]
                    current = {"u": f"{ch.page}#{ident}", "p": ch.title,
                               "s": stringify(block["c"][2]), "t": []}
                    sections.append(current)
                elif block["t"] != "Header":
                    current["t"].append(stringify(block))
            for sec in sections:
                sec["t"] = re.sub(r"\s+", " ", " ".join(sec["t"]))[:SEARCH_TEXT_LIMIT]
                entries.append(sec)
        (self.out / "assets" / "search-index.js").write_text(
            "window.BOOK_SEARCH = " + json.dumps(entries, ensure_ascii=False) + ";\n")

    # ------------------------------------------------------- one whole document

    def combined_ast(self) -> dict:
        """Front matter and all chapters in one AST, ids made unique per chapter
        and links between pages turned into links inside the document."""
        pages = {c.page: c.slug for c in self.chapters}
        title_ids = {c.slug: c.title_id for c in self.chapters}

        def anchor(slug: str, frag: str) -> str:
            return f"#{slug}" if not frag or frag == title_ids[slug] else f"#{slug}--{frag}"

        def relink(target: str, slug: str | None) -> str | None:
            if target.startswith("#"):
                return anchor(slug, target[1:]) if slug else target
            page, _, frag = target.partition("#")
            if page in pages:
                return anchor(pages[page], frag)
            if page in ("index.html", "contents.html"):
                return None
            return target

        def fix(blocks: list, slug: str | None) -> list:
            def fn(el):
                t = el["t"]
                if t in ATTR_POS and slug:
                    attr = el["c"][ATTR_POS[t]]
                    if t == "Header" and el["c"][0] == 1:
                        attr[0] = slug
                    elif attr[0]:
                        attr[0] = f"{slug}--{attr[0]}"
                if t == "Link":
                    new = relink(el["c"][2][0], slug)
                    if new is None:      # a link to a page the document does not have
                        el["t"], el["c"] = "Span", [["", [], []], el["c"][1]]
                    else:
                        el["c"][2][0] = new
            walk(blocks, fn)
            return blocks

        front_json = self.work / "front-print.json"
        (self.work / "front-print.md").write_text(self.front_md(for_print=True))
        self.pandoc(str(self.work / "front-print.md"), "-f", "markdown", "-t", "json",
                    "-o", str(front_json), what="front matter")
        front = json.loads(front_json.read_text())
        blocks = []
        for block in fix(front["blocks"], None):
            if block["t"] == "Header" and block["c"][0] == 1:
                block["c"][1][1] += ["unnumbered", "front-matter"]
            blocks.append(block)
        solutions = []
        for ch in self.chapters:
            chapter_blocks = fix(json.loads(json.dumps(ch.ast["blocks"])), ch.slug)
            replace_solutions(chapter_blocks,
                              lambda div, ch=ch: [self.solution_pointer(div, ch, solutions)])
            blocks += chapter_blocks
        blocks += self.solutions_appendix(solutions)
        meta = {
            "title": {"t": "MetaInlines", "c": [{"t": "Str", "c": self.title}]},
            "subtitle": {"t": "MetaInlines", "c": [{"t": "Str", "c": self.subtitle}]},
            "lang": {"t": "MetaString", "c": "en"},
            "date": {"t": "MetaString", "c": date.today().isoformat()},
        }
        return {"pandoc-api-version": front["pandoc-api-version"], "meta": meta, "blocks": blocks}

    def solution_pointer(self, div, ch: Chapter, solutions: list) -> dict:
        """What the EPUB and PDF print where a solution listing was: which
        exercise to try first, and a link to the listing in the appendix."""
        n = len(solutions) + 1
        here = f"{ch.slug}--solution-{n}"
        solutions.append((n, ch, here, div))
        what, how = try_first_text(solution_exercises(div))
        para = [{"t": "Strong", "c": text_inlines(f"Solution S{n}:")}, {"t": "Space"},
                *caption_inlines(div), {"t": "Str", "c": "."}, {"t": "Space"},
                *text_inlines(f"Try {what} first ("), {"t": "Code", "c": [["", [], []], how]},
                {"t": "Str", "c": "),"}, {"t": "Space"}, *text_inlines("then read it in"),
                {"t": "Space"},
                {"t": "Link", "c": [["", [], []], text_inlines(f"the appendix, S{n}"),
                                    [f"#solution-{n}", ""]]},
                {"t": "Str", "c": "."}]
        return {"t": "Div", "c": [[here, ["solution-pointer"], []], [{"t": "Para", "c": para}]]}

    def solutions_appendix(self, solutions: list) -> list:
        """The appendix "Solutions": every folded listing, after the last chapter."""
        if not solutions:
            return []
        blocks = [{"t": "Header", "c": [1, ["solutions", ["unnumbered", "appendix"], []],
                                        text_inlines("Solutions")]},
                  {"t": "Para", "c": text_inlines(
                      "These listings show what the exercises ask you to write. Each chapter "
                      "points here where it would show one: try the exercise first.")}]
        for n, ch, here, div in solutions:
            what, _ = try_first_text(solution_exercises(div))
            blocks.append({"t": "Header", "c": [2, [f"solution-{n}", ["unnumbered"], []],
                                                text_inlines(f"S{n} · {what}")]})
            blocks.append(div)
            back = f"chapter {ch.number}, {ch.title}" if ch.number else ch.title
            blocks.append({"t": "Para", "c": [
                {"t": "Link", "c": [["", ["solution-back"], []], text_inlines(f"Back to {back}"),
                                    [f"#{here}", ""]]}]})
        return blocks

    def build_epub(self, combined: Path) -> None:
        self.pandoc(str(combined), "-f", "json", "-t", "epub3",
                    "--css", str(BOOK / "assets/epub.css"),
                    "--toc", "--toc-depth=2", "--epub-chapter-level=1",
                    "--resource-path", str(self.out),
                    "-o", str(self.out / EPUB_NAME), what="EPUB")

    def build_pdf(self, combined: Path) -> None:
        printable = self.work / "print.html"
        self.pandoc(str(combined), "-f", "json", "-t", "html5", "--standalone", "--wrap=none",
                    "--template", str(BOOK / "templates/print.html"),
                    "--toc", "--toc-depth=1",
                    "-V", f"css={BOOK / 'assets/print.css'}",
                    "-o", str(printable), what="printable HTML for the PDF")
        proc = subprocess.run(["weasyprint", "--base-url", f"{self.out}/",
                               str(printable), str(self.out / PDF_NAME)],
                              capture_output=True, text=True)
        problems = [line for line in proc.stderr.splitlines() if line.strip()]
        if proc.returncode != 0 or problems:
            raise BuildError("PDF (weasyprint):\n" + ("\n".join(problems) or
                                                      f"exit status {proc.returncode}"))

    # ------------------------------------------------------------------ driver

    def build(self) -> None:
        if not self.chapters:
            raise BuildError(f"no chapters in {self.root / 'chapters'}")
        self.prepare_out()
        self.log(f"{len(self.chapters)} chapters, kernel tree {self.kernel_tree}")
        self.literate(self.chapters)
        if self.run_missing and self.missing_results():
            self.produce_missing()
        if "html" in self.formats:
            self.log("HTML")
            self.build_html()
        if self.formats & {"epub", "pdf"}:
            combined = self.work / "book.json"
            combined.write_text(json.dumps(self.combined_ast()))
            if "epub" in self.formats:
                self.log("EPUB")
                self.build_epub(combined)
            if "pdf" in self.formats:
                self.log("PDF")
                self.build_pdf(combined)
        manifest = {
            "chapters": [{"slug": c.slug, "title": c.title, "page": c.page,
                          "sections": len(c.sections)} for c in self.chapters],
            "pages": ["index.html", "contents.html"] + [c.page for c in self.chapters]
            if "html" in self.formats else [],
            "epub": EPUB_NAME if "epub" in self.formats else None,
            "pdf": PDF_NAME if "pdf" in self.formats else None,
            "solutions": [{"chapter": c.slug, "exercises": [f"{n}@{st}" for n, st in ex]}
                          for c in self.chapters for ex in self.solutions_of(c)],
            "missing_results": [{"chapter": a, "results": b, "command": c}
                                for a, b, c in self.missing_results()],
        }
        (self.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        for chapter, rel, cmd in self.missing_results():
            print(f"book: note: {chapter} shows build/results/{rel}, not there yet "
                  f"(made by: {cmd})", file=sys.stderr)

    @staticmethod
    def solutions_of(ch: Chapter) -> list[list[tuple[str, str]]]:
        found = []

        def fn(div):
            found.append(solution_exercises(div))
            return [div]
        replace_solutions(json.loads(json.dumps(ch.ast.get("blocks", []))), fn)
        return found

    def check_includes(self) -> None:
        self.prepare_out()
        self.literate(self.chapters)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="output directory (default build/book)")
    ap.add_argument("--root", default=str(BOOK.parent), help="repository root")
    ap.add_argument("--formats", default="html,epub,pdf",
                    help="comma-separated subset of html,epub,pdf")
    ap.add_argument("--run-missing", action="store_true",
                    default=os.environ.get("BOOK_RUN") == "1",
                    help="run the make commands that produce missing results (BOOK_RUN=1)")
    ap.add_argument("--check-includes", action="store_true",
                    help="only resolve every inclusion of every chapter")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    root = Path(args.root).resolve()
    out = Path(args.out) if args.out else root / "build/book"
    out = out.resolve()
    formats = {f for f in args.formats.split(",") if f}
    if formats - {"html", "epub", "pdf"}:
        ap.error(f"unknown format(s): {', '.join(formats - {'html', 'epub', 'pdf'})}")
    book = Book(root, out, formats, args.run_missing, not args.quiet)
    try:
        if args.check_includes:
            with tempfile.TemporaryDirectory(prefix="book-check-") as tmp:
                book.out, book.work = Path(tmp), Path(tmp) / ".work"
                book.check_includes()
            n = sum(1 for c in book.chapters for _ in re.finditer(
                r"^\s*```+\s*\{[^}]*\b(include|src|patch)=", c.source.read_text(), re.M))
            print(f"book: {n} inclusions in {len(book.chapters)} chapters resolve")
        else:
            book.build()
            print(f"book: wrote {out}")
    except BuildError as exc:
        print(f"book: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
