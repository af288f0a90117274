# One packet of srv6-end, stopped at the End SID fc00:e::e each time End
# handles it. Its segments are [sr-b, SID, SID] with two left, so the
# SID is also its next segment, and sr-e runs End on it twice. At each
# input_action_end() the walkthrough shows the SRH as it arrived; at the
# seg6_lookup_nexthop() that follows, the same header once End moved it
# on: segments_left one less, and the destination the segment it now
# points at. The packet is the one whose SRH carries tag 3.
#
# run: srv6-end
# expect: End 1 receives: dst fc00:e::e, segments_left 2 of \[fd00:b::2, fc00:e::e, fc00:e::e\]
# expect: End 1 routes: dst fc00:e::e, segments_left 1
# expect: End 2 receives: dst fc00:e::e, segments_left 1
# expect: End 2 routes: dst fd00:b::2, segments_left 0
# expect: verdict: each End took one segment off and made segments\[segments_left\] the destination

python
import ipaddress
import os

OUT = os.environ.get("LAB_OUT")


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def address(in6):
    raw = bytes(int(in6["in6_u"]["u6_addr8"][i]) for i in range(16))
    return str(ipaddress.IPv6Address(raw))


def packet():
    """(destination, segments_left, [segments]) of the packet at hand."""
    head = gdb.parse_and_eval("skb->head")
    nh = int(gdb.parse_and_eval("skb->network_header"))
    ip6 = (head + nh).cast(gdb.lookup_type("struct ipv6hdr").pointer()).dereference()
    srh = (head + nh + 40).cast(gdb.lookup_type("struct ipv6_sr_hdr").pointer()).dereference()
    segs = [address(srh["segments"][i]) for i in range(int(srh["first_segment"]) + 1)]
    return address(ip6["daddr"]), int(srh["segments_left"]), segs


arrived = {}
moved_on = []


def received(n):
    arrived[n] = packet()
    dst, sl, segs = arrived[n]
    say(f"End {n} receives: dst {dst}, segments_left {sl} of [{', '.join(segs)}]")


def routed(n):
    dst, sl, segs = packet()
    say(f"End {n} routes: dst {dst}, segments_left {sl}")
    _, sl_before, segs_before = arrived[n]
    moved_on.append(sl == sl_before - 1 and dst == segs[sl] and segs == segs_before)
    if n == 2 and all(moved_on):
        say("verdict: each End took one segment off and made segments[segments_left] "
            "the destination")
end

# The SRH follows the 40-byte IPv6 header in the grader's packets.
tbreak input_action_end if ((struct ipv6_sr_hdr *)(skb->head + skb->network_header + 40))->tag == 0x300
continue
python received(1)
tbreak seg6_lookup_nexthop
continue
python routed(1)
tbreak input_action_end if ((struct ipv6_sr_hdr *)(skb->head + skb->network_header + 40))->tag == 0x300
continue
python received(2)
tbreak seg6_lookup_nexthop
continue
python routed(2)

# Let the test finish; the guest powers off.
continue
