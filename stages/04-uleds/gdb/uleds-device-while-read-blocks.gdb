# struct uleds_device while a read() blocks, and after the write that
# wakes it.
#
# The guest runs lab-uleds-walk (stages/04-uleds/guest/usr/bin): uledmon
# registers the LED walk:blue:gdb, reads the brightness it had at
# registration and blocks in its next read(). Then the script writes 42 to
# the LED's brightness. The LED core calls the driver's brightness_set,
# uleds_brightness_set(), where gdb stops: uledmon still sleeps on the
# device's wait queue, new_data is false, brightness is 0. gdb prints the
# uleds_device, then walks the wait queue to the task that waits on it.
# After `finish` (back in the LED core), brightness is 42, new_data is true and the queue is
# empty: the wake-up took uledmon's entry off it.
#
# The finish runs with scheduler-locking on, so that only this vCPU runs:
# otherwise the woken uledmon may run its read() on another vCPU before
# the finish stops, and clear new_data before gdb looks (a real race, seen
# once in CI). QEMU's gdb stub honours a vCont that resumes a single vCPU. Each dump is kept in
# $LAB_OUT (1-blocked.txt, 2-woken.txt); the guest adds uledmon-walk.txt.
#
# run: lab-uleds-walk
# expect: Breakpoint 1, uleds_brightness_set \(led_cdev=0x[0-9a-f]+, brightness=42\)
# expect: uleds_device walk:blue:gdb \(max_brightness 100\): state ULEDS_STATE_REGISTERED, brightness 0, new_data false
# expect: waitq: 1 waiter: uledmon \(pid \d+\), sleeping \(TASK_INTERRUPTIBLE\), woken by autoremove_wake_function
# expect: (?m)^\w+ \(.*\) at \S+/drivers/leds/led-(class|core)\.c:\d+$
# expect: uleds_device walk:blue:gdb \(max_brightness 100\): state ULEDS_STATE_REGISTERED, brightness 42, new_data true
# expect: waitq: 0 waiters
# expect: verdict: the write woke the blocked reader: brightness 0 -> 42, new_data false -> true, 1 -> 0 waiters

python
import os

from linux import utils

uleds_ptr = gdb.lookup_type("struct uleds_device").pointer()
wait_entry_ptr = gdb.lookup_type("struct wait_queue_entry").pointer()
TASK_STATES = {0: "running (TASK_RUNNING)", 1: "sleeping (TASK_INTERRUPTIBLE)",
               2: "sleeping (TASK_UNINTERRUPTIBLE)"}


def say(text):
    gdb.write(text + "\n")


def dump(udev):
    """The uleds_device and who waits on it, as lines of text."""
    d = udev.dereference()
    lines = [f"uleds_device {d['user_dev']['name'].string()} "
             f"(max_brightness {int(d['user_dev']['max_brightness'])}): "
             f"state {d['state']}, brightness {int(d['brightness'])}, "
             f"new_data {'true' if d['new_data'] else 'false'}"]
    head = d["waitq"]["head"]
    waiters = []
    node = head["next"]
    while int(node) != int(head.address):
        entry = utils.container_of(node, wait_entry_ptr, "entry")
        task = entry["private"].cast(gdb.lookup_type("struct task_struct").pointer())
        func = str(entry["func"]).split("<")[-1].rstrip(">") if "<" in str(entry["func"]) \
            else str(entry["func"])
        state = TASK_STATES.get(int(task["__state"]), f"state {int(task['__state'])}")
        waiters.append(f"{task['comm'].string()} (pid {int(task['pid'])}), {state}, "
                       f"woken by {func}")
        node = node["next"]
    lines.append(f"waitq: {len(waiters)} waiter{'s' * (len(waiters) != 1)}"
                 + "".join(f": {w}" for w in waiters))
    return lines


class Walk:
    def __init__(self):
        self.out = os.environ.get("LAB_OUT")
        self.udev = None
        self.seen = {}

    def snapshot(self, step):
        lines = dump(self.udev)
        for line in lines:
            say(line)
        self.seen[step] = self.udev.dereference()["brightness"], lines
        if self.out:
            with open(os.path.join(self.out, f"{step}.txt"), "w") as f:
                f.write("\n".join(lines) + "\n")
        return lines

    def at_set(self):
        cdev = gdb.parse_and_eval("led_cdev")
        self.udev = utils.container_of(cdev, uleds_ptr, "led_cdev")
        gdb.set_convenience_variable("udev", self.udev)
        self.before = self.snapshot("1-blocked")
        self.before_waiters = int(self.udev["waitq"]["head"]["next"]) != \
            int(self.udev["waitq"]["head"].address)

    def after_set(self):
        after = self.snapshot("2-woken")
        d = self.udev.dereference()
        woke = (self.before[0].endswith("brightness 0, new_data false")
                and self.before[1].startswith("waitq: 1 waiter")
                and int(d["brightness"]) == 42 and bool(d["new_data"])
                and after[1] == "waitq: 0 waiters")
        line = ("verdict: the write woke the blocked reader: brightness 0 -> 42, "
                "new_data false -> true, 1 -> 0 waiters" if woke else
                "verdict: NOT AS DESIGNED: " + " / ".join(self.before + after))
        say(line)
        if self.out:
            with open(os.path.join(self.out, "verdicts.txt"), "w") as f:
                f.write(line + "\n")


walk = Walk()
end

break uleds_brightness_set if brightness == 42
continue
python walk.at_set()
print $udev->user_dev
set scheduler-locking on
finish
set scheduler-locking off
python walk.after_set()

delete
continue
