"""vm/guest/lab/bin/log-test-ktap: the TEST lines of a net selftest become
KTAP subtests, a skip stays a skip, and a script that fails outside its
TEST lines still fails. Run under busybox sh, as in the guest."""
import shutil
import subprocess

from lab import ktap, settings

CONVERTER = settings.GUEST_DIR / "lab" / "bin" / "log-test-ktap"
SHELL = ["busybox", "sh"] if shutil.which("busybox") else ["sh"]


def convert(tmp_path, selftest):
    script = tmp_path / "selftest.sh"
    script.write_text(selftest)
    result = subprocess.run([*SHELL, str(CONVERTER), "sh", str(script)], capture_output=True,
                            text=True, timeout=10,
                            env={"PATH": "/usr/bin:/bin",
                                 "LAB_LIB": str(settings.GUEST_DIR / "lab" / "lib")})
    return result.returncode, ktap.parse(result.stdout)


LOG_TEST = r'''
t() { printf "\n    TEST: %-50s  [%s]\n" "$1" "$2"; }
'''


def test_every_test_line_is_a_subtest_named_after_it(tmp_path):
    status, report = convert(tmp_path, LOG_TEST + 't "rule4 check: uid redirect to table" " OK "\n'
                                       't "rule6 check: oif" " OK "\n')
    assert status == 0 and report.ok
    assert [r.name for r in report.passed] == ["rule4_check_uid_redirect_to_table",
                                               "rule6_check_oif", "exit_status"]


def test_a_failed_case_fails_the_run(tmp_path):
    status, report = convert(tmp_path, LOG_TEST + 't "one" " OK "\nt "two" FAIL\nexit 1\n')
    assert status == 1 and not report.ok
    assert [r.name for r in report.results if not r.ok] == ["two", "exit_status"]


def test_a_skipped_case_is_a_skip_not_a_pass(tmp_path):
    status, report = convert(tmp_path, LOG_TEST + 't "one" " OK "\nt "no uidrange" SKIP\n')
    assert status == 0
    assert [r.name for r in report.skipped] == ["no_uidrange"]
    assert "no_uidrange" not in [r.name for r in report.passed]


def test_a_failure_without_a_test_line_fails(tmp_path):
    status, report = convert(tmp_path, LOG_TEST + 't "one" " OK "\necho setup failed; exit 2\n')
    assert status == 1
    assert [r.name for r in report.results if not r.ok] == ["exit_status"]


def test_a_whole_script_skip_is_a_skip(tmp_path):
    status, report = convert(tmp_path, 'echo "SKIP: Need root privileges"; exit 4\n')
    assert status == 4 and [r.name for r in report.skipped] == ["exit_status"]


def test_repeated_names_stay_apart(tmp_path):
    status, report = convert(tmp_path, LOG_TEST + 't "same" " OK "\nt "same" FAIL\n')
    assert [r.name for r in report.results] == ["same", "same_2", "exit_status"]
    assert not report.find("same_2").ok
