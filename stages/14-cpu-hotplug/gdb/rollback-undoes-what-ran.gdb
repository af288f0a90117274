# A setup that fails half-way, one step at a time: samples/cpuhp's module,
# loaded with fail_cpu=2, sets up its prepare state, whose startup runs
# for CPU 0, then CPU 1, and fails for CPU 2. The walkthrough stops in
# cpuhp_rollback_install() and reads what it is given, the failed CPU
# and the state, and how far each CPU's own state machine is: every
# CPU is online, past the prepare state. Then it stops at every teardown
# the rollback calls, and shows that they are those of CPUs 0 and 1,
# the CPUs whose startup ran, and of no other.
#
# run: modprobe cpuhp_sample fail_cpu=2; true
# expect: rollback: the startup failed on CPU 2, for state \d+ \(samples/cpuhp:prepare\)
# expect: CPU 0 is at state \d+ \(online\), CPU 1 at \d+ \(online\), CPU 2 at \d+ \(online\), CPU 3 at \d+ \(online\)
# expect: teardown of state \d+ for CPU 0
# expect: teardown of state \d+ for CPU 1
# expect: verdict: the rollback tore down CPUs 0 and 1, whose startup ran, and nothing else

python
import os

OUT = os.environ.get("LAB_OUT")
seen = {"teardowns": []}


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def value(expression):
    return int(gdb.parse_and_eval(expression))


def cpu_state(cpu):
    """The state CPU cpu's hotplug state machine has reached."""
    return value(f"((struct cpuhp_cpu_state *) ((unsigned long) &cpuhp_state "
                 f"+ __per_cpu_offset[{cpu}]))->state")


def state_name(state):
    return gdb.parse_and_eval(f"cpuhp_hp_states[{state}].name").string()


def rollback():
    failed, state = value("failedcpu"), value("state")
    seen["state"] = state
    say(f"rollback: the startup failed on CPU {failed}, for state {state} "
        f"({state_name(state)})")
    cpus = value("nr_cpu_ids")
    states = [cpu_state(cpu) for cpu in range(cpus)]
    online = value("CPUHP_ONLINE")
    described = [f"{s} (online)" if s == online else str(s) for s in states]
    say(f"CPU 0 is at state {described[0]}, "
        + ", ".join(f"CPU {cpu} at {d}" for cpu, d in enumerate(described) if cpu))


def teardown():
    cpu, state = value("cpu"), value("state")
    seen["teardowns"].append((cpu, state))
    say(f"teardown of state {state} for CPU {cpu}")


def verdict():
    if seen["teardowns"] == [(0, seen["state"]), (1, seen["state"])]:
        say("verdict: the rollback tore down CPUs 0 and 1, whose startup ran, and nothing else")


def stopped_in(function):
    try:
        return gdb.selected_frame().name() == function
    except gdb.error:  # the guest powered off
        return False
end

break cpuhp_rollback_install
continue
python rollback()
# Each teardown the rollback asks for. A prepare state's callbacks run
# on the CPU in control, so they are called from here, through
# cpuhp_issue_call(), and not on the CPU they are for.
break cpuhp_invoke_callback if !bringup && $_any_caller_is("cpuhp_rollback_install", 3)
continue
# Until the rollback is over: busybox's modprobe then tries the load a
# second time, with init_module(), and that second setup fails the
# same way.
python
while stopped_in("cpuhp_invoke_callback"):
    teardown()
    gdb.execute("continue")
verdict()
end
delete

# Let the module's load fail and the guest power off.
continue
