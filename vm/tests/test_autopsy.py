"""A guest that hangs or crashes gets an autopsy that names the function
and line to look at. Each test breaks the LRU list the way a student
might, in the second workshop, from the stage the guest tier left in the
first (so the build is a recompile of one file and a relink), and runs
the LRU selftest on it."""
import os
from pathlib import Path

import pytest

from lab import workflow
from lab.errors import LabError
from lab.tree import KernelTree

pytestmark = pytest.mark.kernel

LRU = "kernel/bpf/bpf_lru_list.c"
# The common LRU refills a CPU's local free list under the global list's
# lock; test_lru_map's first update gets there.
REFILL = "bpf_lru_list_pop_free_to_local(struct bpf_lru *lru,"
LOCKED = "\traw_spin_lock(&l->lock);\n"


def broken_kernel(insert):
    """A workshop with `insert` added after the refill's raw_spin_lock,
    built; and the number of the inserted line."""
    tested = KernelTree(Path(os.environ.get("LAB_TEST_TREE", "/nonexistent")))
    if not tested.exists():
        pytest.fail("LAB_TEST_TREE must name the kernel tree make check built in")
    stage = tested.current_stage()
    if stage is None or stage.number < "01":
        pytest.skip("the LRU selftest arrives with stage 01")
    tree = KernelTree().reset_workshop(tested.git("rev-parse", "HEAD").stdout.strip(),
                                       number=2)
    source = (tree.path / LRU).read_text()
    at = source.index(LOCKED, source.index(REFILL)) + len(LOCKED)
    (tree.path / LRU).write_text(source[:at] + insert + source[at:])
    line = source[:at].count("\n") + 1
    work = workflow.Work(tree, stage)
    workflow.build_kernel(work, quiet=True)
    return work, line


def run_lru_test(work, timeout):
    with pytest.raises(LabError) as failed:
        workflow.run_command(work, "test_lru_map", timeout=timeout)
    autopsy = workflow.results_dir(work) / "run" / "autopsy.txt"
    assert autopsy.exists(), str(failed.value)
    return str(failed.value), autopsy.read_text()


def test_a_lock_taken_twice_hangs_and_the_autopsy_names_the_second_lock():
    work, line = broken_kernel(LOCKED)
    # Where test_lru_map runs decides who reports the hang. On the CPU that
    # keeps jiffies, with its interrupts off in the spinning lock, time
    # stops for the kernel and no stall detector fires: only the timeout
    # ends the guest. On another CPU, RCU's stall detector reports it first.
    message, autopsy = run_lru_test(work, timeout=40)
    assert "did not finish within 40 s" in message or \
        "the kernel reported a hang: rcu: INFO: rcu_sched detected stalls" in message, message
    spinning = f"in bpf_lru_list_pop_free_to_local ({LRU}:{line}), waiting in "
    assert spinning in message, message
    assert "vCPU 0:" in autopsy and "vCPU 1:" in autopsy
    assert "The kernel log's last lines:" in autopsy


def test_a_null_dereference_crashes_and_the_autopsy_decodes_its_line():
    work, line = broken_kernel("\tnode = NULL;\n\tnode->ref = 1;\n")
    message, autopsy = run_lru_test(work, timeout=120)
    assert "the guest crashed: " in message and "NULL pointer dereference" in message
    assert f"in bpf_lru_list_pop_free_to_local ({LRU}:{line + 1})" in message, message
    assert "RIP: " in autopsy and f"{LRU}:{line + 1}" in autopsy
