"""Unit tests of book/literate.py: finding C definitions, Kconfig entries,
line ranges and patch hunks. No kernel tree and no pandoc needed."""

import importlib.util
import io
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("book_literate", ROOT / "book/literate.py")
literate = importlib.util.module_from_spec(spec)
sys.modules["book_literate"] = literate
spec.loader.exec_module(literate)

C = r'''// SPDX-License-Identifier: GPL-2.0
#include <linux/list.h>

#define SIMPLE 1
#define LONG_MACRO(a, b) \
	do {             \
		(a) = (b); \
	} while (0)

static int helper(int x);	/* prototype, not the definition */

struct node {
	struct list_head list;
	int key;	/* "helper(" in a comment { */
};

enum colour {
	RED,
	BLUE,
};

/* A comment right above the function. */
static inline int
helper(int x)
{
	const char *s = "} not a brace {";
	char c = '{';

	if (x) {
		return x + 1;
	}
	return 0;
}

static void locked_walk(struct node *n,
			int depth)
	__acquires(&n->lock)
{
	while (depth--)
		n->key++;
}

#ifdef CONFIG_FOO
static int conditional(void)
{
	return 1;
}
#endif

BPF_CALL_2(bpf_thing, struct node *, n, int, k)
{
	return n->key + k;
}

static const struct node_ops fancy_ops = {
	.walk = locked_walk,
	.help = helper,
};

int after(void) { return helper(2); }
'''


def ext(kind, name, **kw):
    return literate.extract(C, kind, name, **kw)


def test_function_with_multiline_signature_and_inline():
    first, text = ext("fn", "helper")
    assert text.startswith("static inline int\nhelper(int x)\n{")
    assert text.endswith("return 0;\n}")
    assert C.split("\n")[first - 1] == "static inline int"


def test_prototype_and_comment_mentions_are_skipped():
    first, text = ext("fn", "helper")
    assert "prototype" not in text
    assert "list_head" not in text


def test_leading_comment_on_request():
    _, text = ext("fn", "helper", comment=True)
    assert text.startswith("/* A comment right above the function. */\nstatic inline int")


def test_annotations_between_parameters_and_body():
    _, text = ext("fn", "locked_walk")
    assert text.startswith("static void locked_walk(struct node *n,\n\t\t\tint depth)\n\t__acquires")
    assert text.endswith("n->key++;\n}")


def test_function_inside_ifdef_starts_after_the_directive():
    _, text = ext("fn", "conditional")
    assert text.startswith("static int conditional(void)")
    assert "#ifdef" not in text


def test_function_defined_by_a_macro():
    _, text = ext("fn", "bpf_thing")
    assert text.startswith("BPF_CALL_2(bpf_thing,")
    assert text.endswith("}")


def test_one_line_function():
    _, text = ext("fn", "after")
    assert text == "int after(void) { return helper(2); }"


def test_struct_enum_define_var():
    assert ext("struct", "node")[1].startswith("struct node {")
    assert ext("struct", "node")[1].endswith("};")
    assert ext("enum", "colour")[1].splitlines()[1].strip() == "RED,"
    assert ext("define", "SIMPLE")[1] == "#define SIMPLE 1"
    assert ext("define", "LONG_MACRO")[1].endswith("} while (0)")
    var = ext("var", "fancy_ops")[1]
    assert var.startswith("static const struct node_ops fancy_ops = {") and var.endswith("};")


def test_unknown_names_raise_lookup_error():
    for kind, name in [("fn", "nothere"), ("struct", "colour"), ("fn", "SIMPLE"),
                       ("define", "helper"), ("var", "helper")]:
        with pytest.raises(LookupError):
            ext(kind, name)


def test_kconfig_entry():
    kconfig = ("config A\n\tbool \"A\"\n\thelp\n\t  Text.\n\n\t  More.\n\n"
               "config B\n\ttristate \"B\"\n\timply A\n\nendmenu\n")
    first, text = literate.extract(kconfig, "kconfig", "B")
    assert first == 8 and text == "config B\n\ttristate \"B\"\n\timply A"
    assert literate.extract(kconfig, "kconfig", "A")[1].endswith("More.")


def test_lines():
    assert literate.select_lines("a\nb\nc\nd\n", "2-3") == (2, "b\nc")
    assert literate.select_lines("a\nb\nc\n", "2-") == (2, "b\nc")
    with pytest.raises(literate.BookError):
        literate.select_lines("a\nb\n", "2-9")


PATCH = """From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001
From: Linux 4.10 Lab <lab@linux-4-10-lab.invalid>
Date: Sat, 10 Dec 2016 10:00:00 +0000
Subject: [PATCH 1/2] bpf: lru: a subject long enough to be
 folded by git

Why the change is made.

Signed-off-by: Linux 4.10 Lab <lab@linux-4-10-lab.invalid>
---
 kernel/a.c | 3 ++-
 1 file changed

diff --git a/kernel/a.c b/kernel/a.c
index 1111111..2222222 100644
--- a/kernel/a.c
+++ b/kernel/a.c
@@ -1,2 +1,2 @@ int first(void)
 context
-old
+new
@@ -10,2 +10,3 @@ int second(void)
 more
+-- 
 end
diff --git a/kernel/b.c b/kernel/b.c
new file mode 100644
--- /dev/null
+++ b/kernel/b.c
@@ -0,0 +1 @@
+only line
-- 
2.39.2

"""


def test_patch_parsing():
    p = literate.parse_patch(PATCH)
    assert p.subject == "bpf: lru: a subject long enough to be folded by git"
    assert p.message.startswith("Why the change is made.")
    assert "1 file changed" not in p.message
    assert [f.path for f in p.files] == ["kernel/a.c", "kernel/b.c"]
    assert len(p.files[0].hunks) == 2
    assert p.files[0].hunks[1][-1] == " end"          # "+-- " is content, not the signature
    assert p.files[1].hunks == [["@@ -0,0 +1 @@", "+only line"]]


def test_malformed_patch_is_an_error():
    with pytest.raises(literate.BookError, match="shorter than its header"):
        literate.parse_patch(PATCH.replace("@@ -1,2 +1,2 @@", "@@ -1,3 +1,3 @@"))


def test_patch_excerpts(tmp_path, monkeypatch):
    d = tmp_path / "kernel-patches/01-lru-list"
    d.mkdir(parents=True)
    (d / "0001-bpf-lru-a-subject.patch").write_text(PATCH)
    monkeypatch.setattr(literate, "ROOT", tmp_path)
    monkeypatch.setenv("KERNEL_TREE", str(tmp_path / "no-tree"))
    text, lang, caption, solutions = literate.patch_excerpt(
        {"patch": "01/0001", "file": "kernel/a.c", "hunk": "2"})
    assert solutions == []                      # no exercises in this lab
    assert lang == "diff"
    assert text.splitlines()[:3] == ["--- a/kernel/a.c", "+++ b/kernel/a.c",
                                     "@@ -10,2 +10,3 @@ int second(void)"]
    assert "hunk 2" in caption and "01-lru-list/0001-bpf-lru-a-subject.patch" in caption
    text, _, _, _ = literate.patch_excerpt({"patch": "01-lru-list/0001-bpf-lru-a-subject.patch",
                                            "match": "only line"})
    assert text.splitlines() == ["--- /dev/null", "+++ b/kernel/b.c", "@@ -0,0 +1 @@", "+only line"]
    text, lang, _, _ = literate.patch_excerpt({"patch": "01/0001", "part": "message"})
    assert lang == "text" and text.startswith("bpf: lru: a subject")
    for bad in ({"patch": "01/0009"}, {"patch": "02/0001"},
                {"patch": "01/0001", "file": "kernel/c.c"},
                {"patch": "01/0001", "file": "kernel/a.c", "hunk": "3"}):
        with pytest.raises(literate.BookError):
            literate.patch_excerpt(bad)


# ---------------------------------------------------------------------------
# Which listings show an exercise's answer (exercises/NN-slug/exercises.toml)

EXERCISED_C = """\
static int helper(int x)
{
\treturn x + 1;
}

static int
solve(int x,
      int y)
{
\tint sum = x + y;

\treturn helper(sum) * 2;
}
"""

EXERCISED_KCONFIG = """\
config KEYBOARD
\tbool "A keyboard"
\t# exercise-begin: keyboard
\timply LEDS
\t# exercise-end: keyboard
"""

EXERCISES_TOML = """\
[[exercise]]
name = "solve"
file = "kernel/x.c"
function = "solve"
summary = "add and double."
hint = "helper() adds one."
stub = "return 0;"
tests = ["x/solve"]

[[exercise]]
name = "keyboard"
file = "samples/Kconfig"
span = "keyboard"
summary = "no LEDs."
hint = "a weaker keyword."
stub = "select LEDS"
tests = ["x/keyboard"]
"""


@pytest.fixture
def exercised_lab(tmp_path, monkeypatch):
    (tmp_path / "exercises/03-demo").mkdir(parents=True)
    (tmp_path / "exercises/03-demo/exercises.toml").write_text(EXERCISES_TOML)
    (tmp_path / "stages/03-demo").mkdir(parents=True)
    (tmp_path / "stages/03-demo/ref.c").write_text("int ref(int x)\n{\n\treturn 2 * x + 2;\n}\n")
    monkeypatch.setattr(literate, "ROOT", tmp_path)
    monkeypatch.setenv("KERNEL_TREE", str(tmp_path / "no-tree"))
    literate.exercised.cache_clear()
    yield tmp_path
    literate.exercised.cache_clear()


def names(found):
    return [ex.name for ex in found]


def test_listings_overlapping_an_exercised_body_are_solutions(exercised_lab):
    src = literate.CSource(EXERCISED_C)
    first, last = (n + 1 for n in src.find_function("solve"))
    assert names(literate.solutions_in_lines("kernel/x.c", EXERCISED_C, first, last)) == ["solve"]
    # the signature alone, another function, another file: no answer shown
    assert literate.solutions_in_lines("kernel/x.c", EXERCISED_C, 6, 8) == []
    assert literate.solutions_in_lines("kernel/x.c", EXERCISED_C, 1, 4) == []
    assert literate.solutions_in_lines("kernel/y.c", EXERCISED_C, 1, 13) == []
    # one line of the body is enough
    assert names(literate.solutions_in_lines("kernel/x.c", EXERCISED_C, 12, 12)) == ["solve"]
    assert names(literate.solutions_in_lines("samples/Kconfig", EXERCISED_KCONFIG, 1, 5)) == \
        ["keyboard"]
    assert literate.solutions_in_lines("samples/Kconfig", EXERCISED_KCONFIG, 1, 2) == []


def test_the_hollowed_file_is_the_exercise_branch_and_no_solution(exercised_lab):
    found = literate.solutions_in_lines("kernel/x.c", EXERCISED_C, 1, 13)
    hollow = literate.hollowed(EXERCISED_C, found)
    assert "sum = x + y" not in hollow and "\treturn 0;" in hollow
    assert "Exercise solve (03-demo): add and double." in hollow
    assert "\treturn x + 1;" in hollow                      # helper() is not exercised
    assert literate.solutions_in_lines("kernel/x.c", hollow, 1, 30) == []
    kconfig = literate.hollowed(EXERCISED_KCONFIG, literate.exercised()[1:])
    assert "imply LEDS" not in kconfig and "\nselect LEDS\n" in kconfig   # the stub, verbatim


def test_a_patch_hunk_adding_body_lines_is_a_solution(exercised_lab, monkeypatch):
    monkeypatch.setattr(literate, "read_stage_file", lambda stage, path: EXERCISED_C)
    stage = literate.Stage("03-demo", "stage/03-demo")
    assert names(literate.solutions_in_hunk(
        "kernel/x.c", ["\tint sum = x + y;", "", "\treturn helper(sum) * 2;"], [stage])) == \
        ["solve"]
    assert names(literate.solutions_in_hunk("kernel/x.c", ["\treturn helper(sum) * 2;"],
                                            [stage])) == ["solve"]
    assert literate.solutions_in_hunk("kernel/x.c", ["\treturn x + 1;", "}"], [stage]) == []
    assert literate.solutions_in_hunk("kernel/y.c", ["\tint sum = x + y;"], [stage]) == []


def test_solution_marks_name_exercises_and_the_answer_says_so(exercised_lab):
    req = {"src": "stages/03-demo/ref.c", "fn": "ref", "solution": "solve", "chapter": "c"}
    text, first, lang, caption, solutions, stub = literate.answer(req)
    assert solutions == "solve@03-demo" and stub is None and "2 * x + 2" in text
    with pytest.raises(literate.BookError, match="solution=nope: no such exercise"):
        literate.answer(dict(req, solution="nope"))
    out = io.BytesIO()
    literate.serve(io.StringIO("chapter=c\tsrc=stages/03-demo/ref.c\tsolution=solve\n"
                               "chapter=c\tsrc=stages/03-demo/ref.c\n"), out)
    answers = out.getvalue().decode()
    assert re.match(r"OK \d+ 1 c solve@03-demo\t", answers)
    assert "}STUB 0 0\nOK " in answers and re.search(r"OK \d+ 1 c -\t", answers)
    assert answers.count("STUB") == 1
