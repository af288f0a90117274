"""How an autopsy reads gdb's backtraces and an oops report. The texts
are in the form gdb 13 and a 6.1 kernel print them; test_autopsy.py
makes them for real, from broken kernels."""
from lab import autopsy

HUNG = """\
0xffffffff8140b513 in native_safe_halt () at ../arch/x86/include/asm/irqflags.h:52
lab-autopsy: threads

Thread 2 (Thread 1.2 (CPU#1 [halted ])):
#0  0xffffffff8140b513 in native_safe_halt () at ../arch/x86/include/asm/irqflags.h:52
#1  0xffffffff8140b716 in default_idle_call () at ../kernel/sched/idle.c:109
#2  do_idle () at ../kernel/sched/idle.c:323

Thread 1 (Thread 1.1 (CPU#0 [running])):
#0  0xffffffff81095a1e in virt_spin_lock (...) at ../arch/x86/include/asm/qspinlock.h:106
#1  native_queued_spin_lock_slowpath (...) at ../kernel/locking/qspinlock.c:326
#2  0xffffffff8140be8c in _raw_spin_lock (...) at ../kernel/locking/spinlock.c:154
#3  0xffffffff81117a20 in bpf_lru_list_pop_free_to_local (...) at ../kernel/bpf/bpf_lru_list.c:360
#4  bpf_common_lru_pop_free (...) at ../kernel/bpf/bpf_lru_list.c:499

Thread 3 (Thread 1.3 (CPU#2 [running])):
#0  0x0000000000401d2e in ?? ()
lab-autopsy: dmesg
[    2.028666] Run /init as init process
[Inferior 1 (process 1) detached]
"""


def test_each_vcpu_is_named_by_its_first_frame_outside_the_kernels_machinery():
    threads, dmesg = autopsy.read_gdb(HUNG)
    assert [autopsy.describe_vcpu(cpu, frames) for cpu, frames in threads] == [
        "vCPU 0: in bpf_lru_list_pop_free_to_local (kernel/bpf/bpf_lru_list.c:360), "
        "waiting in virt_spin_lock",
        "vCPU 1: idle",
        "vCPU 2: in user space"]
    assert dmesg == ["[    2.028666] Run /init as init process"]


def test_a_vcpu_only_in_machinery_is_named_by_where_it_stopped():
    frames = [autopsy.Frame("schedule", "kernel/sched/core.c:6600"),
              autopsy.Frame("ret_from_fork", "arch/x86/entry/entry_64.S:295")]
    assert autopsy.describe_vcpu(3, frames) == "vCPU 3: in schedule (kernel/sched/core.c:6600)"


OOPS = """\
[    1.004134] BUG: kernel NULL pointer dereference, address: 0000000000000013
[    1.008970] CPU: 0 PID: 35 Comm: kunit_try_catch Tainted: G                 N 6.1.192+ #19
[    1.275011] RIP: 0010:bpf_lru_pop_free+0x163/0x4dd
[    1.277500] Call Trace:
[    1.277600]  <TASK>
[    1.277700]  lt_try_pop+0x1a/0x30
[    1.277912]  ? kunit_try_catch_throw+0x1c/0x1c
[    1.278119]  kthread+0xb3/0xbb
[    1.278293]  </TASK>
[    1.278664] ---[ end trace 0000000000000000 ]---
[    1.278749] RIP: 0010:bpf_lru_pop_free+0x163/0x4dd
[    1.288202] Kernel panic - not syncing: Fatal exception
"""


def test_an_oops_trace_is_its_rip_then_its_callers_without_stack_leftovers():
    assert autopsy.trace_addresses(OOPS.splitlines(keepends=True)) == [
        ("bpf_lru_pop_free", 0x163, True), ("lt_try_pop", 0x1a, False),
        ("kthread", 0xb3, False)]


def test_paths_are_named_as_the_tree_names_them():
    assert autopsy.source_path("/lab/tree/.kbuild/../kernel/bpf/hashtab.c") == \
        "kernel/bpf/hashtab.c"
    assert autopsy.source_path("../include/linux/list.h") == "include/linux/list.h"


# A list check's report under CONFIG_BUG_ON_DATA_CORRUPTION, on x86: the
# BUG() is an invalid opcode, and only the panic that oops=panic makes
# of it says "Kernel panic", after the trace.
LIST_BUG = """\
[    4.211000] list_add corruption. next->prev should be prev (ffff888000d9bdc0), but was 0000000000000000. (next=ffff888000d9bdd0).
[    4.211100] ------------[ cut here ]------------
[    4.211200] kernel BUG at lib/list_debug.c:27!
[    4.211300] invalid opcode: 0000 [#1] PREEMPT SMP NOPTI
[    4.211400] RIP: 0010:__list_add_valid+0x47/0x89
[    4.211500] Call Trace:
[    4.211600]  <TASK>
[    4.211700]  bpf_lru_list_push_free+0x2c/0x50
[    4.211800]  </TASK>
[    4.211900] ---[ end trace 0000000000000000 ]---
[    4.212000] Kernel panic - not syncing: Fatal exception
"""


def test_a_bug_report_begins_at_kernel_bug_not_at_the_panic_after_it():
    lines = LIST_BUG.splitlines(keepends=True)
    start = autopsy.first_report(lines)
    assert "kernel BUG at lib/list_debug.c:27!" in lines[start]
    assert autopsy.trace_addresses(lines[start:]) == [
        ("__list_add_valid", 0x47, True), ("bpf_lru_list_push_free", 0x2c, False)]
