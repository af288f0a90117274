// SPDX-License-Identifier: GPL-2.0
/*
 * Writeback throttling on a real disk, judged from its trace events.
 *
 * A buffered writer fills the page cache of the block device and a
 * reader reads another part of it with O_DIRECT, first against a
 * latency target that no read can meet (1 us), with a direct writer
 * beside them, then against one that every read meets (10 s); after
 * each, the load stops and the disk is left idle until wbt has gone
 * back to step 0 and stopped its timer.
 * Timing under emulation is noisy, so nothing here judges a latency:
 * every window that wbt's timer closed (a wbt_timer event, with the
 * verdict of latency_exceeded() and the step it found) is replayed
 * against the rules of wb_timer_fn() and the depth steps of rq-qos, and
 * the wbt_step event that must, or must not, follow it is checked.
 *
 *	wbt-trace /dev/vda
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest.h"

#define TRACEFS		"/sys/kernel/tracing/"
#define DEFAULT_DEPTH	16		/* RWB_DEF_DEPTH */
#define WINDOW_NS	100000000LL	/* RWB_WINDOW_NSEC */
#define UNKNOWN_BUMP	5		/* RWB_UNKNOWN_BUMP */
#define JIFFY_NS	4000000LL	/* HZ=250: a timer may fire this early, twice */
#define WRITE_SPAN	(256LL << 20)	/* the writers' part of the disk, half each */
#define READ_SPAN	(128LL << 20)	/* the reader's, right after it */

enum { LAT_OK = 1, LAT_UNKNOWN, LAT_UNKNOWN_WRITES, LAT_EXCEEDED };

static const char *device;
static char queue_dir[128], wbt_dir[128];
static unsigned int queue_depth;

/* trace_pipe, read by a thread for the whole run so that nothing is lost */
static char *trace_text;
static size_t trace_len, trace_cap;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

static void die(const char *what)
{
	ksft_exit_fail_msg("%s: %s\n", what, strerror(errno));
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		die(path);
	close(fd);
}

static long long read_number(const char *dir, const char *name)
{
	char path[PATH_MAX], text[64] = "";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		die(path);
	return strtoll(text, NULL, 0);
}

static const char *queue_file(const char *name)
{
	static char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", queue_dir, name);
	return path;
}

static void mark(const char *fmt, ...)
{
	char text[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	write_file(TRACEFS "trace_marker", text);
}

static void *read_trace_pipe(void *unused)
{
	int fd = open(TRACEFS "trace_pipe", O_RDONLY);
	char chunk[65536];
	ssize_t n;

	if (fd < 0)
		die("trace_pipe");
	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		pthread_mutex_lock(&trace_lock);
		if (trace_len + n + 1 > trace_cap) {
			trace_cap = 2 * (trace_len + n + 1);
			trace_text = realloc(trace_text, trace_cap);
			if (!trace_text)
				die("realloc");
		}
		memcpy(trace_text + trace_len, chunk, n);
		trace_len += n;
		trace_text[trace_len] = '\0';
		pthread_mutex_unlock(&trace_lock);
	}
	return NULL;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * The load: processes, killed at the end of their part. A buffered
 * writer's pages go to the disk through background writeback, which wbt
 * throttles; a direct writer's writes go at once, and wbt counts them in
 * its windows but never holds them back.
 */
static pid_t start_writer(int flags, long long from)
{
	pid_t pid = fork();
	long long off = 0;
	void *block;
	int fd;

	if (pid)
		return pid;
	if (posix_memalign(&block, 4096, 1 << 20))
		die("posix_memalign");
	memset(block, 0x5a, 1 << 20);
	fd = open(device, O_WRONLY | flags);
	if (fd < 0)
		die(device);
	for (;;) {
		if (pwrite(fd, block, 1 << 20, from + off) != 1 << 20)
			die("write");
		off = (off + (1 << 20)) % (WRITE_SPAN / 2);
	}
}

static pid_t start_reader(void)
{
	pid_t pid = fork();
	unsigned int seed = 1;
	void *block;
	int fd;

	if (pid)
		return pid;
	if (posix_memalign(&block, 4096, 4096))
		die("posix_memalign");
	fd = open(device, O_RDONLY | O_DIRECT);
	if (fd < 0)
		die(device);
	for (;;) {
		long long off = WRITE_SPAN + (rand_r(&seed) % (READ_SPAN / 4096)) * 4096;

		if (pread(fd, block, 4096, off) != 4096)
			die("direct read");
		usleep(1000);
	}
}

static void stop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

/* What rq_depth_calc_max_depth() gives, and whether it is the cap. */
static unsigned int depth_at(int step, bool *at_cap)
{
	unsigned int depth = DEFAULT_DEPTH < queue_depth ? DEFAULT_DEPTH : queue_depth;

	*at_cap = false;
	if (queue_depth == 1) {
		*at_cap = step <= 0;
		return step > 0 ? 1 : 2;
	}
	if (step > 0)
		return 1 + ((depth - 1) >> (step < 31 ? step : 31));
	if (step < 0) {
		unsigned int cap = 3 * queue_depth / 4;

		/* Past step -24 the shift would overflow: that is the cap too. */
		depth = step < -24 ? UINT_MAX : 1 + ((depth - 1) << -step);
		if (depth > cap) {
			*at_cap = true;
			return cap;
		}
	}
	return depth;
}

static unsigned int normal_at(unsigned int max)
{
	return max <= 2 ? max : (max + 1) / 2;
}

static unsigned int background_at(unsigned int max)
{
	return max <= 2 ? 1 : (max + 3) / 4;
}

/* rwb_arm_timer()'s window, with the kernel's own integer square root. */
static long long window_at(int step)
{
	unsigned long long x, r = 0, b;

	if (step <= 0)
		return WINDOW_NS;
	x = (unsigned long long)(step + 1) << 8;
	for (b = 1ULL << 62; b > x; b >>= 2)
		;
	for (; b; b >>= 2) {
		if (x >= r + b) {
			x -= r + b;
			r = (r >> 1) + b;
		} else {
			r >>= 1;
		}
	}
	return (WINDOW_NS << 4) / r;
}

/* The sum of debugfs's "N: inflight M" lines, one per kind of write. */
static long long writes_in_flight(void)
{
	char path[PATH_MAX];
	long long sum = 0, n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/inflight", wbt_dir);
	f = fopen(path, "r");
	if (!f)
		die(path);
	while (fscanf(f, "%*d: inflight %lld\n", &n) == 1)
		sum += n;
	fclose(f);
	return sum;
}

/* Watch the debugfs depth until it reads normal for a while, or time out. */
static bool wait_for_normal(unsigned int normal, int hold_ms, int limit_s)
{
	long long deadline = now_ns() + limit_s * 1000000000LL, held = 0;

	while (now_ns() < deadline) {
		if (read_number(wbt_dir, "wb_normal") == normal) {
			if (!held)
				held = now_ns();
			if (now_ns() - held >= hold_ms * 1000000LL)
				return true;
		} else {
			held = 0;
		}
		usleep(20000);
	}
	return false;
}

/*
 * Stop the load, write the dirty pages back, and wait until wbt is back
 * at step 0 with nothing in flight; then a second with no I/O at all,
 * between two markers, in which its timer must stay quiet.
 */
static void settle(const char *phase)
{
	bool cap;
	int fd = open(device, O_RDONLY);

	if (fd < 0 || fsync(fd))
		die("fsync");
	close(fd);
	if (!wait_for_normal(normal_at(depth_at(0, &cap)), 1000, 20))
		ksft_print_msg("%s: wbt did not come back to step 0 within 20 s\n", phase);
	/* Nothing left in flight: the next window finds none either. */
	for (int i = 0; i < 500 && writes_in_flight(); i++)
		usleep(20000);
	usleep(2 * WINDOW_NS / 1000);
	mark("lab quiet %s", phase);
	sleep(1);
	mark("lab quiet over");
}

static void start_phase(const char *phase, const char *lat_usec)
{
	write_file(queue_file("wbt_lat_usec"), lat_usec);
	mark("lab phase %s unknown_cnt=%lld", phase, read_number(wbt_dir, "unknown_cnt"));
}

static void reach(const char *phase, int step)
{
	bool cap;
	unsigned int normal = normal_at(depth_at(step, &cap));

	/* A second or two on a working kernel: anything past 20 s is stuck. */
	if (!wait_for_normal(normal, 1000, 20))
		ksft_print_msg("%s: wb_normal never came to %u, step %d's, in 20 s\n",
			       phase, normal, step);
}

/*
 * Reads that no target of 1 us can be met by, beside writes of both
 * kinds, until the depth is 1. The buffered writer stops first, and its
 * dirty pages are written back while the others go on, so that when
 * they stop too nothing at all is left to write: the idle windows after
 * it are unknown, with no writes.
 */
static void exceeded(void)
{
	pid_t buffered, direct, reader;
	int fd;

	start_phase("exceeded", "1");
	buffered = start_writer(0, 0);
	direct = start_writer(O_DIRECT, WRITE_SPAN / 2);
	reader = start_reader();
	reach("exceeded", 64);
	stop(buffered);
	fd = open(device, O_RDONLY);
	if (fd < 0 || fsync(fd))
		die("fsync");
	close(fd);
	stop(direct);
	stop(reader);
	settle("exceeded");
}

/*
 * Reads that a target of 10 s is met by, beside a buffered writer, until
 * the depth is at the cap; then the writer alone for a second.
 */
static void good(void)
{
	pid_t buffered, reader;

	start_phase("good", "10000000");
	buffered = start_writer(0, 0);
	reader = start_reader();
	reach("good", -8);
	stop(reader);
	sleep(1);
	stop(buffered);
	settle("good");
}

/* The replay of the trace, window by window. */
enum rule {
	DEPTH_FOLLOWS_STEP,
	EXCEEDED,
	GOOD,
	UNKNOWN,
	TIMER_SEES_LAST_STEP,
	WINDOW_LENGTH,
	QUIET_AT_ZERO,
	NR_RULES
};

static const char *const rule_names[NR_RULES] = {
	"the_depth_and_its_limits_follow_the_step",
	"an_exceeded_window_halves_the_depth_down_to_one",
	"a_good_window_doubles_the_depth_up_to_three_quarters_of_the_queue",
	"five_unknown_windows_move_the_step_back_towards_zero",
	"each_window_starts_from_the_step_the_last_one_left",
	"a_window_lasts_as_long_as_its_step_says",
	"the_timer_stops_at_step_zero_with_nothing_in_flight",
};

static int broken[NR_RULES];

/* What the run must have shown for a rule to count as tested. */
enum seen {
	SEEN_EXCEEDED_STEP, SEEN_EXCEEDED_AT_ONE, SEEN_GOOD_STEP, SEEN_GOOD_AT_CAP,
	SEEN_UNKNOWN_FROM_ABOVE, SEEN_UNKNOWN_FROM_BELOW, SEEN_UNKNOWN_WAIT,
	SEEN_STEP, SEEN_QUIET, NR_SEEN
};
static int seen[NR_SEEN];

static void complain(enum rule rule, double ts, const char *fmt, ...)
{
	char text[256];
	va_list ap;

	if (broken[rule]++ >= 3)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	ksft_print_msg("%s: at %.6f: %s\n", rule_names[rule], ts, text);
}

struct event {
	double ts;
	char name[32];
	const char *args;	/* after "dev: " (or the marker's text) */
};

static bool parse(char *line, struct event *ev)
{
	char *p = strstr(line, "] ");
	int n = 0;

	if (!p || sscanf(p + 2, "%*s %lf: %31[^:]:%n", &ev->ts, ev->name, &n) != 2 || !n)
		return false;
	p += 2 + n;
	while (*p == ' ')
		p++;
	if (!strncmp(ev->name, "wbt_", 4)) {
		p = strstr(p, ": ");	/* past the device's name */
		if (!p)
			return false;
		p += 2;
	}
	ev->args = p;
	return true;
}

struct state {
	int step;
	unsigned int max;
	bool scaled_max;
	int unknown_cnt;
};

static void replay(char *text)
{
	struct state st = { 0 };
	bool in_phase = false, quiet = false;
	double last_timer = -1, min_gap_ns = 0;
	char *line, *save;
	struct event ev, next;
	char *lines[1 << 16];
	int nr = 0, i;

	for (line = strtok_r(text, "\n", &save); line && nr < (int)(sizeof(lines) / sizeof(lines[0]));
	     line = strtok_r(NULL, "\n", &save))
		if (parse(line, &ev))
			lines[nr++] = line;

	for (i = 0; i < nr; i++) {
		int status, before, inflight, after, cnt;
		unsigned int bg, normal, max;
		unsigned long window_us;
		bool step_follows = false, cap;
		char msg[32];

		parse(lines[i], &ev);
		if (!strcmp(ev.name, "tracing_mark_write")) {
			if (sscanf(ev.args, "lab phase %*s unknown_cnt=%d", &cnt) == 1) {
				/* wbt_set_min_lat() starts again from step 0. */
				st.step = 0;
				st.max = depth_at(0, &st.scaled_max);
				st.scaled_max = false;
				st.unknown_cnt = cnt;
				in_phase = true;
				last_timer = -1;
			} else if (!strncmp(ev.args, "lab quiet over", 14)) {
				quiet = false;
			} else if (!strncmp(ev.args, "lab quiet", 9)) {
				quiet = true;
				seen[SEEN_QUIET]++;
			}
			continue;
		}
		if (!in_phase)
			continue;
		if (!strcmp(ev.name, "wbt_step")) {
			complain(TIMER_SEES_LAST_STEP, ev.ts,
				 "a wbt_step event that no window's verdict explains: %s", ev.args);
			continue;
		}
		if (strcmp(ev.name, "wbt_timer"))
			continue;
		if (sscanf(ev.args, "status=%d, step=%d, inflight=%d", &status, &before, &inflight) != 3)
			ksft_exit_fail_msg("cannot read wbt_timer: %s\n", ev.args);

		if (quiet)
			complain(QUIET_AT_ZERO, ev.ts,
				 "the timer ran in a second without I/O, at step 0: status=%d, step=%d",
				 status, before);
		if (last_timer >= 0 && (ev.ts - last_timer) * 1e9 < min_gap_ns - 2 * JIFFY_NS)
			complain(WINDOW_LENGTH, ev.ts, "a window of %.1f ms where step %d's lasts %.1f ms",
				 (ev.ts - last_timer) * 1e3, st.step, min_gap_ns / 1e6);
		if (before != st.step)
			complain(TIMER_SEES_LAST_STEP, ev.ts,
				 "the window found step %d, where the last step event left %d",
				 before, st.step);
		st.step = before;
		st.max = depth_at(before, &cap);

		if (i + 1 < nr && parse(lines[i + 1], &next) && !strcmp(next.name, "wbt_step")) {
			if (sscanf(next.args, "%31[^:]: step=%d, window=%luus, background=%u, normal=%u, max=%u",
				   msg, &after, &window_us, &bg, &normal, &max) != 6)
				ksft_exit_fail_msg("cannot read wbt_step: %s\n", next.args);
			step_follows = true;
			seen[SEEN_STEP]++;
			i++;
		}

		/* What wb_timer_fn() and rq_depth_scale_up()/_down() must do. */
		{
			int want = st.step;
			bool moves = false, up_in_depth = false;

			switch (status) {
			case LAT_EXCEEDED:
				if (st.max != 1) {
					want = st.step < 0 ? 0 : st.step + 1;
					moves = true;
					seen[SEEN_EXCEEDED_STEP]++;
				} else {
					seen[SEEN_EXCEEDED_AT_ONE]++;
				}
				break;
			case LAT_OK:
			case LAT_UNKNOWN_WRITES:
				if (!st.scaled_max) {
					want = st.step - 1;
					moves = up_in_depth = true;
					if (status == LAT_OK)
						seen[SEEN_GOOD_STEP]++;
				} else if (status == LAT_OK) {
					seen[SEEN_GOOD_AT_CAP]++;
				}
				break;
			case LAT_UNKNOWN:
				if (++st.unknown_cnt < UNKNOWN_BUMP || st.step == 0) {
					seen[SEEN_UNKNOWN_WAIT]++;
				} else if (st.step > 0 && !st.scaled_max) {
					want = st.step - 1;
					moves = up_in_depth = true;
					seen[SEEN_UNKNOWN_FROM_ABOVE]++;
				} else if (st.step < 0 && st.max != 1) {
					want = st.step + 1;
					moves = true;
					seen[SEEN_UNKNOWN_FROM_BELOW]++;
				}
				break;
			default:
				ksft_exit_fail_msg("a window with status %d\n", status);
			}

			enum rule rule = status == LAT_EXCEEDED ? EXCEEDED :
					 status == LAT_UNKNOWN ? UNKNOWN : GOOD;

			if (moves && !step_follows)
				complain(rule, ev.ts, "status %d at step %d (depth %u%s): no step, where %d was due",
					 status, st.step, st.max, st.scaled_max ? ", the cap" : "", want);
			else if (!moves && step_follows)
				complain(rule, ev.ts, "status %d at step %d (depth %u%s): a step to %d, where none was due",
					 status, st.step, st.max, st.scaled_max ? ", the cap" : "", after);
			else if (moves && after != want)
				complain(rule, ev.ts, "status %d at step %d (depth %u): a step to %d, where %d was due",
					 status, st.step, st.max, after, want);

			if (step_follows) {
				unsigned int want_max = depth_at(after, &cap);

				if (max != want_max || normal != normal_at(max) || bg != background_at(max))
					complain(DEPTH_FOLLOWS_STEP, ev.ts,
						 "step %d: max=%u normal=%u background=%u, where %u %u %u are due",
						 after, max, normal, bg, want_max,
						 normal_at(want_max), background_at(want_max));
				if ((long long)window_us != window_at(st.step) / 1000)
					complain(WINDOW_LENGTH, ev.ts, "a step event from a window of %lu us at step %d, whose window is %lld us",
						 window_us, st.step, window_at(st.step) / 1000);
				st.scaled_max = up_in_depth ? cap : false;
				st.step = after;
				st.max = max;
				st.unknown_cnt = 0;
			}
		}

		/* rwb_arm_timer(): again while the step is not 0 or I/O is in flight. */
		last_timer = st.step == 0 && inflight == 0 ? -1 : ev.ts;
		min_gap_ns = window_at(st.step);
	}
}

static bool covered(enum rule rule)
{
	switch (rule) {
	case EXCEEDED:
		return seen[SEEN_EXCEEDED_STEP] && seen[SEEN_EXCEEDED_AT_ONE];
	case GOOD:
		return seen[SEEN_GOOD_STEP] && seen[SEEN_GOOD_AT_CAP];
	case UNKNOWN:
		return seen[SEEN_UNKNOWN_FROM_ABOVE] && seen[SEEN_UNKNOWN_FROM_BELOW] &&
		       seen[SEEN_UNKNOWN_WAIT];
	case QUIET_AT_ZERO:
		return seen[SEEN_QUIET] == 2;
	default:
		return seen[SEEN_STEP] > 0;
	}
}

static const char *const coverage[NR_RULES] = {
	[EXCEEDED] = "a step up in an exceeded window, and an exceeded window at depth 1",
	[GOOD] = "a step down in a good window, and a good window at the cap",
	[UNKNOWN] = "unknown windows that waited, moved down from above 0 and up from below",
	[QUIET_AT_ZERO] = "two quiet seconds",
};

int main(int argc, char **argv)
{
	pthread_t pipe_reader;
	const char *name;
	bool done = false;
	FILE *saved;
	int rule;

	if (argc != 2 || !(name = strrchr(argv[1], '/')))
		ksft_exit_fail_msg("usage: wbt-trace /dev/DISK\n");
	device = argv[1];
	name++;
	snprintf(queue_dir, sizeof(queue_dir), "/sys/block/%s/queue", name);
	snprintf(wbt_dir, sizeof(wbt_dir), "/sys/kernel/debug/block/%s/rqos/wbt", name);

	ksft_print_header();
	ksft_set_plan(NR_RULES);
	if (access(wbt_dir, R_OK))
		ksft_exit_fail_msg("%s: no wbt on %s\n", wbt_dir, device);
	queue_depth = read_number(queue_dir, "nr_requests");
	ksft_print_msg("%s: queue depth %u, latency target %lld us by default\n", device,
		       queue_depth, read_number(queue_dir, "wbt_lat_usec"));

	write_file(TRACEFS "tracing_on", "0");
	write_file(TRACEFS "buffer_size_kb", "4096");
	write_file(TRACEFS "trace", "");
	write_file(TRACEFS "events/wbt/enable", "1");
	write_file(TRACEFS "tracing_on", "1");
	if (pthread_create(&pipe_reader, NULL, read_trace_pipe, NULL))
		die("pthread_create");

	exceeded();
	good();

	mark("lab end");
	while (!done) {
		usleep(50000);
		pthread_mutex_lock(&trace_lock);
		done = trace_text && strstr(trace_text, "lab end");
		pthread_mutex_unlock(&trace_lock);
	}
	write_file(TRACEFS "tracing_on", "0");
	write_file(TRACEFS "events/wbt/enable", "0");
	write_file(queue_file("wbt_lat_usec"), "-1");

	pthread_mutex_lock(&trace_lock);
	saved = fopen("/lab/out/wbt-trace.txt", "w");
	if (saved) {
		fwrite(trace_text, 1, trace_len, saved);
		fclose(saved);
	}
	replay(trace_text);

	for (rule = 0; rule < NR_RULES; rule++) {
		if (!broken[rule] && !covered(rule))
			ksft_print_msg("%s: the run never showed %s\n", rule_names[rule],
				       coverage[rule] ? coverage[rule] : "a step");
		ksft_test_result(!broken[rule] && covered(rule), "%s\n", rule_names[rule]);
	}
	ksft_finished();
}
