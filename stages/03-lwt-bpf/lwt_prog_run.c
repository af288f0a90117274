// SPDX-License-Identifier: GPL-2.0
/*
 * lwt-prog-run: run an exercise's LWT xmit program on packets the lab
 * makes, through BPF_PROG_TEST_RUN, and check what it returns, what it
 * writes and what it counts. The route graders (lwt-exercise-*) judge the
 * programs by what reaches the peer; this one reaches what the wire
 * cannot: the verdict for every length around the limit, every TOS byte
 * and many different headers, and both CPUs in the program at once.
 *
 *   lwt-prog-run len-limit OBJECT   (section len_limit)
 *   lwt-prog-run dscp OBJECT        (section set_dscp)
 *
 * The object is loaded as BPF_PROG_TYPE_LWT_XMIT with its maps unpinned,
 * so that the run starts from empty maps and leaves nothing behind.
 * BPF_PROG_TEST_RUN takes an Ethernet frame; an LWT program sees it from
 * the IPv4 header on, as it sees a routed packet, and what it wrote comes
 * back behind 14 zeroed bytes.
 *
 * Concurrency: two threads, pinned to CPU 0 and CPU 1, meet at a spin
 * barrier before every run, and run the program on the same destination:
 *   - bytes: a destination already counted, RACE_REPEAT runs on each CPU
 *     at once: the counter must grow by exactly 2 * RACE_REPEAT * length
 *     (an addition that is not atomic loses some). Under TCG the vCPUs are
 *     host threads that meet only while the host runs both at once, so the
 *     rounds go on until one miscounts, at most RACE_ROUNDS of them;
 *   - first packets: RACE_DEST_ROUNDS x RACE_DESTS new destinations, the
 *     first packet to each on both CPUs at once: each must count both
 *     packets (an insert that replaces the other CPU's, or a packet
 *     forgotten when the insert loses the race, leaves one).
 * The window of that insert race is a few instructions wide, and a busy
 * host may never run both vCPUs inside it. So the lost race is also
 * played on cue: LOST_INSERT_OBJECT, a kprobe on htab_map_update_elem(),
 * inserts each of LOST_DESTS new destinations' counters just before the
 * program's own insert, as the other CPU would (vm/include/lab/lost_insert.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "kselftest.h"
#include "lab/lost_insert.h"
#include "lab/two_cpus.h"

#define LWT_LEN_LIMIT 256
#define LWT_DSCP 34
#define RACE_ROUNDS 128
#define RACE_REPEAT 100000
#define RACE_DESTS 256
#define RACE_DEST_ROUNDS 8
#define RACE_LEN 100
#define LOST_INSERT_OBJECT "/usr/lib/lab/lost_insert.bpf.o"
#define LOST_FIRST 0x0a030000	/* 10.3.0.0 */
#define LOST_DESTS 64
#define HEADERS 8192

#define SADDR 0xc0a8fc01	/* 192.168.252.1 */

struct packet {
	struct ethhdr eth;
	unsigned char ip[1500];
} __attribute__((packed));

static int prog_fd, map_fd = -1;

static __u16 ip_checksum(const void *buf, int len)
{
	const unsigned char *p = buf;
	__u32 sum = 0;

	for (int i = 0; i + 1 < len; i += 2)
		sum += p[i] << 8 | p[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

/* An IPv4 packet of LEN bytes to DADDR (host order), header of IHL words
 * with the given TOS, TTL and id, checksum valid. */
static int make_packet(struct packet *pkt, int len, __u32 daddr, int ihl, __u8 tos,
		       __u8 ttl, __u16 id, __u8 protocol)
{
	struct iphdr *iph = (struct iphdr *)pkt->ip;
	__u16 check;

	memset(pkt, 0, sizeof(*pkt));
	pkt->eth.h_proto = htons(ETH_P_IP);
	iph->version = 4;
	iph->ihl = ihl;
	iph->tos = tos;
	iph->tot_len = htons(len);
	iph->id = htons(id);
	iph->ttl = ttl;
	iph->protocol = protocol;
	iph->saddr = htonl(SADDR);
	iph->daddr = htonl(daddr);
	for (int i = 20; i < ihl * 4; i++)	/* options: NOPs and one end */
		pkt->ip[i] = i + 1 < ihl * 4 ? 1 : 0;
	for (int i = ihl * 4; i < len; i++)
		pkt->ip[i] = i;
	check = ip_checksum(iph, ihl * 4);
	pkt->ip[10] = check >> 8;
	pkt->ip[11] = check & 0xff;
	return sizeof(pkt->eth) + len;
}

/* Choose the header's id so that its checksum comes out near CHECK: an
 * incremental update that forgets the end-around carry goes wrong only
 * when the checksum is within the change of 0 or 0xffff. */
static void checksum_near(struct packet *pkt, int ihl, __u16 check)
{
	__u32 want = ~check & 0xffff, sum;

	pkt->ip[4] = pkt->ip[5] = pkt->ip[10] = pkt->ip[11] = 0;
	sum = want + (ip_checksum(pkt->ip, ihl * 4) & 0xffff);	/* want - sum without id */
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	pkt->ip[4] = sum >> 8;
	pkt->ip[5] = sum & 0xff;
	check = ip_checksum(pkt->ip, ihl * 4);
	pkt->ip[10] = check >> 8;
	pkt->ip[11] = check & 0xff;
}

/* One run; returns the program's verdict, or -1 if the run failed. */
static int run(struct packet *pkt, int size, int repeat, struct packet *out)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = size,
		    .repeat = repeat, .data_out = out, .data_size_out = out ? sizeof(*out) : 0);

	if (bpf_prog_test_run_opts(prog_fd, &opts))
		return -1;
	if (out && opts.data_size_out != (__u32)size)
		return -2;
	return opts.retval;
}

static void load(const char *object, const char *section)
{
	struct bpf_program *prog;
	struct bpf_object *obj;
	struct bpf_map *map;

	obj = bpf_object__open_file(object, NULL);
	if (!obj)
		ksft_exit_fail_msg("%s: %s\n", object, strerror(errno));
	bpf_object__for_each_map(map, obj)
		bpf_map__set_pin_path(map, NULL);
	prog = NULL;
	bpf_object__for_each_program(prog, obj)
		if (!strcmp(bpf_program__section_name(prog), section))
			break;
	if (!prog)
		ksft_exit_fail_msg("%s has no section %s\n", object, section);
	bpf_program__set_type(prog, BPF_PROG_TYPE_LWT_XMIT);
	if (bpf_object__load(obj))
		ksft_exit_fail_msg("loading %s: %s\n", object, strerror(errno));
	prog_fd = bpf_program__fd(prog);
	map = bpf_object__find_map_by_name(obj, "lwt_len_limit_bytes");
	if (map)
		map_fd = bpf_map__fd(map);
}

static unsigned long long bytes_of(__u32 daddr)
{
	unsigned long long bytes = 0;
	__u32 key = htonl(daddr);

	bpf_map_lookup_elem(map_fd, &key, &bytes);
	return bytes;
}

/* -- both CPUs at once -------------------------------------------------- */

struct racer {
	int cpu, errors, repeat, runs;
	__u32 *dests;
	struct timespec start, end;	/* of the last run */
};

static void *race(void *arg)
{
	struct racer *r = arg;
	static struct packet pkts[2];
	struct packet *pkt = &pkts[r->cpu];

	if (lab_pin_to_cpu(r->cpu)) {
		ksft_print_msg("cannot run on CPU %d: %s\n", r->cpu, strerror(errno));
		r->errors++;	/* the guest must have CPUs 0 and 1 */
	}
	for (int i = 0; i < r->runs; i++) {
		int size = make_packet(pkt, RACE_LEN, r->dests[i], 5, 0, 64, i, IPPROTO_UDP);

		lab_two_cpu_barrier();
		clock_gettime(CLOCK_MONOTONIC, &r->start);
		if (run(pkt, size, r->repeat, NULL) != BPF_OK)
			r->errors++;
		clock_gettime(CLOCK_MONOTONIC, &r->end);
	}
	return NULL;
}

static double together;	/* seconds both CPUs spent in repeated runs at once */

static int race_both_cpus(__u32 *dests, int runs, int repeat)
{
	struct racer racers[2] = {
		{ .cpu = 0, .dests = dests, .runs = runs, .repeat = repeat },
		{ .cpu = 1, .dests = dests, .runs = runs, .repeat = repeat },
	};
	pthread_t threads[2];

	for (int i = 0; i < 2; i++)
		if (pthread_create(&threads[i], NULL, race, &racers[i]))
			ksft_exit_fail_msg("pthread_create: %s\n", strerror(errno));
	for (int i = 0; i < 2; i++)
		pthread_join(threads[i], NULL);
	if (racers[0].errors + racers[1].errors)
		ksft_print_msg("%d runs failed or did not return BPF_OK\n",
			       racers[0].errors + racers[1].errors);
	if (repeat > 1) {
		/* How long the two CPUs were in the program together. */
		double t0 = racers[0].start.tv_sec + racers[0].start.tv_nsec / 1e9;
		double t1 = racers[1].start.tv_sec + racers[1].start.tv_nsec / 1e9;
		double e0 = racers[0].end.tv_sec + racers[0].end.tv_nsec / 1e9;
		double e1 = racers[1].end.tv_sec + racers[1].end.tv_nsec / 1e9;
		double both = (e0 < e1 ? e0 : e1) - (t0 > t1 ? t0 : t1);

		together += both > 0 ? both : 0;
	}
	return racers[0].errors + racers[1].errors;
}

/* -- len_limit ---------------------------------------------------------- */

static void len_limit(void)
{
	static const int lengths[] = { 20, 28, 84, 100, 255, 256, 257, 258, 300, 512, 1028, 1500 };
	const __u32 dest = 0x0a000001, other = 0x0a000002;	/* 10.0.0.1, 10.0.0.2 */
	unsigned long long passed = 0, other_passed = 0;
	int wrong_verdicts = 0, bad_rounds = 0, wrong_dests = 0, errors = 0;
	struct packet pkt;

	for (unsigned int i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
		int len = lengths[i], expected = len > LWT_LEN_LIMIT ? BPF_DROP : BPF_OK;
		int got = run(&pkt, make_packet(&pkt, len, i % 2 ? other : dest, 5, 0, 64, i,
						IPPROTO_ICMP), 1, NULL);

		if (got != expected) {
			ksft_print_msg("a packet of %d bytes: verdict %d, expected %s\n", len, got,
				       expected == BPF_OK ? "BPF_OK" : "BPF_DROP");
			wrong_verdicts++;
		}
		if (expected == BPF_OK)
			*(i % 2 ? &other_passed : &passed) += len;
	}
	ksft_test_result(!wrong_verdicts, "verdict_for_every_length\n");

	ksft_print_msg("10.0.0.1: %llu bytes counted, %llu passed; 10.0.0.2: %llu counted, %llu passed\n",
		       bytes_of(dest), passed, bytes_of(other), other_passed);
	ksft_test_result(map_fd >= 0 && bytes_of(dest) == passed && bytes_of(other) == other_passed,
			 "bytes_passed_counted_per_destination\n");

	/* An existing destination, counted by both CPUs at once. Under TCG the
	 * two vCPUs are host threads: they are in the program at the same
	 * instant only while the host runs both, so the rounds go on until one
	 * miscounts or all RACE_ROUNDS have run. */
	int rounds = 0;

	for (int round = 0; round < RACE_ROUNDS && !bad_rounds; round++, rounds++) {
		__u32 d = 0x0a010000 + round;
		unsigned long long before, after;

		if (run(&pkt, make_packet(&pkt, RACE_LEN, d, 5, 0, 64, 0, IPPROTO_UDP), 1,
			NULL) != BPF_OK)
			errors++;
		before = bytes_of(d);
		errors += race_both_cpus(&d, 1, RACE_REPEAT);
		after = bytes_of(d);
		if (after != before + 2ULL * RACE_REPEAT * RACE_LEN) {
			ksft_print_msg("round %d: %llu bytes counted, %llu expected\n", round,
				       after - before, 2ULL * RACE_REPEAT * RACE_LEN);
			bad_rounds++;
		}
	}
	ksft_print_msg("%d of %d rounds of 2 x %d packets to one destination miscounted; "
		       "both CPUs in the program together for %.0f ms\n",
		       bad_rounds, rounds, RACE_REPEAT, together * 1e3);
	ksft_test_result(!bad_rounds && !errors, "concurrent_bytes_exact\n");

	/* New destinations whose first packets come on both CPUs at once. */
	errors = 0;
	for (int round = 0; round < RACE_DEST_ROUNDS; round++) {
		static __u32 dests[RACE_DESTS];

		for (int i = 0; i < RACE_DESTS; i++)
			dests[i] = 0x0a020000 + round * RACE_DESTS + i;
		errors += race_both_cpus(dests, RACE_DESTS, 1);
		for (int i = 0; i < RACE_DESTS; i++)
			wrong_dests += bytes_of(dests[i]) != 2 * RACE_LEN;
		/* The table holds 1024 destinations: make room for the next round. */
		for (int i = 0; i < RACE_DESTS; i++) {
			__u32 key = htonl(dests[i]);

			bpf_map_delete_elem(map_fd, &key);
		}
	}
	ksft_print_msg("%d of %d new destinations, first packet on both CPUs at once, did not count both\n",
		       wrong_dests, RACE_DEST_ROUNDS * RACE_DESTS);
	ksft_test_result(!wrong_dests && !errors, "concurrent_first_packets_counted\n");
}

/* New destinations whose counter the other CPU creates first, every time. */
static void insert_lost_on_cue(void)
{
	const __u64 other_cpu_bytes = RACE_LEN;
	struct lab_lost_insert race;
	int err, wrong_dests = 0, errors = 0;
	struct packet pkt;
	long long won;

	err = lab_lost_insert_attach(&race, LOST_INSERT_OBJECT, map_fd, "htab_map_update_elem");
	for (int i = 0; !err && i < LOST_DESTS; i++) {
		__u32 key = htonl(LOST_FIRST + i);

		err = lab_lost_insert_arm(&race, &key, &other_cpu_bytes);
	}
	if (err)
		ksft_exit_fail_msg("%s: %s\n", LOST_INSERT_OBJECT, strerror(-err));
	for (int i = 0; i < LOST_DESTS; i++)
		if (run(&pkt, make_packet(&pkt, RACE_LEN, LOST_FIRST + i, 5, 0, 64, i, IPPROTO_UDP),
			1, NULL) != BPF_OK)
			errors++;
	won = lab_lost_insert_detach(&race);
	for (int i = 0; i < LOST_DESTS; i++)
		wrong_dests += bytes_of(LOST_FIRST + i) != 2 * RACE_LEN;
	ksft_print_msg("%d of %d new destinations, their counter created by another CPU between "
		       "the lookup and the insert (%lld times), did not count both packets; "
		       "%d runs did not return BPF_OK\n", wrong_dests, LOST_DESTS, won, errors);
	if (won != LOST_DESTS)
		ksft_print_msg("the program tried to insert the counters of %lld of %d new destinations\n",
			       won, LOST_DESTS);
	ksft_test_result(!wrong_dests && !errors && won == LOST_DESTS,
			 "insert_lost_to_another_cpu_counted\n");
}

/* -- dscp --------------------------------------------------------------- */

static void dscp(void)
{
	int wrong_tos = 0, wrong_ecn = 0, bad_csum = 0, other_bytes = 0, failed_runs = 0;
	struct packet pkt, out;
	unsigned int seed = 4010;

	for (int n = 0; n < HEADERS; n++) {
		/* Every TOS byte in the first 256 headers, then random ones; IHL
		 * 5 to 15 (options), TTLs, ids and lengths varied; every other
		 * header with a checksum within 0x200 of 0 or of 0xffff. */
		__u8 tos = n < 256 ? n : rand_r(&seed);
		int ihl = 5 + (n < 256 ? 0 : rand_r(&seed) % 11);
		int len = ihl * 4 + rand_r(&seed) % 200;
		int size = make_packet(&pkt, len, 0xc0a8fc02 + rand_r(&seed) % 4, ihl, tos,
				       rand_r(&seed), rand_r(&seed), rand_r(&seed) % 2 ? IPPROTO_ICMP :
				       IPPROTO_UDP);
		struct iphdr *iph = (struct iphdr *)out.ip;
		int verdict;

		if (n % 2) {
			__u16 near = rand_r(&seed) % 0x200;

			checksum_near(&pkt, ihl, n % 4 == 1 ? near : 0xffff - near);
		}
		verdict = run(&pkt, size, 1, &out);

		if (verdict != BPF_OK) {
			if (failed_runs++ < 4)
				ksft_print_msg("tos 0x%02x ihl %d: verdict %d, expected BPF_OK\n",
					       tos, ihl, verdict);
			continue;
		}
		if (iph->tos >> 2 != LWT_DSCP) {
			if (wrong_tos++ < 4)
				ksft_print_msg("tos 0x%02x came out as 0x%02x: DSCP %d\n", tos,
					       iph->tos, iph->tos >> 2);
		}
		if ((iph->tos & 3) != (tos & 3)) {
			if (wrong_ecn++ < 4)
				ksft_print_msg("tos 0x%02x came out as 0x%02x: ECN %d, was %d\n",
					       tos, iph->tos, iph->tos & 3, tos & 3);
		}
		if (ip_checksum(iph, ihl * 4)) {
			if (bad_csum++ < 4)
				ksft_print_msg("tos 0x%02x ihl %d: header checksum 0x%04x is wrong\n",
					       tos, ihl, ntohs(iph->check));
		}
		for (int i = 0; i < len; i++)
			if (i != 1 && i != 10 && i != 11 && out.ip[i] != pkt.ip[i]) {
				if (other_bytes++ < 4)
					ksft_print_msg("tos 0x%02x: byte %d changed\n", tos, i);
				break;
			}
	}
	ksft_print_msg("%d headers: %d runs failed, %d wrong DSCP, %d wrong ECN, %d bad checksums, %d other bytes changed\n",
		       HEADERS, failed_runs, wrong_tos, wrong_ecn, bad_csum, other_bytes);
	ksft_test_result(!failed_runs && !wrong_tos, "dscp_af41_for_every_tos\n");
	ksft_test_result(!failed_runs && !wrong_ecn, "ecn_kept_for_every_tos\n");
	ksft_test_result(!failed_runs && !bad_csum, "checksum_valid_for_varied_headers\n");
	ksft_test_result(!failed_runs && !other_bytes, "rest_of_packet_untouched\n");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 3 || (strcmp(argv[1], "len-limit") && strcmp(argv[1], "dscp"))) {
		fprintf(stderr, "usage: %s len-limit|dscp OBJECT\n", argv[0]);
		return 2;
	}
	ksft_print_header();
	if (!strcmp(argv[1], "len-limit")) {
		ksft_set_plan(5);
		load(argv[2], "len_limit");
		if (map_fd < 0)
			ksft_exit_fail_msg("%s has no map lwt_len_limit_bytes\n", argv[2]);
		len_limit();
		insert_lost_on_cue();
	} else {
		ksft_set_plan(4);
		load(argv[2], "set_dscp");
		dscp();
	}
	ksft_finished();
}
