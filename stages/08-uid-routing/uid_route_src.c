// SPDX-License-Identifier: GPL-2.0
/*
 * Real sockets of different users, in namespace uidr (set up by
 * uid-route-sockets: table 100 leaves by dummy0 with source 192.0.2.1,
 * the main table by dummy1 with 198.51.100.1, and a rule sends uids
 * 1000-1999 to table 100). A connected UDP socket's source address tells
 * which table its route came from. The uid a lookup uses is the socket's
 * (sk_uid): its owner when it was made, or whoever fchown() gave it to
 * since, not the uid of whoever sends.
 * The same lookups run on every CPU at once, since fib_rule_match() runs
 * under RCU on all of them together; the test checks that they did
 * overlap, and that each ran on the CPU it was pinned to.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest.h"

#define DEST		"203.0.113.9"
#define VPN_SRC		"192.0.2.1"
#define UPLINK_SRC	"198.51.100.1"
#define RANGE_FIRST	1000
#define RANGE_LAST	1999
#define ROUNDS		20000

/* When a process of the concurrent test ran its lookups, and where. */
struct run {
	double start, end;
	int cpu;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *expected_source(uid_t uid)
{
	return uid >= RANGE_FIRST && uid <= RANGE_LAST ? VPN_SRC : UPLINK_SRC;
}

/*
 * Connect the UDP socket @s to DEST and put the source address it was
 * given in @buf ("error: ..." when that failed), then disconnect it, which
 * lets the next connect() look the route up again.
 */
static void source_of(int s, char *buf, size_t len)
{
	struct sockaddr_in dest = { .sin_family = AF_INET, .sin_port = htons(9) };
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	struct sockaddr_in src;
	socklen_t slen = sizeof(src);

	inet_pton(AF_INET, DEST, &dest.sin_addr);
	if (connect(s, (struct sockaddr *)&dest, sizeof(dest)) ||
	    getsockname(s, (struct sockaddr *)&src, &slen)) {
		snprintf(buf, len, "error: %s", strerror(errno));
		return;
	}
	inet_ntop(AF_INET, &src.sin_addr, buf, len);
	connect(s, &unspec, sizeof(unspec));
}

static int become(uid_t uid, uid_t saved)
{
	return setresgid(uid, uid, saved) || setresuid(uid, uid, saved);
}

/*
 * In a child: become @uid on @cpu, make a socket, and connect it @rounds
 * times, each time checking the source its uid's table gives, and note in
 * @run (shared with the parent, or NULL) when the lookups started and
 * ended and on which CPU. The exit status is 0 when all of them were
 * right, 1 when one was wrong, 2 when the set-up failed.
 */
static pid_t lookups_as(uid_t uid, int cpu, int rounds, struct run *run)
{
	cpu_set_t cpus;
	char src[64];
	pid_t pid;
	int s;

	fflush(stdout);		/* or the child prints the parent's lines again */
	pid = fork();
	if (pid)
		return pid;
	CPU_ZERO(&cpus);
	CPU_SET(cpu, &cpus);
	if (sched_setaffinity(0, sizeof(cpus), &cpus) || become(uid, uid))
		_exit(2);
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0)
		_exit(2);
	if (run)
		run->start = now();
	for (int i = 0; i < rounds; i++) {
		source_of(s, src, sizeof(src));
		if (strcmp(src, expected_source(uid))) {
			printf("# uid %u on CPU %d, lookup %d: source %s, expected %s\n",
			       uid, cpu, i, src, expected_source(uid));
			fflush(stdout);
			_exit(1);
		}
	}
	if (run) {
		run->end = now();
		run->cpu = sched_getcpu();
	}
	_exit(0);
}

static int wait_status(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 2;
	return WEXITSTATUS(status);
}

static void each_uid_gets_its_tables_source(void)
{
	static const uid_t uids[] = { 0, 999, 1000, 1500, 1999, 2000, 65534 };
	int wrong = 0;

	for (size_t i = 0; i < sizeof(uids) / sizeof(uids[0]); i++) {
		int status = wait_status(lookups_as(uids[i], 0, 1, NULL));

		ksft_print_msg("uid %u: %s\n", uids[i], status ? "wrong source" : "right source");
		wrong |= status;
	}
	ksft_test_result(!wrong, "each_uid_gets_its_tables_source\n");
}

static void sockets_on_every_cpu_at_once(void)
{
	int ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	pid_t pids[2 * CPU_SETSIZE];
	int pinned[2 * CPU_SETSIZE];
	double last_start = 0, first_end = 1e30;
	int n = 0, wrong = 0, misplaced = 0;
	struct run *runs = mmap(NULL, sizeof(*runs) * 2 * CPU_SETSIZE, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (runs == MAP_FAILED) {
		ksft_test_result_error("sockets_on_every_cpu_at_once: mmap: %s\n", strerror(errno));
		return;
	}

	/*
	 * On each CPU, the same two users: one inside the range and one just
	 * outside it, so that every CPU looks up the same rule for the same
	 * uids at the same time as the others.
	 */
	for (int cpu = 0; cpu < ncpus && cpu < CPU_SETSIZE; cpu++) {
		pinned[n] = cpu;
		pids[n] = lookups_as(RANGE_FIRST, cpu, ROUNDS, &runs[n]);
		n++;
		pinned[n] = cpu;
		pids[n] = lookups_as(RANGE_LAST + 1, cpu, ROUNDS, &runs[n]);
		n++;
	}
	for (int i = 0; i < n; i++)
		wrong |= wait_status(pids[i]);
	/*
	 * They all ran at once if the last of them started its lookups before
	 * the first of them finished.
	 */
	for (int i = 0; !wrong && i < n; i++) {
		if (runs[i].start > last_start)
			last_start = runs[i].start;
		if (runs[i].end < first_end)
			first_end = runs[i].end;
		misplaced |= runs[i].cpu != pinned[i];
	}
	ksft_print_msg("%d users on %d CPUs, %d lookups each%s\n", n, ncpus, ROUNDS,
		       misplaced ? "; one ran on another CPU than its own" : "");
	if (!wrong)
		ksft_print_msg("all of them were looking up routes together for %.0f ms\n",
			       (first_end - last_start) * 1e3);
	ksft_test_result(ncpus > 1 && !wrong && !misplaced && last_start < first_end,
			 "sockets_on_every_cpu_at_once\n");
	munmap(runs, sizeof(*runs) * 2 * CPU_SETSIZE);
}

/*
 * A socket made as @maker, connected after its process became @sender:
 * the source must be that of @maker's table.
 */
static int socket_made_as(uid_t maker, uid_t sender)
{
	char src[64];
	pid_t pid;
	int s;

	fflush(stdout);
	pid = fork();
	if (pid)
		return wait_status(pid);
	/* Keep root as the saved uid, to switch again after the socket. */
	if (become(maker, 0))
		_exit(2);
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || setresuid(0, 0, 0) || (sender && become(sender, 0)))
		_exit(2);
	source_of(s, src, sizeof(src));
	printf("# socket made as uid %u, connected as uid %u: source %s\n", maker, sender, src);
	fflush(stdout);
	_exit(strcmp(src, expected_source(maker)) ? 1 : 0);
}

/* A socket root makes and then gives to uid 1000 with fchown(). */
static int socket_given_away(void)
{
	char src[64];
	int s = socket(AF_INET, SOCK_DGRAM, 0);

	if (s < 0 || fchown(s, RANGE_FIRST, -1))
		return 2;
	source_of(s, src, sizeof(src));
	close(s);
	ksft_print_msg("socket made by root, given to uid %u: source %s\n", RANGE_FIRST, src);
	return strcmp(src, VPN_SRC) ? 1 : 0;
}

int main(void)
{
	ksft_print_header();
	ksft_set_plan(5);
	each_uid_gets_its_tables_source();
	sockets_on_every_cpu_at_once();
	ksft_test_result(!socket_made_as(1000, 0), "a_socket_made_in_the_range_keeps_its_uid\n");
	ksft_test_result(!socket_made_as(0, 1000), "a_socket_made_outside_the_range_keeps_its_uid\n");
	ksft_test_result(!socket_given_away(), "fchown_gives_a_socket_a_new_uid\n");
	ksft_finished();
}
