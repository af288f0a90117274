"""Hollowing works on any C function in kernel brace style, including a BPF
program whose SEC() annotation sits on the line above it and whose file
defines maps with braces and semicolons of their own."""
from types import SimpleNamespace

from lab import exercises

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
    exercise = SimpleNamespace(name="len_limit", function="do_len_limit",
                               summary="drop long packets", hint="compare skb->len",
                               stub="return BPF_OK;")
    hollowed = exercises.hollow(BPF_PROGRAM, exercise, "03-lwt-bpf")
    assert "skb->len > 256" not in hollowed
    assert 'SEC("len_limit")\nint do_len_limit(struct __sk_buff *skb)\n{\n\t/*' in hollowed
    assert "\treturn BPF_OK;\n}\n\nchar _license[]" in hollowed
    assert hollowed.startswith(BPF_PROGRAM[:BPF_PROGRAM.index("SEC(\"len_limit\")")])
