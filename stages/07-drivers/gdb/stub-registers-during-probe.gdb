# i2c-stub's register file for the LT16 while lt16_probe() runs.
#
# lt16_sensor's first test, the probe test, seeds the stub's cells for address 0x4c (the
# power-on state: WHO_AM_I 0xa5, CONFIG with SHUTDOWN set, temperature 0)
# and writes "lt16 0x4c" to new_device. The walkthrough stops in
# i2c_device_probe(), the I2C core's probe, for that client only, loads the
# symbols of the two modules involved (i2c-stub and lt16) from the build
# with lx-symbols, and stops again at the entry of lt16_probe(). There
# it reads the stub's own array, struct stub_chip.words[], which no user
# space interface shows whole: one 16-bit cell per register, of which an
# SMBus byte read sees the low byte only. It lets lt16_probe() return and
# reads the cells again: the probe has cleared SHUTDOWN and changed
# nothing else. Each look is kept in $LAB_OUT as N-STEP.txt; the verdicts
# go to verdicts.txt.
#
# run: lt16_sensor
# expect: Breakpoint 1, i2c_device_probe \(dev=
# expect: client 0-004c "lt16" at 0x4c on i2c-0 "SMBus stub driver"
# expect: loading @0x[0-9a-f]+: (?!\S*lab-guest)\S+/drivers/hwmon/lt16\.ko
# expect: loading @0x[0-9a-f]+: (?!\S*lab-guest)\S+/drivers/i2c/i2c-stub\.ko
# expect: Breakpoint 2(\.1)?, lt16_probe \(client=
# expect: \$\d+ = \{72, 38, 39, 76, 104, 95, 0, 0, 0, 0\}
# expect: \$\d+ = \{0x5aa5, 0x1, 0x0, 0x0\}
# expect: 0x00 WHO_AM_I +cell 0x5aa5 +a byte read gives 0xa5
# expect: 0x01 CONFIG +cell 0x0001 +a byte read gives 0x01
# expect: Value returned is \$\d+ = 0
# expect: \$\d+ = \{0x5aa5, 0x0, 0x0, 0x0\}
# expect: 0x01 CONFIG +cell 0x0000 +a byte read gives 0x00
# expect: verdict: lt16_probe\(\) cleared SHUTDOWN \(CONFIG 0x01 -> 0x00\) and left the other 255 cells as they were

python
import os

from linux import utils

OUT = os.environ.get("LAB_OUT")
ADDR = 0x4c
NAMES = {0: "WHO_AM_I", 1: "CONFIG", 2: "TEMP_MSB", 3: "TEMP_LSB"}


def say(text, step=None):
    gdb.write(text + "\n")
    if OUT and step:
        with open(os.path.join(OUT, step + ".txt"), "a") as f:
            f.write(text + "\n")


def load_module_symbols():
    """lx-symbols, pointed at the build's object directory (that of vmlinux):
    its drivers/ and samples/ hold the .ko files with their debug info (the
    copies installed in the guest are stripped)."""
    obj = os.path.dirname(gdb.objfiles()[0].filename)
    gdb.execute(f"lx-symbols {obj}/drivers {obj}/samples")


client_ptr = gdb.lookup_type("struct i2c_client").pointer()


class ProbeOfLt16(gdb.Breakpoint):
    """i2c_device_probe() for the client at 0x4c only."""

    def stop(self):
        dev = gdb.parse_and_eval("dev")
        client = utils.container_of(dev, client_ptr, "dev")
        return int(client["addr"]) == ADDR and client["name"].string() == "lt16"


def cells():
    count = int(gdb.parse_and_eval("stub_chips_nr"))
    addrs = gdb.parse_and_eval("chip_addr")
    for i in range(count):
        if int(addrs[i]) == ADDR:
            words = gdb.parse_and_eval("stub_chips")[i]["words"]
            return [int(words[r]) for r in range(256)]
    raise gdb.GdbError(f"i2c-stub has no chip at {ADDR:#x}")


def show(step, title):
    words = cells()
    say(f"{step}: {title}", step)
    for reg in range(4):
        say(f"  {reg:#04x} {NAMES[reg]:<9} cell {words[reg]:#06x}  a byte read gives "
            f"{words[reg] & 0xff:#04x}", step)
    return words


def verdict(ok, good, bad):
    line = "verdict: " + (good if ok else "NOT AS DESIGNED: " + bad)
    say(line)
    if OUT:
        with open(os.path.join(OUT, "verdicts.txt"), "a") as f:
            f.write(line + "\n")


class Walk:
    def at_core_probe(self):
        client = utils.container_of(gdb.parse_and_eval("dev"), client_ptr, "dev")
        adapter = client["adapter"]
        say(f"client {client['dev']['kobj']['name'].string()} \"{client['name'].string()}\" "
            f"at {int(client['addr']):#x} on {adapter['dev']['kobj']['name'].string()} "
            f"\"{adapter['name'].string()}\"")
        load_module_symbols()

    def at_probe(self):
        self.before = show("1-probe-entry", "lt16_probe() entered")

    def after_probe(self):
        after = show("2-probe-returned", "lt16_probe() returned")
        changed = [r for r in range(256) if after[r] != self.before[r]]
        verdict(changed == [1] and self.before[1] & 0xff == 1 and after[1] & 0xff == 0,
                "lt16_probe() cleared SHUTDOWN (CONFIG 0x01 -> 0x00) and left the other "
                "255 cells as they were",
                f"the cells that changed: {[hex(r) for r in changed]}")


walk = Walk()
core_probe = ProbeOfLt16("i2c_device_probe")
end

continue
python core_probe.enabled = False
python walk.at_core_probe()
break lt16_probe
continue
backtrace 3
print chip_addr
print/x stub_chips[3].words[0]@4
python walk.at_probe()
# The breakpoint may have a second location inside lt16_probe(), where
# finish would stop: it has served.
delete 2
finish
print/x stub_chips[3].words[0]@4
python walk.after_probe()

delete
continue
