// SPDX-License-Identifier: GPL-2.0
/*
 * Grader of the flow-counter exercise: attach lru_flow_count.bpf.o at tc
 * ingress of a veth in a network namespace, send it more UDP flows than
 * its "flows" table holds, and check what an LRU flow table promises.
 *
 *   lru_flows OBJECT TX-IFNAME NETNS-PATH RX-IFNAME
 *
 * Traffic, all from CPU 0: cold flows 0..3N-1 (N = max_entries), one after
 * the other, flow c sending 1 + c % 3 packets in a row. Once 2N cold flows
 * have gone by, long after the table filled, a hot flow starts and sends
 * one packet after every cold flow. Checks (KTAP, through kselftest.h):
 *   - the table never holds more than N flows (counted every 128 flows);
 *   - the hot flow is there at the end with every packet counted, so it
 *     was never evicted;
 *   - the newest N/4 cold flows are all there (a full plain hash map would
 *     have refused them);
 *   - every flow in the table is one that was sent, with its exact count.
 * Which flows survived, by age, goes to $LAB_RESULTS/lru-flows.txt.
 *
 * Then both CPUs count the same flows at the same moment. The wire cannot
 * make two CPUs meet inside the program often enough, so each CPU runs the
 * attached program itself, through BPF_PROG_TEST_RUN on the same frames,
 * one thread pinned to CPU 0 and one to CPU 1, meeting at a spin barrier
 * before every run:
 *   - increments: a flow already in the table, RACE_REPEAT runs of it on
 *     each CPU at once; its count must grow by exactly 2 * RACE_REPEAT (an
 *     increment that is not atomic loses some). Under TCG the vCPUs are
 *     host threads that meet only while the host runs both at once, and on
 *     a loaded host a round may see no lost update, so the rounds go on
 *     until one miscounts, at most RACE_ROUNDS of them;
 *   - first packets: RACE_FLOW_ROUNDS x RACE_FLOWS flows that are not in
 *     the table, the first packet of each on both CPUs at once; every flow
 *     must count exactly 2 (an insert that overwrites the other CPU's, or
 *     a packet dropped when the insert loses the race, leaves 1).
 * That insert race has a window a few instructions wide, which a busy host
 * may never let both vCPUs into at once. So the race is also lost on cue:
 * a kprobe on htab_lru_map_update_elem() inserts each of LOST_FLOWS new
 * flows, with a count of 1, just before the program's own insert, as the
 * other CPU would (vm/include/lab/lost_insert.h); each must count 2.
 *
 * The receiving side may run in ksoftirqd, after sendto() has returned.
 * Before the table is read, a fence flow of one packet is sent and
 * awaited: the receive backlog of CPU 0 is FIFO, so once the fence is
 * counted every packet before it has been.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "kselftest.h"
#include "lab/lost_insert.h"
#include "lab/two_cpus.h"

#define HOT_PORT 5000
#define FENCE_PORT_BASE 6000
#define COLD_PORT_BASE 10000
#define DEST_PORT 9
#define RACE_INC_PORT 7000
#define RACE_PORT_BASE 20000
#define RACE_ROUNDS 128
#define RACE_REPEAT 100000
#define RACE_FLOWS 256
#define RACE_FLOW_ROUNDS 8
#define LOST_INSERT_OBJECT "/usr/lib/lab/lost_insert.bpf.o"
#define LOST_PORT_BASE 30000
#define LOST_FLOWS 64

struct flow_key {		/* as progs/lru_flow_count.c has it */
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 protocol;
	__u8 pad[3];
};

static unsigned long long sent[65536];	/* packets sent, by source port */

static void die(const char *what)
{
	ksft_exit_fail_msg("%s: %s\n", what, strerror(errno));
}

static void result(const char *name, int ok, const char *why)
{
	if (!ok)
		ksft_print_msg("%s: %s\n", name, why);
	ksft_test_result(ok, "%s\n", name);
}

static __u16 ip_checksum(const void *buf, int len)
{
	const __u16 *p = buf;
	__u32 sum = 0;

	for (; len > 1; len -= 2)
		sum += *p++;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

struct frame {
	struct ethhdr eth;
	struct iphdr ip;
	struct udphdr udp;
	char payload[18];
} __attribute__((packed));

static void make_frame(struct frame *f, __u16 sport)
{
	struct frame frame = {};

	memset(frame.eth.h_dest, 0xff, ETH_ALEN);
	frame.eth.h_source[0] = 0x02;
	frame.eth.h_proto = htons(ETH_P_IP);
	frame.ip.version = 4;
	frame.ip.ihl = 5;
	frame.ip.ttl = 64;
	frame.ip.protocol = IPPROTO_UDP;
	frame.ip.tot_len = htons(sizeof(frame) - sizeof(frame.eth));
	frame.ip.saddr = htonl(0x0a630001);	/* 10.99.0.1 */
	frame.ip.daddr = htonl(0x0a630002);	/* 10.99.0.2 */
	frame.ip.check = ip_checksum(&frame.ip, sizeof(frame.ip));
	frame.udp.source = htons(sport);
	frame.udp.dest = htons(DEST_PORT);
	frame.udp.len = htons(sizeof(frame.udp) + sizeof(frame.payload));
	*f = frame;
}

static void send_packet(int fd, int ifindex, __u16 sport)
{
	struct frame frame;
	struct sockaddr_ll to = {
		.sll_family = AF_PACKET,
		.sll_ifindex = ifindex,
		.sll_halen = ETH_ALEN,
	};

	make_frame(&frame, sport);
	memset(to.sll_addr, 0xff, ETH_ALEN);
	if (sendto(fd, &frame, sizeof(frame), 0, (void *)&to, sizeof(to)) != sizeof(frame))
		die("sendto");
	sent[sport]++;
}

static int lookup_count(int map_fd, __u16 sport, unsigned long long *count);

/* Wait until everything sent so far has gone through the program. A
 * program that never counts the fence costs one timeout, not one each. */
static void fence(int map_fd, int tx_fd, int tx_ifindex)
{
	static int next, broken;
	unsigned long long count;
	__u16 port = FENCE_PORT_BASE + next++;

	send_packet(tx_fd, tx_ifindex, port);
	for (int waited = 0; !broken && lookup_count(map_fd, port, &count); waited++) {
		if (waited == 1000) {
			printf("# fence flow %u not counted after 1 s\n", port);
			broken = 1;
		}
		usleep(1000);
	}
}

static int count_flows(int map_fd)
{
	struct flow_key key, next;
	int n = 0;

	for (int err = bpf_map_get_next_key(map_fd, NULL, &next); !err;
	     err = bpf_map_get_next_key(map_fd, &key, &next)) {
		key = next;
		n++;
	}
	return n;
}

static int lookup_count(int map_fd, __u16 sport, unsigned long long *count)
{
	struct flow_key key = {
		.saddr = htonl(0x0a630001), .daddr = htonl(0x0a630002),
		.sport = htons(sport), .dport = htons(DEST_PORT),
		.protocol = IPPROTO_UDP,
	};

	return bpf_map_lookup_elem(map_fd, &key, count);
}

/* Load the program in the namespace of the receiving veth, attach it at
 * ingress, and come back; the map fd works from any namespace. */
static int attach(const char *object, const char *netns, const char *rx, int *max_entries,
		  int *prog_fd)
{
	int here = open("/proc/self/ns/net", O_RDONLY), there = open(netns, O_RDONLY);
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_map *map;
	int ifindex;

	if (here < 0 || there < 0 || setns(there, CLONE_NEWNET))
		die("entering the receiver's netns");
	ifindex = if_nametoindex(rx);
	if (!ifindex)
		die(rx);
	obj = bpf_object__open_file(object, NULL);
	if (!obj || bpf_object__load(obj))
		die(object);
	prog = bpf_object__find_program_by_name(obj, "count_udp_flows");
	map = bpf_object__find_map_by_name(obj, "flows");
	if (!prog || !map) {
		errno = ENOENT;
		die("program count_udp_flows or map flows");
	}
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = bpf_program__fd(prog));
	if (bpf_tc_hook_create(&hook) && errno != EEXIST)
		die("bpf_tc_hook_create");
	if (bpf_tc_attach(&hook, &opts))
		die("bpf_tc_attach");
	if (setns(here, CLONE_NEWNET))
		die("leaving the receiver's netns");
	*max_entries = bpf_map__max_entries(map);
	*prog_fd = bpf_program__fd(prog);
	return bpf_map__fd(map);
}

static void clear_table(int map_fd)
{
	struct flow_key key;

	while (!bpf_map_get_next_key(map_fd, NULL, &key))
		if (bpf_map_delete_elem(map_fd, &key))
			die("emptying the flow table");
}

/* Two threads, one per CPU, that run the program on the same frame at the
 * same moment: both wait at a spin barrier, then both run it. */
struct racer {
	int cpu, prog_fd, errors;
	__u16 *ports;		/* the flow of each run */
	int runs, repeat;
};

static void *race(void *arg)
{
	struct racer *r = arg;

	if (lab_pin_to_cpu(r->cpu)) {
		r->errors++;	/* the guest must have CPUs 0 and 1 */
		ksft_print_msg("cannot run on CPU %d: %s\n", r->cpu, strerror(errno));
	}
	for (int i = 0; i < r->runs; i++) {
		struct frame frame;
		LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = &frame,
			    .data_size_in = sizeof(frame), .repeat = r->repeat);

		make_frame(&frame, r->ports[i]);
		lab_two_cpu_barrier();
		if (bpf_prog_test_run_opts(r->prog_fd, &opts) || opts.retval != TC_ACT_OK)
			r->errors++;
	}
	return NULL;
}

/* Run the flows of ports[0..runs) on both CPUs at once, each run repeated;
 * returns the number of failed runs (and says why). */
static int race_both_cpus(int prog_fd, __u16 *ports, int runs, int repeat)
{
	struct racer racers[2] = {
		{ .cpu = 0, .prog_fd = prog_fd, .ports = ports, .runs = runs, .repeat = repeat },
		{ .cpu = 1, .prog_fd = prog_fd, .ports = ports, .runs = runs, .repeat = repeat },
	};
	pthread_t threads[2];

	for (int i = 0; i < 2; i++)
		if (pthread_create(&threads[i], NULL, race, &racers[i]))
			die("pthread_create");
	for (int i = 0; i < 2; i++)
		pthread_join(threads[i], NULL);
	if (racers[0].errors + racers[1].errors)
		ksft_print_msg("%d runs of the program failed or did not return TC_ACT_OK\n",
			       racers[0].errors + racers[1].errors);
	return racers[0].errors + racers[1].errors;
}

/* An existing flow, counted by both CPUs at once: every increment must
 * land. Returns the rounds whose count came out wrong. */
static int race_increments(int map_fd, int prog_fd, char *why, size_t size)
{
	__u16 port = RACE_INC_PORT;
	int bad_rounds = 0, errors = 0;
	unsigned long long lost = 0;

	/* Under TCG the two vCPUs are host threads: they are in the program at
	 * the same instant only while the host runs both, so the rounds go on
	 * until one miscounts or all RACE_ROUNDS have run. */
	int round;

	for (round = 0; round < RACE_ROUNDS && !bad_rounds; round++) {
		unsigned long long before = 0, after = 0, expected;

		clear_table(map_fd);
		/* Make the flow exist first: one run on this CPU. */
		{
			struct frame frame;
			LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = &frame,
				    .data_size_in = sizeof(frame), .repeat = 1);

			make_frame(&frame, port);
			if (bpf_prog_test_run_opts(prog_fd, &opts))
				errors++;
		}
		if (lookup_count(map_fd, port, &before)) {
			snprintf(why, size, "the flow was not in the table after its first packet");
			return RACE_ROUNDS;
		}
		errors += race_both_cpus(prog_fd, &port, 1, RACE_REPEAT);
		lookup_count(map_fd, port, &after);
		expected = before + 2ULL * RACE_REPEAT;
		if (after != expected) {
			bad_rounds++;
			lost += expected > after ? expected - after : after - expected;
		}
	}
	snprintf(why, size, "%d of %d rounds of 2 x %d packets on one flow miscounted, "
		 "%llu packets off in all; %d failed runs", bad_rounds, round,
		 RACE_REPEAT, lost, errors);
	return bad_rounds + errors;
}

/* New flows whose first packets come on both CPUs at once: both packets of
 * every flow must be counted. Returns the flows counted wrong. */
static int race_first_packets(int map_fd, int prog_fd, char *why, size_t size)
{
	static __u16 ports[RACE_FLOWS];
	int wrong = 0, errors = 0;

	for (int round = 0; round < RACE_FLOW_ROUNDS; round++) {
		clear_table(map_fd);
		for (int i = 0; i < RACE_FLOWS; i++)
			ports[i] = RACE_PORT_BASE + round * RACE_FLOWS + i;
		errors += race_both_cpus(prog_fd, ports, RACE_FLOWS, 1);
		for (int i = 0; i < RACE_FLOWS; i++) {
			unsigned long long count = 0;

			lookup_count(map_fd, ports[i], &count);
			wrong += count != 2;
		}
	}
	snprintf(why, size, "%d of %d new flows, first packet on both CPUs at once, "
		 "did not count 2; %d failed runs", wrong, RACE_FLOW_ROUNDS * RACE_FLOWS, errors);
	return wrong + errors;
}

/* New flows that the other CPU inserts first, every time: the program's own
 * insert fails, and its packet must still be counted. Returns the flows
 * counted wrong. */
static int insert_lost_on_cue(int map_fd, int prog_fd, char *why, size_t size)
{
	const unsigned long long other_cpu_count = 1;
	struct lab_lost_insert race;
	int err, wrong = 0, errors = 0;
	long long won;

	clear_table(map_fd);
	err = lab_lost_insert_attach(&race, LOST_INSERT_OBJECT, map_fd,
				     "htab_lru_map_update_elem");
	for (int i = 0; !err && i < LOST_FLOWS; i++) {
		struct flow_key key = {
			.saddr = htonl(0x0a630001), .daddr = htonl(0x0a630002),
			.sport = htons(LOST_PORT_BASE + i), .dport = htons(DEST_PORT),
			.protocol = IPPROTO_UDP,
		};

		err = lab_lost_insert_arm(&race, &key, &other_cpu_count);
	}
	if (err)
		ksft_exit_fail_msg("%s: %s\n", LOST_INSERT_OBJECT, strerror(-err));
	for (int i = 0; i < LOST_FLOWS; i++) {
		struct frame frame;
		LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = &frame,
			    .data_size_in = sizeof(frame), .repeat = 1);

		make_frame(&frame, LOST_PORT_BASE + i);
		if (bpf_prog_test_run_opts(prog_fd, &opts) || opts.retval != TC_ACT_OK)
			errors++;
	}
	won = lab_lost_insert_detach(&race);
	for (int i = 0; i < LOST_FLOWS; i++) {
		unsigned long long count = 0;

		lookup_count(map_fd, LOST_PORT_BASE + i, &count);
		wrong += count != 2;
	}
	snprintf(why, size, "%d of %d new flows, inserted by another CPU between the lookup "
		 "and the insert (%lld times), did not count 2; %d failed runs", wrong,
		 LOST_FLOWS, won, errors);
	return wrong + errors + (won != LOST_FLOWS);
}

int main(int argc, char **argv)
{
	int map_fd, prog_fd, tx_fd, tx_ifindex, max_entries, cold, largest = 0;
	int survivors[3] = {}, recent_missing = 0, wrong = 0, strangers = 0;
	unsigned long long hot_count = 0;
	struct flow_key key, next;
	const char *dir = getenv("LAB_RESULTS") ?: "/lab/out";
	char why[160], path[256];
	FILE *report;

	if (argc != 5) {
		fprintf(stderr, "usage: %s OBJECT TX-IFNAME NETNS-PATH RX-IFNAME\n", argv[0]);
		return 2;
	}
	lab_pin_to_cpu(0);
	setvbuf(stdout, NULL, _IOLBF, 0);

	ksft_print_header();
	ksft_set_plan(7);
	map_fd = attach(argv[1], argv[3], argv[4], &max_entries, &prog_fd);
	tx_ifindex = if_nametoindex(argv[2]);
	tx_fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (!tx_ifindex || tx_fd < 0)
		die("the sending side");

	cold = 3 * max_entries;
	for (int c = 0; c < cold; c++) {
		for (int k = 0; k <= c % 3; k++)
			send_packet(tx_fd, tx_ifindex, COLD_PORT_BASE + c);
		if (c >= 2 * max_entries)
			send_packet(tx_fd, tx_ifindex, HOT_PORT);
		if (c % 128 == 127) {
			int n;

			fence(map_fd, tx_fd, tx_ifindex);
			n = count_flows(map_fd);
			largest = n > largest ? n : largest;
		}
	}
	fence(map_fd, tx_fd, tx_ifindex);

	/* Every flow in the table must be one we sent, with its exact count. */
	for (int err = bpf_map_get_next_key(map_fd, NULL, &next); !err;
	     err = bpf_map_get_next_key(map_fd, &key, &next)) {
		unsigned long long count;
		__u16 port;

		key = next;
		port = ntohs(key.sport);
		if (bpf_map_lookup_elem(map_fd, &key, &count))
			continue;	/* evicted while we walked: not ours to judge */
		if (key.saddr != htonl(0x0a630001) || key.daddr != htonl(0x0a630002) ||
		    ntohs(key.dport) != DEST_PORT || key.protocol != IPPROTO_UDP ||
		    !sent[port]) {
			strangers++;
			continue;
		}
		if (count != sent[port])
			wrong++;
		if (port >= COLD_PORT_BASE)
			survivors[(port - COLD_PORT_BASE) * 3 / cold]++;
	}
	for (int c = cold - max_entries / 4; c < cold; c++) {
		unsigned long long count;

		recent_missing += !!lookup_count(map_fd, COLD_PORT_BASE + c, &count);
	}
	lookup_count(map_fd, HOT_PORT, &hot_count);
	largest = count_flows(map_fd) > largest ? count_flows(map_fd) : largest;

	snprintf(path, sizeof(path), "%s/lru-flows.txt", dir);
	report = fopen(path, "w");
	for (FILE *f = stdout; f; f = f == stdout ? report : NULL) {
		fprintf(f, "%sflow table of %d entries; %d cold flows, then a hot flow from cold flow %d\n",
			f == stdout ? "# " : "", max_entries, cold, 2 * max_entries);
		fprintf(f, "%ssurviving cold flows: %d of the oldest third, %d of the middle, %d of the newest\n",
			f == stdout ? "# " : "", survivors[0], survivors[1], survivors[2]);
		fprintf(f, "%shot flow: %llu of %llu packets counted; most flows seen in the table: %d\n",
			f == stdout ? "# " : "", hot_count, sent[HOT_PORT], largest);
	}
	if (report)
		fclose(report);

	snprintf(why, sizeof(why), "%d flows in a table of %d", largest, max_entries);
	result("table_never_exceeds_max_entries", largest <= max_entries, why);
	snprintf(why, sizeof(why), "counted %llu of %llu hot packets", hot_count, sent[HOT_PORT]);
	result("hot_flow_never_evicted", hot_count == sent[HOT_PORT], why);
	snprintf(why, sizeof(why), "%d of the %d newest flows missing", recent_missing,
		 max_entries / 4);
	result("newest_flows_survive", !recent_missing, why);
	snprintf(why, sizeof(why), "%d flows with a wrong count, %d unknown keys", wrong,
		 strangers);
	result("surviving_counts_exact",
	       !wrong && !strangers && survivors[0] + survivors[1] + survivors[2] > 0, why);

	report = fopen(path, "a");
	result("concurrent_increments_exact", !race_increments(map_fd, prog_fd, why, sizeof(why)),
	       why);
	ksft_print_msg("%s\n", why);
	if (report)
		fprintf(report, "both CPUs at once, an existing flow: %s\n", why);
	result("concurrent_first_packets_counted",
	       !race_first_packets(map_fd, prog_fd, why, sizeof(why)), why);
	ksft_print_msg("%s\n", why);
	if (report)
		fprintf(report, "both CPUs at once, new flows: %s\n", why);
	result("insert_lost_to_another_cpu_counted",
	       !insert_lost_on_cue(map_fd, prog_fd, why, sizeof(why)), why);
	ksft_print_msg("%s\n", why);
	if (report) {
		fprintf(report, "another CPU first, on cue: %s\n", why);
		fclose(report);
	}
	ksft_finished();
}
