// SPDX-License-Identifier: GPL-2.0
/*
 * udp-every-cpu COUNT PORT: send COUNT datagrams of 72 bytes (100 with
 * their IPv4 and UDP headers) to 127.0.0.1:PORT from every CPU this
 * process may run on, all CPUs at once, and print how many went through
 * in all (sendto() fails with EPERM when an output rule drops one).
 *
 * One thread per CPU, pinned, each with its own socket; they start
 * together from a spin barrier and send back to back. A bash loop that
 * opens /dev/udp for every datagram spends almost all its time outside
 * the kernel's packet path, so two CPUs seldom meet in a quota or a
 * counter; these meet there far more often, though still by chance (a
 * quota that adds without an atomic add was caught in one of two grades).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lab/two_cpus.h"

#define PAYLOAD 72

struct sender {
	pthread_t thread;
	int cpu;
	long through, errors;
};

static long count;
static struct sockaddr_in to = { .sin_family = AF_INET };
static int ready, senders;

static void *send_all(void *arg)
{
	struct sender *s = arg;
	char payload[PAYLOAD];
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	memset(payload, ' ', sizeof(payload));
	if (fd < 0 || lab_pin_to_cpu(s->cpu)) {
		perror("udp-every-cpu: a sender");
		s->errors = count;
	}
	__atomic_add_fetch(&ready, 1, __ATOMIC_ACQ_REL);
	while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) < senders)
		;
	for (long i = 0; fd >= 0 && i < count; i++) {
		if (sendto(fd, payload, sizeof(payload), 0, (void *)&to, sizeof(to)) ==
		    sizeof(payload))
			s->through++;
		else if (errno != EPERM)
			s->errors++;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sender all[CPU_SETSIZE];
	long through = 0, errors = 0;
	cpu_set_t cpus;

	if (argc != 3 || (count = atol(argv[1])) <= 0 || !atoi(argv[2])) {
		fprintf(stderr, "usage: %s COUNT PORT\n", argv[0]);
		return 2;
	}
	to.sin_port = htons(atoi(argv[2]));
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (sched_getaffinity(0, sizeof(cpus), &cpus)) {
		perror("udp-every-cpu: sched_getaffinity");
		return 1;
	}
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &cpus))
			all[senders++] = (struct sender){ .cpu = cpu };
	for (int i = 0; i < senders; i++)
		if (pthread_create(&all[i].thread, NULL, send_all, &all[i])) {
			fprintf(stderr, "udp-every-cpu: cannot start a sender\n");
			return 1;
		}
	for (int i = 0; i < senders; i++) {
		pthread_join(all[i].thread, NULL);
		through += all[i].through;
		errors += all[i].errors;
	}
	if (errors) {
		fprintf(stderr, "udp-every-cpu: %ld datagrams failed other than by EPERM\n", errors);
		return 1;
	}
	printf("%ld\n", through);
	return 0;
}
