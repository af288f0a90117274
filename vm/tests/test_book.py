"""Checks of the book (host tier of `make check`).

Two books are built:

* a small made-up one in a temporary directory (its own chapters, kernel tree,
  patches and results), which exercises every kind of block and every
  failure the machinery must catch, whatever state the lab is in;
* the lab's real book from chapters/, into build/book (BOOK_TEST_OUT
  overrides), against the kernel tree in KERNEL_TREE (default build/linux).
  These tests are skipped when that tree does not exist yet.

Both are built in all three formats with pandoc warnings as errors, opened
page by page in headless Chromium, and their PDF is counted for chapters.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "book/build.py"
sys.path.insert(0, str(ROOT / "book"))
import check_site  # noqa: E402

TOOLS = {"pandoc": "pandoc", "weasyprint": "weasyprint", "dot": "graphviz",
         "pdfinfo": "poppler-utils", "pdftotext": "poppler-utils", "chromium": "chromium",
         "git": "git"}


@pytest.fixture(scope="session", autouse=True)
def tools():
    missing = sorted({pkg for tool, pkg in TOOLS.items() if not shutil.which(tool)})
    if missing:
        pytest.fail("the book needs these Debian packages: " + " ".join(missing))


def run_build(root: Path, out: Path, *extra: str, env: dict | None = None):
    return subprocess.run([sys.executable, str(BUILD), "--root", str(root), "--out", str(out),
                           "-q", *extra],
                          capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=600)


def git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True,
                          text=True).stdout


def chapter_dests(pdf: Path) -> list[str]:
    """Named destinations of chapter headings (id "NN-slug") in the PDF."""
    out = subprocess.run(["pdfinfo", "-dests", str(pdf)], check=True, capture_output=True,
                         text=True).stdout
    names = re.findall(r'"([^"]+)"\s*$', out, re.M)
    return sorted(n for n in names if re.fullmatch(r"\d\d-[A-Za-z0-9._-]+", n) and "--" not in n)


def pdf_text(pdf: Path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(pdf), "-"], check=True,
                          capture_output=True, text=True).stdout


# ---------------------------------------------------------------------------
# A made-up lab

DEMO_C = textwrap.dedent("""\
    // SPDX-License-Identifier: GPL-2.0
    #include <linux/list.h>

    struct demo_list {
    \tstruct list_head head;
    \tunsigned int count;
    };

    static void demo_rotate(struct demo_list *l,
    \t\t\tunsigned int budget)
    {
    \twhile (budget--)
    \t\tl->count++;
    }
    """)

PATCH = textwrap.dedent("""\
    From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001
    From: Linux 4.10 Lab <lab@linux-4-10-lab.invalid>
    Date: Sat, 10 Dec 2016 10:00:00 +0000
    Subject: [PATCH] demo: count rotations

    The count is what the test reads.

    Signed-off-by: Linux 4.10 Lab <lab@linux-4-10-lab.invalid>
    ---
     kernel/demo.c | 1 +
     1 file changed, 1 insertion(+)

    diff --git a/kernel/demo.c b/kernel/demo.c
    index 1111111..2222222 100644
    --- a/kernel/demo.c
    +++ b/kernel/demo.c
    @@ -11,4 +11,5 @@ static void demo_rotate(struct demo_list *l,
     {
     \twhile (budget--)
     \t\tl->count++;
    +\tl->rotations++;
     }
    --\x20
    2.39.2
    """)

INTRO = """\
# Introduction

This made-up lab has [one chapter](01-lru-list.md) and [another one
planned](02-lru-htab.md). Its design is in [the design notes](../docs/design.md).

```{include=kernel/demo.c struct=demo_list stage=00}
```
"""

CHAPTER = """\
# The demo list

## Code

```{include=kernel/demo.c fn=demo_rotate #lst-rotate}
```

```{include=kernel/demo.c lines=1-2 stage=00 caption="The first *two* lines"}
```

```{patch=01/0001 file=kernel/demo.c hunk=1}
```

```{src=stages/01-lru-list/tests lines=2-3 .bash}
```

```{patch=01-lru-list/0001-demo-count-rotations.patch part=message}
```

See [the rotation](#lst-rotate) and [the introduction](00-introduction.md#introduction).

![A figure from the repository](../docs/figure.svg)

## Results

```{results=01-lru-list/ktap.txt}
```

```{results=01-lru-list/ktap.txt tail=2 #last-two}
```

```{results=01-lru-list/table.md}
```

```{results=01-lru-list/numbers.csv}
```

```{results=01-lru-list/plot.svg caption="A plot"}
```

```{results=01-lru-list/graph.dot}
```

```{results=01-lru-list/bench.txt}
```

```{results=01-lru-list/made.txt run="sh produce.sh"}
```

## A diagram

```{.dot caption="Stages"}
digraph { base -> "stage/01-lru-list" }
```
"""

SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40">'
       '<rect width="120" height="40" fill="#8ac"/></svg>\n')


def make_lab(base: Path) -> dict:
    """A repository, kernel tree and results directory for a two-chapter book."""
    repo, tree, results = base / "lab", base / "linux", base / "results"
    (repo / "chapters").mkdir(parents=True)
    (repo / "chapters/00-introduction.md").write_text(INTRO)
    (repo / "chapters/01-lru-list.md").write_text(CHAPTER)
    (repo / "docs").mkdir()
    (repo / "docs/design.md").write_text("# Design\n")
    (repo / "docs/figure.svg").write_text(SVG)
    (repo / "stages/01-lru-list").mkdir(parents=True)
    (repo / "stages/01-lru-list/tests").write_text("# name  command\na  true\nb  true\nc  true\n")
    (repo / "stages/01-lru-list/stage.conf").write_text("title = Demo\n")
    (repo / "exercises/01-lru-list").mkdir(parents=True)
    (repo / "kernel-patches/01-lru-list").mkdir(parents=True)
    (repo / "kernel-patches/01-lru-list/0001-demo-count-rotations.patch").write_text(PATCH)
    (repo / "kernel-patches/01-lru-list/series").write_text("0001-demo-count-rotations.patch\n")
    (repo / "produce.sh").write_text(
        'mkdir -p "$BOOK_RESULTS/01-lru-list"\n'
        'echo "produced by produce.sh" > "$BOOK_RESULTS/01-lru-list/made.txt"\n')

    (tree / "kernel").mkdir(parents=True)
    (tree / "kernel/demo.c").write_text(DEMO_C)
    git(tree, "init", "-q", "-b", "base")
    git(tree, "add", "-A")
    git(tree, "-c", "user.name=Lab", "-c", "user.email=lab@linux-4-10-lab.invalid",
        "commit", "-q", "-m", "base")
    git(tree, "branch", "stage/00-base")
    git(tree, "checkout", "-q", "-b", "stage/01-lru-list")
    (tree / "kernel/demo.c").write_text(DEMO_C.replace("\t\tl->count++;\n",
                                                       "\t\tl->count++;\n\tl->rotations++;\n"))
    git(tree, "-c", "user.name=Lab", "-c", "user.email=lab@linux-4-10-lab.invalid",
        "commit", "-q", "-am", "demo: count rotations")
    git(tree, "checkout", "-q", "base")          # what is checked out must not matter

    r = results / "01-lru-list"
    r.mkdir(parents=True)
    (r / "ktap.txt").write_text("KTAP version 1\n1..2\nok 1 rotate\nok 2 count\n")
    (r / "table.md").write_text("| map | ops/s |\n| --- | ---: |\n| hash | 100 |\n| lru | 90 |\n")
    (r / "numbers.csv").write_text("cpus,ops\n1,10\n2,19\n")
    (r / "plot.svg").write_text(SVG)
    (r / "graph.dot").write_text("digraph { active -> inactive -> free }\n")
    env = {"KERNEL_TREE": str(tree), "BOOK_RESULTS": str(results)}
    return {"repo": repo, "tree": tree, "results": results, "env": env}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    base = tmp_path_factory.mktemp("book-demo")
    lab = make_lab(base)
    lab["out"] = base / "out"
    lab["proc"] = run_build(lab["repo"], lab["out"], env=lab["env"])
    return lab


def test_demo_book_builds_all_formats_without_warnings(demo):
    proc = demo["proc"]
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr
    out = demo["out"]
    for name in ("index.html", "contents.html", "00-introduction.html", "01-lru-list.html",
                 "linux-4.10-lab.epub", "linux-4.10-lab.pdf", "assets/search-index.js"):
        assert (out / name).is_file(), name


def test_code_inclusions_render_with_origin_and_line_numbers(demo):
    page = (demo["out"] / "01-lru-list.html").read_text()
    # the function, from stage 01 (the chapter's own), starting at its line in the file
    assert 'data-startFrom="9"' in page
    assert "rotations" not in page.split("Results")[0].split("demo_rotate</code>")[0]
    assert re.search(r"kernel/demo\.c</code> · <code>demo_rotate\(\)</code> · stage 01-lru-list",
                     page)
    assert 'id="lst-rotate"' in page and 'class="sourceCode numberSource c numberLines"' in page
    assert "The first <em>two</em> lines" in page
    # patch hunk and message
    assert "0001-demo-count-rotations.patch</code> “demo: count rotations” · <code>kernel/demo.c" in page
    assert 'class="sourceCode diff"' in page
    assert "The count is what the test reads." in page
    assert "<code>stages/01-lru-list/tests</code> · lines 2–3 · lab repository" in page
    assert 'class="sourceCode bash"' in page
    intro = (demo["out"] / "00-introduction.html").read_text()
    assert "struct demo_list" in intro and "stage 00-base" in intro


def test_results_render_by_kind_and_missing_ones_say_how_to_make_them(demo):
    out = demo["out"]
    page = (out / "01-lru-list.html").read_text()
    assert "ok 1 rotate" in page and 'class="ktap"' in page
    tail = re.search(r'<div id="last-two" class="results".*?</div>\s*<pre[^>]*><code>(.*?)</code>',
                     page, re.S)
    assert tail and tail.group(1) == "ok 1 rotate\nok 2 count"
    assert page.count("<table") >= 2 and "<td>hash</td>" in page and "<td>19</td>" in page
    assert (out / "results/01-lru-list--plot.svg").is_file()
    assert len(list((out / "figures").glob("dot-*.svg"))) == 2
    missing = re.findall(r'<div class="results-missing".*?</div>', page, re.S)
    assert len(missing) == 2
    assert "build/results/01-lru-list/bench.txt" in missing[0]
    assert "<code>make test STAGE=01</code>" in missing[0]
    assert "<code>sh produce.sh</code>" in missing[1]
    manifest = json.loads((out / "manifest.json").read_text())
    assert {m["results"] for m in manifest["missing_results"]} == {
        "01-lru-list/bench.txt", "01-lru-list/made.txt"}


def test_front_page_state_comes_from_the_repository(demo):
    front = (demo["out"] / "index.html").read_text()
    row = re.search(r"<tr[^>]*>\s*<td>LRU list for BPF maps</td>.*?</tr>", front, re.S).group(0)
    assert 'href="01-lru-list.html"' in row
    assert row.count("✓") == 3 and "✓ 3" in row         # written, 3 tests, exercises
    row = re.search(r"<tr[^>]*>\s*<td>BPF_MAP_TYPE_LRU_HASH.*?</tr>", front, re.S).group(0)
    assert "planned" in row and "✓" not in row


def test_links_between_chapters_and_to_the_repository(demo):
    intro = (demo["out"] / "00-introduction.html").read_text()
    assert 'href="01-lru-list.html"' in intro
    assert 'class="unwritten"' in intro                 # 02 is planned, not written
    assert 'class="repo-path"' in intro                 # ../docs/design.md
    page = (demo["out"] / "01-lru-list.html").read_text()
    assert 'href="00-introduction.html#introduction"' in page
    assert 'src="img/docs--figure.svg"' in page


def test_demo_site_passes_the_browser_check(demo):
    report = check_site.check_site(demo["out"], screenshots=True, search="rotate")
    assert report.problems == []
    assert set(report.pages) == {"index.html", "contents.html", "00-introduction.html",
                                 "01-lru-list.html"}
    assert report.pages["index.html"].search_hits > 0
    for shot in ("front.png", "chapter.png", "chapter-phone.png"):
        data = (demo["out"] / "screenshots" / shot).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000


def test_demo_pdf_and_epub_have_every_chapter(demo):
    pdf = demo["out"] / "linux-4.10-lab.pdf"
    assert chapter_dests(pdf) == ["00-introduction", "01-lru-list"]
    text = pdf_text(pdf)
    assert "The demo list" in text and "Introduction" in text and "demo_rotate" in text
    with zipfile.ZipFile(demo["out"] / "linux-4.10-lab.epub") as z:
        names = z.namelist()
        chapters = [n for n in names if re.fullmatch(r"EPUB/text/ch\d+\.xhtml", n)]
        body = "".join(z.read(n).decode() for n in chapters)
    assert "EPUB/nav.xhtml" in names
    assert 'id="00-introduction"' in body and 'id="01-lru-list"' in body


def test_book_run_produces_missing_results(demo, tmp_path):
    env = dict(demo["env"], BOOK_RESULTS=str(tmp_path / "results"))
    shutil.copytree(demo["results"], tmp_path / "results")
    proc = run_build(demo["repo"], tmp_path / "out", "--formats", "html",
                     env={**env, "BOOK_RUN": "1"})
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "out/01-lru-list.html").read_text()
    assert "produced by produce.sh" in page
    assert page.count('class="results-missing"') == 1     # bench.txt's command is make test


# ---------------------------------------------------------------------------
# Failures the build must catch

def broken_variant(demo, tmp_path, old: str, new: str) -> subprocess.CompletedProcess:
    repo = tmp_path / "lab"
    shutil.copytree(demo["repo"], repo)
    chapter = repo / "chapters/01-lru-list.md"
    text = chapter.read_text()
    assert old in text
    chapter.write_text(text.replace(old, new))
    return run_build(repo, tmp_path / "out", "--formats", "html", env=demo["env"])


def test_a_vanished_function_fails_naming_chapter_file_stage_and_symbol(demo, tmp_path):
    proc = broken_variant(demo, tmp_path, "fn=demo_rotate", "fn=demo_rotate_gone")
    assert proc.returncode != 0
    msg = proc.stderr
    assert "chapters/01-lru-list.md" in msg and "kernel/demo.c" in msg
    assert "demo_rotate_gone" in msg and "stage 01-lru-list" in msg


def test_a_missing_stage_or_file_fails(demo, tmp_path):
    proc = broken_variant(demo, tmp_path, "lines=1-2 stage=00", "lines=1-2 stage=05")
    assert proc.returncode != 0 and "stage 05" in proc.stderr
    proc = broken_variant(demo, tmp_path / "b", "kernel/demo.c fn=", "kernel/nothere.c fn=")
    assert proc.returncode != 0 and "kernel/nothere.c does not exist" in proc.stderr


def test_a_pandoc_warning_fails_the_build(demo, tmp_path):
    proc = broken_variant(demo, tmp_path, "## Results", "## Results {#twice}\n\n## Again {#twice}")
    assert proc.returncode != 0 and "Duplicate identifier" in proc.stderr


def test_a_broken_link_fails_the_build(demo, tmp_path):
    proc = broken_variant(demo, tmp_path, "(00-introduction.md#introduction)", "(../no/such/file)")
    assert proc.returncode != 0 and "broken link to ../no/such/file" in proc.stderr


def test_check_includes_mode(demo):
    proc = subprocess.run([sys.executable, str(BUILD), "--root", str(demo["repo"]),
                           "--check-includes"], capture_output=True, text=True,
                          env={**os.environ, **demo["env"]})
    assert proc.returncode == 0, proc.stderr
    assert "6 inclusions in 2 chapters resolve" in proc.stdout


# ---------------------------------------------------------------------------
# The browser check itself must fail on broken pages

BROKEN_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>broken</title></head>
<body>
<h1 id="top">Broken</h1>
<img src="missing.png" alt="not there">
<a href="#top">fine</a> <a href="#nowhere">bad anchor</a>
<a href="other.html#gone">bad anchor elsewhere</a> <a href="absent.html">no page</a>
<script>undefinedFunction();</script>
</body></html>
"""

OTHER_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>other</title></head>
<body><h1 id="here">Fine</h1><a href="index.html#top">back</a></body></html>
"""


def test_browser_check_catches_js_errors_broken_images_links_and_anchors(tmp_path):
    (tmp_path / "index.html").write_text(BROKEN_PAGE)
    (tmp_path / "other.html").write_text(OTHER_PAGE)
    report = check_site.check_site(tmp_path, search=None)
    problems = "\n".join(report.problems)
    assert "JavaScript error" in problems and "undefinedFunction" in problems
    assert "broken image: missing.png" in problems
    assert "broken anchor #nowhere" in problems
    assert "broken anchor other.html#gone" in problems
    assert "broken link absent.html" in problems
    assert not [p for p in report.problems if p.startswith("other.html")]


# ---------------------------------------------------------------------------
# The lab's real book

def real_kernel_tree() -> Path:
    tree = Path(os.environ.get("KERNEL_TREE") or "build/linux")
    return tree if tree.is_absolute() else ROOT / tree


@pytest.fixture(scope="module")
def real_book():
    tree = real_kernel_tree()
    if subprocess.run(["git", "-C", str(tree), "rev-parse", "-q", "--verify", "base"],
                      capture_output=True).returncode != 0:
        pytest.skip(f"no lab kernel tree at {tree} (set KERNEL_TREE or build the tree first)")
    out = Path(os.environ.get("BOOK_TEST_OUT") or ROOT / "build/book")
    proc = run_build(ROOT, out)
    return {"out": out, "proc": proc,
            "chapters": sorted(p.stem for p in (ROOT / "chapters").glob("[0-9][0-9]-*.md"))}


def test_real_book_builds_all_formats_without_warnings(real_book):
    proc = real_book["proc"]
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr
    for name in ("index.html", "linux-4.10-lab.epub", "linux-4.10-lab.pdf"):
        assert (real_book["out"] / name).is_file()


def test_every_code_inclusion_of_every_chapter_resolves():
    if subprocess.run(["git", "-C", str(real_kernel_tree()), "rev-parse", "-q", "--verify",
                       "base"], capture_output=True).returncode != 0:
        pytest.skip("no lab kernel tree")
    proc = subprocess.run([sys.executable, str(BUILD), "--check-includes"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_real_site_passes_the_browser_check(real_book):
    assert real_book["proc"].returncode == 0, real_book["proc"].stderr
    report = check_site.check_site(real_book["out"], screenshots=True)
    assert report.problems == []
    assert len(report.pages) == len(real_book["chapters"]) + 2
    assert (real_book["out"] / "screenshots/front.png").is_file()
    assert (real_book["out"] / "screenshots/chapter.png").is_file()


def test_real_pdf_has_as_many_chapters_as_the_sources(real_book):
    assert real_book["proc"].returncode == 0, real_book["proc"].stderr
    pdf = real_book["out"] / "linux-4.10-lab.pdf"
    assert chapter_dests(pdf) == real_book["chapters"]
    pages = int(re.search(r"^Pages:\s+(\d+)", subprocess.run(
        ["pdfinfo", str(pdf)], capture_output=True, text=True).stdout, re.M).group(1))
    assert pages >= len(real_book["chapters"]) + 2
    manifest = json.loads((real_book["out"] / "manifest.json").read_text())
    text = re.sub(r"\s+", " ", pdf_text(pdf))
    for ch in manifest["chapters"]:
        assert ch["title"] in text, ch["title"]
