# lkdtm's CORRUPT_LIST_ADD, one step at a time: it adds an entry to an
# empty list on its stack, then points the list head's next at a small
# array of its own, as a stray write would, and adds a second entry.
# The walkthrough stops in __list_add_valid() for both additions, when
# the test calls it, reads the three pointers the check is given and the
# two links it compares, and shows which link the second addition finds
# broken: next->prev,
# read through the redirected next, is the array's second slot, NULL,
# not prev. Then the check reports it, and the kernel BUG()s in the
# writing task; the array is never written.
#
# run: lkdtm-selftest-ktap CORRUPT_LIST_ADD
# expect: layout: struct list_head's next at \+0, prev at \+8
# expect: addition 1: prev=head next=head: next->prev is prev, prev->next is next: sound
# expect: addition 2: prev=head next=target\[0\]: next->prev is 0x0, not prev: broken
# expect: BUG: report_bug\(\) for the task in __list_add_valid\(\); the target holds 0x0 and 0x0
# expect: verdict: the second addition reaches __list_add_valid\(\) with next->prev broken, and the kernel BUG\(\)s before anything is written through it

python
import os

OUT = os.environ.get("LAB_OUT")
seen = []


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def value(expression):
    return int(gdb.parse_and_eval(expression))


def layout():
    say(f"layout: struct list_head's next at "
        f"+{value('(unsigned long) &((struct list_head *) 0)->next')}, prev at "
        f"+{value('(unsigned long) &((struct list_head *) 0)->prev')}")


def name(address, frame):
    """Where a pointer points, in the words of lkdtm's test."""
    places = {frame["head"]: "head", frame.get("target"): "target[0]"}
    return places.get(address, hex(address))


def addition(frame):
    prev, next_ = value("(unsigned long) prev"), value("(unsigned long) next")
    next_prev = value("(unsigned long) next->prev")
    prev_next = value("(unsigned long) prev->next")
    where = f"prev={name(prev, frame)} next={name(next_, frame)}"
    if next_prev != prev:
        verdict = f"next->prev is {hex(next_prev)}, not prev: broken"
    elif prev_next != next_:
        verdict = f"prev->next is {hex(prev_next)}, not next: broken"
    else:
        verdict = "next->prev is prev, prev->next is next: sound"
    seen.append(verdict)
    say(f"addition {len(seen)}: {where}: {verdict}")


def bugged(frame):
    """In report_bug(), which the invalid opcode of BUG() leads to."""
    where = gdb.execute("info symbol bugaddr", to_string=True).split()[0]
    slots = [value(f"((unsigned long *) {frame['target']})[{i}]") for i in (0, 1)]
    seen.append((where, slots))
    say(f"BUG: report_bug() for the task in {where}(); the target holds "
        f"{hex(slots[0])} and {hex(slots[1])}")


def verdict():
    if len(seen) == 3 and seen[0].endswith("sound") and "next->prev" in seen[1] \
            and seen[1].endswith("broken") and seen[2] == ("__list_add_valid", [0, 0]):
        say("verdict: the second addition reaches __list_add_valid() with next->prev "
            "broken, and the kernel BUG()s before anything is written through it")
end

python layout()
break lkdtm_CORRUPT_LIST_ADD
continue
delete
# lkdtm's list_add() is inlined into the test: gdb counts __list_add()
# and list_add() as the check's callers, and the test comes after them.
# No other list of the kernel is checked from there.
# The breakpoint is on the function's first instruction: gdb's choice for
# "__list_add_valid", the first address of the first line, lies in the
# report of a NULL prev, out of the way of a sound list.
break *__list_add_valid if $_any_caller_is("lkdtm_CORRUPT_LIST_ADD", 3)
continue
# The good addition: prev is the test's head, and so is next.
python frame = {"head": value("(unsigned long) prev")}
python addition(frame)
continue
# The corrupted one: next is where the head's next was pointed.
python frame["target"] = value("(unsigned long) next")
python addition(frame)
delete
break *report_bug
continue
python bugged(frame)
python verdict()
delete

# The check reports and BUG()s; the selftest sees the report; the guest
# powers off.
continue
