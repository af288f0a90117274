# KTAP for the guest's test scripts, sourced by every one of them
# (`. /lab/lib/ktap.sh`), so that no script keeps its own plan count or
# decides its own exit status. A script declares its plan, reports each
# subtest once, and ends with ktap_finished, which turns the counts into
# the exit status lab-run-tests judges: 0 when every subtest passed or
# skipped and the plan was kept, 4 (kselftest's KSFT_SKIP) when all of them
# skipped, 1 otherwise. Missing, extra or unreported subtests are failures.

KTAP_PASS=0
KTAP_FAIL=0
KTAP_SKIP=0
KTAP_NUMBER=0
KTAP_PLAN=

ktap_print_header() {
	echo "KTAP version 1"
}

# ktap_set_plan COUNT
ktap_set_plan() {
	KTAP_PLAN=$1
	echo "1..$1"
}

# ktap_print_msg TEXT...: a diagnostic line.
ktap_print_msg() {
	echo "# $*"
}

_ktap_result() { # verdict name [directive]
	KTAP_NUMBER=$((KTAP_NUMBER + 1))
	echo "$1 $KTAP_NUMBER $2${3:+ # $3}"
}

# ktap_test_pass NAME
ktap_test_pass() {
	KTAP_PASS=$((KTAP_PASS + 1))
	_ktap_result ok "$1"
}

# ktap_test_fail NAME [REASON]
ktap_test_fail() {
	KTAP_FAIL=$((KTAP_FAIL + 1))
	_ktap_result "not ok" "$1" "$2"
}

# ktap_test_skip NAME REASON: reported as a skip, never as a pass.
ktap_test_skip() {
	KTAP_SKIP=$((KTAP_SKIP + 1))
	_ktap_result ok "$1" "SKIP${2:+ $2}"
}

# ktap_test_result NAME COMMAND...: passes when COMMAND exits 0.
ktap_test_result() {
	_ktap_name=$1
	shift
	if "$@"; then
		ktap_test_pass "$_ktap_name"
	else
		ktap_test_fail "$_ktap_name"
	fi
}

# ktap_test_status NAME STATUS [REASON]: passes when STATUS is 0, for a
# check already run (`cmp a b; ktap_test_status same_bytes $?`).
ktap_test_status() {
	if [ "$2" = 0 ]; then
		ktap_test_pass "$1"
	else
		ktap_test_fail "$1" "$3"
	fi
}

# ktap_finished: print the totals and exit with the status they give.
ktap_finished() {
	echo "# totals: pass:$KTAP_PASS fail:$KTAP_FAIL skip:$KTAP_SKIP"
	if [ -z "$KTAP_PLAN" ]; then
		echo "# ktap.sh: the script set no plan"
		exit 1
	fi
	if [ "$KTAP_NUMBER" != "$KTAP_PLAN" ]; then
		echo "# ktap.sh: planned $KTAP_PLAN subtests, reported $KTAP_NUMBER"
		exit 1
	fi
	[ "$KTAP_FAIL" = 0 ] || exit 1
	if [ "$KTAP_PLAN" -gt 0 ] && [ "$KTAP_SKIP" = "$KTAP_PLAN" ]; then
		exit 4
	fi
	exit 0
}
