"""Hollowing: C function bodies, and marked spans of lines in any file."""
import pytest

from lab import exercises
from lab.errors import LabError

KCONFIG = """config KEYBOARD
\tbool "A keyboard"
\t# exercise-begin: keyboard
\timply LEDS
\t# exercise-end: keyboard

config LEDS
\ttristate "LEDs"
"""


def span_exercise(**extra):
    fields = dict(name="kbd", file="Kconfig", span="keyboard", summary="make it imply",
                  hint="select forces", tests=[], stub="\tselect LEDS")
    fields.update(extra)
    return exercises.Exercise(**fields)


def test_a_span_is_replaced_by_the_stub_under_a_header_in_the_files_syntax():
    hollowed = exercises.hollow(KCONFIG, span_exercise(), "05-demo")
    assert "\timply LEDS" not in hollowed
    assert "\t# Exercise kbd (05-demo): make it imply\n\t# Hint: select forces\n" in hollowed
    assert "\tselect LEDS\n\t# exercise-end: keyboard\n" in hollowed
    # Everything outside the markers is untouched.
    assert hollowed.startswith('config KEYBOARD\n\tbool "A keyboard"\n\t# exercise-begin: keyboard\n')
    assert hollowed.endswith('config LEDS\n\ttristate "LEDs"\n')


def test_the_span_of_the_solved_file_restores_it():
    exercise = span_exercise()
    hollowed = exercises.hollow(KCONFIG, exercise, "05-demo")
    start, end = exercises.body_span(hollowed, exercise)
    s_start, s_end = exercises.body_span(KCONFIG, exercise)
    assert hollowed[:start] + KCONFIG[s_start:s_end] + hollowed[end:] == KCONFIG


def test_a_missing_marker_is_named():
    with pytest.raises(LabError, match="exercise-begin: nothing"):
        exercises.hollow(KCONFIG, span_exercise(span="nothing"), "05-demo")
    with pytest.raises(LabError, match="no 'exercise-end: keyboard'"):
        exercises.hollow(KCONFIG.replace("exercise-end", "exercise-stop"), span_exercise(),
                         "05-demo")


def test_a_function_is_still_hollowed_in_kernel_style():
    source = "static int f(int a)\n{\n\treturn a;\n}\n"
    exercise = exercises.Exercise(name="f", file="f.c", function="f", summary="s", hint="h",
                                  tests=[], stub="return 0;")
    hollowed = exercises.hollow(source, exercise, "01-demo")
    assert "\treturn 0;\n}\n" in hollowed and "return a" not in hollowed


def test_an_exercise_names_a_function_or_a_span(tmp_path, monkeypatch):
    from lab import settings, stages
    (tmp_path / "09-demo").mkdir()
    (tmp_path / "09-demo" / "exercises.toml").write_text(
        '[[exercise]]\nname = "x"\nfile = "f"\nfunction = "f"\nspan = "s"\n'
        'summary = ""\nhint = ""\ntests = []\n')
    monkeypatch.setattr(settings, "EXERCISES_DIR", tmp_path)
    with pytest.raises(LabError, match="either function or span"):
        exercises.load(stages.Stage("09-demo", tmp_path))


BPF_PROGRAM = '''struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
} counts SEC(".maps");

SEC("len_limit")
int do_len_limit(struct __sk_buff *skb)
{
	if (skb->len > 256)
		return BPF_DROP;
	return BPF_OK;
}

char _license[] SEC("license") = "GPL";
'''


def test_a_bpf_program_is_hollowed_between_its_braces():
    # The SEC() annotation sits on the line above the function, and the map
    # definition before it has braces and semicolons of its own.
    exercise = exercises.Exercise(name="len_limit", file="x.c", function="do_len_limit",
                                  summary="drop long packets", hint="compare skb->len",
                                  tests=[], stub="return BPF_OK;")
    hollowed = exercises.hollow(BPF_PROGRAM, exercise, "03-lwt-bpf")
    assert "skb->len > 256" not in hollowed
    assert 'SEC("len_limit")\nint do_len_limit(struct __sk_buff *skb)\n{\n\t/*' in hollowed
    assert "\treturn BPF_OK;\n}\n\nchar _license[]" in hollowed
    assert hollowed.startswith(BPF_PROGRAM[:BPF_PROGRAM.index('SEC("len_limit")')])


def _exercise_data(tmp_path, monkeypatch, proof):
    from lab import settings, stages
    (tmp_path / "09-demo").mkdir()
    (tmp_path / "09-demo" / "exercises.toml").write_text(
        proof + '[[exercise]]\nname = "x"\nfile = "f.c"\nfunction = "f"\nsummary = ""\n'
        'hint = ""\ntests = ["kunit/demo/case_one", "selftest"]\n')
    monkeypatch.setattr(settings, "EXERCISES_DIR", tmp_path)
    return stages.Stage("09-demo", tmp_path)


def test_a_module_proof_must_hold_every_test_it_grades(tmp_path, monkeypatch):
    stage = _exercise_data(tmp_path, monkeypatch,
                           '[proof]\nmodule = "lib/demo_test.ko"\ntests = "kunit/demo/"\n')
    with pytest.raises(LabError, match=r"builds only lib/demo_test.ko.*x: selftest"):
        exercises.load(stage)


def test_a_module_proof_names_a_module(tmp_path, monkeypatch):
    stage = _exercise_data(tmp_path, monkeypatch,
                           '[proof]\nmodule = "lib/demo_test.o"\ntests = "kunit/demo/"\n')
    with pytest.raises(LabError, match=r"needs a module"):
        exercises.load(stage)


def test_stage_01_is_proven_by_its_kunit_module():
    from lab import stages
    loaded = exercises.load(stages.resolve("01"))
    assert loaded.proof.module == "kernel/bpf/bpf_lru_list_test.ko"
    assert all(t.startswith("kunit/bpf_lru_list/") for e in loaded.exercises for t in e.tests)
