// SPDX-License-Identifier: GPL-2.0
/*
 * What seg6_validate_srh() accepts from a socket. Since 4.10, a program
 * may give its UDP or raw IPv6 socket a Segment Routing Header with
 * setsockopt(IPPROTO_IPV6, IPV6_RTHDR), no privilege needed; the kernel
 * keeps the header only if seg6_validate_srh(srh, optlen, false) accepts
 * it, and answers EINVAL otherwise. A socket's header is the complete,
 * non-reduced kind: segments_left may not exceed first_segment.
 *
 * setsockopt() itself refuses a length that is not a multiple of 8 or
 * shorter than the header says, and any routing header type but 4, before
 * the validator is asked, so those are not cases here.
 *
 * Each accepted header must read back from getsockopt() byte for byte:
 * validating changes nothing. The same verdicts are then asked for on
 * every CPU at once, since the validator runs unlocked on all of them.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/ipv6.h>
#include <linux/seg6.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kselftest.h"

#define MAX_LEN		2040	/* the longest header setsockopt() takes */
#define RACE_SECONDS	1.0

struct header {
	unsigned char bytes[MAX_LEN + 8];
	int len;	/* what is given to setsockopt() */
};

/*
 * A header of @nsegs segments, hdrlen @hdrlen (-1: just the segments
 * and @tlv), first_segment @fs, segments_left @sl, then @tlv_len bytes
 * of @tlv after the segments; it is given with its own length.
 */
static void make(struct header *h, int nsegs, int hdrlen, int fs, int sl,
		 const unsigned char *tlv, int tlv_len)
{
	struct ipv6_sr_hdr *srh = (struct ipv6_sr_hdr *)h->bytes;
	int i;

	if (hdrlen < 0)
		hdrlen = 2 * nsegs + tlv_len / 8;
	memset(h, 0, sizeof(*h));
	srh->nexthdr = IPPROTO_UDP;
	srh->hdrlen = hdrlen;
	srh->type = IPV6_SRCRT_TYPE_4;
	srh->first_segment = fs;
	srh->segments_left = sl;
	srh->tag = htons(0x4a10);
	for (i = 0; i < nsegs; i++) {
		srh->segments[i].s6_addr[0] = 0xfc;
		srh->segments[i].s6_addr[1] = 0x00;
		srh->segments[i].s6_addr[14] = i;
		srh->segments[i].s6_addr[15] = 1;
	}
	memcpy(h->bytes + 8 + 16 * nsegs, tlv, tlv_len);
	h->len = (hdrlen + 1) * 8;
}

static int udp_socket(void)
{
	int fd = socket(AF_INET6, SOCK_DGRAM, 0);

	if (fd < 0)
		ksft_exit_fail_msg("socket: %s\n", strerror(errno));
	return fd;
}

/* 0 if the socket took @h, else the errno it answered. */
static int give(int fd, const struct header *h)
{
	if (setsockopt(fd, IPPROTO_IPV6, IPV6_RTHDR, h->bytes, h->len))
		return errno;
	return 0;
}

/* Does the socket hold exactly @h now? */
static int holds(int fd, const struct header *h)
{
	unsigned char back[MAX_LEN + 8];
	socklen_t len = sizeof(back);

	if (getsockopt(fd, IPPROTO_IPV6, IPV6_RTHDR, back, &len))
		return 0;
	return len == (socklen_t)h->len && !memcmp(back, h->bytes, len);
}

static void expect_accepted(const char *name, const struct header *h)
{
	int fd = udp_socket();
	int err = give(fd, h);
	int kept = !err && holds(fd, h);

	if (err)
		ksft_print_msg("%s: setsockopt answered %s\n", name,
			       strerror(err));
	else if (!kept)
		ksft_print_msg("%s: the header read back differs\n", name);
	ksft_test_result(kept, "%s\n", name);
	close(fd);
}

static void expect_refused(const char *name, const struct header *h)
{
	int fd = udp_socket();
	int err = give(fd, h);

	if (err != EINVAL)
		ksft_print_msg("%s: setsockopt answered %s, expected EINVAL\n",
			       name, err ? strerror(err) : "success");
	ksft_test_result(err == EINVAL, "%s\n", name);
	close(fd);
}

static const unsigned char padn14[] = { 4, 14 };
static const unsigned char padn15[] = { 4, 15 };
static const unsigned char padn13[] = { 4, 13 };
static const unsigned char two_padn6[] = {
	4, 6, 0, 0, 0, 0, 0, 0, 4, 6, 0, 0, 0, 0, 0, 0,
};
static const unsigned char padn12_then_padn0[] = {
	4, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0,
};
static const unsigned char padn6_then_7[] = {
	4, 6, 0, 0, 0, 0, 0, 0, 4, 7, 0, 0, 0, 0, 0, 0,
};
/* An HMAC TLV: type 5, 38 bytes of flags, key id and HMAC. */
static const unsigned char hmac_tlv[40] = { 5, 38, 0, 0, 0, 0, 0, 42 };

/* The verdicts the race asks for, again and again, on every CPU. */
struct race_case {
	struct header h;
	int accepted;
};

static struct race_case race_cases[3];

struct racer {
	int cpu;
	long rounds, wrong;
	double start, end;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *race(void *arg)
{
	struct racer *r = arg;
	int fd = udp_socket();
	cpu_set_t cpus;

	CPU_ZERO(&cpus);
	CPU_SET(r->cpu, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);
	r->start = now();
	do {
		for (int i = 0; i < 3; i++) {
			int err = give(fd, &race_cases[i].h);

			if (race_cases[i].accepted ? err != 0 : err != EINVAL)
				r->wrong++;
		}
		r->rounds++;
	} while (now() - r->start < RACE_SECONDS);
	r->end = now();
	close(fd);
	return NULL;
}

static void race_on_every_cpu(void)
{
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct racer racers[64] = {};
	pthread_t tids[64];
	double last_start = 0, first_end = 1e300;
	long wrong = 0, rounds = 0;
	int i;

	if (ncpus > 64)
		ncpus = 64;
	make(&race_cases[0].h, 3, -1, 2, 1, NULL, 0);
	race_cases[0].accepted = 1;
	make(&race_cases[1].h, 3, -1, 1, 2, NULL, 0);
	make(&race_cases[2].h, 1, 4, 0, 0, padn15, sizeof(padn15));
	for (i = 0; i < ncpus; i++) {
		racers[i].cpu = i;
		if (pthread_create(&tids[i], NULL, race, &racers[i]))
			ksft_exit_fail_msg("pthread_create failed\n");
	}
	for (i = 0; i < ncpus; i++) {
		pthread_join(tids[i], NULL);
		wrong += racers[i].wrong;
		rounds += racers[i].rounds;
		if (racers[i].start > last_start)
			last_start = racers[i].start;
		if (racers[i].end < first_end)
			first_end = racers[i].end;
	}
	ksft_print_msg("%ld CPUs, %ld rounds of 3 headers, %ld wrong verdicts\n",
		       ncpus, rounds, wrong);
	ksft_test_result(ncpus > 1 && last_start < first_end && !wrong,
			 "verdicts_hold_on_every_cpu_at_once\n");
}

int main(void)
{
	struct header h;

	ksft_print_header();
	ksft_set_plan(20);

	make(&h, 1, -1, 0, 0, NULL, 0);
	expect_accepted("one_segment_is_accepted", &h);
	make(&h, 3, -1, 2, 2, NULL, 0);
	expect_accepted("segments_left_equal_to_first_segment_is_accepted", &h);
	make(&h, 3, -1, 2, 1, NULL, 0);
	expect_accepted("segments_left_below_first_segment_is_accepted", &h);
	make(&h, 3, -1, 2, 0, NULL, 0);
	expect_accepted("segments_left_0_is_accepted", &h);
	make(&h, 127, -1, 126, 126, NULL, 0);
	expect_accepted("the_longest_header_is_accepted", &h);
	make(&h, 1, 4, 0, 0, padn14, sizeof(padn14));
	expect_accepted("a_tlv_filling_the_rest_is_accepted", &h);
	make(&h, 1, 4, 0, 0, two_padn6, sizeof(two_padn6));
	expect_accepted("two_tlvs_filling_the_rest_are_accepted", &h);
	make(&h, 1, 4, 0, 0, padn12_then_padn0, sizeof(padn12_then_padn0));
	expect_accepted("a_last_tlv_of_two_bytes_is_accepted", &h);
	make(&h, 1, -1, 0, 0, hmac_tlv, sizeof(hmac_tlv));
	expect_accepted("an_hmac_tlv_is_accepted", &h);
	/* Room for three segments, and a list of two then a 16-byte TLV. */
	make(&h, 2, 6, 1, 1, padn14, sizeof(padn14));
	expect_accepted("first_segment_short_of_the_room_leaves_tlvs", &h);

	make(&h, 3, -1, 1, 2, NULL, 0);
	expect_refused("segments_left_above_first_segment_is_refused", &h);
	make(&h, 1, -1, 0, 1, NULL, 0);
	expect_refused("segments_left_one_past_a_single_segment_is_refused", &h);
	make(&h, 1, -1, 1, 0, NULL, 0);
	expect_refused("first_segment_past_the_header_is_refused", &h);
	make(&h, 3, -1, 3, 0, NULL, 0);
	expect_refused("first_segment_one_past_the_last_slot_is_refused", &h);
	make(&h, 1, -1, 0, 0, NULL, 0);
	h.len += 8;
	expect_refused("a_length_beyond_hdrlen_is_refused", &h);
	make(&h, 1, 4, 0, 0, padn15, sizeof(padn15));
	expect_refused("a_tlv_running_past_the_end_is_refused", &h);
	make(&h, 1, 4, 0, 0, padn13, sizeof(padn13));
	expect_refused("a_byte_left_after_the_last_tlv_is_refused", &h);
	make(&h, 1, 4, 0, 0, padn6_then_7, sizeof(padn6_then_7));
	expect_refused("a_second_tlv_running_past_the_end_is_refused", &h);
	make(&h, 3, 6, 2, 0, padn14, sizeof(padn14));
	h.bytes[1] = 5;
	h.len = 48;
	expect_refused("segments_overrunning_an_odd_hdrlen_are_refused", &h);

	race_on_every_cpu();
	ksft_finished();
}
