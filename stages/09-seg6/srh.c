// SPDX-License-Identifier: GPL-2.0
/*
 * srh: send IPv6 packets with a hand-made Segment Routing Header, and
 * capture them further down the path, for the stage's tests.
 *
 * The kernel builds a valid SRH for every route and socket it is given,
 * so the tests need a sender that can also build the invalid ones, and
 * SRHs the receiving kernel checks in its "reduced" form (RFC 8754).
 * A raw IPPROTO_RAW socket sends the header exactly as built.
 *
 *   srh send --src A --dst A [--seg A]... [--sl N] [--fs N] [--hdrlen N]
 *            [--tag N] [--tlv HEX] [--no-srh] [--seq N] [--count N]
 *            [--threads N]
 *   srh capture IFNAME COUNT SECONDS [READY-FILE]
 *
 * --seg gives the segment list in the header's own order: the first
 * --seg is segments[0], the last hop of the path. The payload is
 * "srh-lab <seq>", under next header 59 (none), so no checksum depends
 * on which address a router wrote where.
 *
 * capture prints one line for each packet carrying that payload that
 * arrives on IFNAME, until COUNT arrived or SECONDS passed, and exits 0
 * only when COUNT arrived: the sequence number, the hop limit, the
 * destination, and the SRH's fields or "srh=none".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/ipv6.h>
#include <linux/seg6.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAGIC		"srh-lab "
#define MAX_SEGS	16
#define NEXTHDR_NONE	59
#define NEXTHDR_ROUTING	43

struct packet_spec {
	struct in6_addr src, dst;
	struct in6_addr segs[MAX_SEGS];
	int nsegs;
	int sl, fs, hdrlen;		/* -1: derived from the segments */
	int tag;
	unsigned char tlv[256];
	int tlv_len;
	int no_srh;
	long seq, count;
	int threads;
};

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void parse_addr(const char *text, struct in6_addr *addr)
{
	if (inet_pton(AF_INET6, text, addr) != 1) {
		fprintf(stderr, "srh: not an IPv6 address: %s\n", text);
		exit(2);
	}
}

static int parse_hex(const char *text, unsigned char *out, int max)
{
	int n = 0;

	while (text[0] && text[1]) {
		if (n == max || sscanf(text, "%2hhx", &out[n]) != 1) {
			fprintf(stderr, "srh: bad --tlv bytes: %s\n", text);
			exit(2);
		}
		n++;
		text += 2;
	}
	return n;
}

/* Build one packet of @spec with sequence number @seq into @buf. */
static size_t build(const struct packet_spec *spec, long seq,
		    unsigned char *buf)
{
	struct ipv6hdr *ip6 = (struct ipv6hdr *)buf;
	unsigned char *p = buf + sizeof(*ip6);
	int payload;

	memset(ip6, 0, sizeof(*ip6));
	ip6->version = 6;
	ip6->hop_limit = 64;
	ip6->saddr = spec->src;
	ip6->daddr = spec->dst;
	ip6->nexthdr = spec->no_srh ? NEXTHDR_NONE : NEXTHDR_ROUTING;

	if (!spec->no_srh) {
		struct ipv6_sr_hdr *srh = (struct ipv6_sr_hdr *)p;
		int hdrlen = spec->hdrlen >= 0 ? spec->hdrlen :
			2 * spec->nsegs + spec->tlv_len / 8;
		int len = (hdrlen + 1) * 8;

		memset(srh, 0, len);
		srh->nexthdr = NEXTHDR_NONE;
		srh->hdrlen = hdrlen;
		srh->type = IPV6_SRCRT_TYPE_4;
		srh->first_segment = spec->fs >= 0 ? spec->fs : spec->nsegs - 1;
		srh->segments_left = spec->sl >= 0 ? spec->sl :
			srh->first_segment;
		srh->tag = htons(spec->tag);
		memcpy(srh->segments, spec->segs,
		       spec->nsegs * sizeof(struct in6_addr));
		memcpy(p + sizeof(*srh) + spec->nsegs * sizeof(struct in6_addr),
		       spec->tlv, spec->tlv_len);
		p += len;
	}
	payload = sprintf((char *)p, MAGIC "%ld", seq);
	p += payload + 1;
	ip6->payload_len = htons(p - buf - sizeof(*ip6));
	return p - buf;
}

struct sender {
	const struct packet_spec *spec;
	int index;
	int failed;
};

static void *send_all(void *arg)
{
	struct sender *s = arg;
	const struct packet_spec *spec = s->spec;
	struct sockaddr_in6 to = { .sin6_family = AF_INET6 };
	unsigned char buf[4096];
	cpu_set_t cpus;
	long i;
	int fd;

	/* One sender per CPU, so that the receiving path runs on all. */
	CPU_ZERO(&cpus);
	CPU_SET(s->index % sysconf(_SC_NPROCESSORS_ONLN), &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);

	fd = socket(AF_INET6, SOCK_RAW, IPPROTO_RAW);
	if (fd < 0)
		die("socket");
	to.sin6_addr = spec->dst;
	for (i = 0; i < spec->count; i++) {
		size_t len = build(spec, spec->seq + s->index * spec->count + i,
				   buf);

		if (sendto(fd, buf, len, 0, (struct sockaddr *)&to,
			   sizeof(to)) != (ssize_t)len) {
			perror("sendto");
			s->failed = 1;
			break;
		}
	}
	close(fd);
	return NULL;
}

static int do_send(int argc, char **argv)
{
	struct packet_spec spec = {
		.sl = -1, .fs = -1, .hdrlen = -1, .count = 1, .threads = 1,
	};
	struct sender senders[64];
	pthread_t tids[64];
	int i, have_src = 0, have_dst = 0, failed = 0;

	for (i = 0; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(opt, "--no-srh")) {
			spec.no_srh = 1;
			continue;
		}
		if (!val) {
			fprintf(stderr, "srh: %s needs a value\n", opt);
			return 2;
		}
		i++;
		if (!strcmp(opt, "--src")) {
			parse_addr(val, &spec.src);
			have_src = 1;
		} else if (!strcmp(opt, "--dst")) {
			parse_addr(val, &spec.dst);
			have_dst = 1;
		} else if (!strcmp(opt, "--seg")) {
			if (spec.nsegs == MAX_SEGS) {
				fprintf(stderr, "srh: at most %d segments\n",
					MAX_SEGS);
				return 2;
			}
			parse_addr(val, &spec.segs[spec.nsegs++]);
		} else if (!strcmp(opt, "--sl")) {
			spec.sl = atoi(val);
		} else if (!strcmp(opt, "--fs")) {
			spec.fs = atoi(val);
		} else if (!strcmp(opt, "--hdrlen")) {
			spec.hdrlen = atoi(val);
		} else if (!strcmp(opt, "--tag")) {
			spec.tag = atoi(val);
		} else if (!strcmp(opt, "--tlv")) {
			spec.tlv_len = parse_hex(val, spec.tlv, sizeof(spec.tlv));
		} else if (!strcmp(opt, "--seq")) {
			spec.seq = atol(val);
		} else if (!strcmp(opt, "--count")) {
			spec.count = atol(val);
		} else if (!strcmp(opt, "--threads")) {
			spec.threads = atoi(val);
		} else {
			fprintf(stderr, "srh: unknown option %s\n", opt);
			return 2;
		}
	}
	if (!have_src || !have_dst || spec.threads < 1 || spec.threads > 64 ||
	    (!spec.no_srh && !spec.nsegs)) {
		fprintf(stderr, "srh send: needs --src, --dst and a --seg\n");
		return 2;
	}
	for (i = 0; i < spec.threads; i++) {
		senders[i] = (struct sender){ .spec = &spec, .index = i };
		if (pthread_create(&tids[i], NULL, send_all, &senders[i]))
			die("pthread_create");
	}
	for (i = 0; i < spec.threads; i++) {
		pthread_join(tids[i], NULL);
		failed |= senders[i].failed;
	}
	return failed;
}

/* Print @buf's line if it is one of ours; returns whether it was. */
static int print_packet(const unsigned char *buf, ssize_t len)
{
	const struct ipv6hdr *ip6 = (const void *)buf;
	const unsigned char *p = buf + sizeof(*ip6);
	char addr[INET6_ADDRSTRLEN];
	const char *payload;
	int i;

	if (len < (ssize_t)sizeof(*ip6) || ip6->version != 6)
		return 0;
	if (ip6->nexthdr == NEXTHDR_ROUTING) {
		const struct ipv6_sr_hdr *srh = (const void *)p;

		if (len < p - buf + 8 ||
		    len < p - buf + (srh->hdrlen + 1) * 8)
			return 0;
		p += (srh->hdrlen + 1) * 8;
	} else if (ip6->nexthdr != NEXTHDR_NONE) {
		return 0;
	}
	payload = (const char *)p;
	if (len - (p - buf) <= (ssize_t)strlen(MAGIC) ||
	    memcmp(payload, MAGIC, strlen(MAGIC)) ||
	    !memchr(payload, 0, len - (p - buf)))
		return 0;

	inet_ntop(AF_INET6, &ip6->daddr, addr, sizeof(addr));
	printf("seq=%s hlim=%d dst=%s", payload + strlen(MAGIC),
	       ip6->hop_limit, addr);
	if (ip6->nexthdr == NEXTHDR_ROUTING) {
		const struct ipv6_sr_hdr *srh = (const void *)(ip6 + 1);
		int nsegs = srh->first_segment + 1;
		int tlv_at = 8 + 16 * nsegs, end = (srh->hdrlen + 1) * 8;

		printf(" srh=nh:%d,hdrlen:%d,type:%d,sl:%d,fs:%d,flags:%d,tag:%d,segs:",
		       srh->nexthdr, srh->hdrlen, srh->type,
		       srh->segments_left, srh->first_segment, srh->flags,
		       ntohs(srh->tag));
		for (i = 0; i < nsegs && 8 + 16 * (i + 1) <= end; i++) {
			inet_ntop(AF_INET6, &srh->segments[i], addr,
				  sizeof(addr));
			printf("%s%s", i ? "," : "", addr);
		}
		printf(",tlv:");
		for (i = tlv_at; i < end; i++)
			printf("%02x", ((const unsigned char *)srh)[i]);
	} else {
		printf(" srh=none");
	}
	printf("\n");
	fflush(stdout);
	return 1;
}

/*
 * The capture must see each packet as it arrived, and End rewrites the
 * SRH in place, in data that the packet shares with what a packet socket
 * was handed. Two things make the copy early enough. The socket listens
 * for every protocol (ETH_P_ALL), since the stack hands a packet to those
 * sockets before IPv6 handles it, and to a socket bound to ETH_P_IPV6 on
 * the link only after ipv6_rcv() returned, End included. And it reads
 * from a TPACKET ring, which copies the packet when it is handed over,
 * where a plain socket would queue a reference to the same data.
 */
#define RING_FRAME	2048
#define RING_FRAMES	1024

static int do_capture(int argc, char **argv)
{
	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_ALL),
	};
	struct tpacket_req req = {
		.tp_block_size = RING_FRAME * 32,
		.tp_block_nr = RING_FRAMES / 32,
		.tp_frame_size = RING_FRAME,
		.tp_frame_nr = RING_FRAMES,
	};
	int version = TPACKET_V2;
	struct timespec start, now;
	long want, seen = 0;
	unsigned int frame = 0;
	unsigned char *ring;
	double seconds;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "srh capture IFNAME COUNT SECONDS [READY-FILE]\n");
		return 2;
	}
	want = atol(argv[1]);
	seconds = atof(argv[2]);
	sll.sll_ifindex = if_nametoindex(argv[0]);
	if (!sll.sll_ifindex)
		die(argv[0]);
	fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_ALL));
	if (fd < 0)
		die("socket");
	if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version,
		       sizeof(version)) ||
	    setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)))
		die("PACKET_RX_RING");
	ring = mmap(NULL, (size_t)RING_FRAME * RING_FRAMES,
		    PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ring == MAP_FAILED)
		die("mmap");
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)))
		die("bind");
	if (argc > 3) {
		int ready = open(argv[3], O_CREAT | O_WRONLY, 0644);

		if (ready < 0)
			die(argv[3]);
		close(ready);
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (seen < want) {
		struct tpacket2_hdr *hdr =
			(void *)(ring + (size_t)frame * RING_FRAME);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		struct sockaddr_ll *from;
		double left;

		if (!(hdr->tp_status & TP_STATUS_USER)) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			left = seconds - (now.tv_sec - start.tv_sec) -
				(now.tv_nsec - start.tv_nsec) / 1e9;
			if (left <= 0 || poll(&pfd, 1, left * 1000 + 1) < 0)
				break;
			continue;
		}
		from = (void *)((unsigned char *)hdr +
				TPACKET_ALIGN(sizeof(*hdr)));
		/* What this host sent out of the link is not an arrival. */
		if (from->sll_protocol == htons(ETH_P_IPV6) &&
		    from->sll_pkttype != PACKET_OUTGOING)
			seen += print_packet((unsigned char *)hdr + hdr->tp_net,
					     hdr->tp_snaplen);
		hdr->tp_status = TP_STATUS_KERNEL;
		__sync_synchronize();
		frame = (frame + 1) % RING_FRAMES;
	}
	close(fd);
	return seen == want ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "send"))
		return do_send(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "capture"))
		return do_capture(argc - 2, argv + 2);
	fprintf(stderr, "usage: srh send ... | srh capture IFNAME COUNT SECONDS\n");
	return 2;
}
