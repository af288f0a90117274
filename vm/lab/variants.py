"""One kernel for many grader proofs.

A stage's proofs grade the skeleton, the solutions and every wrong
solution, and each of them used to be a kernel of its own: a recompile and
a vmlinux link of about 13 s, times twenty variants a stage. Where every
exercise is a function of a C file built into vmlinux, the variants differ
only inside those functions' bodies. So the proofs build one kernel in
which each exercised function holds every body that any variant gives it,
and the kernel command line picks one:

    {
        if (lab_proof_variant == 2) {
            __label__ out;      /* the body's own labels, kept apart */
            ...the body of wrong solution 2...
        } else {
            ...the stage's own body...
        }
    }

The bodies stay in the function itself, so everything that names it sees
what a student's kernel shows: `__func__`, kprobes on it, the backtrace of
an oops. Each body keeps its own locals and static variables, as it would
in a kernel of its own. Variant 0, the default, is the stage's code.

A variant that changes anything else (another function, a declaration,
another file) is left out of the plan and gets a kernel of its own, as
every variant did before; so does every variant when the combined kernel
fails to build.
"""
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import kbuild
from .errors import LabError

PARAM = "lab_proof_variant"

# Where the file reads the command line's choice: once per file, before the
# first exercised function. Each file has its own copy (static), and
# early_param() calls every handler registered under the name.
SELECTOR = f"""\
/* Grader proofs only: which variant of the exercised functions runs. */
static int {PARAM} __read_mostly;

static int __init {PARAM}_setup(char *arg)
{{
	return kstrtoint(arg, 10, &{PARAM});
}}
early_param("{PARAM}", {PARAM}_setup);

"""

# A label at the start of a line: `out:`, not `case X:`, `default:` or `::`.
LABEL = re.compile(r"^[ \t]*([A-Za-z_]\w*)[ \t]*:(?!:)", re.M)


@dataclass
class Plan:
    files: dict    # path -> the generated text, holding every variant
    numbers: dict  # attempt label -> its variant number (0: the stage's code)

    def cmdline(self, label):
        return [f"{PARAM}={self.numbers[label]}"]


def plan(tree, stage, exercise_set, attempts, obj):
    """The Plan for these (label, rev, patches, focus) attempts, or None
    when the stage's exercises are not all functions built into vmlinux
    (a module, a BPF program or a host tool is quick to rebuild anyway)."""
    exercises = exercise_set.exercises
    if exercise_set.proof or not exercises or \
            not all(e.function and kbuild.is_builtin(obj, e.file) for e in exercises):
        return None
    by_file = {}
    for exercise in exercises:
        by_file.setdefault(exercise.file, []).append(exercise.function)
    stage_texts = {path: tree.git("show", f"{stage.branch}:{path}").stdout for path in by_file}
    stage_parts = {path: _parts(text, by_file[path]) for path, text in stage_texts.items()}
    numbers = {}
    bodies = {path: {name: {} for name in names} for path, names in by_file.items()}
    for label, rev, patches, _ in attempts:
        texts = _attempt_texts(tree, stage.branch, rev, patches, stage_texts)
        if texts is None or not set(texts) <= set(by_file):
            continue
        parts = {path: _parts(text, by_file[path]) for path, text in texts.items()}
        if any(part is None or part[0] != stage_parts[path][0] for path, part in parts.items()):
            continue  # it changes something besides the exercised bodies
        number = max([0, *numbers.values()]) + 1 if texts else 0
        numbers[label] = number
        for path, (_, body_of) in parts.items():
            for name, body in body_of.items():
                if body != stage_parts[path][1][name]:
                    bodies[path][name].setdefault(body, []).append(number)
    if not any(numbers.values()):
        return None
    files = {path: _generate(stage_texts[path], by_file[path], bodies[path])
             for path in by_file}
    return Plan(files, numbers)


def _attempt_texts(tree, base, rev, patches, known):
    """{path: text} of each file that rev with the patches applied has
    otherwise than base; None when that cannot be told (a patch that
    creates or deletes a file, or does not apply)."""
    changed = tree.git("diff", "--name-only", "--no-renames", base, rev).stdout.split()
    touched = []
    for patch in patches:
        listed = tree.git("apply", "--numstat", str(patch), check=False)
        if listed.returncode != 0:
            return None
        touched += [line.split("\t", 2)[2] for line in listed.stdout.splitlines()]
    texts = {}
    for path in set(changed) | set(touched):
        shown = tree.git("show", f"{rev}:{path}", check=False)
        if shown.returncode != 0:
            return None
        texts[path] = shown.stdout
    if patches:
        with tempfile.TemporaryDirectory(prefix="lab-variant-") as scratch:
            for path, text in texts.items():
                (Path(scratch) / path).parent.mkdir(parents=True, exist_ok=True)
                (Path(scratch) / path).write_text(text)
            for patch in patches:
                # Outside a repository, git apply patches the files in cwd.
                if subprocess.run(["git", "apply", str(patch)], cwd=scratch,
                                  capture_output=True).returncode != 0:
                    return None
            texts = {path: (Path(scratch) / path).read_text() for path in texts}
    def base_text(path):
        return known[path] if path in known else tree.git("show", f"{base}:{path}").stdout
    return {path: text for path, text in texts.items() if text != base_text(path)}


def _parts(text, functions):
    """(the text outside the functions' bodies, {function: body}), or None
    when a function is not there in kernel style."""
    from .exercises import function_body_span  # exercises imports this module
    try:
        spans = sorted((function_body_span(text, name), name) for name in functions)
    except LabError:
        return None
    outside, body_of, at = [], {}, 0
    for (start, end), name in spans:
        outside.append(text[at:start])
        body_of[name] = text[start:end]
        at = end
    outside.append(text[at:])
    return outside, body_of


def _generate(text, functions, variants):
    """The stage's text with each function's body holding its variants,
    and the selector before the first of them."""
    from .exercises import function_body_span, function_head_start
    spans = sorted(((function_body_span(text, name), name) for name in functions),
                   reverse=True)
    for (start, end), name in spans:
        text = text[:start] + _dispatch(text[start:end], variants[name]) + text[end:]
    first = min(function_head_start(text, name) for name in functions)
    return text[:first] + SELECTOR + text[first:]


def _dispatch(own, variants):
    """A body that runs the variant's body, the stage's own by default."""
    lines = []
    for body, numbers in variants.items():
        test = " || ".join(f"{PARAM} == {n}" for n in numbers)
        lines.append(("\tif (" if not lines else "\t} else if (") + test + ") {")
        lines.append(_block(body))
    if not lines:
        return own
    lines += ["\t} else {", _block(own), "\t}"]
    return "\n".join(lines) + "\n"


def _block(body):
    """A body as the inside of a block: its labels declared local to it, as
    every body has the function's one label scope to share."""
    labels = sorted({m.group(1) for m in LABEL.finditer(body)} - {"default", "case"})
    head = f"\t\t__label__ {', '.join(labels)};\n" if labels else ""
    return head + "".join(f"\t{line}" if line.strip() else line
                          for line in body.rstrip("\n").splitlines(True))
