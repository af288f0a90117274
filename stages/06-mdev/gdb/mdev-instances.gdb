# The mdev parent, its instances and mcount's state for each, seen from a
# write that reaches the driver.
#
# mdev_mcount_test runs all its tests. instances_count_independently is
# the first to make a second instance: it writes instance A (UUID ...0a)
# five times, creates instance B (...0b) and writes B once.
# vfio_device_fops_write() is VFIO's write() for every device file
# descriptor; the walkthrough stops there at the first write to B, with a
# condition on the name of the device the file descriptor belongs to. From the file descriptor it finds the vfio_device, its mdev instance
# and its parent; from the mdev core's own list (mdev_list, which nothing
# in sysfs shows) every instance, its type, its parent's instance budget
# and mcount's struct mcount_state. It lets the write finish and looks
# again: B has counted one write, A still has its five. mcount is a
# module: lx-symbols loads its symbols from the build, so that gdb knows
# struct mcount_state. Each look is kept in $LAB_OUT as
# N-STEP.txt; the verdicts go to verdicts.txt.
#
# run: mdev_mcount_test
# expect: Breakpoint 1, vfio_device_fops_write \(filep=
# expect: loading @0x[0-9a-f]+: (?!\S*lab-guest)\S+/samples/vfio-mdev/mcount\.ko
# expect: \$\d+ = 0x[0-9a-f]+ "6d636f75-6e74-4000-8000-", '0' <repeats 11 times>, "b"
# expect: uuid = \{
# expect: available_instances = \{
# expect: this write goes to instance 6d636f75-6e74-4000-8000-00000000000b
# expect: parent mcount \(class mcount\): type mcount-1, 2 of 4 instances left
# expect: instance 6d636f75-6e74-4000-8000-00000000000a +type mcount-1 +open 1 +writes 5
# expect: instance 6d636f75-6e74-4000-8000-00000000000b +type mcount-1 +open 1 +writes 0
# expect: Value returned is \$\d+ = 4
# expect: instance 6d636f75-6e74-4000-8000-00000000000b +type mcount-1 +open 1 +writes 1
# expect: verdict: the write to instance \S+0b counted in its own mcount_state \(0 -> 1\); instance \S+0a kept its 5

python
import os

from linux import lists, utils

OUT = os.environ.get("LAB_OUT")


def say(text, step=None):
    gdb.write(text + "\n")
    if OUT and step:
        with open(os.path.join(OUT, step + ".txt"), "a") as f:
            f.write(text + "\n")


def uuid(mdev):
    """An instance is named by its UUID."""
    return mdev["dev"]["kobj"]["name"].string()


def load_module_symbols():
    """lx-symbols, pointed at the build's object directory (that of vmlinux):
    its drivers/ and samples/ hold the .ko files with their debug info (the
    copies installed in the guest are stripped)."""
    obj = os.path.dirname(gdb.objfiles()[0].filename)
    gdb.execute(f"lx-symbols {obj}/drivers {obj}/samples")


mdev_ptr = gdb.lookup_type("struct mdev_device").pointer()


def instances():
    head = gdb.parse_and_eval("mdev_list")
    found = [utils.container_of(node, mdev_ptr, "next") for node in lists.list_for_each(head.address)]
    return sorted(found, key=uuid)


def show(step, title):
    state_ptr = gdb.lookup_type("struct mcount_state").pointer()
    counts = {}
    say(f"{step}: {title}", step)
    parents = []
    for mdev in instances():
        parent = mdev["type"]["parent"]
        if int(parent) not in [int(p) for p in parents]:
            parents.append(parent)
    for parent in parents:
        dev = parent["dev"]
        types = ", ".join(parent["types"][i]["kobj"]["name"].string()
                          for i in range(int(parent["nr_types"])))
        driver = parent["mdev_driver"]
        say(f"parent {dev['kobj']['name'].string()} (class {dev['class']['name'].string()}): "
            f"type {types}, {int(parent['available_instances']['counter'])} of "
            f"{int(driver['max_instances'])} instances left", step)
    for mdev in instances():
        state = mdev["dev"]["driver_data"].cast(state_ptr)
        writes = int(state["writes"]["counter"])
        counts[uuid(mdev)] = writes
        say(f"  instance {uuid(mdev)}  type {mdev['type']['kobj']['name'].string()}  "
            f"open {int(state['vdev']['open_count'])}  writes {writes}", step)
    return counts


def verdict(ok, good, bad):
    line = "verdict: " + (good if ok else "NOT AS DESIGNED: " + bad)
    say(line)
    if OUT:
        with open(os.path.join(OUT, "verdicts.txt"), "a") as f:
            f.write(line + "\n")


class Walk:
    def at_write(self):
        vdev = gdb.parse_and_eval("(struct vfio_device *)filep->private_data")
        mdev = utils.container_of(vdev["dev"], mdev_ptr, "dev")
        self.target = uuid(mdev)
        say(f"this write goes to instance {self.target}", "1-before")
        self.before = show("1-before", "vfio_device_fops_write() entered, the register not yet written")

    def after_write(self):
        after = show("2-after", "vfio_device_fops_write() returned")
        others = [u for u in after if u != self.target]
        ok = (after[self.target] == self.before[self.target] + 1
              and all(after[u] == self.before[u] for u in others))
        other = others[0] if others else "none"
        verdict(ok, f"the write to instance {self.target} counted in its own mcount_state "
                f"({self.before[self.target]} -> {after[self.target]}); instance {other} kept "
                f"its {after.get(other)}",
                f"before {self.before}, after {after}")


walk = Walk()
end

break vfio_device_fops_write if $_streq(((struct vfio_device *)filep->private_data)->dev->kobj.name, "6d636f75-6e74-4000-8000-00000000000b")
continue
backtrace 2
python load_module_symbols()
print ((struct vfio_device *)filep->private_data)->dev->kobj.name
print *(struct mdev_device *)((struct vfio_device *)filep->private_data)->dev
print *$.type->parent
python walk.at_write()
finish
python walk.after_write()

delete
continue
