// SPDX-License-Identifier: GPL-2.0
/*
 * Grades tools/leds/uledbar: run it with its output on a pipe, drive its
 * LED through sysfs, and compare each line it draws with what the program's
 * contract says: one line per reported brightness, starting with the
 * brightness at registration, "[" + width cells + "] " + value "/" max, and
 * ceil(brightness * width / max) cells lit.
 */
#include <signal.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "uled_helpers.h"

#define FRAME_TIMEOUT_MS 5000

struct frame {
	int lit, width, value, max;
};

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

/* Parses "[###---] v/max"; 0, or -EINVAL for anything else. */
static int parse_frame(const char *line, struct frame *frame)
{
	const char *p = line;
	int consumed = 0;

	if (*p++ != '[')
		return -EINVAL;
	frame->lit = strspn(p, "#");
	frame->width = frame->lit + strspn(p + frame->lit, "-");
	p += frame->width;
	if (sscanf(p, "] %d/%d%n", &frame->value, &frame->max, &consumed) != 2 ||
	    p[consumed] != '\0')
		return -EINVAL;
	return 0;
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

FIXTURE_SETUP(bar)
{
	char max[16], width[16];
	int pipefd[2];

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
	ASSERT_TRUE(led_wait_for(self->name, FRAME_TIMEOUT_MS))
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

/* Reads the next frame and checks its shape against the variant. */
static int next_frame(struct __test_metadata *_metadata, int out,
		      const FIXTURE_VARIANT(bar) *variant, struct frame *frame)
{
	char line[512];
	int len = read_line(out, line, sizeof(line), FRAME_TIMEOUT_MS);

	if (len < 0) {
		TH_LOG("no line from uledbar within %d ms", FRAME_TIMEOUT_MS);
		return len;
	}
	if (parse_frame(line, frame)) {
		TH_LOG("not a frame: '%s'", line);
		return -EINVAL;
	}
	if (frame->width != variant->width || frame->max != variant->max) {
		TH_LOG("'%s': expected %d cells and max %d", line,
		       variant->width, variant->max);
		return -EINVAL;
	}
	return 0;
}

static int cells_for(int brightness, int max, int width)
{
	return ((long long)brightness * width + max - 1) / max;
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
	struct frame frame;

	ASSERT_EQ(0, next_frame(_metadata, self->out, variant, &frame));
	ASSERT_EQ(0, frame.value);
	ASSERT_EQ(0, frame.lit);
}

TEST_F(bar, one_frame_per_change)
{
	const int values[] = { 10, 20, 30, 0 };
	struct pollfd pfd = { .fd = self->out, .events = POLLIN };
	struct frame frame;
	unsigned int i;

	ASSERT_EQ(0, next_frame(_metadata, self->out, variant, &frame));
	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		ASSERT_EQ(0, led_set_brightness(self->name, values[i]));
		ASSERT_EQ(0, next_frame(_metadata, self->out, variant, &frame));
		ASSERT_EQ(values[i], frame.value);
	}
	/* Nothing changed since: nothing more to draw. */
	ASSERT_EQ(0, poll(&pfd, 1, 300));
}

TEST_F(bar, lights_the_rounded_up_share_of_cells)
{
	const int values[] = { 1, 10, 11, 50, 51, 99, 0, 100 };
	struct frame frame;
	unsigned int i;
	int value;

	ASSERT_EQ(0, next_frame(_metadata, self->out, variant, &frame));
	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		value = values[i] * variant->max / 100;
		ASSERT_EQ(0, led_set_brightness(self->name, value));
		ASSERT_EQ(0, next_frame(_metadata, self->out, variant, &frame));
		ASSERT_EQ(value, frame.value);
		ASSERT_EQ(cells_for(value, variant->max, variant->width),
			  frame.lit) TH_LOG("brightness %d", value);
	}
	/* Over the top is clamped by the LED core, and drawn full. */
	ASSERT_EQ(0, led_set_brightness(self->name, 1));
	ASSERT_EQ(0, next_frame(_metadata, self->out, variant, &frame));
	ASSERT_EQ(1, frame.lit);
	ASSERT_EQ(0, led_set_brightness(self->name, variant->max * 3));
	ASSERT_EQ(0, next_frame(_metadata, self->out, variant, &frame));
	ASSERT_EQ(variant->max, frame.value);
	ASSERT_EQ(variant->width, frame.lit);
}

TEST_F(bar, follows_the_timer_trigger)
{
	struct frame frame;
	int i, previous;

	ASSERT_EQ(0, next_frame(_metadata, self->out, variant, &frame));
	ASSERT_EQ(0, led_write_attr(self->name, "trigger", "timer"));
	ASSERT_EQ(0, led_write_attr(self->name, "delay_on", "100"));
	ASSERT_EQ(0, led_write_attr(self->name, "delay_off", "100"));
	ASSERT_EQ(0, next_frame(_metadata, self->out, variant, &frame));
	previous = frame.value;
	for (i = 0; i < 6; i++) {
		ASSERT_EQ(0, next_frame(_metadata, self->out, variant, &frame));
		ASSERT_TRUE(frame.value == 0 || frame.value == variant->max)
			TH_LOG("value %d", frame.value);
		ASSERT_NE(previous, frame.value);
		ASSERT_EQ(frame.value ? variant->width : 0, frame.lit);
		previous = frame.value;
	}
	ASSERT_EQ(0, led_write_attr(self->name, "trigger", "none"));
}

TEST_HARNESS_MAIN
