# One vfree_atomic(), one step at a time: the KUnit case
# a_freed_area_is_unmapped_soon_after frees an area on CPU 0 with
# preemption off. The walkthrough stops in vfree_atomic() for that area
# (the case fills it with 0x5a), reads who frees it and on which
# CPU, and that CPU's list of deferred frees. It stops again in
# free_work(), and reads who runs it and what is on the list: the area.
# It stops a third time in __vunmap() for that area, called by
# free_work() in the worker.
#
# run: modprobe vfree_atomic_kunit; kunit-results vfree_atomic
# expect: layout: struct vfree_deferred's list at \+0, wq at \+\d+
# expect: vfree_atomic\(\) of the area on CPU 0, by kunit_try_catch \(pid \d+\); CPU 0's deferred list is empty
# expect: free_work\(\) on CPU 0, by kworker/0:\d+ \(pid \d+\), a workqueue worker; CPU 0's deferred list starts with the area
# expect: __vunmap\(\) of the area, called by free_work\(\), by kworker/0:\d+
# expect: verdict: the area freed by kunit_try_catch with preemption off was unmapped later by a workqueue worker, from the list of the CPU it was freed on

python
import os

OUT = os.environ.get("LAB_OUT")
seen = {}
PF_WQ_WORKER = 0x20


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def value(expression):
    return int(gdb.parse_and_eval(expression))


def cpu():
    # QEMU's gdb stub gives one thread per vCPU, numbered from 1.
    return gdb.selected_thread().num - 1


def first_deferred(n):
    return value(f"(unsigned long) ((struct vfree_deferred *) ((unsigned long) "
                 f"&vfree_deferred + __per_cpu_offset[{n}]))->list.first")


def task():
    current = gdb.parse_and_eval("$lx_current()")
    return current["comm"].string(), int(current["pid"]), int(current["flags"])


def layout():
    say("layout: struct vfree_deferred's list at "
        f"+{value('(unsigned long) &((struct vfree_deferred *) 0)->list')}, wq at "
        f"+{value('(unsigned long) &((struct vfree_deferred *) 0)->wq')}")


def at_vfree_atomic():
    seen["area"] = value("(unsigned long) addr")
    seen["cpu"] = cpu()
    comm, pid, _ = task()
    seen["freer"] = comm
    first = first_deferred(seen["cpu"])
    listed = "empty" if first == 0 else f"starting at {first:#x}"
    say(f"vfree_atomic() of the area on CPU {seen['cpu']}, by {comm} (pid {pid}); "
        f"CPU {seen['cpu']}'s deferred list is {listed}")


def at_free_work():
    comm, pid, flags = task()
    n = cpu()
    worker = "a workqueue worker" if flags & PF_WQ_WORKER else "not a workqueue worker"
    first = first_deferred(n)
    what = "the area" if first == seen["area"] else f"{first:#x}"
    seen["worker_cpu"], seen["worker"] = n, comm
    seen["worker_flagged"] = bool(flags & PF_WQ_WORKER)
    say(f"free_work() on CPU {n}, by {comm} (pid {pid}), {worker}; "
        f"CPU {n}'s deferred list starts with {what}")


def at_vunmap():
    caller = gdb.selected_frame().older().name()
    comm, _, _ = task()
    seen["unmapper"], seen["caller"] = comm, caller
    say(f"__vunmap() of the area, called by {caller}(), by {comm}")


def verdict():
    if seen.get("caller") == "free_work" and seen.get("worker_flagged") \
            and seen.get("worker_cpu") == seen.get("cpu") and seen.get("unmapper") == seen.get("worker"):
        say(f"verdict: the area freed by {seen['freer']} with preemption off was unmapped later "
            "by a workqueue worker, from the list of the CPU it was freed on")
end

python layout()
# The case's area is four pages of 0x5a; a free of anything else, by
# the rest of the kernel, is let through.
break vfree_atomic if addr != 0 && *((unsigned char *) addr + 8) == 0x5a
continue
python at_vfree_atomic()
delete
python gdb.execute(f"break free_work if $_thread == {seen['cpu'] + 1}")
continue
python at_free_work()
delete
python gdb.execute(f"break __vunmap if addr == {seen['area']}")
continue
python at_vunmap()
python verdict()
delete

# Let the suite finish; the guest powers off.
continue
