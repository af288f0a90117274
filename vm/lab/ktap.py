"""A KTAP (and TAP 13/14) parser, tolerant of kernel messages interleaved in
the stream, strict about the plan: a test list that stops early fails."""
import re
import sys
from dataclasses import dataclass, field

VERSION = re.compile(r"^(K?TAP) version (\d+)\s*$")
PLAN = re.compile(r"^1\.\.(\d+)")
RESULT = re.compile(r"^(not ok|ok)\s+(\d+)\s*(?:-\s*)?([^#]*?)\s*(?:#\s*(.*))?$")
SUBTEST_HEADER = re.compile(r"^# Subtest: (.*)")


@dataclass
class Result:
    name: str
    ok: bool
    skipped: bool = False
    directive: str = ""
    children: list = field(default_factory=list)
    diagnostics: list = field(default_factory=list)

    @property
    def status(self):
        return "SKIP" if self.skipped else ("PASS" if self.ok else "FAIL")


@dataclass
class Report:
    results: list
    planned: int = None
    problems: list = field(default_factory=list)

    @property
    def passed(self):
        return [r for r in self.results if r.ok and not r.skipped]

    @property
    def skipped(self):
        return [r for r in self.results if r.skipped]

    @property
    def failed(self):
        return [r for r in self.results if not r.ok]

    @property
    def ok(self):
        return not self.failed and not self.problems and self.planned is not None

    def find(self, path):
        """A result by 'top/child/grandchild' name, or None."""
        level, found = self.results, None
        for part in path.split("/"):
            found = next((r for r in level if r.name == part), None)
            if found is None:
                return None
            level = found.children
        return found


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def parse(text):
    """Parse KTAP. Lines that are not KTAP (console noise) are ignored; the
    nesting level comes from 4-space indentation, as KTAP specifies."""
    lines = [l.rstrip("\r\n").expandtabs(4) for l in text.splitlines()]
    start = next((i for i, l in enumerate(lines) if VERSION.match(l.strip()) and _indent(l) == 0),
                 None)
    if start is None:
        return Report([], None, ["no KTAP header found"])
    return _parse_level(lines[start + 1:], 0)


def _parse_level(lines, depth):
    results, planned, problems = [], None, []
    pending_children, pending_diag = [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        indent, body = _indent(line), line.strip()
        if not body:
            i += 1
            continue
        if indent > depth * 4:
            # A nested block: every deeper line, parsed as one level down,
            # up to this level's next plan or result. A less indented line
            # that is neither (a message's continuation, console noise)
            # does not end the block: ending it there would lose the
            # results before it.
            block, j = [], i
            while j < len(lines):
                later, shown = lines[j], lines[j].strip()
                if shown and _indent(later) <= depth * 4:
                    if PLAN.match(shown) or RESULT.match(shown) or VERSION.match(shown):
                        break
                    if shown.startswith("#") and _indent(later) == depth * 4:
                        pending_diag.append(shown)
                else:
                    block.append(later)
                j += 1
            child = _parse_level(block, depth + 1)
            pending_children = pending_children + child.results
            problems += child.problems
            i = j
            continue
        if indent < depth * 4:
            # Between this level and the one above: console noise, such
            # as a WARN splat's " <TASK>" lines, indented by one space
            # more than the level above. The results after it still count.
            i += 1
            continue
        if m := PLAN.match(body):
            planned = int(m.group(1))
        elif m := RESULT.match(body):
            directive = (m.group(4) or "").strip()
            skipped = directive.upper().startswith("SKIP")
            # As kunit.py's parser does: a result is ok only if every one of
            # its subtests is, whatever the parent line says. A script that
            # prints "not ok" for a subtest but exits 0 still fails.
            ok = m.group(1) == "ok" and all(c.ok for c in pending_children)
            if m.group(1) == "ok" and not ok:
                directive = directive or "a subtest failed"
            results.append(Result(m.group(3).strip(), ok, skipped and ok,
                                  directive, pending_children, pending_diag))
            pending_children, pending_diag = [], []
        elif body.startswith("#"):
            pending_diag.append(body)
        i += 1
    if planned is not None and len(results) != planned:
        problems.append(f"the plan announced {planned} tests but {len(results)} reported "
                        "(did the run stop early?)")
    return Report(results, planned, problems)


LIVE_HEADER = re.compile(r"^# lab-live (\d+) (\S+)\s*$")
CUT_SHORT = "cut short while running"


def with_live(report, live_text):
    """The report of a run cut short, with what the test it was running
    had reported so far (the guest's live file: a "# lab-live N name"
    line, then the test's own output) as that test's subtests. The test
    itself counts as failed once one of them has: it can only end so."""
    first, _, rest = live_text.partition("\n")
    header = LIVE_HEADER.match(first)
    if not header or int(header.group(1)) <= len(report.results):
        return report  # nothing running, or its result is in already
    children = parse(rest).results
    report.results.append(Result(header.group(2), all(c.ok for c in children),
                                 directive=CUT_SHORT, children=children))
    return report


class Writer:
    """KTAP for the lab's Python test programs, as vm/guest/lab/lib/ktap.sh
    is for the guest's scripts: one plan, counted from the results, and an
    exit status derived from the counts, so that no program keeps its own.
    The results are printed by finished(), which returns that status: 0
    when every result passed or skipped, 4 (kselftest's KSFT_SKIP) when
    all of them skipped, 1 otherwise or when there was none."""

    def __init__(self):
        self.lines, self.passed, self.failed, self.skipped = [], 0, 0, 0

    def _add(self, verdict, name, why, directive=""):
        self.lines += [f"# {line}" for line in why.splitlines()]
        number = self.passed + self.failed + self.skipped
        self.lines.append(f"{verdict} {number} {name}" + (f" # {directive}" if directive else ""))

    def result(self, name, ok, why=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        self._add("ok" if ok else "not ok", name, why)

    def skip(self, name, why):
        self.skipped += 1
        self._add("ok", name, "", f"SKIP {why}")

    def finished(self, out=None):
        out = out or sys.stdout
        count = self.passed + self.failed + self.skipped
        out.write("KTAP version 1\n" + f"1..{count}\n"
                  + "".join(line + "\n" for line in self.lines))
        out.flush()
        if self.failed or not count:
            return 1
        return 4 if self.skipped == count else 0
