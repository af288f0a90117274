"""A guest that crashes or hangs in the middle of a test leaves a report
with what that test had reported before it: the failures a hint is keyed
to often come before the crash they lead to, and a grade that lost them
would show no hint at all."""
from types import SimpleNamespace

from lab import qemu, workflow


def test_a_crash_keeps_the_running_tests_subtests(monkeypatch, tmp_path):
    out = tmp_path / "out"

    def run_watched(boot, timeout, console, echo=True, stop_when=None):
        (out / "ktap.txt").write_text("KTAP version 1\n1..2\nok 1 first\n")
        (out / "live.txt").write_text("# lab-live 2 second\nKTAP version 1\n1..3\n"
                                      "ok 1 fine\nnot ok 2 reported_wrong\n")
        return qemu.Outcome(False, "the guest crashed: BUG: ...", [], 1.0)

    monkeypatch.setattr(workflow, "build_guest", lambda *args, **kwargs: tmp_path / "initrd")
    monkeypatch.setattr(workflow.qemu, "Boot", lambda *args, **kwargs: None)
    monkeypatch.setattr(workflow.qemu, "run_watched", run_watched)
    tests = [SimpleNamespace(name="first"), SimpleNamespace(name="second")]
    stage = SimpleNamespace(host_tests=[], tests=tests, host_reports=[],
                            timeout_for=lambda chosen: 60)
    work = SimpleNamespace(stage=stage, kernel=None, symbols=None)

    run = workflow.run_tests(work, out=out, quiet=True, build=False, tests=tests)

    assert not run.outcome.ok
    second = run.report.find("second")
    assert second is not None and not second.ok
    assert [c.name for c in second.children if not c.ok] == ["reported_wrong"]
    assert any("crashed" in problem for problem in run.report.problems)
