"""Stages as data: stages/NN-slug/stage.toml, the Kconfig fragment
stages/NN-slug/config, the guest/ and gdb/ directories, and the patch
series kernel-patches/NN-slug/series. docs/design.md documents the
declaration; this module only reads it and says what is wrong with it."""
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from . import settings
from .errors import LabError

STAGE_DIR_RE = re.compile(r"^(\d\d)-[a-z0-9][a-z0-9-]*$")
DECLARATION = "stage.toml"
PROGRAM_KINDS = ("c", "bpf", "file", "gen")
SIZE_RE = re.compile(r"^\d+[KMG]$")


@dataclass(frozen=True)
class Test:
    name: str
    command: str
    walkthrough: bool = False  # a host test that is a gdb walkthrough
    timeout: int = None  # seconds it may take in the guest; None: the stage's timeout


@dataclass(frozen=True)
class Experiment:
    """The stage's kernel with one more patch, and a guest command whose KTAP
    says what the change did: a question a chapter asks of another kernel."""
    name: str
    patch: Path
    run: str
    summary: str


@dataclass(frozen=True)
class Program:
    guest_path: str
    kind: str          # "c", "bpf", "file" or "gen"
    source: str        # relative to the kernel tree, or "lab:" + relative to the repo;
                       # for "gen", a host shell command whose output is the file
    flags: tuple


@dataclass(frozen=True)
class Disk:
    """A block device the lab makes on the host for every unattended boot."""
    name: str
    size: str                  # as truncate(1) takes it: 64M, 1G
    filesystem: str = ""       # "" for a blank disk, else a mkfs type (ext4)
    files: str = ""            # a directory of the stage put on the filesystem
    properties: str = ""       # extra virtio-blk-pci properties, e.g. "num-queues=1"


@dataclass(frozen=True)
class Machine:
    """What a stage boots. The defaults are the fast machine every stage
    had before machines were declared."""
    arch: str = "x86_64"
    cpus: int = 2
    memory: str = "1G"
    firmware: str = "direct"   # "direct" (QEMU loads the kernel itself) or "ovmf" (UEFI)
    rng: bool = False          # a virtio-rng device fed from the host's /dev/urandom
    cmdline: tuple = ()        # added to the kernel command line
    disks: tuple = ()


MACHINE_KEYS = {"arch", "cpus", "memory", "firmware", "rng", "cmdline", "disk"}
FIRMWARES = ("direct", "ovmf")


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
    def declaration(self):
        return self.path / DECLARATION

    @property
    def data(self):
        return _declaration(self.declaration)

    @property
    def title(self):
        return self.data.get("title", self.slug)

    @property
    def chapter(self):
        """The chapter that teaches the stage, relative to the repository."""
        return self.data.get("chapter", f"chapters/{self.slug}.md")

    @property
    def runs_alone(self):
        """True when the stage's own tests measure speed, which make check
        then gives the machine to alone, before the proofs' guests start."""
        value = self.data.get("runs_alone", False)
        if not isinstance(value, bool):
            raise LabError(f"{settings.shown(self.declaration)}: runs_alone must be true "
                           "or false")
        return value

    @property
    def timeout(self):
        """Seconds a non-interactive boot of this stage may take."""
        return int(self.data.get("timeout", 300))

    def timeout_for(self, tests):
        """Seconds a boot that runs just these guest tests may take: the
        boot's allowance and each test's own timeout, when every one of
        them declares one, and never more than the stage's. A grade that
        runs one quick test then reports a hang in a minute or two, not
        in the minutes the stage's longest tests need."""
        if not tests or any(t.timeout is None for t in tests):
            return self.timeout
        return min(self.timeout, BOOT_ALLOWANCE + sum(t.timeout for t in tests))

    @property
    def packages(self):
        """Debian packages the stage needs on the host, beyond vm/packages."""
        return list(self.data.get("packages", []))

    @property
    def machine(self):
        return _machine(self.declaration, self.data.get("machine", {}))

    @property
    def host_packages(self):
        """Every Debian package the stage needs on the host: its own, and
        those its machine needs."""
        from . import arches
        machine = self.machine
        arch = arches.ARCHES[machine.arch]
        needed = list(self.packages)
        if arch.name != "x86_64":
            needed += [arch.qemu_package, arch.cross_package, arch.libc_package]
            if self.gdb_scripts:
                needed.append(arch.gdb_package)
        if machine.firmware == "ovmf":
            needed.append("ovmf")
        if any(d.filesystem.startswith("ext") for d in machine.disks):
            needed.append("e2fsprogs")
        return needed

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
        return self._tests("test")

    @property
    def host_tests(self):
        """Tests run on the host, in the stage tree (for example Kconfig's
        own test suite, which runs the real conf)."""
        return self._tests("host_test")

    @property
    def host_reports(self):
        """Commands run on the host after the guest tests, with LAB_RESULTS
        naming the results directory: they turn what the guest measured
        into plots or tables (same format and rules as host tests)."""
        return self._tests("host_report")

    @property
    def host_walkthroughs(self):
        """Host tests that are gdb walkthroughs (`walkthrough = true`): a
        program that runs on the host, such as Kconfig's conf, is debugged
        there, and `make gdb-test` runs them with the guest's."""
        return [t for t in self.host_tests if t.walkthrough]

    def _tests(self, key):
        tests = []
        allowed = {"name", "run", "walkthrough"} if key == "host_test" else \
            {"name", "run", "timeout"}
        for entry in self.data.get(key, []):
            name, command = entry.get("name"), entry.get("run")
            timeout = entry.get("timeout")
            if not name or not command or set(entry) - allowed \
                    or not isinstance(entry.get("walkthrough", False), bool) \
                    or not (timeout is None or (type(timeout) is int and timeout > 0)):
                raise LabError(f"{settings.shown(self.declaration)}: every [[{key}]] has a "
                               f"name and a run command"
                               + (", and may say walkthrough = true" if key == "host_test"
                                  else ", and may say timeout = <seconds>")
                               + f", and nothing else (got {entry})")
            tests.append(Test(name, command, entry.get("walkthrough", False), timeout))
        names = [t.name for t in tests]
        if len(set(names)) != len(names):
            raise LabError(f"{settings.shown(self.declaration)}: [[{key}]] names repeat: {names}")
        return tests

    @property
    def experiments(self):
        found = []
        for entry in self.data.get("experiment", []):
            keys = {"name", "patch", "run", "summary"}
            if set(entry) != keys or not all(isinstance(entry[k], str) and entry[k]
                                             for k in keys):
                raise LabError(f"{settings.shown(self.declaration)}: an [[experiment]] has a "
                               f"name, a patch, a run command and a summary (got {entry})")
            patch = self.path / entry["patch"]
            if not patch.is_file():
                raise LabError(f"{settings.shown(self.declaration)}: experiment "
                               f"{entry['name']}: no patch {settings.shown(patch)}")
            found.append(Experiment(entry["name"], patch, entry["run"], entry["summary"]))
        names = [e.name for e in found]
        if len(set(names)) != len(names):
            raise LabError(f"{settings.shown(self.declaration)}: [[experiment]] names repeat")
        return found

    @property
    def programs(self):
        programs = []
        for entry in self.data.get("program", []):
            kind = entry.get("kind")
            source = entry.get("command" if kind == "gen" else "source")
            known = {"path", "kind", "flags", "command" if kind == "gen" else "source"}
            if kind not in PROGRAM_KINDS or not entry.get("path") or not source \
                    or set(entry) - known:
                raise LabError(
                    f"{settings.shown(self.declaration)}: cannot use the program {entry}: a "
                    f"[[program]] has a path in the guest, a kind ({', '.join(PROGRAM_KINDS)}), "
                    "a source (for gen, a command) and optional flags")
            programs.append(Program(entry["path"], kind, source, tuple(entry.get("flags", []))))
        return programs

    @property
    def host_tools(self):
        return list(self.data.get("host_tools", []))

    @property
    def host_files(self):
        """Data files of the host's Debian packages that the guest needs at
        the same path, such as /etc/protocols for protocol names."""
        return list(self.data.get("host_files", []))

    @property
    def guest_files(self):
        path = self.path / "guest"
        return path if path.is_dir() else None

    @property
    def gdb_scripts(self):
        return sorted((self.path / "gdb").glob("*.gdb"))


# Seconds a boot may take beyond its tests' own timeouts: the boot under
# a busy TCG host, the guest's set-up and its power-off, which take 2 to
# 5 s. Every second of it is paid again by each grade that wedges.
BOOT_ALLOWANCE = 30

STAGE_KEYS = {"title", "chapter", "timeout", "runs_alone", "packages", "host_tools",
              "host_files", "machine", "test", "host_test", "host_report", "program",
              "experiment"}


_parsed = {}


def _declaration(path):
    """The parsed stage.toml, read again only when it changes."""
    try:
        key = (path, path.stat().st_mtime_ns)
    except OSError:
        key = None
    if key in _parsed:
        return _parsed[key]
    data = _parse_declaration(path)
    if key:
        _parsed[key] = data
    return data


def _parse_declaration(path):
    if not path.exists():
        old = [n for n in ("stage.conf", "tests", "programs") if (path.parent / n).exists()]
        hint = (f" ({', '.join(old)} are the old form: docs/design.md shows the new one)"
                if old else "")
        raise LabError(f"{settings.shown(path)} is missing: every stage is declared there{hint}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise LabError(f"{settings.shown(path)}: {error}") from None
    unknown = set(data) - STAGE_KEYS
    if unknown:
        raise LabError(f"{settings.shown(path)}: unknown keys {sorted(unknown)}; a stage "
                       f"declares {sorted(STAGE_KEYS)}")
    return data


def _machine(path, table):
    where = f"{settings.shown(path)} [machine]"
    unknown = set(table) - MACHINE_KEYS
    if unknown:
        raise LabError(f"{where}: unknown keys {sorted(unknown)}; a machine declares "
                       f"{sorted(MACHINE_KEYS)}")
    from . import arches  # the table of architectures the lab can boot
    machine = Machine(arch=table.get("arch", Machine.arch),
                      cpus=table.get("cpus", Machine.cpus),
                      memory=str(table.get("memory", Machine.memory)),
                      firmware=table.get("firmware", Machine.firmware),
                      rng=table.get("rng", Machine.rng),
                      cmdline=tuple(table.get("cmdline", ())),
                      disks=tuple(_disk(where, d) for d in table.get("disk", [])))
    if machine.arch not in arches.ARCHES:
        raise LabError(f"{where}: arch '{machine.arch}' is not one the lab boots "
                       f"({', '.join(arches.ARCHES)})")
    if not isinstance(machine.cpus, int) or not 1 <= machine.cpus <= 16:
        raise LabError(f"{where}: cpus must be a whole number from 1 to 16")
    if not SIZE_RE.match(machine.memory):
        raise LabError(f"{where}: memory '{machine.memory}' is not a size like 1G or 512M")
    if machine.firmware not in FIRMWARES:
        raise LabError(f"{where}: firmware '{machine.firmware}' is not one of {FIRMWARES}")
    if machine.firmware not in arches.ARCHES[machine.arch].firmwares:
        raise LabError(f"{where}: {machine.arch} machines boot with "
                       f"{', '.join(arches.ARCHES[machine.arch].firmwares)}")
    names = [d.name for d in machine.disks]
    if len(set(names)) != len(names):
        raise LabError(f"{where}: disk names repeat: {names}")
    return machine


def _disk(where, table):
    known = {"name", "size", "filesystem", "files", "properties"}
    if set(table) - known or not table.get("name") or not table.get("size"):
        raise LabError(f"{where}: a [[machine.disk]] has a name and a size, and optionally "
                       f"a filesystem, files and properties (got {table})")
    disk = Disk(**table)
    if not re.fullmatch(r"[a-z][a-z0-9-]*", disk.name):
        raise LabError(f"{where}: disk name '{disk.name}' must be lower-case letters, digits, -")
    if not SIZE_RE.match(disk.size):
        raise LabError(f"{where}: disk {disk.name}: size '{disk.size}' is not like 64M or 1G")
    if disk.files and not disk.filesystem:
        raise LabError(f"{where}: disk {disk.name} has files but no filesystem to put them on")
    return disk


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


def default():
    """The stage a target works on when none is named and the tree is on
    none: the latest stage of the default machine's architecture. A
    chapter on another architecture is a stage a student picks by name,
    not the machine `make boot` starts on a new tree."""
    native = Machine().arch
    return next((s for s in reversed(all_stages()) if s.machine.arch == native), latest())


def upto(stage):
    """The stage and every stage before it, oldest first."""
    return [s for s in all_stages() if s.number <= stage.number]


def machine_lineage(stage):
    """The stages whose config fragments and guest programs the stage's
    machine carries: the stage and every earlier one of its architecture.
    An earlier stage of another architecture adds its patches to the tree
    and nothing to this machine: its options and programs were chosen for
    a machine this one is not."""
    return [s for s in upto(stage) if s.machine.arch == stage.machine.arch]
