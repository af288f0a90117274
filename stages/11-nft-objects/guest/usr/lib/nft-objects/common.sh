# Shared by the stage's tests of nf_tables' stateful objects. Each test
# runs in a network namespace of its own, $NS, with lo up and a ruleset
# of an inet table "t" that it loads with `ruleset`. The traffic is UDP
# from bash to 127.0.0.1: one write() of 72 bytes of payload on a fresh
# socket per datagram, so 100 bytes at the IP layer, which is skb->len
# at the output hook where the rules count. N datagrams are N * 100
# bytes to a counter or a quota. A datagram that a rule drops on output
# makes write() fail (EPERM), so the sender knows which ones passed.
# Each test prints KTAP through /lab/lib/ktap.sh.
. "${LAB_LIB:-/lab/lib}/ktap.sh"
TEST_NAME=$(basename "$0")
NS=${NS:-nftobj}
BYTES=100
MONITOR_LOG=/tmp/$TEST_NAME.monitor
MONITOR_PID=
# The last CPU that is online: 1 on the stage's machine, whose possible
# CPUs are its online ones, 0-1.
LAST_CPU=$(sed -E 's/.*[-,]//' /sys/devices/system/cpu/online)

# in_ns COMMAND...: COMMAND in the namespace.
in_ns() { ip netns exec "$NS" "$@"; }

# nft_on CPU ARGS...: nft in the namespace, pinned to CPU: a counter is
# read by the CPU that runs the command.
nft_on() {
	local cpu=$1
	shift
	in_ns taskset -c "$cpu" nft "$@"
}

nft_ns() { in_ns nft "$@"; }

ns_setup() {
	ns_cleanup
	ip netns add "$NS" && ip -n "$NS" link set lo up
}

ns_cleanup() {
	monitor_stop
	ip netns del "$NS" 2>/dev/null
	return 0
}

# ruleset TEXT: the namespace's ruleset becomes TEXT (nft -f syntax).
ruleset() {
	nft_ns flush ruleset && printf '%s\n' "$1" | nft_ns -f -
}

# nft_text TEXT: nft -f with TEXT, in the namespace.
nft_text() {
	printf '%s\n' "$1" | nft_ns -f -
}

# quota_table NAME SPEC: a table t with the quota NAME { SPEC } and the
# two rules that let datagrams to port 9 through while it matches.
quota_table() {
	ruleset "table inet t {
		quota $1 { $2 }
		chain out {
			type filter hook output priority 0; policy accept;
			udp dport 9 quota name \"$1\" accept
			udp dport 9 drop
		}
	}"
}

# counter_table NAME: a table t with the counter NAME, which counts every
# datagram to port 9.
counter_table() {
	ruleset "table inet t {
		counter $1 { }
		chain out {
			type filter hook output priority 0; policy accept;
			udp dport 9 counter name \"$1\"
		}
	}"
}

# send COUNT [CPU] [PORT]: COUNT datagrams to 127.0.0.1:PORT (9) from a
# bash pinned to CPU (0), one after the other. Prints one character per
# datagram: + when write() took it, - when it failed.
send() {
	in_ns taskset -c "${2:-0}" bash -c '
		for ((i = 0; i < $1; i++)); do
			if printf "%72s" "" 2> /dev/null > /dev/udp/127.0.0.1/$2; then
				printf +
			else
				printf -
			fi
		done' send "$1" "${3:-9}"
}

# passed PATTERN: how many datagrams of send's PATTERN went through.
passed() {
	local only=${1//-/}
	echo ${#only}
}

# send_from_every_cpu COUNT [PORT]: COUNT datagrams from each online CPU,
# all CPUs at once, back to back (udp-every-cpu). Prints the number that
# went through, in total.
send_from_every_cpu() {
	in_ns udp-every-cpu "$1" "${2:-9}"
}

online_cpus() {
	local cpu
	for cpu in $(seq 0 "$(sed -E 's/.*[-,]//' /sys/devices/system/cpu/possible)"); do
		if [ "$cpu" = 0 ] || [ "$(cat /sys/devices/system/cpu/cpu$cpu/online)" = 1 ]; then
			echo "$cpu"
		fi
	done
}

# counter NAME [CPU]: "packets P bytes B", the counter NAME of table t as
# nft lists it, read on CPU (0).
counter() {
	nft_on "${2:-0}" list counter inet t "$1" |
		sed -n -E 's/^[[:space:]]*(packets [0-9]+ bytes [0-9]+)[[:space:]]*$/\1/p'
}

# quota NAME: the quota NAME of table t as nft lists it, on one line:
# "1000 bytes used 500 bytes" (nft prints "used" only when it is not 0,
# and "over " before a quota that matches past its bytes).
quota() {
	nft_ns list quota inet t "$1" |
		sed -n -E "/^[[:space:]]*quota $1 \{/{n;s/^[[:space:]]*//;s/[[:space:]]*\$//;p}"
}

# print_lines: standard input as KTAP diagnostics, on standard error, so
# that functions whose output is captured can say what went wrong.
print_lines() {
	local line
	while IFS= read -r line; do
		[ -z "$line" ] || echo "# $line" >&2
	done
}

# bytes_of "N UNIT": N bytes, N kbytes or N mbytes in bytes. nft prints
# a multiple of 1024 in the larger unit (get_rate()).
bytes_of() {
	local n unit
	read -r n unit <<< "$1"
	case $unit in
	kbytes) echo $((n * 1024)) ;;
	mbytes) echo $((n * 1024 * 1024)) ;;
	gbytes) echo $((n * 1024 * 1024 * 1024)) ;;
	*) echo $((n)) ;;
	esac
}

# expect NAME WHAT GOT WANT: a subtest that passes when GOT is WANT, and
# says what it got when it is not.
expect() {
	if [ "$3" = "$4" ]; then
		ktap_test_pass "$1"
		return 0
	fi
	ktap_print_msg "$1: $2: got '${3//$'\n'/ / }', expected '$4'"
	ktap_test_fail "$1"
	return 1
}

# expect_all NAME "WHAT|GOT|WANT"...: one subtest over several checks,
# which all run and all say what they got.
expect_all() {
	local name=$1 check what got want ok=0
	shift
	for check in "$@"; do
		# GOT may be several lines: split on the first and last |.
		what=${check%%|*}
		got=${check#*|}
		want=${got##*|}
		got=${got%|*}
		if [ "$got" != "$want" ]; then
			ktap_print_msg "$name: $what: got '${got//$'\n'/ / }', expected '$want'"
			ok=1
		fi
	done
	ktap_test_status "$name" $ok
}

# fails_with NAME MESSAGE COMMAND...: COMMAND must fail, and say MESSAGE
# (the strerror text nft prints for the kernel's errno).
fails_with() {
	local name=$1 message=$2 out status
	shift 2
	out=$("$@" 2>&1)
	status=$?
	if [ $status != 0 ] && grep -qF "$message" <<< "$out"; then
		return 0
	fi
	ktap_print_msg "$name: '$*' exited with $status, expected a failure saying '$message':"
	print_lines <<< "$out"
	return 1
}

# monitor_start: `nft monitor ruleset` in the namespace, in the
# background, into $MONITOR_LOG; returns once it listens. The kernel
# sends an object's events only while someone listens.
monitor_start() {
	monitor_stop
	: > "$MONITOR_LOG"
	# ip netns exec becomes nft (it forks only in batch mode): $! is nft.
	ip netns exec "$NS" nft monitor ruleset > "$MONITOR_LOG" 2>&1 &
	MONITOR_PID=$!
	monitor_sync
}

# monitor_sync: returns once the monitor printed every event sent before
# it: a new chain's event, which comes after them on its socket. A
# monitor that has only just started may not listen yet, and misses the
# events sent before it does, so a chain that stays unseen for a second
# is replaced by another. The chains' names are new each time, as this
# runs in subshells too.
monitor_sync() {
	local mark try i
	for try in $(seq 10); do
		mark=sync$BASHPID$SRANDOM
		nft_ns add chain inet t "$mark" || return 1
		for i in $(seq 10); do
			if grep -qw "chain inet t $mark" "$MONITOR_LOG"; then
				nft_ns delete chain inet t "$mark"
				return 0
			fi
			sleep 0.1
		done
		nft_ns delete chain inet t "$mark"
	done
	echo "$TEST_NAME: nft monitor printed none of 10 new chains in 10 s" | print_lines
	return 1
}

monitor_stop() {
	if [ -n "$MONITOR_PID" ]; then
		kill "$MONITOR_PID" 2>/dev/null
		wait "$MONITOR_PID" 2>/dev/null
	fi
	MONITOR_PID=
}

# depletions NAME BYTES: how many times the monitor printed the quota
# NAME of BYTES bytes as used up, the event nft_quota_obj_eval() sends.
# The event carries the family of the packet, nft_pf(pkt), and not the
# table's: for the inet table t and an IPv4 datagram, nft 1.0.6 prints
# "add quota ip t NAME { BYTES bytes used BYTES bytes }" (and warns that
# it cannot find a table ip t).
depletions() {
	monitor_sync
	grep -cF "add quota ip t $1 { $2 bytes used $2 bytes }" "$MONITOR_LOG"
}
