"""The guest's shared KTAP helper (vm/guest/lab/lib/ktap.sh): the exit
status a script ends with comes from what it reported, never from the
script's own bookkeeping. Run under busybox sh, as in the guest."""
import shutil
import subprocess

import pytest

from lab import ktap, settings

HELPER = settings.GUEST_DIR / "lab" / "lib" / "ktap.sh"
SHELL = ["busybox", "sh"] if shutil.which("busybox") else ["sh"]


def run(body):
    script = f". {HELPER}\nktap_print_header\n{body}\nktap_finished\n"
    result = subprocess.run([*SHELL, "-c", script], capture_output=True, text=True, timeout=10)
    return result.returncode, result.stdout


def test_all_passing_exits_zero_and_parses_ok():
    status, out = run("ktap_set_plan 2\nktap_test_pass a\nktap_test_result b true")
    assert status == 0
    report = ktap.parse(out)
    assert report.ok and [r.name for r in report.passed] == ["a", "b"]


def test_one_failure_fails_the_script():
    status, out = run("ktap_set_plan 2\nktap_test_pass a\nktap_test_result b false")
    assert status == 1
    assert "not ok 2 b" in out


@pytest.mark.parametrize("body", [
    "ktap_set_plan 3\nktap_test_pass a\nktap_test_pass b",           # stopped early
    "ktap_set_plan 1\nktap_test_pass a\nktap_test_pass b",           # reported more
    "ktap_test_pass a",                                               # no plan at all
])
def test_a_broken_plan_fails_even_when_every_subtest_passed(body):
    status, _ = run(body)
    assert status == 1


def test_skips_are_skips_and_all_skipped_is_a_skip():
    status, out = run("ktap_set_plan 2\nktap_test_skip a 'needs 3 CPUs'\nktap_test_skip b")
    assert status == 4
    report = ktap.parse(out)
    assert all(r.skipped for r in report.results) and not report.passed


def test_a_skip_beside_a_pass_exits_zero_and_stays_a_skip():
    status, out = run("ktap_set_plan 2\nktap_test_pass a\nktap_test_skip b why")
    assert status == 0
    assert "ok 2 b # SKIP why" in out


def test_status_of_an_earlier_command():
    status, out = run("ktap_set_plan 2\ntrue; ktap_test_status a $?\n"
                      "false; ktap_test_status b $? 'b was false'")
    assert status == 1
    assert "not ok 2 b # b was false" in out
