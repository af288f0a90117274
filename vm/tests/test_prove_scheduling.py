"""Grader proofs on two workshops: a cold second workshop makes its first
build without holding an attempt, so that the proofs end when the first
workshop has proved everything, not when that build ends; and the two
workshops' guests run at once."""
import threading
import time
from types import SimpleNamespace

import pytest

from lab import exercises, stages


class FakeTree:
    def __init__(self, number, root):
        self.number = number
        self.path = root / f"workshop{number}"


class FakeMain:
    def __init__(self, root):
        self.root = root
        self.resets = []

    def workshop(self, number=1):
        return FakeTree(number, self.root)

    def reset_workshop(self, rev, patches=(), number=1):
        self.resets.append((number, rev))
        return FakeTree(number, self.root)


# Exercise sets whose variants are proven by building the kernel, or one
# module alone.
KERNEL_PROOF = SimpleNamespace(proof=None)
MODULE_PROOF = SimpleNamespace(proof=exercises.ModuleProof("lib/demo_test.ko", "kunit/demo/"))


def test_a_cold_second_workshop_holds_up_no_attempt(monkeypatch, tmp_path):
    warm_up_may_end = threading.Event()

    def build_kernel(work, quiet=False, nice=0):
        if work.tree.number == 2:
            assert warm_up_may_end.wait(20)

    main = FakeMain(tmp_path)

    def grade(work, *args, **kwargs):
        # The first grade lasts until the second workshop has begun its
        # warm-up, as a guest outlasts the start of a thread.
        for _ in range(1000):
            if (2, "stage/99-x") in main.resets:
                break
            time.sleep(0.01)
        return f"graded in workshop {work.tree.number}"

    monkeypatch.setattr(exercises.workflow, "build_kernel", build_kernel)
    monkeypatch.setattr(exercises, "boots_a_guest", lambda *args: True)
    monkeypatch.setattr(exercises, "grade", grade)
    monkeypatch.setattr(exercises, "_is_cold",
                        lambda tree, stage: tree.number == 2 and not warm_up_may_end.is_set())
    stage = SimpleNamespace(branch="stage/99-x", machine=SimpleNamespace(arch="x86_64"))
    attempts = [(f"attempt{i}", "rev", [], None) for i in range(4)]
    try:
        results = exercises._prove_attempts(main, stage, KERNEL_PROOF, tmp_path / "out", attempts)
        assert results == {f"attempt{i}": "graded in workshop 1" for i in range(4)}
        # The warm-up built the stage itself, and still holds its workshop.
        assert (2, "stage/99-x") in main.resets
        assert exercises.workshop_lock(2).locked()
    finally:
        warm_up_may_end.set()
    assert exercises.workshop_lock(2).acquire(timeout=20)
    exercises.workshop_lock(2).release()
    assert (tmp_path / "out" / "timings.json").exists()


def test_a_warm_second_workshop_takes_attempts(monkeypatch, tmp_path):
    monkeypatch.setattr(exercises.workflow, "build_kernel", lambda work, **kwargs: None)
    guests = threading.Barrier(2, timeout=5)

    def grade(work, *args, **kwargs):
        return f"graded in workshop {work.tree.number}"

    monkeypatch.setattr(exercises, "grade", grade)
    monkeypatch.setattr(exercises, "boots_a_guest", lambda *args: True)
    monkeypatch.setattr(exercises, "_is_cold", lambda tree, stage: False)
    slow_reset = FakeMain.reset_workshop

    def reset_workshop(self, rev, patches=(), number=1):
        # Both workshops reach a reset before either goes on: each has one.
        try:
            guests.wait()
        except threading.BrokenBarrierError:
            pass
        return slow_reset(self, rev, patches, number)

    monkeypatch.setattr(FakeMain, "reset_workshop", reset_workshop)
    stage = SimpleNamespace(branch="stage/99-x", machine=SimpleNamespace(arch="x86_64"))
    attempts = [(f"attempt{i}", "rev", [], None) for i in range(4)]
    results = exercises._prove_attempts(FakeMain(tmp_path), stage, KERNEL_PROOF, tmp_path / "out",
                                        attempts)
    assert set(results) == {f"attempt{i}" for i in range(4)}
    assert {"graded in workshop 1", "graded in workshop 2"} <= set(results.values())


def test_a_grade_on_the_host_builds_no_kernel(monkeypatch, tmp_path):
    built = []
    monkeypatch.setattr(exercises.workflow, "build_kernel", lambda work, **kw: built.append(work))
    monkeypatch.setattr(exercises, "grade", lambda work, *args, **kwargs: "graded")
    monkeypatch.setattr(exercises, "boots_a_guest", lambda *args: False)
    monkeypatch.setattr(exercises, "_is_cold", lambda tree, stage: False)
    stage = SimpleNamespace(branch="stage/99-x", machine=SimpleNamespace(arch="x86_64"))
    attempts = [(f"attempt{i}", "rev", [], None) for i in range(3)]
    results = exercises._prove_attempts(FakeMain(tmp_path), stage, KERNEL_PROOF, tmp_path / "out",
                                        attempts)
    assert results == {f"attempt{i}": "graded" for i in range(3)}
    assert built == []


def test_only_guest_tests_make_a_grade_boot():
    # Stage 05's puzzles are graded on the host; stage 08's exercises in
    # the guest, each of them alone as well.
    puzzles = stages.resolve("05")
    assert not exercises.boots_a_guest(puzzles, exercises.load(puzzles))
    routing = stages.resolve("08")
    exercise_set = exercises.load(routing)
    assert exercises.boots_a_guest(routing, exercise_set)
    for exercise in exercise_set.exercises:
        assert exercises.boots_a_guest(routing, exercise_set, [exercise.name])


@pytest.mark.parametrize("stage_built", [True, False])
def test_a_module_proof_builds_the_module_alone_over_the_stages_kernel(
        monkeypatch, tmp_path, stage_built):
    """Its variants are built as the module alone while the workshop holds
    a build of the stage; where it does not, as a whole kernel."""
    built = []
    monkeypatch.setattr(exercises.workflow, "build_kernel",
                        lambda work, **kw: built.append("kernel"))

    def build_module(work, module, **kw):
        built.append(module)
        return stage_built

    monkeypatch.setattr(exercises.workflow, "build_module", build_module)
    monkeypatch.setattr(exercises, "grade", lambda work, *args, **kwargs: "graded")
    monkeypatch.setattr(exercises, "boots_a_guest", lambda *args: True)
    monkeypatch.setattr(exercises, "_is_cold", lambda tree, stage: False)
    stage = SimpleNamespace(branch="stage/99-x", machine=SimpleNamespace(arch="x86_64"))
    attempts = [(f"attempt{i}", "rev", [], None) for i in range(3)]
    results = exercises._prove_attempts(FakeMain(tmp_path), stage, MODULE_PROOF,
                                        tmp_path / "out", attempts)
    assert results == {f"attempt{i}": "graded" for i in range(3)}
    if stage_built:
        assert built == ["lib/demo_test.ko"] * 3
    else:
        assert built == ["lib/demo_test.ko", "kernel"] * 3


@pytest.mark.parametrize("allowed", [1, 2])
def test_the_workshops_guests_run_at_once_up_to_the_setting(monkeypatch, tmp_path, allowed):
    """The guests, not the builds, bound the proofs: two overlap by default,
    and LAB_PROOF_GUESTS=1 runs them one at a time."""
    monkeypatch.setenv("LAB_PROOF_GUESTS", str(allowed))
    monkeypatch.setattr(exercises.workflow, "build_kernel", lambda work, **kwargs: None)
    monkeypatch.setattr(exercises, "boots_a_guest", lambda *args: True)
    monkeypatch.setattr(exercises, "_is_cold", lambda tree, stage: False)
    running, most = [], []
    count = threading.Lock()

    def grade(work, *args, **kwargs):
        with count:
            running.append(work)
            most.append(len(running))
        time.sleep(0.3)
        with count:
            running.remove(work)
        return "graded"

    monkeypatch.setattr(exercises, "grade", grade)
    stage = SimpleNamespace(branch="stage/99-x", machine=SimpleNamespace(arch="x86_64"))
    attempts = [(f"attempt{i}", "rev", [], None) for i in range(6)]
    results = exercises._prove_attempts(FakeMain(tmp_path), stage, KERNEL_PROOF, tmp_path / "out",
                                        attempts)
    assert results == {f"attempt{i}": "graded" for i in range(6)}
    assert max(most) == allowed


def test_the_stages_own_run_takes_the_first_workshop_beside_the_proofs(monkeypatch, tmp_path):
    """make check runs a stage's tests and walkthroughs in the first
    workshop, which holds the stage's build, while the second proves."""
    monkeypatch.setattr(exercises.workflow, "build_kernel", lambda work, **kwargs: None)
    monkeypatch.setattr(exercises, "boots_a_guest", lambda *args: True)
    monkeypatch.setattr(exercises, "_is_cold", lambda tree, stage: False)
    order = []
    proved_beside = threading.Event()

    def grade(work, *args, **kwargs):
        order.append(f"graded in workshop {work.tree.number}")
        if work.tree.number == 2:
            proved_beside.set()
        return "graded"

    def stage_run():
        assert proved_beside.wait(10), "the second workshop proved nothing beside the run"
        order.append("stage run")

    monkeypatch.setattr(exercises, "grade", grade)
    stage = SimpleNamespace(branch="stage/99-x", machine=SimpleNamespace(arch="x86_64"))
    attempts = [(f"attempt{i}", "rev", [], None) for i in range(4)]
    results = exercises._prove_attempts(FakeMain(tmp_path), stage, KERNEL_PROOF, tmp_path / "out",
                                        attempts, first=stage_run)
    assert results == {f"attempt{i}": "graded" for i in range(4)}
    assert "stage run" in order
    assert "graded in workshop 1" not in order[:order.index("stage run")]


def test_the_proofs_end_only_when_the_stages_own_run_has(monkeypatch, tmp_path):
    """The check resets the first workshop for the next stage as soon as the
    proofs return, so they must not return while the run beside them, which
    boots that workshop's kernel, goes on."""
    monkeypatch.setattr(exercises.workflow, "build_kernel", lambda work, **kwargs: None)
    monkeypatch.setattr(exercises, "boots_a_guest", lambda *args: True)
    monkeypatch.setattr(exercises, "_is_cold", lambda tree, stage: False)
    monkeypatch.setattr(exercises, "grade", lambda work, *args, **kwargs: "graded")
    run_may_end = threading.Event()
    events = []

    def stage_run():
        assert run_may_end.wait(20)
        events.append("stage run ended")

    def release_the_run_later():
        time.sleep(0.5)
        events.append("run released")
        run_may_end.set()

    stage = SimpleNamespace(branch="stage/99-x", machine=SimpleNamespace(arch="x86_64"))
    attempts = [(f"attempt{i}", "rev", [], None) for i in range(2)]
    threading.Thread(target=release_the_run_later).start()
    results = exercises._prove_attempts(FakeMain(tmp_path), stage, KERNEL_PROOF, tmp_path / "out",
                                        attempts, first=stage_run)
    assert results == {"attempt0": "graded", "attempt1": "graded"}
    assert events == ["run released", "stage run ended"]


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_number_of_proof_guests_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv("LAB_PROOF_GUESTS", value)
    with pytest.raises(exercises.LabError, match="LAB_PROOF_GUESTS=.*1 or more"):
        exercises.settings.proof_guests()
