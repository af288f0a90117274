// SPDX-License-Identifier: GPL-2.0
/*
 * Grades tools/leds/uledbar: run it with its output on a pipe, drive its
 * LED through sysfs, and compare each line it draws, byte for byte, with
 * what the program's contract says: one line per reported brightness,
 * starting with the brightness at registration, "[" + width cells + "] " +
 * the value right-aligned to the width of max + "/" + max, and
 * ceil(brightness * width / max) cells lit. The bars go from one cell to
 * the widest uledbar allows, and from a max of 1 to one whose products
 * overflow an int. On a terminal, each frame is "\r" + frame + "\033[K".
 * Run under ptrace, uledbar must return when a read of /dev/uleds fails.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stddef.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <termios.h>

#include "kselftest_harness.h"
#include "uled_helpers.h"

#define FRAME_TIMEOUT_MS 5000
#define MAX_WIDTH	200	/* the widest bar uledbar draws */

/* One line from fd within timeout_ms; its length, or -ETIME/-EPIPE. */
static int read_line(int fd, char *buf, size_t size, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	long long end = now_ms() + timeout_ms;
	size_t len = 0;
	char c;

	while (len < size - 1) {
		int left = end - now_ms();

		if (left <= 0 || poll(&pfd, 1, left) <= 0)
			return -ETIME;
		if (read(fd, &c, 1) != 1)
			return -EPIPE;
		if (c == '\n')
			break;
		buf[len++] = c;
	}
	buf[len] = '\0';
	return len;
}

static int cells_for(long long brightness, long long max, int width)
{
	return (brightness * width + max - 1) / max;
}

/* The frame the contract asks for. */
static void expected_frame(char *buf, size_t size, int value, int max,
			   int width)
{
	int lit = cells_for(value, max, width);
	int digits = snprintf(NULL, 0, "%d", max);
	int i, pos = 0;

	buf[pos++] = '[';
	for (i = 0; i < width; i++)
		buf[pos++] = i < lit ? '#' : '-';
	snprintf(buf + pos, size - pos, "] %*d/%d", digits, value, max);
}

/*
 * Waits up to timeout_ms for the LED to appear: 1 if it did, 0 if not,
 * and -1 at once if uledbar exited first (it is reaped, its status in
 * *status), so that a program that gives up does not cost every case
 * the whole timeout.
 */
static int led_wait_while_running(const char *led, pid_t pid, int *status,
				  int timeout_ms)
{
	long long end = now_ms() + timeout_ms;

	while (!led_exists(led)) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return -1;
		if (now_ms() > end)
			return 0;
		usleep(10000);
	}
	return 1;
}

FIXTURE(bar) {
	char name[LED_MAX_NAME_SIZE];
	pid_t pid;
	int out;
};

FIXTURE_VARIANT(bar) {
	int max, width;
};

FIXTURE_VARIANT_ADD(bar, max100_width10) {
	.max = 100, .width = 10,
};

FIXTURE_VARIANT_ADD(bar, max255_width20) {
	.max = 255, .width = 20,
};

/* The smallest bar: off or on. */
FIXTURE_VARIANT_ADD(bar, max1_width1) {
	.max = 1, .width = 1,
};

/* One cell per step of brightness. */
FIXTURE_VARIANT_ADD(bar, max7_width7) {
	.max = 7, .width = 7,
};

/* The widest bar, wider than max: each step lights many cells. */
FIXTURE_VARIANT_ADD(bar, max3_width200) {
	.max = 3, .width = MAX_WIDTH,
};

/* Brightness that does not fit in a byte. */
FIXTURE_VARIANT_ADD(bar, max1000_width13) {
	.max = 1000, .width = 13,
};

/* brightness * width overflows an int. */
FIXTURE_VARIANT_ADD(bar, max2000000000_width200) {
	.max = 2000000000, .width = MAX_WIDTH,
};

FIXTURE_SETUP(bar)
{
	char max[16], width[16];
	int pipefd[2], registered, status = 0;

	snprintf(self->name, sizeof(self->name), "uledbar:white:%d", getpid());
	snprintf(max, sizeof(max), "%d", variant->max);
	snprintf(width, sizeof(width), "%d", variant->width);
	ASSERT_EQ(0, pipe(pipefd));
	self->pid = fork();
	ASSERT_LE(0, self->pid);
	if (self->pid == 0) {
		dup2(pipefd[1], STDOUT_FILENO);
		close(pipefd[0]);
		close(pipefd[1]);
		execlp("uledbar", "uledbar", "-m", max, "-w", width, self->name,
		       NULL);
		_exit(127);
	}
	close(pipefd[1]);
	self->out = pipefd[0];
	registered = led_wait_while_running(self->name, self->pid, &status,
					    FRAME_TIMEOUT_MS);
	if (registered < 0)
		self->pid = 0;
	ASSERT_LE(0, registered)
		TH_LOG("uledbar exited (status 0x%x) before %s appeared",
		       status, self->name);
	ASSERT_EQ(1, registered)
		TH_LOG("uledbar did not register %s", self->name);
}

FIXTURE_TEARDOWN(bar)
{
	if (self->pid > 0) {
		kill(self->pid, SIGTERM);
		waitpid(self->pid, NULL, 0);
	}
	close(self->out);
}

/* Reads the next line: it must be the frame of value, byte for byte. */
static int expect_frame(struct __test_metadata *_metadata, int out,
			const FIXTURE_VARIANT(bar) *variant, int value)
{
	char line[512], want[512];
	int len = read_line(out, line, sizeof(line), FRAME_TIMEOUT_MS);

	if (len < 0) {
		TH_LOG("no line from uledbar within %d ms (expected brightness %d)",
		       FRAME_TIMEOUT_MS, value);
		return len;
	}
	expected_frame(want, sizeof(want), value, variant->max, variant->width);
	if (strcmp(line, want)) {
		TH_LOG("brightness %d: got  '%s'", value, line);
		TH_LOG("brightness %d: want '%s'", value, want);
		return -EINVAL;
	}
	return 0;
}

/* Sets a brightness the LED core takes as it is (0..max). */
static int set_value(const char *led, long long value)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%lld", value);
	return led_write_attr(led, "brightness", buf);
}

TEST_F(bar, registers_the_led_with_its_max_brightness)
{
	char buf[32];

	ASSERT_EQ(0, led_read_attr(self->name, "max_brightness", buf,
				   sizeof(buf)));
	ASSERT_EQ(variant->max, atoi(buf));
}

TEST_F(bar, first_frame_is_the_initial_brightness)
{
	ASSERT_EQ(0, expect_frame(_metadata, self->out, variant, 0));
}

TEST_F(bar, one_frame_per_change)
{
	const int max = variant->max;
	const int values[] = { 1, max, max / 2, 0, max };
	struct pollfd pfd = { .fd = self->out, .events = POLLIN };
	unsigned int i;
	int previous = 0;

	ASSERT_EQ(0, expect_frame(_metadata, self->out, variant, 0));
	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		/* The driver reports changes only. */
		if (values[i] == previous)
			continue;
		ASSERT_EQ(0, set_value(self->name, values[i]));
		ASSERT_EQ(0, expect_frame(_metadata, self->out, variant,
					  values[i]));
		previous = values[i];
	}
	/* Nothing changed since: nothing more to draw. */
	ASSERT_EQ(0, poll(&pfd, 1, 300));
}

static int compare_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/*
 * Every bound: 0, 1, max - 1 and max, and for each number of lit cells k
 * the least and the greatest brightness that light k cells, in rising
 * order, then back to 0; then a brightness over max, which the LED core
 * clamps to max.
 */
TEST_F(bar, lights_the_rounded_up_share_of_cells)
{
	const long long max = variant->max, width = variant->width;
	long long *values = calloc(2 * width + 4, sizeof(*values));
	size_t count = 0, i;
	long long k, previous = 0;

	ASSERT_TRUE(values != NULL);
	values[count++] = 1;
	values[count++] = max - 1;
	values[count++] = max;
	for (k = 1; k <= width; k++) {
		long long least = (k - 1) * max / width + 1;
		long long greatest = k * max / width;

		if (least <= greatest) {
			values[count++] = least;
			values[count++] = greatest;
		}
	}
	qsort(values, count, sizeof(*values), compare_ll);
	ASSERT_EQ(0, expect_frame(_metadata, self->out, variant, 0));
	for (i = 0; i < count; i++) {
		if (values[i] == previous || values[i] < 0 || values[i] > max)
			continue;
		ASSERT_EQ(0, set_value(self->name, values[i]));
		ASSERT_EQ(0, expect_frame(_metadata, self->out, variant,
					  values[i]));
		previous = values[i];
	}
	free(values);
	ASSERT_EQ(max, previous);
	ASSERT_EQ(0, set_value(self->name, 0));
	ASSERT_EQ(0, expect_frame(_metadata, self->out, variant, 0));
	ASSERT_EQ(0, set_value(self->name, max + 1));
	ASSERT_EQ(0, expect_frame(_metadata, self->out, variant, max));
}

TEST_F(bar, follows_the_timer_trigger)
{
	char line[512], off[512], on[512];
	int i;

	ASSERT_EQ(0, expect_frame(_metadata, self->out, variant, 0));
	expected_frame(off, sizeof(off), 0, variant->max, variant->width);
	expected_frame(on, sizeof(on), variant->max, variant->max,
		       variant->width);
	ASSERT_EQ(0, led_write_attr(self->name, "trigger", "timer"));
	ASSERT_EQ(0, led_write_attr(self->name, "delay_on", "100"));
	ASSERT_EQ(0, led_write_attr(self->name, "delay_off", "100"));
	/* On and off by turns, each a frame of its own. */
	ASSERT_LE(0, read_line(self->out, line, sizeof(line), FRAME_TIMEOUT_MS));
	ASSERT_TRUE(!strcmp(line, on) || !strcmp(line, off)) TH_LOG("'%s'", line);
	for (i = 0; i < 6; i++) {
		int was_on = !strcmp(line, on);

		ASSERT_LE(0, read_line(self->out, line, sizeof(line),
				       FRAME_TIMEOUT_MS));
		ASSERT_STREQ(was_on ? off : on, line);
	}
	ASSERT_EQ(0, led_write_attr(self->name, "trigger", "none"));
}

/* Reads exactly len bytes from fd within FRAME_TIMEOUT_MS; 0 or -ETIME. */
static int read_bytes(int fd, char *buf, size_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	long long end = now_ms() + FRAME_TIMEOUT_MS;
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		int left = end - now_ms();

		if (left <= 0 || poll(&pfd, 1, left) <= 0)
			return -ETIME;
		n = read(fd, buf + got, len - got);
		if (n <= 0)
			return -EPIPE;
		got += n;
	}
	buf[got] = '\0';
	return 0;
}

/*
 * On a terminal the line is redrawn in place: each frame is a carriage
 * return, the frame, and "\033[K" to clear what is left of the line, and
 * no newline is ever written. The terminal is raw, so what arrives is
 * what uledbar wrote.
 */
TEST(on_a_terminal_each_frame_is_redrawn_in_place)
{
	const int values[] = { 0, 50, 100, 1 };
	char name[LED_MAX_NAME_SIZE], got[128], want[128], frame[96];
	struct pollfd pfd;
	unsigned int i;
	int master;
	pid_t pid;

	snprintf(name, sizeof(name), "uledbar:tty:%d", getpid());
	master = posix_openpt(O_RDWR | O_NOCTTY);
	ASSERT_LE(0, master);
	ASSERT_EQ(0, grantpt(master));
	ASSERT_EQ(0, unlockpt(master));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct termios raw;
		int slave;

		setsid();
		slave = open(ptsname(master), O_RDWR);
		if (slave < 0 || tcgetattr(slave, &raw))
			_exit(126);
		cfmakeraw(&raw);
		tcsetattr(slave, TCSANOW, &raw);
		dup2(slave, STDOUT_FILENO);
		close(master);
		execlp("uledbar", "uledbar", "-m", "100", "-w", "10", name, NULL);
		_exit(127);
	}
	ASSERT_TRUE(led_wait_for(name, FRAME_TIMEOUT_MS));
	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		if (i)
			ASSERT_EQ(0, set_value(name, values[i]));
		expected_frame(frame, sizeof(frame), values[i], 100, 10);
		snprintf(want, sizeof(want), "\r%s\033[K", frame);
		ASSERT_EQ(0, read_bytes(master, got, strlen(want)))
			TH_LOG("brightness %d: expected %zu bytes", values[i],
			       strlen(want));
		ASSERT_STREQ(want, got);
	}
	/* Nothing else, a newline least of all. */
	pfd = (struct pollfd){ .fd = master, .events = POLLIN };
	ASSERT_EQ(0, poll(&pfd, 1, 300));
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	close(master);
}

/* Whether fd of process pid is open on /dev/uleds. */
static int is_uleds(pid_t pid, long long fd)
{
	char path[64], target[64];
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/%d/fd/%lld", pid, fd);
	len = readlink(path, target, sizeof(target) - 1);
	if (len < 0)
		return 0;
	target[len] = '\0';
	return !strcmp(target, "/dev/uleds");
}

/*
 * uledbar runs under ptrace. Its first two reads of /dev/uleds go through
 * (the initial brightness, then one change); every later one fails with
 * EIO before it reaches the driver. follow() must then return, and
 * uledbar exit with status 1, having drawn the two frames and no more.
 */
TEST(returns_when_the_device_fails)
{
	const int good_reads = 2, give_up = 100;
	char name[LED_MAX_NAME_SIZE], line[512], want[512];
	int pipefd[2], status, reads = 0, failing = 0, entering = 1;
	int signal_to_pass = 0;
	struct user_regs_struct regs;
	pid_t pid;

	snprintf(name, sizeof(name), "uledbar:fail:%d", getpid());
	ASSERT_EQ(0, pipe(pipefd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		/* Its complaints about the failed reads are not KTAP. */
		dup2(null, STDERR_FILENO);
		dup2(pipefd[1], STDOUT_FILENO);
		close(pipefd[0]);
		close(pipefd[1]);
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		execlp("uledbar", "uledbar", "-m", "100", "-w", "10", name, NULL);
		_exit(127);
	}
	close(pipefd[1]);
	/* Stopped at exec. */
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSTOPPED(status));
	ASSERT_EQ(0, ptrace(PTRACE_SETOPTIONS, pid, NULL,
			    PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL));
	for (;;) {
		ASSERT_EQ(0, ptrace(PTRACE_SYSCALL, pid, NULL,
				    (void *)(long)signal_to_pass));
		signal_to_pass = 0;
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		if (WIFEXITED(status) || WIFSIGNALED(status))
			break;
		ASSERT_TRUE(WIFSTOPPED(status));
		if (WSTOPSIG(status) != (SIGTRAP | 0x80)) {
			signal_to_pass = WSTOPSIG(status);
			continue;
		}
		ASSERT_EQ(0, ptrace(PTRACE_GETREGS, pid, NULL, &regs));
		if (entering) {
			if (regs.orig_rax == SYS_read &&
			    is_uleds(pid, regs.rdi) && ++reads > good_reads) {
				/* The device fails: skip the read. */
				ASSERT_GT(give_up, reads)
					TH_LOG("%d failed reads and uledbar goes on",
					       reads - good_reads);
				regs.orig_rax = -1;
				ASSERT_EQ(0, ptrace(PTRACE_SETREGS, pid, NULL,
						    &regs));
				failing = 1;
			}
			if (reads == good_reads && !failing &&
			    regs.orig_rax == SYS_read && is_uleds(pid, regs.rdi)) {
				/* The second read: make a change to report. */
				ASSERT_EQ(0, set_value(name, 40));
			}
		} else if (failing) {
			regs.rax = -EIO;
			ASSERT_EQ(0, ptrace(PTRACE_SETREGS, pid, NULL, &regs));
			failing = 0;
		}
		entering = !entering;
	}
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("uledbar died of signal %d",
					      WTERMSIG(status));
	ASSERT_EQ(1, WEXITSTATUS(status));
	ASSERT_EQ(good_reads + 1, reads);
	expected_frame(want, sizeof(want), 0, 100, 10);
	ASSERT_LE(0, read_line(pipefd[0], line, sizeof(line), FRAME_TIMEOUT_MS));
	ASSERT_STREQ(want, line);
	expected_frame(want, sizeof(want), 40, 100, 10);
	ASSERT_LE(0, read_line(pipefd[0], line, sizeof(line), FRAME_TIMEOUT_MS));
	ASSERT_STREQ(want, line);
	/* Nothing drawn after the failure: the pipe is at its end. */
	ASSERT_EQ(-EPIPE, read_line(pipefd[0], line, sizeof(line),
				    FRAME_TIMEOUT_MS));
	close(pipefd[0]);
}

TEST_HARNESS_MAIN
