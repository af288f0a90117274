# Two lookups of uid-rule-selectors, stopped where the uid rule decides
# them. The rule, at preference 1000, sends uids 1000-1999 to table 100.
# The walkthrough stops in fib_rule_match() for that rule, first with the
# flow of `ip route get ... uid 1000`, then with that of uid 999, and shows
# the rule's selectors and the flow's fields that they are compared with.
# Then it follows the lookup to the next table it reads: fib_rule_match()
# returns no value that gdb could show once the compiler has inlined it
# into fib_rules_lookup(), but the next fib_table_lookup() shows the
# decision: table 100 when the rule matched, the main table (254) when
# it did not, and the walk went on to the next rule.
#
# run: uid-rule-selectors
# expect: rule pref 1000 -> table 100: uidrange 1000-1999, fwmark 0x0/0x0, iif 0, oif 0, flags 0x0
# expect: flow: uid 1000, mark 0x0, oif 0
# expect: next table read: 100
# expect: verdict: uid 1000 lies in 1000-1999: the rule matched and table 100 answers
# expect: flow: uid 999, mark 0x0, oif 0
# expect: next table read: 254
# expect: verdict: uid 999 lies outside 1000-1999: the rule refused, and the walk went on to the main table

python
import os

OUT = os.environ.get("LAB_OUT")


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def show_rule_and_flow():
    rule = gdb.parse_and_eval("rule")
    common = gdb.parse_and_eval("fl->u.__fl_common")
    first = int(rule["uid_range"]["start"]["val"])
    last = int(rule["uid_range"]["end"]["val"])
    say(f"rule pref {int(rule['pref'])} -> table {int(rule['table'])}: "
        f"uidrange {first}-{last}, fwmark {int(rule['mark']):#x}/{int(rule['mark_mask']):#x}, "
        f"iif {int(rule['iifindex'])}, oif {int(rule['oifindex'])}, flags {int(rule['flags']):#x}")
    uid = int(common["flowic_uid"]["val"])
    say(f"flow: uid {uid}, mark {int(common['flowic_mark']):#x}, oif {int(common['flowic_oif'])}")
    return uid, first, last


def follow(uid, first, last):
    table = int(gdb.parse_and_eval("tb->tb_id"))
    say(f"next table read: {table}")
    inside = first <= uid <= last
    if inside and table == 100:
        say(f"verdict: uid {uid} lies in {first}-{last}: the rule matched and table 100 answers")
    elif not inside and table == 254:
        say(f"verdict: uid {uid} lies outside {first}-{last}: the rule refused, and the walk "
            "went on to the main table")
    else:
        say(f"verdict: NOT AS DESIGNED: uid {uid}, range {first}-{last}, next table {table}")
end

# The uid rule, for the first lookup, uid 1000.
tbreak fib_rule_match if rule->pref == 1000 && fl->u.__fl_common.flowic_uid.val == 1000
continue
python seen = show_rule_and_flow()
tbreak fib_table_lookup if tb->tb_id != 255 && flp->__fl_common.flowic_uid.val == 1000
continue
python follow(*seen)

# The same rule, for uid 999, just below its range.
tbreak fib_rule_match if rule->pref == 1000 && fl->u.__fl_common.flowic_uid.val == 999
continue
python seen = show_rule_and_flow()
tbreak fib_table_lookup if tb->tb_id != 255 && flp->__fl_common.flowic_uid.val == 999
continue
python follow(*seen)

# Let the test finish; the guest powers off.
continue
