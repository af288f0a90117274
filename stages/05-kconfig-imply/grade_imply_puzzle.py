#!/usr/bin/python3
"""Grade the imply puzzle (exercises/05-kconfig-imply) with the kernel's own
conf: every prediction is compared with what conf does on the tree's
puzzle Kconfig, and the goal configuration must be reachable. Prints KTAP;
exits 1 if anything failed.

Usage: grade_imply_puzzle.py PUZZLE_DIR   (relative to the kernel tree, the
current directory). conf is built in $LAB_OBJ/lab-imply-puzzle, or in a
temporary directory without LAB_OBJ.
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# KTAP through the lab's one writer (vm/lab/ktap.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "vm"))
from lab import ktap  # noqa: E402


class Conf:
    """Runs conf on the puzzle through the kernel's make, as a student would:
    make O=<dir> KBUILD_KCONFIG=<puzzle>/Kconfig <target>."""

    def __init__(self, tree, puzzle, workdir):
        self.tree, self.puzzle, self.workdir = tree, puzzle, workdir

    def run(self, target, fragment_text):
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / ".config").write_text(fragment_text)
        result = subprocess.run(
            ["make", "-s", "-C", str(self.tree), f"O={self.workdir}",
             f"KBUILD_KCONFIG={self.puzzle}/Kconfig", target],
            input="\n" * 100, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"make {target} failed:\n{result.stdout}{result.stderr}")
        return result.stdout, (self.workdir / ".config").read_text()


def value_in(config, symbol):
    match = re.search(rf"^CONFIG_{symbol}=(.*)$", config, re.M)
    return match.group(1) if match else "n"


def choices_in(stdout, symbol):
    """The choices conf's prompt offered, without the '?': "M/n/y"."""
    match = re.search(rf"\({symbol}\) \[([^\]]*)\]", stdout)
    if not match:
        return None
    return "/".join(c for c in match.group(1).split("/") if c != "?")


def same_choices(offered, predicted):
    """The current value first, then the others in any order."""
    offered, predicted = offered.split("/"), predicted.split("/")
    return offered[0] == predicted[0] and sorted(offered[1:]) == sorted(predicted[1:])


def read_predictions(path):
    rows = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 4:
            raise ValueError(f"{path}: expected 'fragment symbol value choices': {line!r}")
        rows.append(fields)
    return rows


def grade_predictions(conf, puzzle, report):
    for fragment, symbol, value, choices in read_predictions(puzzle / "predictions"):
        name = f"{fragment}.{symbol}"
        if "?" in (value, choices):
            report.result(name, False, f"{name}: not answered yet")
            continue
        text = (puzzle / f"{fragment}.config").read_text()
        _, config = conf.run("olddefconfig", text)
        stdout, _ = conf.run("config", text)
        offered = choices_in(stdout, symbol)
        got = value_in(config, symbol)
        problems = []
        if got != value:
            problems.append(f"{name}: predicted {value}, olddefconfig gives {got}")
        if offered is None:
            problems.append(f"{name}: make config did not ask for {symbol}")
        elif not same_choices(offered, choices):
            problems.append(f"{name}: predicted {choices}, make config offers {offered}")
        report.result(name, not problems, "\n".join(problems))


def grade_goal(conf, puzzle, report):
    goal = (puzzle / "goal.config").read_text()
    wanted = {m.group(1): m.group(2) for m in re.finditer(r"^CONFIG_(\w+)=(.*)$", goal, re.M)}
    wanted.update({m.group(1): "n" for m in
                   re.finditer(r"^# CONFIG_(\w+) is not set$", goal, re.M)})
    _, config = conf.run("olddefconfig", goal)
    lost = [f"{s}: wanted {v}, got {value_in(config, s)}"
            for s, v in wanted.items() if value_in(config, s) != v]
    report.result("goal_is_reachable", not lost, "\n".join(lost))

    # The keyboard still asks for LEDs by default, and still builds without
    # them: a dropped select, or one turned into "depends on", would not.
    _, config = conf.run("olddefconfig", "CONFIG_KEYBOARD=y\n")
    problems = [f"with only CONFIG_KEYBOARD=y: {s}={value_in(config, s)}, expected y"
                for s in ("KEYBOARD", "LEDS") if value_in(config, s) != "y"]
    report.result("keyboard_still_defaults_leds_on", not problems, "\n".join(problems))

    # It is the keyboard that turns the LEDs on: with nothing set, they stay
    # off (a "default y" on LEDS itself would turn them on for everyone).
    _, config = conf.run("olddefconfig", "")
    problems = [f"with an empty .config: {s}={value_in(config, s)}, expected n"
                for s in ("KEYBOARD", "LEDS") if value_in(config, s) != "n"]
    report.result("leds_stay_off_without_the_keyboard", not problems, "\n".join(problems))


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    tree, puzzle = Path.cwd(), Path(sys.argv[1])
    obj = os.environ.get("LAB_OBJ")
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(obj) / "lab-imply-puzzle" if obj else Path(scratch)
        conf = Conf(tree, puzzle, workdir)
        report = ktap.Writer()
        try:
            grade_predictions(conf, tree / puzzle, report)
            grade_goal(conf, tree / puzzle, report)
        except (RuntimeError, ValueError) as error:
            report.result("conf_runs", False, str(error))
        return report.finished()


if __name__ == "__main__":
    sys.exit(main())
