"""The KTAP parser that turns guest output into results."""
from lab import ktap

KUNIT_LIKE = """\
[    1.000] some kernel noise
KTAP version 1
1..2
# smoke output
ok 1 smoke
    KTAP version 1
    1..1
        # Subtest: bpf_lru_list
        1..2
        ok 1 nodes_start_free
        not ok 2 shrink_takes_the_tail # expected key 7
    not ok 1 bpf_lru_list
not ok 2 kunit # exit status 1
"""


def test_nested_results_and_paths():
    report = ktap.parse(KUNIT_LIKE)
    assert report.planned == 2
    assert [r.name for r in report.results] == ["smoke", "kunit"]
    assert report.find("smoke").ok
    case = report.find("kunit/bpf_lru_list/shrink_takes_the_tail")
    assert case is not None and not case.ok
    assert report.find("kunit/bpf_lru_list/nodes_start_free").ok
    assert not report.ok


def test_skip_directive_counts_as_ok_but_skipped():
    report = ktap.parse("KTAP version 1\n1..1\nok 1 - needs_kvm # SKIP no kvm\n")
    (result,) = report.results
    assert result.ok and result.skipped and result.status == "SKIP"
    assert result.name == "needs_kvm"


def test_a_run_that_stops_early_is_a_problem():
    report = ktap.parse("KTAP version 1\n1..3\nok 1 a\nok 2 b\n")
    assert report.problems and "announced 3" in report.problems[0]
    assert not report.ok


def test_no_output_at_all_is_not_a_pass():
    report = ktap.parse("")
    assert not report.ok and report.problems


def test_tap14_and_diagnostics_are_kept():
    report = ktap.parse("TAP version 14\n1..1\n# hello\nok 1 x\n")
    assert report.ok
    assert report.results[0].diagnostics == ["# hello"]


def test_all_passing_report_is_ok():
    report = ktap.parse("KTAP version 1\n1..2\nok 1 a\nok 2 b # SKIP\n")
    assert report.ok and len(report.passed) == 1 and len(report.skipped) == 1


def test_a_failed_subtest_fails_its_ok_parent():
    report = ktap.parse("KTAP version 1\n1..1\n"
                        "    KTAP version 1\n    1..2\n    ok 1 a\n    not ok 2 b\n"
                        "ok 1 script_that_exits_zero\n")
    (parent,) = report.results
    assert not parent.ok and parent.status == "FAIL"
    assert not report.ok and report.failed == [parent]


def test_a_failed_grandchild_fails_every_ancestor():
    report = ktap.parse("KTAP version 1\n1..1\n"
                        "    KTAP version 1\n    1..1\n"
                        "        KTAP version 1\n        1..1\n        not ok 1 deep\n"
                        "    ok 1 middle\n"
                        "ok 1 top\n")
    assert not report.find("top").ok
    assert not report.find("top/middle").ok


def test_skipped_subtests_leave_the_parent_ok():
    report = ktap.parse("KTAP version 1\n1..1\n"
                        "    KTAP version 1\n    1..2\n    ok 1 a\n    ok 2 b # SKIP no CPU\n"
                        "ok 1 parent\n")
    assert report.find("parent").ok and not report.find("parent").skipped
    assert report.ok


def test_a_skip_is_not_counted_as_a_pass():
    report = ktap.parse("KTAP version 1\n1..2\nok 1 a\nok 2 b # SKIP\n")
    assert [r.name for r in report.passed] == ["a"]
    assert [r.name for r in report.skipped] == ["b"]
    assert report.ok


def _kunit_run(suite):
    """A guest's kunit test whose output is one suite: `suite` holds the
    suite's lines, its result and the kunit test's own result."""
    return ktap.parse("KTAP version 1\n1..1\n    KTAP version 1\n    1..1\n" + suite)


def _cases(suite):
    return [(c.name, c.ok) for c in suite.children]


def test_a_less_indented_message_inside_a_nested_block_does_not_split_it():
    # KUnit's own failure messages: a case's message continues on lines
    # less indented than the case, and a log cut at its size limit runs
    # two lines together. Every case's result must still be there.
    report = _kunit_run("""\
        KTAP version 1
        1..3
        ok 1 first
        # second: EXPECTATION FAILED at test.c:315
    shrink by 3: deleted 3 [19 18 17], want 3 [0 1 2]
[    1.234] a kernel message
        not ok 2 second
        ok 3 third
    # parent-level diagnostic
    not ok 1 suite
not ok 1 kunit
""")
    suite = report.find("kunit/suite")
    assert _cases(suite) == [("first", True), ("second", False), ("third", True)]
    assert not report.problems
    assert "# parent-level diagnostic" in suite.diagnostics


def test_a_warn_splat_between_two_levels_loses_no_result():
    # A WARN from a helper kthread lands among a suite's cases: its lines
    # at the level above, its call trace one space deeper than that. The
    # cases after it must still be found, and still fail their parents.
    report = _kunit_run("""\
        KTAP version 1
        # Subtest: bpf_lru_list
        1..3
        ok 1 first
    ------------[ cut here ]------------
    WARNING: CPU: 0 PID: 89 at kernel/bpf/bpf_lru_list.c:563 bpf_lru_push_free+0x84/0x147
    Call Trace:
     <TASK>
     lt_race+0xce/0x107 [bpf_lru_list_test]
     kthread+0xb3/0xbb
     </TASK>
    ---[ end trace 0000000000000000 ]---
        # second: ASSERTION FAILED at kernel/bpf/bpf_lru_list_test.c:441
        not ok 2 second
        ok 3 third
    not ok 1 bpf_lru_list
not ok 1 kunit
""")
    suite = report.find("kunit/bpf_lru_list")
    assert _cases(suite) == [("first", True), ("second", False), ("third", True)]
    assert not report.problems
    assert not report.find("kunit").ok


def test_the_writer_counts_its_plan_and_derives_the_exit_status():
    import io
    writer = ktap.Writer()
    writer.result("first", True)
    writer.result("second", False, "why it failed\non two lines")
    writer.skip("third", "needs three CPUs")
    out = io.StringIO()
    assert writer.finished(out) == 1
    report = ktap.parse(out.getvalue())
    assert report.planned == 3 and not report.problems
    assert [r.status for r in report.results] == ["PASS", "FAIL", "SKIP"]
    assert "on two lines" in " ".join(report.results[1].diagnostics)

    skipped = ktap.Writer()
    skipped.skip("only", "not here")
    assert skipped.finished(io.StringIO()) == 4
    passed = ktap.Writer()
    passed.result("only", True)
    assert passed.finished(io.StringIO()) == 0
    assert ktap.Writer().finished(io.StringIO()) == 1, "no result at all is a failure"
