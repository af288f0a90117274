# Shared by the SRv6 tests: three network namespaces in a line,
#
#   sr-a (a0 fd00:a::1) -- (e0 fd00:a::e) sr-e (e1 fd00:b::e) -- (b0 fd00:b::2) sr-b
#
# where sr-e forwards, and holds the SID fc00:e::e, an End behaviour
# with counters (seg6local action End count). sr-a sends hand-made SRv6
# packets to the SID with `srh send`; tcpdump on b0 shows what sr-e
# made of them, and `srh decode` prints each as a line. Each test prints
# KTAP through /lab/lib/ktap.sh.
. /lab/lib/ktap.sh
A=sr-a
E=sr-e
B=sr-b
A_ADDR=fd00:a::1
B_ADDR=fd00:b::2
SID=fc00:e::e
# A segment beyond sr-b: only ever listed, never routed to.
FAR=fc00:9::9
CAPTURE=/tmp/seg6-capture.txt
# Names the test in messages that a hint may be keyed to.
TEST_NAME=$(basename "$0")

sr_cleanup() {
	for ns in $A $E $B; do
		ip netns del $ns 2>/dev/null
	done
}

sr_setup() {
	sr_cleanup
	for ns in $A $E $B; do
		ip netns add $ns &&
		ip -n $ns link set lo up &&
		ip netns exec $ns sysctl -qw net.ipv6.conf.all.accept_dad=0 &&
		ip netns exec $ns sysctl -qw net.ipv6.conf.default.accept_dad=0 ||
		return 1
	done
	ip -n $A link add a0 type veth peer name e0 netns $E &&
	ip -n $E link add e1 type veth peer name b0 netns $B &&
	ip -n $A addr add $A_ADDR/64 dev a0 nodad &&
	ip -n $E addr add fd00:a::e/64 dev e0 nodad &&
	ip -n $E addr add fd00:b::e/64 dev e1 nodad &&
	ip -n $B addr add $B_ADDR/64 dev b0 nodad &&
	ip -n $A link set a0 up &&
	ip -n $E link set e0 up &&
	ip -n $E link set e1 up &&
	ip -n $B link set b0 up &&
	ip -n $A -6 route add default via fd00:a::e &&
	ip -n $B -6 route add default via fd00:b::e &&
	ip netns exec $E sysctl -qw net.ipv6.conf.all.forwarding=1 &&
	ip -n $E -6 route add $SID/128 encap seg6local action End count dev e0 &&
	# Neighbours resolved both ways before any test counts packets.
	ip netns exec $A ping -q -c 1 -W 5 $B_ADDR > /dev/null
}

# counters: sets $packets and $errors from the SID's End counters.
counters() {
	local out
	out=$(ip -n $E -6 -s route show $SID)
	packets=$(echo "$out" | sed -n -E 's/.* packets ([0-9]+) .*/\1/p')
	errors=$(echo "$out" | sed -n -E 's/.* errors ([0-9]+).*/\1/p')
	packets=${packets:-?}
	errors=${errors:-?}
}

# capture_start COUNT SECONDS [NS LINK FILE]: tcpdump on LINK of NS (b0
# of sr-b), in the background, until COUNT of the test's packets
# (routing header or no next header after IPv6) arrived or SECONDS
# passed; capture_wait waits for every capture started, and srh decodes
# each into FILE ($CAPTURE), one line per packet.
# tcpdump copies a packet from its ring as the link hands it over,
# before IPv6 sees it: End rewrites the SRH in place.
capture_start() {
	local ns=${3:-$B} link=${4:-b0} out=${5:-$CAPTURE}
	rm -f "$out" "$out.pcap" "$out.log"
	ip netns exec $ns timeout "$2" tcpdump -Z root -U -n -Q in -i $link \
		-c "$1" -w "$out.pcap" 'ip6[6] == 43 or ip6[6] == 59' \
		2> "$out.log" &
	CAPTURE_PIDS="$CAPTURE_PIDS $!"
	CAPTURE_FILES="$CAPTURE_FILES $out"
	for _ in $(seq 50); do
		grep -q "listening on" "$out.log" 2>/dev/null && return 0
		sleep 0.1
	done
	ktap_print_msg "tcpdump did not start on $link: $(cat "$out.log")"
	return 1
}

capture_wait() {
	local out
	wait $CAPTURE_PIDS
	for out in $CAPTURE_FILES; do
		if [ -s "$out.pcap" ]; then
			srh decode "$out.pcap" > "$out"
		else
			: > "$out"
		fi
	done
	CAPTURE_PIDS=
	CAPTURE_FILES=
}

# srh_line HDRLEN SL FS SEGS [TAG] [TLV]: the line `srh decode` prints
# for an SRH with these fields, its next header 59 (no next header).
srh_line() {
	echo "nh:59,hdrlen:$1,type:4,sl:$2,fs:$3,flags:0,tag:${5:-0},segs:$4,tlv:$6"
}

# send ARGS...: `srh send` from sr-a to the SID.
send() {
	ip netns exec $A srh send --src $A_ADDR --dst $SID "$@"
}

# expect_forwarded NAME PASSES "LINE..." SEND-ARGS...: a subtest that
# passes when the packets sent reach b0 as exactly these lines, the End
# counters counting PASSES packets (one per End a packet went through)
# and no error.
expect_forwarded() {
	local name=$1 passes=$2 want=$3 before_p before_e
	shift 3
	counters
	before_p=$packets before_e=$errors
	# A packet crosses the two links in milliseconds, even under TCG;
	# a burst from every CPU gets a second for each 20 packets more.
	local count
	count=$(echo "$want" | wc -l)
	capture_start $count $((3 + count / 20)) &&
	send "$@"
	capture_wait
	counters
	local got
	got=$(sort -t= -k2 -n $CAPTURE)
	if [ "$got" = "$want" ] &&
	   [ "$packets" = $((before_p + passes)) ] &&
	   [ "$errors" = "$before_e" ]; then
		ktap_test_pass "$name"
		return
	fi
	ktap_print_msg "$name: sent $*"
	ktap_print_msg "expected at b0: $(echo "$want" | head -3)"
	if [ -s $CAPTURE ]; then
		ktap_print_msg "got at b0:      $(echo "$got" | head -3)"
	else
		ktap_print_msg "$TEST_NAME: b0 got nothing"
	fi
	ktap_print_msg "End counters: packets $before_p -> $packets, errors $before_e -> $errors"
	ktap_test_fail "$name"
}

# expect_dropped NAME SEND-ARGS...: a subtest that passes when the packet
# sent never reaches b0, and the End counters count it as one error.
expect_dropped() {
	local name=$1 before_p before_e
	shift
	counters
	before_p=$packets before_e=$errors
	capture_start 1 1 &&
	send "$@"
	capture_wait
	counters
	if [ ! -s $CAPTURE ] && [ "$packets" = "$before_p" ] &&
	   [ "$errors" = $((before_e + 1)) ]; then
		ktap_test_pass "$name"
		return
	fi
	ktap_print_msg "$name: sent $*"
	ktap_print_msg "got at b0: $(head -3 $CAPTURE)"
	ktap_print_msg "End counters: packets $before_p -> $packets, errors $before_e -> $errors"
	ktap_test_fail "$name"
}
