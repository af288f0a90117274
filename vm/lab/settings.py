"""Where things live. Every path can be overridden from the environment,
which is how the Makefile passes its variables down."""
import os
from pathlib import Path

from .errors import LabError

REPO = Path(__file__).resolve().parents[2]


def _path(name, default):
    value = os.environ.get(name)
    return Path(value).resolve() if value else default


BUILD = _path("BUILD", REPO / "build")
KERNEL_TREE = _path("KERNEL_TREE", BUILD / "linux")
SOURCE_TARBALL = _path("LINUX_SOURCE", Path("/usr/src/linux-source-6.1.tar.xz"))
SOURCE_PACKAGE = "linux-source-6.1"
# The package version the patch series was written and tested against.
TESTED_SOURCE_VERSION = (REPO / "vm" / "source-version").read_text().strip()
STAGES_DIR = REPO / "stages"
PATCHES_DIR = REPO / "kernel-patches"
EXERCISES_DIR = REPO / "exercises"
SOLUTIONS_DIR = REPO / "solutions"
GUEST_DIR = REPO / "vm" / "guest"
BASE_CONFIG = REPO / "vm" / "base.config"
ARCH_CONFIG_DIR = REPO / "vm" / "arch"

# Identity used for every commit the lab makes in the kernel tree, with fixed
# dates, so that base and stage commits have the same ids on every machine.
LAB_IDENT = {
    "GIT_AUTHOR_NAME": "Linux 4.10 Lab",
    "GIT_AUTHOR_EMAIL": "lab@linux-4-10-lab.invalid",
    "GIT_COMMITTER_NAME": "Linux 4.10 Lab",
    "GIT_COMMITTER_EMAIL": "lab@linux-4-10-lab.invalid",
    "GIT_COMMITTER_DATE": "2016-12-14T00:00:00Z",
}


def jobs():
    return int(os.environ.get("JOBS") or os.cpu_count() or 1)


def proof_guests():
    """How many guests a stage's grader proofs run at once. A graded guest
    under TCG keeps about a third of two cores busy (its tests wait on
    timers, pings and captures), so two overlap well; LAB_PROOF_GUESTS=1
    runs them one at a time, as a student's grade does."""
    value = os.environ.get("LAB_PROOF_GUESTS") or "2"
    if not value.isdigit() or int(value) < 1:
        raise LabError(f"LAB_PROOF_GUESTS={value}: give a number of guests, 1 or more")
    return int(value)


def shown(path):
    """A path as the user would type it: relative to the repository if inside."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)
