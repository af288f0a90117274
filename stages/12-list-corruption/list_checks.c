// SPDX-License-Identifier: GPL-2.0
/*
 * What the list debugging checks (lib/list_debug.c) do with each kind of
 * broken list, on a kernel built with CONFIG_BUG_ON_DATA_CORRUPTION.
 *
 * Each case is one of lkdtm's list crash types, which builds a list on
 * its own stack, breaks one pointer and asks for list_add() or
 * list_del(). A child process writes the type's name to lkdtm's DIRECT
 * trigger, so that the task the kernel stops is the child. What is
 * checked, from the kernel log and the child's end:
 *   - the check's report is printed, once, in the kernel's words, with
 *     the pointers it names where the test knows them (a NULL the
 *     corruption left behind, an entry that is its own neighbour);
 *   - the kernel BUG()s in lib/list_debug.c, which kills the child;
 *   - lkdtm never gets to report, after the operation, that the
 *     corruption went unnoticed or that the operation was refused
 *     without a BUG;
 *   - on every CPU at once, every one of them reports and stops.
 *
 * The kernel must not panic on these oopses (kernel.panic_on_oops=0):
 * the stage's command line says so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The harness leaves a handler's parameter unused: -Wextra would say so. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#include "lab/two_cpus.h"

#define TRIGGER		"/sys/kernel/debug/provoke-crash/DIRECT"
#define PTR		"[0-9a-f]{16}"
/* Any report of lib/list_debug.c, right or wrong in its details. */
#define ANY_REPORT	"^list_(add|del) (corruption|double add)"
/* What only a task that went past the check prints (lkdtm/bugs.c). */
#define WENT_ON		"corruption not detected|Overwrite did not happen"
#define BUGGED		"^kernel BUG at lib/list_debug\\.c:[0-9]+!$"
/* Where the guest's results go back to the host (absent under make boot). */
#define REPORTS		"/lab/out/list-reports.txt"

/* Every kernel log record printed since the reader was opened. */
struct kmsg {
	int fd;
	char *text;	/* the records' messages, one per line */
	size_t len;
};

static void kmsg_open(struct __test_metadata *_metadata, struct kmsg *log)
{
	log->fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	ASSERT_LE(0, log->fd) TH_LOG("open /dev/kmsg: %s", strerror(errno));
	ASSERT_LE(0, lseek(log->fd, 0, SEEK_END));
	log->text = NULL;
	log->len = 0;
}

/* Read what came since: "prio,seq,time,flags;message" per record. */
static void kmsg_read(struct kmsg *log)
{
	char record[8192];
	ssize_t n;

	for (;;) {
		n = read(log->fd, record, sizeof(record) - 1);
		if (n < 0 && errno == EPIPE)
			continue;	/* records overwritten: read on */
		if (n <= 0)
			break;
		record[n] = '\0';
		char *message = strchr(record, ';');
		char *end;

		if (!message)
			continue;
		message++;
		end = strchr(message, '\n');
		if (end)
			*end = '\0';
		log->text = realloc(log->text, log->len + strlen(message) + 2);
		log->len += sprintf(log->text + log->len, "%s\n", message);
	}
}

static void kmsg_close(struct kmsg *log)
{
	close(log->fd);
	free(log->text);
}

/*
 * How many lines of the log match the extended regular expression. Each
 * one is also written, after @type and a tab, to @keep if it is not NULL.
 */
static int count_lines(const char *text, const char *pattern, const char *type, FILE *keep)
{
	regex_t re;
	int count = 0;
	const char *line = text;

	if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB))
		return -1;
	while (line && *line) {
		const char *end = strchr(line, '\n');
		char *copy = strndup(line, end ? (size_t)(end - line) : strlen(line));

		if (!regexec(&re, copy, 0, NULL, 0)) {
			count++;
			if (keep)
				fprintf(keep, "%s\t%s\n", type, copy);
		}
		free(copy);
		line = end ? end + 1 : NULL;
	}
	regfree(&re);
	return count;
}

/*
 * Start a child that waits for the pipe @go to close, then writes @type
 * to the trigger from @cpu (or wherever it runs, for -1). Its exit status
 * is 0 only if the write returned: the kernel let the task go on.
 */
static pid_t provoke(const char *type, int cpu, const int go[2])
{
	pid_t pid = fork();
	char byte;

	if (pid)
		return pid;
	close(go[1]);
	if (cpu >= 0 && lab_pin_to_cpu(cpu))
		_exit(2);
	while (read(go[0], &byte, 1) < 0 && errno == EINTR)
		;
	int fd = open(TRIGGER, O_WRONLY);

	if (fd < 0)
		_exit(3);
	_exit(write(fd, type, strlen(type)) == (ssize_t)strlen(type) ? 0 : 4);
}

static const char *how_it_ended(int status)
{
	static char text[64];

	if (WIFSIGNALED(status))
		snprintf(text, sizeof(text), "killed by signal %d", WTERMSIG(status));
	else
		snprintf(text, sizeof(text), "exited with %d (%s)", WEXITSTATUS(status),
			 WEXITSTATUS(status) == 0 ? "the write returned" :
			 WEXITSTATUS(status) == 3 ? TRIGGER " did not open" : "setup failed");
	return text;
}

/*
 * The two fixtures are the two checks. The program is built once for
 * each (-DLIST_ADD, -DLIST_DEL), so that a check that crashes the guest
 * leaves the other's results standing.
 */
#ifdef LIST_ADD
FIXTURE(list_add) { struct kmsg log; };

FIXTURE_VARIANT(list_add) {
	const char *type;
	const char *report;	/* the whole record, an extended regex */
};

/* next->prev of the entry after the insertion point is not prev. */
FIXTURE_VARIANT_ADD(list_add, next_prev_is_not_prev) {
	.type = "CORRUPT_LIST_ADD",
	.report = "^list_add corruption\\. next->prev should be prev \\(" PTR
		  "\\), but was 0{16}\\. \\(next=" PTR "\\)\\.$",
};

/* prev->next of the entry before it is not next. */
FIXTURE_VARIANT_ADD(list_add, prev_next_is_not_next) {
	.type = "CORRUPT_LIST_ADD_PREV_NEXT",
	.report = "^list_add corruption\\. prev->next should be next \\(" PTR
		  "\\), but was 0{16}\\. \\(prev=" PTR "\\)\\.$",
};

FIXTURE_VARIANT_ADD(list_add, prev_is_null) {
	.type = "CORRUPT_LIST_ADD_NULL_PREV",
	.report = "^list_add corruption\\. prev is NULL\\.$",
};

FIXTURE_VARIANT_ADD(list_add, next_is_null) {
	.type = "CORRUPT_LIST_ADD_NULL_NEXT",
	.report = "^list_add corruption\\. next is NULL\\.$",
};

/* The entry is already first: new is next. */
FIXTURE_VARIANT_ADD(list_add, added_twice_at_the_head) {
	.type = "CORRUPT_LIST_ADD_TWICE",
	.report = "^list_add double add: new=(" PTR "), prev=" PTR ", next=\\1\\.$",
};

/* The entry is already last: new is prev. */
FIXTURE_VARIANT_ADD(list_add, added_twice_at_the_tail) {
	.type = "CORRUPT_LIST_ADD_TAIL_TWICE",
	.report = "^list_add double add: new=(" PTR "), prev=\\1, next=" PTR "\\.$",
};

#endif /* LIST_ADD */

#ifdef LIST_DEL
FIXTURE(list_del) { struct kmsg log; };

FIXTURE_VARIANT(list_del) {
	const char *type;
	const char *report;
};

FIXTURE_VARIANT_ADD(list_del, next_prev_is_not_the_entry) {
	.type = "CORRUPT_LIST_DEL",
	.report = "^list_del corruption\\. next->prev should be " PTR
		  ", but was 0{16}\\. \\(next=" PTR "\\)$",
};

FIXTURE_VARIANT_ADD(list_del, prev_next_is_not_the_entry) {
	.type = "CORRUPT_LIST_DEL_PREV_NEXT",
	.report = "^list_del corruption\\. prev->next should be " PTR
		  ", but was 0{16}\\. \\(prev=" PTR "\\)$",
};

FIXTURE_VARIANT_ADD(list_del, next_is_null) {
	.type = "CORRUPT_LIST_DEL_NULL_NEXT",
	.report = "^list_del corruption, " PTR "->next is NULL$",
};

FIXTURE_VARIANT_ADD(list_del, prev_is_null) {
	.type = "CORRUPT_LIST_DEL_NULL_PREV",
	.report = "^list_del corruption, " PTR "->prev is NULL$",
};

/* Both pointers are poisoned, and next is the one reported. */
FIXTURE_VARIANT_ADD(list_del, deleted_twice) {
	.type = "CORRUPT_LIST_DEL_TWICE",
	.report = "^list_del corruption, " PTR "->next is LIST_POISON1 \\(dead000000000100\\)$",
};

FIXTURE_VARIANT_ADD(list_del, prev_is_poisoned) {
	.type = "CORRUPT_LIST_DEL_POISON2",
	.report = "^list_del corruption, " PTR "->prev is LIST_POISON2 \\(dead000000000122\\)$",
};
#endif /* LIST_DEL */

/*
 * Provoke @type on each of @cpus CPUs at once (one child, anywhere, for
 * 0) and check what each child and the log show.
 */
static void expect_reports(struct __test_metadata *_metadata, struct kmsg *log,
			   const char *type, const char *report, int cpus)
{
	int children = cpus ? cpus : 1;
	int go[2], status, reports, i;
	pid_t pid[256];
	FILE *keep;

	ASSERT_GE(256, children);
	ASSERT_EQ(0, pipe(go));
	for (i = 0; i < children; i++) {
		pid[i] = provoke(type, cpus ? i : -1, go);
		ASSERT_LT(0, pid[i]);
	}
	close(go[0]);
	close(go[1]);
	for (i = 0; i < children; i++) {
		ASSERT_EQ(pid[i], waitpid(pid[i], &status, 0));
		EXPECT_TRUE(WIFSIGNALED(status))
			TH_LOG("%s: the task that wrote it %s; the check should have "
			       "stopped it with a BUG", type, how_it_ended(status));
	}
	kmsg_read(log);
	/* Each type's report, as the kernel printed it, for the chapter. */
	keep = cpus ? NULL : fopen(REPORTS, "a");
	reports = count_lines(log->text ?: "", report, type, keep);
	if (keep)
		fclose(keep);
	EXPECT_EQ(children, reports)
		TH_LOG("%s: %d report(s) matching %s, for %d task(s)", type, reports,
		       report, children);
	EXPECT_EQ(children, count_lines(log->text ?: "", ANY_REPORT, NULL, NULL))
		TH_LOG("%s: one report of lib/list_debug.c per task, and no other",
		       type);
	EXPECT_EQ(children, count_lines(log->text ?: "", BUGGED, NULL, NULL))
		TH_LOG("%s: one BUG in lib/list_debug.c per task", type);
	EXPECT_EQ(0, count_lines(log->text ?: "", WENT_ON, NULL, NULL))
		TH_LOG("%s: lkdtm went on after the operation", type);
	if (!_metadata->passed)
		TH_LOG("the kernel log:\n%s", log->text ?: "(nothing)");
}

static int online_cpus(void)
{
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

/* Each type alone, then on every CPU at once. */
#define LIST_CHECK_TESTS(check)						\
	FIXTURE_SETUP(check) { kmsg_open(_metadata, &self->log); }	\
	FIXTURE_TEARDOWN(check) { kmsg_close(&self->log); }		\
									\
	TEST_F(check, is_reported_and_stops_the_task)			\
	{								\
		expect_reports(_metadata, &self->log, variant->type,	\
			       variant->report, 0);			\
	}								\
									\
	TEST_F(check, on_every_cpu_at_once)				\
	{								\
		expect_reports(_metadata, &self->log, variant->type,	\
			       variant->report, online_cpus());		\
	}

#ifdef LIST_ADD
LIST_CHECK_TESTS(list_add)
#endif
#ifdef LIST_DEL
LIST_CHECK_TESTS(list_del)
#endif

TEST_HARNESS_MAIN
