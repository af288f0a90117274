# The example of include/uapi/linux/bpf.h, as cgroup_effective builds
# it: a chain L1/L2/L3/L4/L5 with programs A and B on L1 (MULTI), C on
# L2 (OVERRIDE), D on L3 (MULTI), E on L4 (OVERRIDE) and F on L5 (no
# flag). The test sends three datagrams from a socket made in L5: with
# every program attached, after F is detached, and after D and E are
# detached too. At each one the walkthrough stops where the egress hook
# runs the socket's cgroup's programs, and shows what the kernel holds:
# every cgroup of the chain with its flags and the programs attached to
# it, and then the effective array that the datagram meets.
#
# run: cgroup_effective
# expect: send 1 from L5: L5 NONE \[F\], L4 OVERRIDE \[E\], L3 MULTI \[D\], L2 OVERRIDE \[C\], L1 MULTI \[A B\]
# expect: send 1 runs: F D A B
# expect: send 2 from L5: L5 - \[\], L4 OVERRIDE \[E\]
# expect: send 2 runs: E D A B
# expect: send 3 from L5: L5 - \[\], L4 - \[\], L3 - \[\], L2 OVERRIDE \[C\], L1 MULTI \[A B\]
# expect: send 3 runs: C A B
# expect: verdict: the array held each cgroup's programs in the order they run, and no others

python
import os

OUT = os.environ.get("LAB_OUT")
EGRESS = int(gdb.parse_and_eval("CGROUP_INET_EGRESS"))
FLAGS = {0: "NONE", 1: "OVERRIDE", 2: "MULTI"}
WANTED = ["F D A B", "E D A B", "C A B"]
seen = []


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def prog_name(prog):
    return prog["aux"]["name"].string()


def attached(cgrp):
    """The names of the programs on cgrp's egress list, in list order."""
    names = []
    node = cgrp["bpf"]["progs"][EGRESS]["first"]
    entry_type = gdb.lookup_type("struct bpf_prog_list").pointer()
    while node:
        prog = node.cast(entry_type)["prog"]
        if prog:
            names.append(prog_name(prog))
        node = node["next"]
    return names


def chain(cgrp):
    """'L5 NONE [F], L4 OVERRIDE [E], ...' from cgrp up to L1."""
    cgroup_type = gdb.lookup_type("struct cgroup").pointer()
    parts = []
    while cgrp and cgrp["kn"]["name"].string().startswith("L"):
        names = attached(cgrp)
        mode = FLAGS.get(int(cgrp["bpf"]["flags"][EGRESS]), "?") if names else "-"
        parts.append(f"{cgrp['kn']['name'].string()} {mode} [{' '.join(names)}]")
        cgrp = cgrp["self"]["parent"].cast(cgroup_type)
    return ", ".join(parts)


def effective(cgrp):
    array = cgrp["bpf"]["effective"][EGRESS]
    names, i = [], 0
    while array["items"][i]["prog"]:
        names.append(prog_name(array["items"][i]["prog"]))
        i += 1
    return " ".join(names)


def sent(n):
    cgrp = gdb.parse_and_eval("sk->sk_cgrp_data.cgroup")
    say(f"send {n} from L5: {chain(cgrp)}")
    runs = effective(cgrp)
    say(f"send {n} runs: {runs}")
    seen.append(runs)
    if seen == WANTED:
        say("verdict: the array held each cgroup's programs in the order they run, "
            "and no others")
end

# Only the datagrams of the test's socket in L5: every other egress
# packet passes the breakpoint's condition by.
break __cgroup_bpf_run_filter_skb if atype == CGROUP_INET_EGRESS && $_streq(sk->sk_cgrp_data.cgroup->kn->name, "L5")
continue
python sent(1)
continue
python sent(2)
continue
python sent(3)
delete

# Let the tests finish; the guest powers off.
continue
