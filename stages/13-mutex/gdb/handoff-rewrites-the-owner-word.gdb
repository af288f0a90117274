# The owner word of a contended mutex, through a handoff: the KUnit case
# a_handoff_gives_the_lock_to_the_first_waiter holds a lock, has two
# threads go to sleep on it, asks for a handoff as a starving first
# waiter would, and unlocks. The walkthrough stops where that unlock
# enters its slow path, __mutex_unlock_slowpath(), and reads the word:
# the case's own task with WAITERS and HANDOFF, and the first waiter on
# the list. It stops again in the unlock's wake_up_q(), after the
# handoff and before anyone is woken:
# the word now names the first waiter, with WAITERS kept, HANDOFF gone
# and PICKUP set, waiting for that waiter to take what is already its.
#
# run: modprobe mutex_kunit; kunit-results mutex_owner
# expect: layout: struct mutex's owner at \+0, wait_list at \+\d+; struct mutex_waiter's task at \+\d+
# expect: before the handoff: the owner word names the case \(pid \d+\) with WAITERS\|HANDOFF; first on the wait list: pid \d+, then pid \d+
# expect: after the handoff: the owner word names the first waiter \(pid \d+\) with WAITERS\|PICKUP
# expect: verdict: the unlock handed the lock to the first waiter, kept WAITERS for the second and cleared HANDOFF

python
import os

OUT = os.environ.get("LAB_OUT")
FLAGS = {1: "WAITERS", 2: "HANDOFF", 4: "PICKUP"}
seen = {}


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def value(expression):
    return int(gdb.parse_and_eval(expression))


def word(lock):
    owner = value(f"((struct mutex *) {lock})->owner.counter") & (2**64 - 1)
    task, flags = owner & ~7, owner & 7
    names = "|".join(name for bit, name in FLAGS.items() if flags & bit) or "no flags"
    return value(f"((struct task_struct *) {task})->pid") if task else 0, names


def waiters(lock):
    """The pids on the lock's wait list, first first."""
    head = value(f"(unsigned long) &((struct mutex *) {lock})->wait_list")
    pids, node = [], value(f"(unsigned long) ((struct mutex *) {lock})->wait_list.next")
    while node != head and len(pids) < 8:
        pids.append(value(f"((struct mutex_waiter *) {node})->task->pid"))
        node = value(f"((struct list_head *) {node})->next")
    return pids


def offset(struct, member):
    return value(f"(unsigned long) &((struct {struct} *) 0)->{member}")


def layout():
    # The flags are macros, which the debug info does not keep: FLAGS
    # above copies kernel/locking/mutex.h.
    say(f"layout: struct mutex's owner at +{offset('mutex', 'owner')}, wait_list at "
        f"+{offset('mutex', 'wait_list')}; struct mutex_waiter's task at "
        f"+{offset('mutex_waiter', 'task')}")


def before():
    lock = value("(unsigned long) lock")
    seen["lock"] = lock
    pid, names = word(lock)
    seen["before"] = (pid, names)
    seen["waiters"] = waiters(lock)
    listed = ", then ".join(f"pid {p}" for p in seen["waiters"])
    say(f"before the handoff: the owner word names the case (pid {pid}) with {names}; "
        f"first on the wait list: {listed}")


def after():
    pid, names = word(seen["lock"])
    seen["after"] = (pid, names)
    say(f"after the handoff: the owner word names the first waiter (pid {pid}) with {names}")


def verdict():
    first = seen["waiters"][0] if seen["waiters"] else None
    if seen["before"][1] == "WAITERS|HANDOFF" and len(seen["waiters"]) == 2 \
            and seen["after"] == (first, "WAITERS|PICKUP"):
        say("verdict: the unlock handed the lock to the first waiter, kept WAITERS for "
            "the second and cleared HANDOFF")
end

python layout()
# An unlock that finds HANDOFF set: the case sets it by hand, and nothing
# else in a quiet guest starves a waiter long enough to ask for one.
break *__mutex_unlock_slowpath if (lock->owner.counter & 2) != 0
continue
python before()
delete
# The same unlock, on the same CPU, once the handoff is done and the lock
# released, and before the first waiter is woken.
python gdb.execute(f"break wake_up_q if $_thread == {gdb.selected_thread().num} && $_any_caller_is(\"__mutex_unlock_slowpath\", 1)")
continue
python after()
python verdict()
delete

# Let the suite finish; the guest powers off.
continue
