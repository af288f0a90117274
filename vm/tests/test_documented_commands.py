"""Every command that README.md and docs/*.md show a reader is run by a
test, or is listed here as not run, with the reason. A new command in the
documentation fails this test until someone says which test runs it: a
documented command that fails is the first defect a student or an
instructor meets."""
import re

from conftest import REPO

# What a reader of the lab reads: its README, the documentation, the
# chapters and the exercises' tasks. docs/research/ holds sources, not
# instructions.
DOCUMENTS = sorted({"README.md", "book/README.md", *(
    str(p.relative_to(REPO)) for pattern in ("docs/*.md", "chapters/*.md", "exercises/*/README.md")
    for p in REPO.glob(pattern))})

# The lab's own verbs: a `make` whose target is one of these runs the lab.
# Any other `make` in a code block runs kbuild in the kernel tree.
LAB_VERBS = set(re.search(r"^\.PHONY:(.*?)(?<!\\)$", (REPO / "Makefile").read_text(),
                          re.M | re.S).group(1).replace("\\", " ").split())

# The documented command, as written (a two-digit stage as STAGE=NN), and
# the test that runs it: a test function (file::name), a tier of `make
# check` (vm/lab/check.py::name) or a file that runs it.
RUN_BY = {
    "make boot": "vm/tests/test_interactive.py::test_make_boot_passes_ctrl_c_to_the_guest_shell",
    "make boot STAGE=NN": "vm/tests/test_interactive.py::test_make_boot_passes_ctrl_c_to_the_guest_shell",
    "make check": ".ci/run",
    "make check STAGE=NN": "vm/lab/check.py::guest_tier",
    "make debug": "vm/tests/test_interactive.py::test_ctrl_c_in_make_debug_stops_the_guest_in_gdb_and_keeps_it",
    "make debug STAGE=NN":
        "vm/tests/test_interactive.py::test_ctrl_c_in_make_debug_stops_the_guest_in_gdb_and_keeps_it",
    "make console": "vm/tests/test_interactive.py::test_ctrl_c_in_make_debug_stops_the_guest_in_gdb_and_keeps_it",
    "make gdb-test": "vm/lab/check.py::guest_tier",
    "make gdb-test STAGE=NN": "vm/lab/check.py::guest_tier",
    "make experiment STAGE=NN": "vm/lab/check.py::guest_tier",
    "make stage STAGE=NN": "vm/tests/test_stages_and_tree.py::test_stage_branch_is_previous_stage_plus_series",
    "make test": "vm/lab/check.py::guest_tier",
    "make test STAGE=NN": "vm/lab/check.py::guest_tier",
    "make exercise": "vm/lab/check.py::guest_tier",
    "make exercise STAGE=NN": "vm/lab/check.py::guest_tier",
    "make grade": "vm/lab/check.py::guest_tier",
    "make grade STAGE=NN": "vm/lab/check.py::guest_tier",
    "make watch": "vm/tests/test_watch.py::test_make_watch_grades_each_saved_change_and_stops_on_ctrl_c",
    "make hint": "vm/tests/test_hints.py::test_make_hint_climbs_for_the_failures_of_the_last_results",
    "make book": "vm/tests/test_book.py::test_real_book_builds_all_formats_without_warnings",
    "make book BOOK_RUN=1": "vm/tests/test_book.py::test_book_run_produces_missing_results",
    "make handout": "vm/lab/check.py::handout_tier",
    "make handout STAGES=01,02": "vm/lab/check.py::handout_tier",
    "make handout STAGES=02 OUT=/tmp/ho": "vm/lab/check.py::handout_shapes_tier",
    "make submission": "vm/tests/test_instructor_kit.py::test_a_submission_carries_the_students_commits_onto_the_exercise_commit",
    "make submission STAGE=NN":
        "vm/tests/test_instructor_kit.py::test_a_submission_carries_the_students_commits_onto_the_exercise_commit",
    "make submission STAGE=NN FORMAT=patch":
        "vm/tests/test_instructor_kit.py::test_a_submission_carries_the_students_commits_onto_the_exercise_commit",
    "make submission STAGE=NN FORMAT=patch OUT=submissions/NN-slug.patch":
        "vm/tests/test_instructor_kit.py::test_a_submission_carries_the_students_commits_onto_the_exercise_commit",
    "make grade-class": "vm/tests/test_class_fixtures.py::test_every_submission_gets_a_verdict",
    "make grade-class STAGE=NN SUBMISSIONS=inbox/ [JOBS=N] [OUT=dir]":
        "vm/tests/test_class_fixtures.py::test_every_submission_gets_a_verdict",
    "make solutions": "vm/lab/exercises.py::prove",
    "make solutions STAGE=NN": "vm/lab/exercises.py::prove",
    "make stages": "vm/tests/test_stages_and_tree.py::test_make_stages_lists_every_stage",
    "make run": "vm/tests/test_watch.py::test_ctrl_c_in_make_run_ends_the_guest_with_the_lab",
    "make run CMD=true": "vm/tests/test_watch.py::test_ctrl_c_in_make_run_ends_the_guest_with_the_lab",
    "make run CMD=true STAGE=NN": "vm/tests/test_watch.py::test_ctrl_c_in_make_run_ends_the_guest_with_the_lab",
    # the guest tier runs the same program in the same guest, as a test
    "make run STAGE=NN CMD='mdev_mtty_test'": "vm/lab/check.py::guest_tier",
    "make help": "vm/tests/test_documented_commands.py::test_make_help_lists_every_verb",
    # kbuild in the kernel tree, as the chapters and tasks show it
    "make O=/tmp/puzzle KBUILD_KCONFIG=samples/kconfig/imply-puzzle/Kconfig olddefconfig":
        "stages/05-kconfig-imply/grade_imply_puzzle.py",
    "make O=/tmp/puzzle KBUILD_KCONFIG=samples/kconfig/imply-puzzle/Kconfig config":
        "stages/05-kconfig-imply/grade_imply_puzzle.py",
    'make O=/tmp/conf-g HOSTCFLAGS="-g -O0" \\': "stages/05-kconfig-imply/host_gdb.py",
}

NOT_RUN = {
    "make bench": "a benchmark of many minutes; docs/benchmarks.md records each run, "
                  "with the machine and the date",
    "make bench-class": "a benchmark of many minutes; docs/benchmarks.md records each run",
    "make kernel STAGE=NN": "measured by hand for docs/benchmarks.md; the guest tier builds "
                            "every stage's kernel through the same function",
    "make check STAGE=NN TIER=guest": "one stage's guest tier, as make check runs it for "
                                      "every stage through the same guest_tier()",
    "make kernel": "the guest tier builds every stage's kernel through the same function, "
                   "workflow.build_kernel(); the verb itself is run only with an unknown "
                   "stage, by test_stages_and_tree.py::test_unknown_stage_from_the_front_door",
}


def _normal(command):
    return re.sub(r"\bSTAGE=\d\d\b", "STAGE=NN", command)


def _verb(command):
    """The first target of a make command line, past its variables."""
    words = [w for w in command.split()[1:] if "=" not in w and not w.startswith("-")]
    return words[0] if words else ""


def documented_commands():
    """{command: document} for every `make` line of a code block, fenced or
    indented, and every inline `make` of the lab's own verbs. An inline
    `make olddefconfig` names a kbuild target in prose; a code block is
    something to type."""
    found = {}
    for name in DOCUMENTS:
        inside = False
        for line in (REPO / name).read_text().splitlines():
            if line.startswith("```"):
                inside = not inside
                continue
            if inside or line.startswith("    "):
                command = line.split(" #", 1)[0].strip()
                if command.startswith("make "):
                    found.setdefault(_normal(command), name)
                continue
            for command in re.findall(r"`(make [^`]+)`", line):
                if _verb(command) in LAB_VERBS or not _verb(command):
                    found.setdefault(_normal(command.strip()), name)
    return found


def test_every_documented_command_is_run_by_a_test_or_says_why_not():
    found = documented_commands()
    assert found, "no documented commands found: has the documentation moved?"
    unaccounted = sorted(set(found) - set(RUN_BY) - set(NOT_RUN))
    assert not unaccounted, ("documented, but no test runs it and NOT_RUN does not say why: "
                             + "; ".join(f"{c} ({found[c]})" for c in unaccounted))
    stale = sorted((set(RUN_BY) | set(NOT_RUN)) - set(found))
    assert not stale, f"listed here, but no longer documented: {stale}"


def test_the_tests_named_exist():
    for command, where in RUN_BY.items():
        path, _, name = where.partition("::")
        text = (REPO / path).read_text()
        if name:
            assert re.search(rf"^def {re.escape(name)}\(", text, re.M), \
                f"{command}: {where} does not exist"


def test_make_help_lists_every_verb():
    import subprocess
    shown = subprocess.run(["make", "-s", "help"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout
    for verb in LAB_VERBS - {"help", "deps", "deps-kernel", "deps-debug", "deps-check", "clean"}:
        assert re.search(rf"\bmake {re.escape(verb)}\b", shown), f"make help does not show {verb}"


def test_the_scan_sees_every_kind_of_command():
    found = documented_commands()
    assert "make check" in found and "make test STAGE=NN" in found
    assert "make olddefconfig" not in found, "an inline kbuild target is prose, not a command"
