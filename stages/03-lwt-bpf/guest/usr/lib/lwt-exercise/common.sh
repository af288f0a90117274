# Shared by the LWT exercise graders: a peer namespace behind a veth
# pair, a route into it that runs the student's object, and a watch on
# the peer's side of the wire. Each grader prints KTAP through
# /lab/lib/ktap.sh, one subtest per claim the exercise makes.
. /lab/lib/ktap.sh
PEER_NS=lwt_ex
DEV=lwtx0
PEER_DEV=lwtx1
LOCAL=192.168.252.1
PEER=192.168.252.2
PEER2=192.168.252.3
OBJ_DIR=/usr/share/lwt-bpf
WIRE=/tmp/lwt-exercise-wire.txt

lwt_cleanup() {
	[ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null
	ip link del $DEV 2>/dev/null
	ip netns del $PEER_NS 2>/dev/null
	# Pinned maps outlive the routes; start every run with fresh ones.
	for map in "$@"; do
		find /sys/fs/bpf -name "$map" -exec rm -f {} + 2>/dev/null
	done
}

lwt_setup() {
	ip netns add $PEER_NS &&
	ip link add $DEV type veth peer name $PEER_DEV &&
	ip link set $PEER_DEV netns $PEER_NS &&
	ip addr add $LOCAL/24 dev $DEV &&
	ip link set $DEV up &&
	ip netns exec $PEER_NS ip addr add $PEER/24 dev $PEER_DEV &&
	ip netns exec $PEER_NS ip addr add $PEER2/32 dev $PEER_DEV &&
	ip netns exec $PEER_NS ip link set $PEER_DEV up &&
	ip netns exec $PEER_NS ip link set lo up
}

# lwt_route DEST OBJECT SECTION: send DEST through the program.
lwt_route() {
	ip route add $1/32 encap bpf xmit obj $OBJ_DIR/$2 section $3 dev $DEV
}

# Watch what arrives at the peer until lwt_watch_stop.
lwt_watch_start() {
	ip netns exec $PEER_NS lwt-wire-watch $PEER_DEV 120 > $WIRE &
	watch_pid=$!
	for i in $(seq 50); do
		grep -q listening $WIRE && return 0
		sleep 0.1
	done
	echo "# lwt-wire-watch did not start"
	return 1
}

lwt_watch_stop() {
	sleep 0.5	# the last packets are still on their way
	kill "$watch_pid" 2>/dev/null
	wait "$watch_pid" 2>/dev/null
	watch_pid=
	sed 's/^/# wire: /' $WIRE
}

# ping_peer DEST SIZE COUNT [ping options]: iputils ping, which goes on
# after the EPERM a dropped packet returns.
ping_peer() {
	dest=$1 size=$2 count=$3
	shift 3
	ping -n -q -c $count -i 0.2 -W 1 -s $size "$@" $dest > /dev/null 2>&1
}

# result NAME STATUS [diagnostic]
result() {
	[ "$2" != 0 ] && [ -n "$3" ] && ktap_print_msg "$3"
	ktap_test_status "$1" "$2"
}

# lwt_bail WHY: the setup failed; no subtest can be judged.
lwt_bail() {
	ktap_print_msg "$1"
	ktap_finished
}
