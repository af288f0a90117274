// SPDX-License-Identifier: GPL-2.0
/*
 * Grades samples/leds/ledtrig-kprobe.c with a userspace LED: each blink the
 * trigger starts arrives on the /dev/uleds fd as an "on" report (the LED's
 * max_brightness) followed by an "off" report. The probed functions are
 * system calls this program makes on purpose and nothing else in the guest
 * makes: getppid and getpgrp. Beyond the blinks: the length of each half
 * (with blink_ms set to 300), the count when both CPUs call at once, the
 * errors symbol_store() returns (the core's -ENOENT and -EINVAL, and
 * -ENAMETOOLONG at the size of its buffer), and after every test, that
 * the kernel logged no bug or warning.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>

#include "kselftest_harness.h"
#include "uled_helpers.h"

#define MAX_BRIGHTNESS	100
#define BLINK_MS	50	/* the module's default blink_ms */
#define QUIET_MS	300	/* no report for this long: the LED is at rest */
#define REPORT_MS	3000
#define KPROBE_LIST	"/sys/kernel/debug/kprobes/list"
#define BLINK_MS_PARAM	"/sys/module/ledtrig_kprobe/parameters/blink_ms"
/* The trigger's symbol buffer: KSYM_NAME_LEN bytes, its NUL among them. */
#define SYMBOL_SIZE	512
/* Calls each CPU makes at once: enough that unserialised counts lose some. */
#define RACE_CALLS	200000
#define RACE_ROUNDS	4

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

/* Reads a file's first line into buf without its newline; 0 or -errno. */
static int read_first_line(const char *path, char *buf, size_t size)
{
	FILE *file = fopen(path, "r");
	int ret = 0;

	if (!file)
		return -errno;
	if (!fgets(buf, size, file))
		ret = -EIO;
	fclose(file);
	buf[strcspn(buf, "\n")] = '\0';
	return ret;
}

static int write_file(const char *path, const char *value)
{
	FILE *file = fopen(path, "w");
	int ret = 0;

	if (!file)
		return -errno;
	if (fputs(value, file) < 0)
		ret = -EIO;
	if (fclose(file))
		ret = -errno;
	return ret;
}

/*
 * What the kernel logged since fd was opened at the end of the log: nonzero
 * if it reported a bug, an oops or a warning (a handler that sleeps in the
 * probed function's context is "scheduling while atomic", for one).
 */
static int kernel_complained(struct __test_metadata *_metadata, int fd)
{
	static const char *const marks[] = {
		"BUG:", "WARNING:", "Oops", "sleeping function", "INFO: task",
	};
	char record[1024];
	int complained = 0;
	ssize_t len;
	unsigned int i;

	if (fd < 0)
		return 0;
	while ((len = read(fd, record, sizeof(record) - 1)) != 0) {
		if (len < 0) {
			if (errno == EPIPE)	/* overwritten: read on */
				continue;
			break;			/* EAGAIN: nothing more */
		}
		record[len] = '\0';
		for (i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
			if (strstr(record, marks[i])) {
				TH_LOG("kernel: %s", strchr(record, ';') ?
				       strchr(record, ';') + 1 : record);
				complained = 1;
			}
		}
	}
	return complained;
}

FIXTURE(kprobe_led) {
	char name[LED_MAX_NAME_SIZE];
	char blink_ms[16];
	int fd, kmsg;
};

FIXTURE_SETUP(kprobe_led)
{
	char buf[32];

	self->kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (self->kmsg >= 0)
		lseek(self->kmsg, 0, SEEK_END);
	ASSERT_EQ(0, read_first_line(BLINK_MS_PARAM, self->blink_ms,
				     sizeof(self->blink_ms)))
		TH_LOG("is ledtrig-kprobe loaded?");
	ASSERT_EQ(BLINK_MS, atoi(self->blink_ms));
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
	if (self->blink_ms[0])
		write_file(BLINK_MS_PARAM, self->blink_ms);
	/* Every test: no handler may upset the kernel doing what it did. */
	EXPECT_EQ(0, kernel_complained(_metadata, self->kmsg));
	if (self->kmsg >= 0)
		close(self->kmsg);
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

/*
 * One blink is blink_ms on, then blink_ms off: a call made in the off half
 * still folds into the blink, and the next blink starts only after it.
 * blink_ms is the module's parameter, read by each call.
 */
TEST_F(kprobe_led, a_blink_is_blink_ms_on_then_blink_ms_off)
{
	const int ms = 300;
	long long on_at, off_at, next_on_at;
	char value[16];
	int calls = 1, report;

	/* The parameter changes after the probe is armed: it is read at each call */
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	snprintf(value, sizeof(value), "%d", ms);
	ASSERT_EQ(0, write_file(BLINK_MS_PARAM, value));
	call_getppid();
	ASSERT_EQ(MAX_BRIGHTNESS, uled_next(self->fd, REPORT_MS));
	on_at = now_ms();
	ASSERT_EQ(0, uled_next(self->fd, REPORT_MS));
	off_at = now_ms();
	TH_LOG("on for %lld ms", off_at - on_at);
	ASSERT_LE(ms * 3 / 4, off_at - on_at);
	ASSERT_GE(ms * 9 / 5, off_at - on_at);
	/* Call every 20 ms from the start of the off half on. */
	do {
		call_getppid();
		calls++;
		report = uled_next(self->fd, 20);
	} while (report == -ETIME && now_ms() - off_at < REPORT_MS);
	next_on_at = now_ms();
	ASSERT_EQ(MAX_BRIGHTNESS, report);
	TH_LOG("off for %lld ms", next_on_at - off_at);
	ASSERT_LE(ms * 3 / 4, next_on_at - off_at);
	ASSERT_GE(ms * 9 / 5, next_on_at - off_at);
	ASSERT_EQ(0, uled_next(self->fd, REPORT_MS));
	ASSERT_EQ(-ETIME, uled_next(self->fd, ms + QUIET_MS));
	ASSERT_EQ(calls, hits(self->name));
}

struct racer {
	pthread_barrier_t *start;
	int cpu, ran_on, calls;
	long long from, to;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	cpu_set_t set;
	int i;

	CPU_ZERO(&set);
	CPU_SET(r->cpu, &set);
	r->ran_on = -1;
	if (sched_setaffinity(0, sizeof(set), &set))
		return NULL;
	pthread_barrier_wait(r->start);
	r->from = now_ms();
	for (i = 0; i < RACE_CALLS; i++) {
		call_getppid();
		r->calls++;
	}
	r->to = now_ms();
	r->ran_on = sched_getcpu();
	return NULL;
}

/*
 * Both CPUs call the probed function at once: every call is counted, so
 * the count may not lose an update made on the other CPU meanwhile.
 * Under TCG the two vCPUs only collide while the host runs both of them,
 * so the rounds go on until one loses a call, up to RACE_ROUNDS.
 */
TEST_F(kprobe_led, calls_from_both_cpus_at_once_are_all_counted)
{
	struct racer racers[2];
	pthread_barrier_t start;
	pthread_t threads[2];
	long counted = 2 * RACE_CALLS;
	int i, round;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "needs two CPUs");
	ASSERT_EQ(0, pthread_barrier_init(&start, NULL, 2));
	for (round = 0; round < RACE_ROUNDS && counted == 2 * RACE_CALLS; round++) {
		/* Naming the function again resets hits. */
		ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
		memset(racers, 0, sizeof(racers));
		for (i = 0; i < 2; i++) {
			racers[i].cpu = i;
			racers[i].start = &start;
			ASSERT_EQ(0, pthread_create(&threads[i], NULL, race, &racers[i]));
		}
		for (i = 0; i < 2; i++)
			pthread_join(threads[i], NULL);
		for (i = 0; i < 2; i++) {
			ASSERT_EQ(racers[i].cpu, racers[i].ran_on);
			ASSERT_EQ(RACE_CALLS, racers[i].calls);
		}
		/* The two loops ran at the same time, not one after the other. */
		ASSERT_LT(racers[0].from, racers[1].to);
		ASSERT_LT(racers[1].from, racers[0].to);
		/* Let the last blink end, then count. */
		while (uled_next(self->fd, QUIET_MS) != -ETIME)
			;
		counted = hits(self->name);
	}
	TH_LOG("%d round(s) of %d calls on each CPU; the last counted %ld",
	       round, RACE_CALLS, counted);
	ASSERT_EQ(2 * RACE_CALLS, counted);
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

/* A name the core refuses for another reason: exc_int3 is noinstr code. */
TEST_F(kprobe_led, a_refused_symbol_fails_with_the_cores_error)
{
	char buf[128];

	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	call_getppid();
	expect_one_blink(_metadata, self->fd);
	ASSERT_EQ(-EINVAL, led_write_attr(self->name, "symbol", "exc_int3\n"));
	ASSERT_EQ(0, led_read_attr(self->name, "symbol", buf, sizeof(buf)));
	ASSERT_STREQ("", buf);
	ASSERT_EQ(0, kprobes_registered());
	ASSERT_EQ(0, hits(self->name));
	call_getppid();
	ASSERT_EQ(-ETIME, uled_next(self->fd, QUIET_MS));
	/* The trigger takes a good name again afterwards. */
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	call_getppid();
	expect_one_blink(_metadata, self->fd);
	ASSERT_EQ(1, hits(self->name));
}

/* Writing the name it already has is a change too: hits start again. */
TEST_F(kprobe_led, the_same_symbol_again_rearms_and_resets_hits)
{
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	call_getppid();
	expect_one_blink(_metadata, self->fd);
	ASSERT_EQ(1, hits(self->name));
	ASSERT_EQ(0, led_write_attr(self->name, "symbol",
				    "__x64_sys_getppid\n"));
	ASSERT_EQ(0, hits(self->name));
	ASSERT_EQ(1, kprobes_registered());
	call_getppid();
	expect_one_blink(_metadata, self->fd);
	ASSERT_EQ(1, hits(self->name));
}

/* hits counts since the last change of symbol, whatever the change. */
TEST_F(kprobe_led, removing_or_refusing_resets_hits)
{
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	call_getppid();
	expect_one_blink(_metadata, self->fd);
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "\n"));
	ASSERT_EQ(0, hits(self->name));
	/* An empty line with no probe is no error either. */
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "\n"));

	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	call_getppid();
	expect_one_blink(_metadata, self->fd);
	ASSERT_EQ(-ENOENT, led_write_attr(self->name, "symbol",
					  "lab_no_such_function\n"));
	ASSERT_EQ(0, hits(self->name));
}

/* A name of length chars, and a newline if asked. */
static char *long_name(size_t length, int newline)
{
	char *name = malloc(length + 2);

	if (!name)
		return NULL;
	memset(name, 'a', length);
	strcpy(name + length, newline ? "\n" : "");
	return name;
}

/*
 * The longest name the buffer holds, SYMBOL_SIZE - 1 characters, with or
 * without its newline, goes to the kprobes core, which knows no such
 * function.
 */
TEST_F(kprobe_led, the_longest_name_that_fits_goes_to_the_core)
{
	char *name = long_name(SYMBOL_SIZE - 1, 0);
	char *line = long_name(SYMBOL_SIZE - 1, 1);

	ASSERT_TRUE(name && line);
	ASSERT_EQ(-ENOENT, led_write_attr(self->name, "symbol", name));
	ASSERT_EQ(-ENOENT, led_write_attr(self->name, "symbol", line));
	ASSERT_EQ(0, kprobes_registered());
	free(name);
	free(line);
}

/*
 * A name one byte too long for the buffer (SYMBOL_SIZE characters, or far
 * more) fails with -ENAMETOOLONG and changes nothing: the probe, its name
 * and its hits stay as they were.
 */
TEST_F(kprobe_led, a_name_too_long_for_the_buffer_changes_nothing)
{
	char *name = long_name(SYMBOL_SIZE, 0);
	char *line = long_name(SYMBOL_SIZE, 1);
	char *huge = long_name(4000, 1);
	char buf[128];

	ASSERT_TRUE(name && line && huge);
	ASSERT_EQ(0, led_write_attr(self->name, "symbol", "__x64_sys_getppid"));
	call_getppid();
	expect_one_blink(_metadata, self->fd);
	ASSERT_EQ(-ENAMETOOLONG, led_write_attr(self->name, "symbol", name));
	ASSERT_EQ(-ENAMETOOLONG, led_write_attr(self->name, "symbol", line));
	ASSERT_EQ(-ENAMETOOLONG, led_write_attr(self->name, "symbol", huge));
	ASSERT_EQ(0, led_read_attr(self->name, "symbol", buf, sizeof(buf)));
	ASSERT_STREQ("__x64_sys_getppid", buf);
	ASSERT_EQ(1, kprobes_registered());
	ASSERT_EQ(1, hits(self->name));
	call_getppid();
	expect_one_blink(_metadata, self->fd);
	ASSERT_EQ(2, hits(self->name));
	free(name);
	free(line);
	free(huge);
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
