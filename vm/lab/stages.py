"""Stages as data: stages/NN-slug/ plus kernel-patches/NN-slug/series."""
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from . import settings
from .errors import LabError

STAGE_DIR_RE = re.compile(r"^(\d\d)-[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class Test:
    name: str
    command: str


@dataclass(frozen=True)
class Program:
    guest_path: str
    kind: str          # "c", "bpf", "file" or "gen"
    source: str        # relative to the kernel tree, or "lab:" + relative to the repo;
                       # for "gen", a host shell command whose output is the file
    flags: tuple


@dataclass(frozen=True)
class Stage:
    slug: str
    path: Path

    @property
    def number(self):
        return self.slug[:2]

    @property
    def branch(self):
        return f"stage/{self.slug}"

    @property
    def exercise_branch(self):
        return f"exercise/{self.slug}"

    @property
    def meta(self):
        return parse_keyvalues(self.path / "stage.conf")

    @property
    def title(self):
        return self.meta.get("title", self.slug)

    @property
    def timeout(self):
        """Seconds a non-interactive boot of this stage may take."""
        return int(self.meta.get("timeout", 300))

    @property
    def config_fragment(self):
        path = self.path / "config"
        return path if path.exists() else None

    @property
    def patch_dir(self):
        return settings.PATCHES_DIR / self.slug

    @property
    def patches(self):
        series = self.patch_dir / "series"
        if not series.exists():
            return []
        names = [line.strip() for line in series.read_text().splitlines()]
        patches = [self.patch_dir / n for n in names if n and not n.startswith("#")]
        for patch in patches:
            if not patch.exists():
                raise LabError(f"{series} names {patch.name}, which does not exist")
        return patches

    @property
    def tests(self):
        """Tests run in the guest."""
        return self._test_list("tests")

    @property
    def host_tests(self):
        """Tests run on the host, in the stage tree (for example Kconfig's
        own test suite, which runs the real conf)."""
        return self._test_list("host-tests")

    @property
    def host_reports(self):
        """Commands run on the host after the guest tests, with LAB_RESULTS
        naming the results directory: they turn what the guest measured
        into plots or tables (same format and rules as host tests)."""
        return self._test_list("host-reports")

    def _test_list(self, name):
        tests = []
        for line in data_lines(self.path / name):
            test_name, _, command = line.partition(" ")
            if not command.strip():
                raise LabError(f"{self.path}/{name}: test '{test_name}' has no command")
            tests.append(Test(test_name, command.strip()))
        return tests

    @property
    def programs(self):
        programs = []
        for line in data_lines(self.path / "programs"):
            fields = shlex.split(line)
            if len(fields) < 3 or fields[1] not in ("c", "bpf", "file", "gen"):
                raise LabError(f"{self.path}/programs: cannot parse '{line}' "
                               "(expected: guest-path c|bpf|file source [flags], "
                               "or guest-path gen 'command')")
            programs.append(Program(fields[0], fields[1], fields[2], tuple(fields[3:])))
        return programs

    @property
    def host_tools(self):
        return [t for line in data_lines(self.path / "host-tools") for t in line.split()]

    @property
    def guest_files(self):
        path = self.path / "guest"
        return path if path.is_dir() else None

    @property
    def gdb_scripts(self):
        return sorted((self.path / "gdb").glob("*.gdb"))


def parse_keyvalues(path):
    values = {}
    for line in data_lines(path):
        key, sep, value = line.partition("=")
        if not sep:
            raise LabError(f"{path}: expected 'key = value', got '{line}'")
        values[key.strip()] = value.strip()
    return values


def data_lines(path):
    """Non-empty lines of a data file, without whole-line # comments (commands
    may contain #); no lines if the file is absent."""
    if not path.exists():
        return []
    lines = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def all_stages():
    if not settings.STAGES_DIR.is_dir():
        return []
    stages = [Stage(p.name, p) for p in sorted(settings.STAGES_DIR.iterdir())
              if p.is_dir() and STAGE_DIR_RE.match(p.name)]
    numbers = [s.number for s in stages]
    if len(set(numbers)) != len(numbers):
        raise LabError(f"two stage directories share a number: {numbers}")
    return stages


def resolve(name):
    """A stage from 'NN', 'NN-slug' or 'slug'; the error lists the stages."""
    stages = all_stages()
    name = (name or "").strip()
    for stage in stages:
        if name in (stage.number, stage.slug, stage.slug[3:]):
            return stage
    listing = "\n".join(f"  {s.number}  {s.slug:<22} {s.title}" for s in stages)
    raise LabError(f"unknown stage '{name}'. The stages are:\n{listing}")


def latest():
    stages = all_stages()
    if not stages:
        raise LabError("there are no stages under stages/")
    return stages[-1]


def upto(stage):
    """The stage and every stage before it, oldest first."""
    return [s for s in all_stages() if s.number <= stage.number]
