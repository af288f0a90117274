// SPDX-License-Identifier: GPL-2.0
/*
 * srh: send IPv6 packets with a hand-made Segment Routing Header, and
 * decode them from tcpdump's captures further down the path, for the
 * stage's tests.
 *
 * The kernel builds a valid SRH for every route and socket it is given,
 * so the tests need a sender that can also build the invalid ones, and
 * SRHs the receiving kernel checks in its "reduced" form (RFC 8754).
 * A raw IPPROTO_RAW socket sends the header exactly as built.
 *
 *   srh send --src A --dst A [--seg A]... [--sl N] [--fs N] [--hdrlen N]
 *            [--type N] [--tag N] [--tlv HEX] [--no-srh] [--seq N]
 *            [--count N] [--threads N]
 *   srh decode FILE.pcap
 *
 * --seg gives the segment list in the header's own order: the first
 * --seg is segments[0], the last hop of the path. The payload is
 * "srh-lab <seq>", under next header 59 (none), so no checksum depends
 * on which address a router wrote where.
 *
 * decode prints one line for each packet carrying that payload: the
 * sequence number, the hop limit, the destination, and the SRH's fields
 * or "srh=none".
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
	int type;
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
		srh->type = spec->type;
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
		.type = IPV6_SRCRT_TYPE_4,
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
		} else if (!strcmp(opt, "--type")) {
			spec.type = atoi(val);
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
 * Decode a capture that tcpdump wrote (-w, classic pcap, Ethernet links):
 * one line per packet of ours, in the order they arrived.
 */
static int do_decode(int argc, char **argv)
{
	unsigned char buf[65536 + 16];
	struct {
		unsigned int magic;
		unsigned short major, minor;
		int zone;
		unsigned int sigfigs, snaplen, linktype;
	} file;
	struct {
		unsigned int sec, usec, caplen, len;
	} rec;
	FILE *f;

	if (argc != 1) {
		fprintf(stderr, "srh decode FILE.pcap\n");
		return 2;
	}
	f = fopen(argv[0], "r");
	if (!f)
		die(argv[0]);
	if (fread(&file, sizeof(file), 1, f) != 1 ||
	    (file.magic != 0xa1b2c3d4 && file.magic != 0xa1b23c4d) ||
	    file.linktype != 1) {
		fprintf(stderr, "srh: %s is not a pcap of an Ethernet link\n",
			argv[0]);
		return 2;
	}
	while (fread(&rec, sizeof(rec), 1, f) == 1) {
		if (rec.caplen > sizeof(buf) ||
		    fread(buf, rec.caplen, 1, f) != 1)
			break;
		/* Ethernet: 14 bytes, the last two the type, IPv6 0x86dd. */
		if (rec.caplen > 14 && buf[12] == 0x86 && buf[13] == 0xdd)
			print_packet(buf + 14, rec.caplen - 14);
	}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "send"))
		return do_send(argc - 2, argv + 2);
	if (argc > 1 && !strcmp(argv[1], "decode"))
		return do_decode(argc - 2, argv + 2);
	fprintf(stderr, "usage: srh send ... | srh decode FILE.pcap\n");
	return 2;
}
