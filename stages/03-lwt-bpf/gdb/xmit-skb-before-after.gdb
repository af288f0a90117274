# One packet on a route with an LWT xmit program, stopped in bpf_xmit()
# before and after the program ran: the route's lwtunnel state that holds
# the program, and the skb and its IPv4 header as the program found them
# and as it left them.
#
# lwt-exercise-dscp (the dscp grader, with the stage's solved
# lwt_dscp_kern.o) routes 192.168.252.2 through "encap bpf xmit ... section
# set_dscp" and pings it, first with TOS 0x00. bpf_xmit() runs only for
# routes with an LWT BPF xmit program, so the first stop is the first echo
# request. The walkthrough reads the program's name and the encap type
# from the skb's dst, dumps the skb's lengths and offsets and the IPv4
# header, lets bpf_xmit() return, and reads them again: the program
# rewrote the TOS byte to AF41 and repaired the header checksum in place,
# and bpf_xmit() told the caller to go on to the neighbour layer.
#
# run: lwt-exercise-dscp
# expect: Breakpoint 1, bpf_xmit \(skb=0x[0-9a-f]+\)
# expect: route 192\.168\.252\.2: lwtunnel type LWTUNNEL_ENCAP_BPF, xmit program "lwt_dscp_kern\.o:\[set_dscp\]"
# expect: before: skb 0x[0-9a-f]+ len 84 data_len 0 .*protocol 0x0800
# expect: before: IPv4 192\.168\.252\.1 -> 192\.168\.252\.2 proto 1 tos 0x00 tot_len 84 ttl \d+ check 0x[0-9a-f]{4} \(valid\)
# expect: \$\d+ = \{.*tos = 0 '\\000'
# expect: in lwtunnel_xmit \(skb=
# expect: Value returned is \$\d+ = 256
# expect: after: IPv4 192\.168\.252\.1 -> 192\.168\.252\.2 proto 1 tos 0x88 tot_len 84 ttl \d+ check 0x[0-9a-f]{4} \(valid\)
# expect: \$\d+ = \{.*tos = 136 '\\210'
# expect: verdict: the program set DSCP 34 \(tos 0x00 -> 0x88\) and changed the checksum from 0x[0-9a-f]{4} to 0x[0-9a-f]{4}, valid before and after; no other byte of the header changed
# expect: verdict: bpf_xmit\(\) returned LWTUNNEL_XMIT_CONTINUE: the packet goes on to the neighbour layer

python
import os
import socket
import struct


OUT = os.environ.get("LAB_OUT")


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def show(command):
    say(gdb.execute(command, to_string=True).rstrip("\n"))


def checksum(header):
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return total == 0xffff


class Packet:
    def header(self):
        skb = gdb.parse_and_eval("$skb")
        data = int(skb["data"])
        ihl = bytes(gdb.selected_inferior().read_memory(data, 1))[0] & 0xf
        return bytes(gdb.selected_inferior().read_memory(data, ihl * 4))

    def show(self, when):
        skb = gdb.parse_and_eval("$skb")
        head = int(skb["head"])
        say(f"{when}: skb {int(skb):#x} len {int(skb['len'])} data_len {int(skb['data_len'])} "
            f"head {head:#x} data +{int(skb['data']) - head} "
            f"network_header +{int(skb['network_header'])} cloned {int(skb['cloned'])} "
            f"protocol {socket.ntohs(int(skb['protocol'])):#06x}")
        h = self.header()
        say(f"{when}: IPv4 {socket.inet_ntoa(h[12:16])} -> {socket.inet_ntoa(h[16:20])} "
            f"proto {h[9]} tos {h[1]:#04x} tot_len {struct.unpack('!H', h[2:4])[0]} ttl {h[8]} "
            f"check {struct.unpack('!H', h[10:12])[0]:#06x} "
            f"({'valid' if checksum(h) else 'INVALID'})")
        return h

    def at_entry(self):
        gdb.execute("set $skb = skb")
        dst = gdb.parse_and_eval("(struct dst_entry *) ($skb->_skb_refdst & ~1UL)")
        lwt = dst["lwtstate"]
        bpf_lwt = lwt["data"].cast(gdb.lookup_type("struct bpf_lwt").pointer())
        daddr = socket.inet_ntoa(self.header()[16:20])
        say(f"route {daddr}: lwtunnel type {lwt['type'].cast(gdb.lookup_type('enum lwtunnel_encap_types'))}, "
            f"xmit program \"{bpf_lwt['xmit']['name'].string()}\"")
        self.before = self.show("before")
        show("print *(struct iphdr *) $skb->data")

    def after_return(self, ret):
        self.after = self.show("after")
        show("print *(struct iphdr *) $skb->data")
        b, a = self.before, self.after
        # Bytes 10 and 11 hold the checksum. Adding 0x88 to the TOS byte
        # takes 0x88 off the checksum, which leaves byte 10 alone whenever
        # byte 11 does not borrow: which of the two change depends on the
        # packet's id, so the verdict names the fields, not the bytes.
        others = [i for i in range(min(len(a), len(b))) if a[i] != b[i] and i not in (1, 10, 11)]
        ok = (a[1] >> 2 == 34 and a[1] & 3 == b[1] & 3 and checksum(a) and checksum(b)
              and a[10:12] != b[10:12] and len(a) == len(b) and not others)
        text = (f"the program set DSCP 34 (tos {b[1]:#04x} -> {a[1]:#04x}) and changed the "
                f"checksum from 0x{b[10]:02x}{b[11]:02x} to 0x{a[10]:02x}{a[11]:02x}, valid before "
                "and after; " + (f"bytes {others} of the header changed too" if others else
                                 "no other byte of the header changed"))
        say("verdict: " + (text if ok else "NOT AS DESIGNED: " + text))
        try:
            cont = int(gdb.parse_and_eval("LWTUNNEL_XMIT_CONTINUE"))
        except gdb.error:
            cont = 0x100	# include/net/lwtunnel.h
        say("verdict: " + ("bpf_xmit() returned LWTUNNEL_XMIT_CONTINUE: the packet goes on to "
                           "the neighbour layer" if ret == cont else
                           f"NOT AS DESIGNED: bpf_xmit() returned {ret}"))


packet = Packet()
end

break bpf_xmit
continue
python packet.at_entry()
delete
finish
python packet.after_return(int(gdb.history(0)))

# Let the grader finish; the guest powers off.
continue
