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

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
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
         "git": "git", "java": "epubcheck"}
# Debian's epubcheck runs /usr/bin/epubcheck as a jar through binfmt_misc,
# which a container or chroot may not have: the jar is run with java.
EPUBCHECK_JAR = Path("/usr/share/java/epubcheck.jar")


@pytest.fixture(scope="session", autouse=True)
def tools():
    missing = sorted({pkg for tool, pkg in TOOLS.items() if not shutil.which(tool)})
    if not EPUBCHECK_JAR.is_file():
        missing = sorted(set(missing) | {"epubcheck"})
    if missing:
        pytest.fail("the book needs these Debian packages (make deps installs them): "
                    + " ".join(missing))


def epubcheck(epub: Path) -> tuple[int, str]:
    """(fatal errors + errors, report) of epubcheck on an EPUB."""
    proc = subprocess.run(["java", "-jar", str(EPUBCHECK_JAR), str(epub)], capture_output=True,
                          text=True, timeout=600)
    report = proc.stdout + proc.stderr
    m = re.search(r"Messages: (\d+) fatals? / (\d+) errors?", report)
    assert m, f"epubcheck printed no tally:\n{report[-3000:]}"
    count = int(m.group(1)) + int(m.group(2))
    assert (count == 0) == (proc.returncode == 0), report[-3000:]
    return count, report


SOLUTION_DETAILS = re.compile(r'<details class="solution"[^>]*>.*?</details>', re.S)


def visible(markup: str) -> str:
    """Text of HTML as a reader sees it, tags removed."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def solutions_page(pdf: Path) -> int:
    """The page where the PDF's appendix "Solutions" starts."""
    out = subprocess.run(["pdfinfo", "-dests", str(pdf)], check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r'^\s*(\d+)\s.*"solutions"\s*$', out, re.M)
    assert m, "the PDF has no appendix Solutions"
    return int(m.group(1))


def pdf_pages_text(pdf: Path, first: int, last: int | None = None) -> str:
    args = ["pdftotext", "-layout", "-f", str(first)] + (["-l", str(last)] if last else [])
    return subprocess.run([*args, str(pdf), "-"], check=True, capture_output=True,
                          text=True).stdout


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

Before the exercise's own stage, its function is folded all the same:

```{include=kernel/demo.c fn=demo_rotate stage=00}
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

```{src=stages/01-lru-list/tests from="b " to="c " .bash}
```

```{patch=01-lru-list/0001-demo-count-rotations.patch part=message}
```

```{src=stages/01-lru-list/reference.c solution=rotate}
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

# A figure as drawing programs write them: a DOCTYPE with external
# identifiers (epubcheck OPF-073) and an internal subset whose entity the
# drawing uses.
SVG_WITH_DOCTYPE = ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
                    '<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"\n'
                    ' "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd" [\n'
                    '  <!ENTITY fill "#8ac">\n'
                    ']>\n'
                    '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40">'
                    '<rect width="120" height="40" fill="&fill;"/></svg>\n')

# The demo's one exercise: demo_rotate()'s body. Its reference answer is a
# grader file the chapter shows with solution=rotate.
EXERCISES_TOML = """\
[[exercise]]
name = "rotate"
file = "kernel/demo.c"
function = "demo_rotate"
summary = "count the rotations."
hint = "one per budget."
tests = ["demo/rotate"]
"""
REFERENCE_C = "/* the grader's reference */\nstatic unsigned int reference_rotations(unsigned int b)\n{\n\treturn b * 7919u;\n}\n"


def make_lab(base: Path) -> dict:
    """A repository, kernel tree and results directory for a two-chapter book."""
    repo, tree, results = base / "lab", base / "linux", base / "results"
    (repo / "chapters").mkdir(parents=True)
    (repo / "chapters/00-introduction.md").write_text(INTRO)
    (repo / "chapters/01-lru-list.md").write_text(CHAPTER)
    (repo / "docs").mkdir()
    (repo / "docs/design.md").write_text("# Design\n")
    (repo / "docs/figure.svg").write_text(SVG_WITH_DOCTYPE)
    (repo / "stages/01-lru-list").mkdir(parents=True)
    (repo / "stages/01-lru-list/tests").write_text("# name  command\na  true\nb  true\nc  true\n")
    (repo / "stages/01-lru-list/stage.toml").write_text('title = "Demo"\n')
    (repo / "stages/00-base").mkdir(parents=True)
    (repo / "stages/00-base/stage.toml").write_text(
        'title = "Base"\nchapter = "chapters/00-introduction.md"\n')
    (repo / "exercises/01-lru-list").mkdir(parents=True)
    (repo / "exercises/01-lru-list/exercises.toml").write_text(EXERCISES_TOML)
    (repo / "stages/01-lru-list/reference.c").write_text(REFERENCE_C)
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
    # from= and to= anchor an excerpt by the text its lines start with
    assert "<code>stages/01-lru-list/tests</code> · lines 3–4 · lab repository" in page
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
    row = re.search(r"<tr[^>]*>\s*<td>A BPF map type with a least-recently-used list.*?</tr>",
                    front, re.S).group(0)
    assert 'href="01-lru-list.html"' in row
    assert row.count("✓") == 3 and "✓ 3" in row         # written, 3 tests, exercises
    row = re.search(r"<tr[^>]*>\s*<td>User-space LED drivers.*?</tr>", front, re.S).group(0)
    assert "planned" in row and "✓" not in row and "href=" not in row


# The article's two lists, item by item in its order, and the chapter of the
# lab that covers (or will cover) each: the book's plan, typed in once more
# here so that a row lost, merged or moved in book/features.toml shows.
ARTICLE_ITEMS = [
    ("writeback throttling", "17-writeback-throttling"),
    ("arm64 uprobes and PAN emulation", "18-arm64-uprobes-pan"),
    ("per-UID routing", "08-uid-routing"),
    ("IPv6 segment routing", "09-seg6"),
    ("the LRU BPF map type", "01-lru-list"),
    ("BPF programs on control groups", "10-cgroup-bpf"),
    ("BPF on lightweight tunnels", "03-lwt-bpf"),
    ("netfilter stateful objects", "11-nft-objects"),
    ("EFI random seed", "19-efi-random-seed"),
    ("perf", "20-perf"),
    ("mediated devices", "06-mdev"),
    ("user-space LEDs", "04-uleds"),
    ("new hardware", "07-drivers"),
    ("CONFIG_BUG_ON_DATA_CORRUPTION", "12-list-corruption"),
    ("the mutex rewrite", "13-mutex"),
    ("the CPU-idle notifier's removal", "14-cpu-hotplug"),
    ("CPU hotplug state machine", "14-cpu-hotplug"),
    ("Kconfig imply", "05-kconfig-imply"),
    ("vfree_atomic()", "15-vfree-atomic"),
    ("device links", "16-device-links"),
    ("s390 CMA", "21-s390-cma"),
]


def test_features_toml_has_one_row_per_article_item():
    import tomllib
    data = tomllib.loads((ROOT / "book/features.toml").read_text())
    features, chapters = data["feature"], [c["slug"] for c in data["chapter"]]
    assert len(features) == len(ARTICLE_ITEMS) == 21
    assert [f.get("chapter") for f in features] == [ch for _, ch in ARTICLE_ITEMS]
    assert len({f["name"] for f in features}) == len(features)
    # every chapter a row names is in the plan, and the plan is 00..21 in order
    assert set(f["chapter"] for f in features) <= set(chapters)
    assert chapters == sorted(chapters)
    assert [int(c[:2]) for c in chapters] == list(range(len(chapters)))
    # the chapters written so far are in the plan under the same slug
    written = sorted(p.stem for p in (ROOT / "chapters").glob("[0-9][0-9]-*.md"))
    assert set(written) <= set(chapters)


def test_front_page_has_a_row_per_feature_and_marks_planned_chapters(demo):
    import tomllib
    data = tomllib.loads((ROOT / "book/features.toml").read_text())
    front = (demo["out"] / "index.html").read_text()
    table = re.search(r"<table.*?</table>", front, re.S).group(0)
    rows = re.findall(r"<tr[^>]*>\s*<td>.*?</tr>", table, re.S)
    assert len(rows) == len(data["feature"]) == 21
    written = {"00-introduction", "01-lru-list"}         # the demo's chapters
    for feat, row in zip(data["feature"], rows):
        if feat["chapter"] in written:
            assert f'href="{feat["chapter"]}.html"' in row, row
        else:
            assert "planned" in row and "href=" not in row, row
    assert "not covered by the lab" not in front


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
# Exercised code is folded, and figures are packaged as EPUB 3 allows

# What the demo's exercise asks for (demo_rotate's body, HTML-escaped as the
# highlighter writes it once tags are gone) and its grader's reference.
ANSWER = "l->count++"
REFERENCE = "b * 7919u"


def test_exercised_listings_are_folded_on_the_web(demo):
    out = demo["out"]
    page = (out / "01-lru-list.html").read_text()
    folded = SOLUTION_DETAILS.findall(page)
    # demo_rotate() at stage 01, the patch hunk adding to its body, the reference
    assert len(folded) == 3
    for details in folded:
        assert 'data-exercises="rotate@01-lru-list"' in details
        assert "try exercise rotate first" in details and "make exercise STAGE=01" in details
    assert ANSWER in visible(folded[0]) and REFERENCE in visible(folded[2])
    assert "reference_rotations" in visible(folded[2])
    rest = visible(SOLUTION_DETAILS.sub("", page))
    assert ANSWER not in rest and REFERENCE not in rest
    # before the solution, the listing as the exercise branch has it
    stub = re.search(r'<div id="lst-rotate" class="listing exercise-stub">.*?</pre>', page, re.S)
    assert stub and "Exercise rotate (01-lru-list): count the rotations." in visible(stub.group(0))
    assert "as on the exercise branch" in visible(stub.group(0))
    # an earlier stage than the exercise's own is folded too
    intro = (out / "00-introduction.html").read_text()
    assert len(SOLUTION_DETAILS.findall(intro)) == 1
    assert ANSWER not in visible(SOLUTION_DETAILS.sub("", intro))
    index = (out / "assets/search-index.js").read_text()
    assert ANSWER not in index and REFERENCE not in index and "demo_rotate" in index
    manifest = json.loads((out / "manifest.json").read_text())
    assert [m["chapter"] for m in manifest["solutions"]] == [
        "00-introduction", "01-lru-list", "01-lru-list", "01-lru-list"]
    assert {e for m in manifest["solutions"] for e in m["exercises"]} == {"rotate@01-lru-list"}


def test_epub_and_pdf_print_exercised_listings_in_an_appendix(demo):
    out = demo["out"]
    with zipfile.ZipFile(out / "linux-4.10-lab.epub") as z:
        texts = {n: z.read(n).decode() for n in z.namelist() if n.endswith(".xhtml")}
    appendix = [n for n, t in texts.items() if 'id="solutions"' in t]
    assert len(appendix) == 1
    chapters = "".join(visible(t) for n, t in texts.items() if n not in appendix)
    assert ANSWER not in chapters and REFERENCE not in chapters
    assert "Solution S1:" in chapters and "Solution S4:" in chapters
    assert "Try exercise rotate first" in chapters
    solved = visible(texts[appendix[0]])
    assert ANSWER in solved and REFERENCE in solved and "Back to chapter 1" in solved

    pdf = out / "linux-4.10-lab.pdf"
    page = solutions_page(pdf)
    before, after = pdf_pages_text(pdf, 1, page - 1), pdf_pages_text(pdf, page)
    assert ANSWER not in before and REFERENCE not in before
    assert "Solution S1:" in before and "Try exercise rotate first" in before
    assert ANSWER in after and REFERENCE in after and "S4 · exercise rotate" in after
    assert "Exercise rotate (01-lru-list)" in before        # the stub stays in the chapter


def test_figures_lose_their_doctype_and_keep_their_entities(demo):
    out = demo["out"]
    figure = (out / "img/docs--figure.svg").read_text()
    assert "<!DOCTYPE" not in figure and 'fill="#8ac"' in figure and "&fill;" not in figure
    for svg in (out / "figures").glob("*.svg"):
        assert "<!DOCTYPE" not in svg.read_text(), svg.name     # graphviz writes one
    with zipfile.ZipFile(out / "linux-4.10-lab.epub") as z:
        svgs = [n for n in z.namelist() if n.endswith(".svg")]
        assert len(svgs) >= 3
        for name in svgs:
            assert b"<!DOCTYPE" not in z.read(name), name


def test_demo_epub_passes_epubcheck_and_epubcheck_catches_a_doctype(demo, tmp_path):
    epub = demo["out"] / "linux-4.10-lab.epub"
    errors, report = epubcheck(epub)
    assert errors == 0, report
    # the same EPUB with one figure as graphviz or a drawing program writes it
    planted = tmp_path / "planted.epub"
    with zipfile.ZipFile(epub) as src, zipfile.ZipFile(planted, "w") as dst:
        svg = next(n for n in src.namelist() if n.endswith(".svg"))
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, SVG_WITH_DOCTYPE.encode() if info.filename == svg else data)
    errors, report = epubcheck(planted)
    assert errors > 0 and "OPF-073" in report


def test_a_solution_mark_must_name_an_exercise(demo, tmp_path):
    proc = broken_variant(demo, tmp_path, "solution=rotate", "solution=rotat")
    assert proc.returncode != 0
    assert "solution=rotat: no such exercise in exercises/*/exercises.toml" in proc.stderr


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


def test_a_block_whose_attributes_pandoc_cannot_read_fails(demo, tmp_path):
    # A quoted value that starts with a blank makes pandoc read the fence
    # as inline code.
    proc = broken_variant(demo, tmp_path, "fn=demo_rotate #lst-rotate}", 'from="x" to=" */" #lst-rotate}')
    assert proc.returncode != 0
    assert "pandoc could not read the attributes of this block" in proc.stderr


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
    assert "9 inclusions in 2 chapters resolve" in proc.stdout


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


def test_real_epub_passes_epubcheck(real_book):
    assert real_book["proc"].returncode == 0, real_book["proc"].stderr
    errors, report = epubcheck(real_book["out"] / "linux-4.10-lab.epub")
    assert errors == 0, report


# ---------------------------------------------------------------------------
# No exercised body unfolded in the lab's own book: the hand-out's leak check
# (vm/lab/handout.py), run on what a reader sees without opening a solution.

def hollowed_commit(tree, exercise_set) -> str:
    """The exercise commit of a stage, as exercises.exercise_commit makes it
    (the stage branch, every exercised file through exercises.hollow), but
    written with git plumbing: no workshop checkout, so no wait for the lock
    that a running lab command holds."""
    from lab import exercises, settings
    stage = exercise_set.stage
    base = tree.rev(stage.branch)
    assert base, f"no branch {stage.branch}"
    scratch = tempfile.TemporaryDirectory(prefix="book-leak-check-")
    index = Path(scratch.name) / "index"
    # The lab's own identity: a fresh machine has no git user to commit as.
    env = {**os.environ, **settings.LAB_IDENT, "GIT_INDEX_FILE": str(index)}

    def run(*args, data=None):
        return subprocess.run(["git", "-C", str(tree.path), *args], input=data, env=env,
                              check=True, capture_output=True, text=True).stdout.strip()
    try:
        run("read-tree", base)
        by_file: dict[str, list] = {}
        for exercise in exercise_set.exercises:
            by_file.setdefault(exercise.file, []).append(exercise)
        for file, items in by_file.items():
            text = run("show", f"{base}:{file}") + "\n"
            for exercise in items:
                text = exercises.hollow(text, exercise, stage.slug)
            mode = run("ls-tree", base, "--", file).split()[0]
            blob = run("hash-object", "-w", "--stdin", data=text)
            run("update-index", "--cacheinfo", f"{mode},{blob},{file}")
        hollow = run("write-tree")
        return run("commit-tree", hollow, "-p", base, "-m", f"book leak check: {stage.slug}")
    finally:
        scratch.cleanup()


@pytest.fixture(scope="module")
def leak_check(real_book):
    """find_leaks(root) over every stage with exercises, plus the grader
    reference code the chapters mark with solution=NAME."""
    assert real_book["proc"].returncode == 0, real_book["proc"].stderr
    sys.path.insert(0, str(ROOT / "vm"))
    from lab import exercises, handout
    from lab.tree import KernelTree
    tree = KernelTree(real_kernel_tree())
    stages = handout.exercise_stages()
    assert stages
    commits: dict[str, str] = {}

    def exercise_commit(tree_, exercise_set):
        slug = exercise_set.stage.slug
        if slug not in commits:
            commits[slug] = hollowed_commit(tree_, exercise_set)
        return commits[slug]

    references = marked_references()

    def check(root: Path) -> list[tuple[str, str]]:
        """[(what leaked, where)]: solution hunks and marked references."""
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(exercises, "exercise_commit", exercise_commit)
            leaks = [(l.solution, l.where) for l in handout.find_leaks(root, stages, tree)]
            # find_leaks looks for WINDOW lines at a time; a hunk with fewer
            # significant lines (imply-puzzle-keyboard adds one) is looked for
            # as it is, with the same rules.
            texts = handout.handout_texts(root)
            for stage in stages:
                commit = exercise_commit(tree, exercises.load(stage))
                for patch, header, file, added in handout.solution_hunks(stage):
                    lines = handout.significant(added)
                    if not lines or len(lines) >= handout.WINDOW:
                        continue
                    shown = tree.git("show", f"{commit}:{file}").stdout.splitlines()
                    if tuple(lines) in handout.windows(handout.significant(shown), len(lines)):
                        continue
                    for rel, text in texts.items():
                        if tuple(lines) in handout.windows(handout.significant(text), len(lines)):
                            leaks.append((str(patch.relative_to(ROOT)), rel))
                            break
        for name, lines in references:
            window = tuple(lines[:handout.WINDOW])
            for rel, text in handout.handout_texts(root).items():
                if window in handout.windows(handout.significant(text), len(window)):
                    leaks.append((f"reference code of {name}", rel))
                    break
        return leaks
    return check


def marked_references() -> list[tuple[str, list[str]]]:
    """(exercise, significant lines) of each listing a chapter marks solution=NAME."""
    sys.path.insert(0, str(ROOT / "book"))
    import literate
    found = []
    for chapter in sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md")):
        for attrs in re.findall(r"^```+\s*\{([^}]*\bsolution=[^}]*)\}", chapter.read_text(), re.M):
            req = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', attrs))
            req = {k: v.strip('"') for k, v in req.items()}
            req["default-stage"] = chapter.name[:2]
            text = literate.answer(req)[0]
            from lab import handout
            found.append((req["solution"], handout.significant(text.split("\n"))))
    return found


def student_facing(out: Path, dest: Path, unfold: bool = False) -> dict[str, Path]:
    """What a reader sees of the book without opening a solution, one
    directory per format: the web pages without their <details
    class="solution"> and the search index; the EPUB's documents but the
    appendix Solutions; the PDF's text up to that appendix, without the
    listings' line numbers. With unfold, everything (the planted leak)."""
    dirs = {f: dest / f for f in ("html", "epub", "pdf")}
    for d in dirs.values():
        d.mkdir(parents=True)
    for page in out.glob("*.html"):
        text = page.read_text()
        (dirs["html"] / page.name).write_text(text if unfold else SOLUTION_DETAILS.sub("", text))
    shutil.copy(out / "assets/search-index.js", dirs["html"] / "search-index.js")
    with zipfile.ZipFile(out / "linux-4.10-lab.epub") as z:
        for name in z.namelist():
            if name.endswith(".xhtml"):
                text = z.read(name).decode()
                if unfold or 'id="solutions"' not in text:
                    (dirs["epub"] / (Path(name).stem + ".html")).write_text(text)
    pdf = out / "linux-4.10-lab.pdf"
    text = pdf_pages_text(pdf, 1, None if unfold else solutions_page(pdf) - 1)
    (dirs["pdf"] / "book.txt").write_text(re.sub(r"(?m)^\s*\d+ +", "", text))
    return dirs


def test_no_exercised_body_is_unfolded_in_the_real_book(real_book, leak_check, tmp_path):
    manifest = json.loads((real_book["out"] / "manifest.json").read_text())
    assert manifest["solutions"], "the book folds no listing at all"
    for fmt, root in student_facing(real_book["out"], tmp_path).items():
        assert leak_check(root) == [], fmt


def test_the_leak_check_finds_every_folded_solution_once_unfolded(real_book, leak_check,
                                                                   tmp_path):
    """The planted leak: the same book with its solutions unfolded. In each
    format, every exercise the book folds must be found by the check."""
    manifest = json.loads((real_book["out"] / "manifest.json").read_text())
    folded = {e.split("@")[0] for m in manifest["solutions"] for e in m["exercises"]}
    references = {name for name, _ in marked_references()}
    assert references <= folded
    for fmt, root in student_facing(real_book["out"], tmp_path, unfold=True).items():
        leaks = leak_check(root)
        found = {Path(what).stem for what, _ in leaks if what.endswith(".patch")}
        assert folded - found == set(), f"{fmt}: not found when unfolded: {folded - found}"
        marked = {what.split()[-1] for what, _ in leaks if what.startswith("reference code")}
        assert marked == references, fmt
