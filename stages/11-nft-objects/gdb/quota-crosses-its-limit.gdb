# A quota object of 1000 bytes meets fifteen datagrams of 100 bytes:
# nft-quota-objects' until_lets_through_exactly_the_quota, whose quota is
# q_until. The walkthrough stops in nft_quota_obj_eval() for each of
# them, reads what the quota had consumed and the datagram's length,
# lets the function return, and reads again: what it consumed now, the
# verdict it left in the rule's registers, and its depleted flag. The
# tenth datagram brings the total to exactly 1000 bytes: it still
# matches, and it is the one that sets the flag and has the kernel
# announce the quota as used up. From the eleventh on the quota breaks
# the rule, and still counts every byte: 1500 after the fifteenth,
# though nft never shows more than 1000.
#
# run: nft-quota-objects
# expect: layout: struct nft_object's data at \+\d+, struct nft_quota's consumed at \+\d+
# expect: datagram 1 to q_until: consumed 0 \+ 100 = 100 of 1000 bytes: matches \(NFT_CONTINUE\)
# expect: datagram 9 to q_until: consumed 800 \+ 100 = 900 of 1000 bytes: matches \(NFT_CONTINUE\)
# expect: datagram 10 to q_until: consumed 900 \+ 100 = 1000 of 1000 bytes: matches \(NFT_CONTINUE\); depleted flag set: the quota is announced as used up
# expect: datagram 11 to q_until: consumed 1000 \+ 100 = 1100 of 1000 bytes: breaks the rule \(NFT_BREAK\)
# expect: datagram 15 to q_until: consumed 1400 \+ 100 = 1500 of 1000 bytes: breaks the rule \(NFT_BREAK\)
# expect: verdict: 10 datagrams matched, the 10th reached the quota and announced it once, 5 broke the rule, and all 1500 bytes were counted

python
import os

OUT = os.environ.get("LAB_OUT")
NFT_CONTINUE, NFT_BREAK = -1, -2
DEPLETED = 1 << 1  # NFT_QUOTA_DEPLETED_BIT, nft_quota.c
seen = []
state = {}


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def offset(struct, member):
    return int(gdb.parse_and_eval(f"(unsigned long) &((struct {struct} *) 0)->{member}"))


def quota_at(address):
    return gdb.parse_and_eval(f"(struct nft_quota *) {address}").dereference()


def layout():
    # Where a kprobe's fetch argument finds the consumed bytes of a quota
    # object: +data(obj) then +consumed (a pointer to an atomic64_t).
    say(f"layout: struct nft_object's data at +{offset('nft_object', 'data')}, "
        f"struct nft_quota's consumed at +{offset('nft_quota', 'consumed')}")


def entered():
    quota = gdb.parse_and_eval("(struct nft_quota *) obj->data")
    state["quota"] = int(quota)
    state["regs"] = int(gdb.parse_and_eval("regs"))
    state["before"] = int(quota["consumed"].dereference()["counter"])
    state["flags"] = int(quota["flags"])
    state["len"] = int(gdb.parse_and_eval("pkt->skb->len"))
    state["size"] = int(quota["quota"]["counter"])


def returned():
    quota = quota_at(state["quota"])
    after = int(quota["consumed"].dereference()["counter"])
    flags = int(quota["flags"])
    # verdict.code is a u32; NFT_CONTINUE and NFT_BREAK are negative.
    code = int(gdb.parse_and_eval(f"(int) ((struct nft_regs *) {state['regs']})->verdict.code"))
    verdict = {NFT_CONTINUE: "matches (NFT_CONTINUE)",
               NFT_BREAK: "breaks the rule (NFT_BREAK)"}.get(code, f"verdict code {code}")
    announced = bool(flags & DEPLETED) and not state["flags"] & DEPLETED
    line = (f"datagram {len(seen) + 1} to q_until: consumed {state['before']} + "
            f"{state['len']} = {after} of {state['size']} bytes: {verdict}")
    if announced:
        line += "; depleted flag set: the quota is announced as used up"
    say(line)
    seen.append((code, announced, after))


def verdict():
    matched = [i + 1 for i, (code, _, _) in enumerate(seen) if code == NFT_CONTINUE]
    broke = [i + 1 for i, (code, _, _) in enumerate(seen) if code == NFT_BREAK]
    announced = [i + 1 for i, (_, flag, _) in enumerate(seen) if flag]
    if matched == list(range(1, 11)) and broke == list(range(11, 16)) \
            and announced == [10] and seen[-1][2] == 1500:
        say("verdict: 10 datagrams matched, the 10th reached the quota and announced it "
            "once, 5 broke the rule, and all 1500 bytes were counted")
end

python layout()
# Only the quota of the boundary test: the other tests' quotas have
# names of their own.
break nft_quota_obj_eval if $_streq(obj->key.name, "q_until")
set $datagram = 1
while $datagram <= 15
  continue
  python entered()
  finish
  python returned()
  set $datagram = $datagram + 1
end
python verdict()
delete

# Let the tests finish; the guest powers off.
continue
