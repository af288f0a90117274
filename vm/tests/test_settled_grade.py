"""A proof's guest stops once its grade is settled: a failure cannot turn
into a pass, and the hint the failure gets cannot change when every hint
before it names results already reported. What the guest is running then
counts with the subtests it has reported so far."""
import pytest

from lab import exercises, hints, ktap


def exercise(*entries):
    return exercises.Exercise(
        name="demo", file="f.c", summary="", hint="", tests=["demo"], function="f",
        hints=[hints.Hint(["a hint"], **entry) for entry in entries])


def live(number, name, *lines):
    return "\n".join([f"# lab-live {number} {name}", "KTAP version 1", "1..4", *lines]) + "\n"


DONE = "KTAP version 1\n1..2\n"


def report(live_text, done=DONE):
    return ktap.with_live(ktap.parse(done), live_text)


def test_the_running_tests_subtests_count_and_it_fails_with_them():
    got = report(live(1, "demo", "ok 1 first", "not ok 2 second"))
    running = got.find("demo")
    assert [c.name for c in running.children] == ["first", "second"]
    assert not running.ok and running.directive == ktap.CUT_SHORT
    assert report(live(1, "demo", "ok 1 first")).find("demo").ok


def test_a_live_file_of_a_test_already_reported_adds_nothing():
    done = DONE + "    KTAP version 1\n    1..1\n    ok 1 first\nok 1 demo\n"
    assert len(report(live(1, "demo", "ok 1 first"), done).results) == 1


def test_no_live_file_or_no_ktap_in_it_adds_no_subtest():
    assert report("").results == []
    assert report("# lab-live 1 demo\nsome noise\n").find("demo").children == []


def test_the_first_hint_settles_at_once():
    demo = exercise({"failing": ["demo/second"]}, {"failing": ["demo/first"]})
    assert hints.settled(demo, report(live(1, "demo", "not ok 1 second")))


def test_a_later_hint_waits_for_every_result_an_earlier_one_names():
    demo = exercise({"failing": ["demo/third"]}, {"failing": ["demo/second"]})
    early = report(live(1, "demo", "ok 1 first", "not ok 2 second"))
    assert not hints.settled(demo, early)  # third may still fail: hint 1 then
    later = report(live(1, "demo", "ok 1 first", "not ok 2 second", "ok 3 third"))
    assert hints.settled(demo, later)


@pytest.mark.parametrize("earlier", [
    {"failing": ["demo/th*"]},                       # a wildcard may match what comes
    {"console": "NULL pointer"},                     # a panic may come
    {"failing": ["demo/fourth"]},                    # a result still to come
])
def test_an_earlier_hint_that_could_still_match_keeps_the_guest_running(earlier):
    demo = exercise(earlier, {"failing": ["demo/second"]})
    assert not hints.settled(demo, report(live(1, "demo", "ok 1 first", "not ok 2 second",
                                               "ok 3 third")))


def test_a_failed_subtest_settles_a_hint_on_its_running_test():
    # The test will end failed whatever comes: its hint is the first.
    demo = exercise({"failing": ["demo"]}, {"failing": ["demo/second"]})
    assert hints.settled(demo, report(live(1, "demo", "ok 1 first", "not ok 2 second")))


def test_no_failure_or_no_matching_hint_is_not_settled():
    demo = exercise({"failing": ["demo/second"]})
    assert not hints.settled(demo, report(live(1, "demo", "ok 1 first", "ok 2 second")))
    assert not hints.settled(demo, report(live(1, "demo", "not ok 1 first")))


def test_the_grade_settles_when_every_graded_exercise_has_failed():
    one = exercise({"failing": ["demo/first"]})
    other = exercises.Exercise(name="other", file="f.c", summary="", hint="", tests=["other"],
                               function="g")
    chosen = exercises.ExerciseSet(stage=None, exercises=[one, other])
    settle = exercises.settled_failure(chosen, focus=None, hinted=False)
    first_failed = report(live(1, "demo", "not ok 1 first"))
    assert settle(first_failed) is None  # other has not failed yet
    both = "KTAP version 1\n1..2\n    KTAP version 1\n    1..1\n    not ok 1 first\nnot ok 1 demo\n"
    reason = settle(report(live(2, "other", "not ok 1 case"), both))
    assert reason and "demo: demo/first failed" in reason and "other: other/case failed" in reason
    # A wrong solution is graded on its own exercise only.
    assert exercises.settled_failure(chosen, focus=["demo"], hinted=True)(first_failed)
