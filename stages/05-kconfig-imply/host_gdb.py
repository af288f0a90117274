#!/usr/bin/python3
"""Run a gdb walkthrough of the host's conf (stages/05-kconfig-imply/host-gdb/)
as a host test: Kconfig runs on the host, so its debugger session is not one
of the lab's guest-kernel walkthroughs. The script's comments declare what
it needs, as the lab's walkthroughs do (vm/lab/debugger.py, whose parser and
checker this uses):
    # config: <line>     a line of the .config conf starts from
    # run: <arguments>   conf's arguments; files relative to the kernel tree
    # expect: <regex>    must appear in gdb's output, in this order

Usage: host_gdb.py SCRIPT, in the kernel tree. conf is built with -g -O0 in
$LAB_OBJ/lab-gdb-conf (or a temporary directory). gdb's output and what the
script writes to $LAB_OUT are kept in $LAB_RESULTS/gdb/<script name>/.
Exits 0 when every expectation is met, 1 otherwise, saying which was not.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.environ.get("LAB_REPO", str(Path(__file__).resolve().parents[2])))
from vm.lab.debugger import Walkthrough  # noqa: E402


def build_conf(tree, obj):
    """conf with debug information and no optimisation, so that gdb sees
    every local of sym_calc_value() and every line where it is written."""
    obj.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["make", "-s", "-C", str(tree), f"O={obj}", "HOSTCFLAGS=-g -O0",
         "KBUILD_KCONFIG=scripts/kconfig/tests/imply/Kconfig", "allnoconfig"],
        capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"building conf failed:\n{result.stdout}{result.stderr}")
    return obj / "scripts" / "kconfig" / "conf"


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    script = Path(sys.argv[1]).resolve()
    walk = Walkthrough.load(script)
    text = script.read_text()
    config = [m.group(1) for m in re.finditer(r"^#\s*config:\s*(.+)$", text, re.M)]
    tree = Path.cwd()
    results = Path(os.environ.get("LAB_RESULTS", tempfile.mkdtemp()))
    out = results / "gdb" / script.stem
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        old.unlink()
    with tempfile.TemporaryDirectory() as scratch:
        obj = Path(os.environ["LAB_OBJ"]) / "lab-gdb-conf" if "LAB_OBJ" in os.environ \
            else Path(scratch) / "obj"
        conf = build_conf(tree, obj)
        dot_config = Path(scratch) / ".config"
        dot_config.write_text("".join(line + "\n" for line in config))
        cmd = ["gdb", "-q", "-nx", "-batch",
               "-iex", "set pagination off", "-iex", "set confirm off",
               "-x", str(script), "--args", str(conf), *shlex.split(walk.command or "")]
        # conf finds the Kconfig through srctree and writes what it writes
        # (include/config/ among them) in the scratch directory, never in
        # the tree.
        env = dict(os.environ, srctree=str(tree), KCONFIG_CONFIG=str(dot_config),
                   LAB_OUT=str(out))
        try:
            result = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True,
                                    timeout=120)
            output = result.stdout + result.stderr
        except subprocess.TimeoutExpired as e:
            output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
                else (e.stdout or "")
            output += "\n[host_gdb.py: gdb did not finish within 120 s]\n"
    (out / "gdb.log").write_text(output)
    print(output, end="")
    missing = walk.check(output)
    if missing:
        print(f"host_gdb.py: {script.name}: expected /{missing}/ in gdb's output")
        return 1
    print(f"host_gdb.py: {script.name}: all {len(walk.expectations)} expectations met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
