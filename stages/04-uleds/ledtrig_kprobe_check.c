// SPDX-License-Identifier: GPL-2.0
/*
 * Grades samples/leds/ledtrig-kprobe.c with a userspace LED: each blink the
 * trigger starts arrives on the /dev/uleds fd as an "on" report (the LED's
 * max_brightness) followed by an "off" report. The probed functions are
 * system calls this program makes on purpose and nothing else in the guest
 * makes: getppid and getpgrp.
 */
#include <sys/syscall.h>

#include "kselftest_harness.h"
#include "uled_helpers.h"

#define MAX_BRIGHTNESS	100
#define BLINK_MS	50	/* the module's default blink_ms */
#define QUIET_MS	300	/* no report for this long: the LED is at rest */
#define REPORT_MS	3000
#define KPROBE_LIST	"/sys/kernel/debug/kprobes/list"

static void call_getppid(void)
{
	syscall(SYS_getppid);
}

static void call_getpgrp(void)
{
	syscall(SYS_getpgrp);
}

static long hits(const char *led)
{
	char buf[32];

	if (led_read_attr(led, "hits", buf, sizeof(buf)))
		return -1;
	return atol(buf);
}

/*
 * How many kprobes exist right now. The list names a probe by its address
 * symbolised, which may be an alias of the symbol asked for (a probe on
 * __x64_sys_getppid shows as __do_sys_getppid), so probes are counted, not
 * looked up; nothing else in the guest registers kprobes.
 */
static int kprobes_registered(void)
{
	char line[256];
	FILE *list = fopen(KPROBE_LIST, "r");
	int count = 0;

	if (!list)
		return -1;
	while (fgets(line, sizeof(line), list))
		count++;
	fclose(list);
	return count;
}

FIXTURE(kprobe_led) {
	char name[LED_MAX_NAME_SIZE];
	int fd;
};

FIXTURE_SETUP(kprobe_led)
{
	char buf[32];

	snprintf(self->name, sizeof(self->name), "kprobe-check:red:%d",
		 getpid());
	self->fd = uled_create(self->name, MAX_BRIGHTNESS);
	ASSERT_LE(0, self->fd) TH_LOG("%s", strerror(-self->fd));
	ASSERT_EQ(0, uled_next(self->fd, REPORT_MS));
	ASSERT_EQ(0, led_write_attr(self->name, "trigger", "kprobe"))
		TH_LOG("is ledtrig-kprobe loaded?");
	ASSERT_EQ(0, led_read_attr(self->name, "symbol", buf, sizeof(buf)));
	ASSERT_STREQ("", buf);
}

FIXTURE_TEARDOWN(kprobe_led)
{
	if (self->fd >= 0)
		close(self->fd);
}

/* Expects exactly one blink (on, then off) and then quiet. */
static void expect_one_blink(struct __test_metadata *_metadata, int fd)
{
	long long on_at;

	ASSERT_EQ(MAX_BRIGHTNESS, uled_next(fd, REPORT_MS));
	on_at = now_ms();
	ASSERT_EQ(0, uled_next(fd, REPORT_MS));
	/* Timer ticks may cut the half short by up to one jiffy. */
	ASSERT_LE(BLINK_MS / 2, now_ms() - on_at);
	ASSERT_EQ(-ETIME, uled_next(fd, QUIET_MS));
}

TEST_F(kprobe_led, one_call_makes_one_blink)
{
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	ASSERT_EQ(-ETIME, uled_next(self->fd, QUIET_MS));
	ASSERT_EQ(0, hits(self->name));
	call_getppid();
	expect_one_blink(_metadata, self->fd);
	ASSERT_EQ(1, hits(self->name));
}

TEST_F(kprobe_led, spaced_calls_blink_each)
{
	int i;

	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	for (i = 0; i < 3; i++) {
		call_getppid();
		expect_one_blink(_metadata, self->fd);
	}
	ASSERT_EQ(3, hits(self->name));
}

TEST_F(kprobe_led, calls_during_a_blink_fold_into_it)
{
	int i;

	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	for (i = 0; i < 20; i++)
		call_getppid();
	expect_one_blink(_metadata, self->fd);
	ASSERT_EQ(20, hits(self->name));
}

TEST_F(kprobe_led, other_functions_do_not_blink)
{
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	call_getpgrp();
	getpid();
	ASSERT_EQ(-ETIME, uled_next(self->fd, QUIET_MS));
	ASSERT_EQ(0, hits(self->name));
}

TEST_F(kprobe_led, a_new_symbol_moves_the_probe)
{
	char buf[128];

	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	call_getppid();
	expect_one_blink(_metadata, self->fd);

	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getpgrp\n"));
	ASSERT_EQ(0, led_read_attr(self->name, "symbol", buf, sizeof(buf)));
	ASSERT_STREQ("__x64_sys_getpgrp", buf);
	ASSERT_EQ(0, hits(self->name));
	/* Moved: the old probe is gone, not left beside the new one. */
	ASSERT_EQ(1, kprobes_registered());
	call_getppid();
	ASSERT_EQ(-ETIME, uled_next(self->fd, QUIET_MS));
	call_getpgrp();
	expect_one_blink(_metadata, self->fd);
	ASSERT_EQ(1, hits(self->name));
}

TEST_F(kprobe_led, an_unknown_symbol_is_refused_and_disarms)
{
	char buf[128];

	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	ASSERT_EQ(-ENOENT, led_write_attr(self->name, "symbol",
					  "lab_no_such_function"));
	ASSERT_EQ(0, led_read_attr(self->name, "symbol", buf, sizeof(buf)));
	ASSERT_STREQ("", buf);
	ASSERT_EQ(0, kprobes_registered());
	call_getppid();
	ASSERT_EQ(-ETIME, uled_next(self->fd, QUIET_MS));
}

TEST_F(kprobe_led, an_empty_line_removes_the_probe)
{
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	ASSERT_EQ(1, kprobes_registered());
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "\n"));
	ASSERT_EQ(0, kprobes_registered());
	call_getppid();
	ASSERT_EQ(-ETIME, uled_next(self->fd, QUIET_MS));
}

TEST_F(kprobe_led, leaving_the_trigger_removes_the_probe)
{
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	ASSERT_EQ(1, kprobes_registered());
	ASSERT_EQ(0, led_write_attr(self->name, "trigger", "none"));
	ASSERT_EQ(0, kprobes_registered());
	call_getppid();
	ASSERT_EQ(-ETIME, uled_next(self->fd, QUIET_MS));
}

TEST_HARNESS_MAIN
