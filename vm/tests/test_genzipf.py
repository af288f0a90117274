"""Host tests for tools/genzipf: the regenerated LRU htab key traces.

The tool is built with its own Makefile into a temporary directory, so the
tests neither need nor touch the repository's build/ directory.
"""

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOL_DIR = REPO / "tools" / "genzipf"

NRANGES = 100_000
COUNT = 100_000

# name -> (theta, unique keys, sha256)
# The sha256 sums are those of the regenerated 2016 traces: byte for byte the
# files zipf.100k.a1_01.out and zipf.100k.a0_01.out that Linux commit
# 5db58faf989f ("bpf: Add tests for the LRU bpf_htab") points to.
TRACES = {
    "zipf.100k.a1_01.out": (
        "1.01",
        23093,
        "023b055f353c753fcc0e43bd3a3b6c7859df497c5b781dacecc9c60ca6fe1783",
    ),
    "zipf.100k.a0_01.out": (
        "0.01",
        61239,
        "8e9593306d4f36e37c3f2c5de7372e3720ed25abb2b3283ad3cd98a7da2c9657",
    ),
}


def _make(*args):
    make = shutil.which("make")
    assert make, "make is needed to build tools/genzipf"
    return subprocess.run(
        [make, "-s", "-C", str(TOOL_DIR), *args],
        check=True,
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Build genzipf and run `make traces`; return (binary, trace dir)."""
    root = tmp_path_factory.mktemp("genzipf")
    bindir = root / "bin"
    outdir = root / "traces"
    _make(f"BUILDDIR={bindir}", f"OUT={outdir}", "all", "traces")
    binary = bindir / "genzipf"
    assert binary.is_file()
    return binary, outdir


def run(binary, *args):
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=120
    )


def keys_of(text):
    return [int(line) for line in text.splitlines()]


@pytest.mark.parametrize("name", sorted(TRACES))
def test_trace_matches_2016_original(built, name):
    _, outdir = built
    _theta, unique, digest = TRACES[name]
    data = (outdir / name).read_bytes()

    assert data.endswith(b"\n")
    keys = keys_of(data.decode("ascii"))
    assert len(keys) == COUNT
    assert len(set(keys)) == unique
    assert all(0 <= k < NRANGES for k in keys)
    assert hashlib.sha256(data).hexdigest() == digest


@pytest.mark.parametrize("name", sorted(TRACES))
def test_command_line_matches_make_traces(built, name):
    binary, outdir = built
    theta = TRACES[name][0]
    res = run(binary, "-t", theta, "-n", str(NRANGES), "-s", "1",
              "-c", str(COUNT))
    assert res.returncode == 0, res.stderr
    assert res.stdout == (outdir / name).read_text()


def test_defaults_give_the_a1_01_trace(built):
    binary, outdir = built
    res = run(binary)
    assert res.returncode == 0, res.stderr
    assert res.stdout == (outdir / "zipf.100k.a1_01.out").read_text()


def test_count_gives_a_prefix(built):
    binary, outdir = built
    res = run(binary, "-t", "0.01", "-c", "25")
    assert res.returncode == 0, res.stderr
    full = (outdir / "zipf.100k.a0_01.out").read_text().splitlines()
    assert res.stdout.splitlines() == full[:25]


def test_other_seed_gives_other_trace(built):
    binary, outdir = built
    res = run(binary, "-t", "1.01", "-s", "2")
    assert res.returncode == 0, res.stderr
    keys = keys_of(res.stdout)
    assert len(keys) == COUNT
    assert all(0 <= k < NRANGES for k in keys)
    assert res.stdout != (outdir / "zipf.100k.a1_01.out").read_text()


def test_small_range_stays_in_range(built):
    binary, _ = built
    res = run(binary, "-t", "0.5", "-n", "7", "-c", "1000")
    assert res.returncode == 0, res.stderr
    keys = keys_of(res.stdout)
    assert len(keys) == 1000
    assert set(keys) <= set(range(7))


def test_help(built):
    binary, _ = built
    res = run(binary, "-h")
    assert res.returncode == 0
    assert res.stdout.startswith("usage: genzipf")
    for opt in ("-t", "-n", "-s", "-c"):
        assert opt in res.stdout


@pytest.mark.parametrize("theta", ["abc", "1", "1.0", "-0.5", "nan", "", "2x"])
def test_bad_theta_exits_2(built, theta):
    binary, _ = built
    res = run(binary, "-t", theta)
    assert res.returncode == 2
    assert res.stdout == ""
    assert "invalid theta" in res.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["-n", "0"], "invalid nranges"),
        (["-n", "-5"], "invalid nranges"),
        (["-s", "4294967296"], "invalid seed"),
        (["-c", "ten"], "invalid count"),
        (["-q"], "unknown option"),
        (["-t"], "needs a value"),
        (["extra"], "unexpected argument"),
    ],
)
def test_bad_arguments_exit_2(built, args, message):
    binary, _ = built
    res = run(binary, *args)
    assert res.returncode == 2
    assert message in res.stderr


def test_clean_removes_outputs(tmp_path):
    bindir = tmp_path / "bin"
    outdir = tmp_path / "traces"
    _make(f"BUILDDIR={bindir}", f"OUT={outdir}", "traces")
    assert (bindir / "genzipf").is_file()
    assert all((outdir / name).is_file() for name in TRACES)
    _make(f"BUILDDIR={bindir}", f"OUT={outdir}", "clean")
    assert not (bindir / "genzipf").exists()
    assert not any((outdir / name).exists() for name in TRACES)
