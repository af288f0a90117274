"""One kernel for many grader proofs: the generated function holds every
variant's body, and the command line's number picks the one that runs.
The generated C is compiled and run here, as a user-space program with
the kernel's few macros it uses stood in for, so what is proven is what
the compiler makes of it."""
import subprocess
import textwrap

import pytest

from lab import variants

STAGE = textwrap.dedent("""\
    #include "prelude.h"

    static int helper(int x)
    {
    \treturn x * 10;
    }

    int score(int x)
    {
    \tint total = 0;

    \tif (x < 0)
    \t\tgoto out;
    \ttotal = helper(x);
    out:
    \treturn total;
    }

    void count(int *seen)
    {
    \tstatic int calls;

    \t*seen = ++calls;
    }
    """)

# What the generated file needs of the kernel: its parameter and its parser.
PRELUDE = textwrap.dedent("""\
    #include <stdio.h>
    #include <stdlib.h>
    #define __init
    #define __read_mostly
    #define kstrtoint(s, base, res) (*(res) = atoi(s), 0)
    #define early_param(name, fn) int (*early_param_##fn)(char *) = fn
    """)

MAIN = textwrap.dedent("""\
    int main(int argc, char **argv)
    {
    \tint seen, x;

    \tearly_param_lab_proof_variant_setup(argv[1]);
    \tfor (x = -1; x <= 2; x++)
    \t\tprintf("%d ", score(x));
    \tcount(&seen);
    \tcount(&seen);
    \tprintf("%d\\n", seen);
    \treturn 0;
    }
    """)


def _body(function, text):
    from lab.exercises import function_body_span
    start, end = function_body_span(text, function)
    return text[start:end]


def generate(bodies):
    """The stage's file with variants: {function: {body: [numbers]}}."""
    return variants._generate(STAGE, ["score", "count"],
                              {"score": bodies.get("score", {}),
                               "count": bodies.get("count", {})})


def run(tmp_path, text, number):
    (tmp_path / "prelude.h").write_text(PRELUDE)
    (tmp_path / "f.c").write_text(text + MAIN)
    subprocess.run(["gcc", "-Wall", "-Werror", "-o", str(tmp_path / "f"), str(tmp_path / "f.c")],
                   check=True, capture_output=True, text=True)
    return subprocess.run([str(tmp_path / "f"), str(number)], check=True,
                          capture_output=True, text=True).stdout.strip()


WRONG_SCORE = _body("score", STAGE).replace("x < 0", "x < 2")
OTHER_SCORE = ("\tint total = 1;\n\n\tif (x > 1)\n\t\tgoto out;\n\ttotal = 7;\nout:\n"
               "\treturn total;\n")
WRONG_COUNT = _body("count", STAGE).replace("++calls", "calls++")


@pytest.mark.parametrize("number, expected", [
    (0, "0 0 10 20 2"),   # the stage's own bodies
    (1, "0 0 0 20 2"),    # a wrong body: x < 2 jumps at 1 too
    (2, "7 7 7 1 2"),     # another body, with a label of the same name
    (3, "0 0 0 20 2"),    # the same body as 1
    (4, "0 0 10 20 1"),   # count's wrong body, its own static counter
    (9, "0 0 10 20 2"),   # a number no body has: the stage's
])
def test_the_command_lines_number_picks_the_body(tmp_path, number, expected):
    text = generate({"score": {WRONG_SCORE: [1, 3], OTHER_SCORE: [2]},
                     "count": {WRONG_COUNT: [4]}})
    assert run(tmp_path, text, number) == expected


def test_labels_of_the_same_name_are_local_to_each_body():
    text = generate({"score": {OTHER_SCORE: [2]}})
    assert text.count("__label__ out;") == 2


def test_the_selector_comes_once_before_the_first_exercised_function():
    text = generate({"count": {WRONG_COUNT: [1]}})
    assert text.count("early_param(") == 1
    assert text.index("early_param(") < text.index("int score(int x)")
    assert text.index("static int helper") < text.index("early_param(")


def test_a_function_no_variant_changes_keeps_its_body():
    text = generate({"count": {WRONG_COUNT: [1]}})
    assert _body("score", text) == _body("score", STAGE)


def test_a_change_outside_the_bodies_is_told_apart():
    stage = variants._parts(STAGE, ["score", "count"])
    inside = variants._parts(STAGE.replace("x < 0", "x <= 0"), ["score", "count"])
    outside = variants._parts(STAGE.replace("x * 10", "x * 11"), ["score", "count"])
    assert inside[0] == stage[0] and inside[1]["score"] != stage[1]["score"]
    assert outside[0] != stage[0]
    assert variants._parts(STAGE, ["missing"]) is None
