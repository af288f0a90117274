# Shared by the uid-routing tests: a network namespace with two dummy
# links, a default route through each, and a table per link. Table 100
# ("the VPN") leaves by dummy0, the main table ("the uplink") by dummy1,
# so the table a lookup chose shows in `ip route get` and in the source
# address a socket is given. Each test prints KTAP through
# /lab/lib/ktap.sh, one subtest per claim.
. /lab/lib/ktap.sh
NS=uidr
IPNS="ip -n $NS"
DEST4=203.0.113.9
DEST6=2001:db8:9::9
VPN_SRC4=192.0.2.1
UPLINK_SRC4=198.51.100.1
TABLE=100

uidr_cleanup() {
	ip netns del $NS 2>/dev/null
}

uidr_setup() {
	uidr_cleanup
	ip netns add $NS &&
	$IPNS link set lo up &&
	$IPNS link add dummy0 type dummy &&
	$IPNS link add dummy1 type dummy &&
	$IPNS link set dummy0 up &&
	$IPNS link set dummy1 up &&
	$IPNS addr add $VPN_SRC4/24 dev dummy0 &&
	$IPNS addr add $UPLINK_SRC4/24 dev dummy1 &&
	$IPNS -6 addr add 2001:db8:2::1/64 dev dummy0 nodad &&
	$IPNS -6 addr add 2001:db8:3::1/64 dev dummy1 nodad &&
	$IPNS route add default via 198.51.100.254 dev dummy1 onlink &&
	$IPNS route add table $TABLE default via 192.0.2.254 dev dummy0 onlink &&
	# A second way out of table 100, by the uplink: an oif rule that
	# wrongly matched a lookup bound to dummy1 would find it.
	$IPNS route add table $TABLE default via 198.51.100.253 dev dummy1 onlink metric 20 &&
	$IPNS -6 route add default via 2001:db8:3::fe dev dummy1 onlink &&
	$IPNS -6 route add table $TABLE default via 2001:db8:2::fe dev dummy0 onlink &&
	ip netns exec $NS sysctl -qw net.ipv4.ip_forward=1 &&
	ip netns exec $NS sysctl -qw net.ipv4.conf.all.rp_filter=0 &&
	ip netns exec $NS sysctl -qw net.ipv4.conf.dummy0.rp_filter=0 &&
	ip netns exec $NS sysctl -qw net.ipv4.conf.dummy1.rp_filter=0
}

# lookup [-6] GET-ARGS...: sets $answer to "100" or "main", the table
# that answers `ip route get` for the test's destination with the given
# selectors, or to "error".
lookup() {
	if [ "$1" = -6 ]; then
		shift
		out=$($IPNS -6 route get $DEST6 "$@" 2>&1)
	else
		out=$($IPNS route get $DEST4 "$@" 2>&1)
	fi
	ktap_print_msg "route get $*: $(echo $out)"
	case " $out " in
	*" table $TABLE "*) answer=$TABLE ;;
	*" dev "*) answer=main ;;
	*) answer=error ;;
	esac
}

# expect_table NAME TABLE [-6] GET-ARGS...: a subtest that passes when
# the lookup is answered by TABLE.
expect_table() {
	name=$1
	want=$2
	shift 2
	lookup "$@"
	[ "$answer" = "$want" ]
	ktap_test_status "$name" $? "route get $*: table $answer, expected $want"
}

# expect_tables NAME "TABLE..." "GET-ARGS"...: a subtest that passes when
# each lookup is answered by its table, in order.
expect_tables() {
	name=$1
	wants=($2)
	shift 2
	got=()
	for args in "$@"; do
		lookup $args
		got+=("$answer")
	done
	[ "${got[*]}" = "${wants[*]}" ]
	ktap_test_status "$name" $? \
		"$(printf '%s; ' "$@")tables ${got[*]}, expected ${wants[*]}"
}

# rule ARGS...: add a rule at the test's preference, sending what it
# matches to table 100; unrule removes it.
PREF=1000
rule() {
	$IPNS "$@" pref $PREF table $TABLE ||
		ktap_print_msg "ip $* pref $PREF table $TABLE failed"
}

unrule() {
	$IPNS rule del pref $PREF 2>/dev/null
	$IPNS -6 rule del pref $PREF 2>/dev/null
}
