"""Hints keyed to failures.

An exercise's `[[exercise.hints]]` entries each name the failures that
show one typical mistake, and give a ladder of hints for it, from a nudge
to a pointer into the chapter:

    [[exercise.hints]]
    failing = ["uid_rule_selectors/*last_uid*"]   # result paths, shell patterns
    console = "NULL pointer dereference"          # or a console/autopsy regex
    ladder = ["a nudge", "a closer look", "the chapter's section"]

After a grade, each failed exercise gets the first entry that its failure
matches, at the rung the student has reached on it (the first, at
first); `make hint` climbs one rung. What each student has been shown is
kept beside the tree's git data, goes into the submission as a
`Lab-Hints-Seen:` line, and the class report lists it. It is the
student's own record, not a control: a student can edit it.
"""
import fnmatch
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import ktap
from .errors import LabError

SEEN_LINE = "Lab-Hints-Seen:"


@dataclass
class Hint:
    ladder: list
    failing: list = field(default_factory=list)
    console: str = ""

    @property
    def key(self):
        """What names this entry in the record: stable as long as its triggers are."""
        return "|".join(self.failing) + ("~" + self.console if self.console else "")

    def matches(self, failed_paths, console_text):
        if any(fnmatch.fnmatchcase(path, pattern)
               for pattern in self.failing for path in failed_paths):
            return True
        return bool(self.console) and re.search(self.console, console_text) is not None


def parse(where, exercise_name, tests, entries):
    """[Hint] from an exercise's `hints` tables, checked against its tests:
    a pattern that can match none of them would never show its hint."""
    hints = []
    tops = {path.split("/")[0] for path in tests}
    for number, entry in enumerate(entries, 1):
        unknown = set(entry) - {"ladder", "failing", "console"}
        name = f"{where}: exercise {exercise_name}, hint {number}"
        if unknown:
            raise LabError(f"{name}: unknown keys {sorted(unknown)}")
        hint = Hint(list(entry.get("ladder", [])), list(entry.get("failing", [])),
                    entry.get("console", ""))
        if not hint.ladder or not all(isinstance(rung, str) and rung.strip()
                                      for rung in hint.ladder):
            raise LabError(f"{name}: `ladder` needs at least one hint")
        if not hint.failing and not hint.console:
            raise LabError(f"{name}: say when it shows, with `failing` or `console`")
        for pattern in hint.failing:
            if pattern.split("/")[0] not in tops:
                raise LabError(f"{name}: '{pattern}' is not under this exercise's tests "
                               f"({', '.join(sorted(tops))})")
        if hint.console:
            try:
                re.compile(hint.console)
            except re.error as error:
                raise LabError(f"{name}: console pattern: {error}") from None
        hints.append(hint)
    return hints


def failed_paths(report, tests):
    """Every failed result at or under the exercise's tests, as 'a/b/c'
    paths. A skip is not a mistake, and a sibling's failure (another
    exercise's case in the same suite) is not this exercise's."""
    found = []

    def walk(results, prefix):
        for result in results:
            path = f"{prefix}{result.name}"
            if not result.ok:
                found.append(path)
            walk(result.children, path + "/")
    walk(report.results, "")
    return [path for path in found
            if any(path == test or path.startswith(test + "/") for test in tests)]


def settled(exercise, report):
    """True when nothing still to come in the run (a result, a console
    line) can change the hint its failure gets, as select() will choose
    it from the whole run: a failure already matches a hint by its
    results, and each hint before that one names only results that have
    been reported (and passed, or it would have been chosen), with no
    wildcard and no console pattern."""
    got = select(exercise, report, "")
    if got is None:
        return False
    reported = _reported_paths(report)
    for hint in exercise.hints[:exercise.hints.index(got)]:
        if hint.console or any(GLOB.search(pattern) or pattern not in reported
                               for pattern in hint.failing):
            return False
    return True


GLOB = re.compile(r"[*?\[]")


def _reported_paths(report):
    """Every result's path, but not that of a test still running when the
    report was taken (ktap.with_live): its own result is still to come."""
    found = set()

    def walk(results, prefix):
        for result in results:
            path = f"{prefix}{result.name}"
            if result.directive != ktap.CUT_SHORT:
                found.add(path)
            walk(result.children, path + "/")
    walk(report.results, "")
    return found


def select(exercise, report, console_text):
    """The first of the exercise's hints that this failure matches, or None."""
    paths = failed_paths(report, exercise.tests)
    return next((hint for hint in exercise.hints if hint.matches(paths, console_text)), None)


# -- what a student has been shown ---------------------------------------------

class Record:
    """{exercise: {hint key: highest rung shown, from 1}} for one tree and stage."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            self.seen = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.seen = {}

    @classmethod
    def of(cls, tree, stage):
        where = tree.git("rev-parse", "--git-path", f"lab-hints/{stage.slug}.json").stdout.strip()
        path = Path(where)
        return cls(path if path.is_absolute() else tree.path / path)

    def rung(self, exercise, hint):
        return self.seen.get(exercise.name, {}).get(hint.key, 0)

    def show(self, exercise, hint, climb=False):
        """The rung to show now (1-based): the one reached, or the next with
        `climb`; it is recorded as shown."""
        reached = self.rung(exercise, hint)
        rung = min(len(hint.ladder), max(1, reached + 1 if climb else reached))
        if rung > reached:
            self.seen.setdefault(exercise.name, {})[hint.key] = rung
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.seen, indent=1, sort_keys=True) + "\n")
        return rung

    def summary(self):
        """{exercise: rungs shown, over all its hints}: what a report lists."""
        return {name: sum(keys.values()) for name, keys in sorted(self.seen.items())
                if sum(keys.values())}


def seen_line(summary):
    return SEEN_LINE + " " + json.dumps(summary, sort_keys=True)


def read_seen(text):
    """The last Lab-Hints-Seen record in a commit message or patch series."""
    found = {}
    for match in re.finditer(rf"^{SEEN_LINE}\s*(\{{.*\}})\s*$", text, re.M):
        try:
            value = json.loads(match.group(1))
        except ValueError:
            continue
        if isinstance(value, dict):
            found = {str(k): int(v) for k, v in value.items()
                     if isinstance(v, int) and not isinstance(v, bool)}
    return found


def format_hint(exercise, hint, rung):
    more = (f"  (`make hint EXERCISE={exercise.name}` for the next of {len(hint.ladder)})"
            if rung < len(hint.ladder) else "  (the last hint for this failure)")
    return f"  hint {rung}/{len(hint.ladder)} for {exercise.name}: {hint.ladder[rung - 1]}\n{more}"


# -- the proof that the hints are keyed to real failures ------------------------

EXPECTED = re.compile(r"^Hint:\s*(\d+)\s*$", re.M)


def expected(patch_text):
    """The hint a wrong solution's failure must get: its `Hint: N` line
    (N counts the exercise's [[exercise.hints]] from 1), or None."""
    match = EXPECTED.search(patch_text)
    return int(match.group(1)) if match else None


def check(exercise, patch_text, report, console_text):
    """(ok, detail): the wrong solution's real failure gets the hint it names."""
    wanted = expected(patch_text)
    if wanted is None:
        return False, "the patch names no hint (a 'Hint: N' line)"
    if not 1 <= wanted <= len(exercise.hints):
        return False, f"Hint: {wanted}, but {exercise.name} has {len(exercise.hints)} hints"
    got = select(exercise, report, console_text)
    number = exercise.hints.index(got) + 1 if got else None
    if number != wanted:
        failed = ", ".join(failed_paths(report, exercise.tests)) or "no result failed"
        return False, (f"its failure ({failed}) gets hint {number or 'none'}, "
                       f"not hint {wanted}")
    return True, ""


def console_of(out):
    """What a run's hints may be keyed to besides results: its console and autopsy."""
    out = Path(out)
    return "".join((out / name).read_text(errors="replace")
                   for name in ("console.log", "autopsy.txt") if (out / name).exists())
