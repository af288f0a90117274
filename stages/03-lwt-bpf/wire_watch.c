// SPDX-License-Identifier: GPL-2.0
/*
 * lwt-wire-watch IFACE SECONDS: print every IPv4 packet that arrives on
 * IFACE, one line each, for SECONDS seconds. The exercise graders run it
 * in the peer namespace, so that they judge a program by what reaches
 * the wire, including packets the peer's IP stack would throw away
 * (a bad header checksum, for one).
 *
 * Output, after a first line "listening":
 *   src=A dst=B proto=P tos=0xTT len=L csum=ok|bad
 */
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int header_checksum_ok(const unsigned char *hdr, unsigned int len)
{
	unsigned long sum = 0;
	unsigned int i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (hdr[i] << 8) | hdr[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct sockaddr_ll addr = { .sll_family = AF_PACKET };
	unsigned char buf[65536];
	double end;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: %s IFACE SECONDS\n", argv[0]);
		return 2;
	}
	/* SOCK_DGRAM: the kernel strips the link-layer header for us. */
	fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));
	addr.sll_protocol = htons(ETH_P_IP);
	addr.sll_ifindex = if_nametoindex(argv[1]);
	if (fd < 0 || !addr.sll_ifindex ||
	    bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror(argv[1]);
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	end = now() + atof(argv[2]);
	while (now() < end) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		struct sockaddr_ll from;
		socklen_t fromlen = sizeof(from);
		char src[INET_ADDRSTRLEN], dst[INET_ADDRSTRLEN];
		const struct iphdr *ip = (const struct iphdr *)buf;
		int left_ms = (int)((end - now()) * 1000);
		ssize_t n;

		if (left_ms <= 0)
			break;
		if (poll(&pfd, 1, left_ms) <= 0)
			continue;
		n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fromlen);
		/* Only what the peer receives, not what it sends back. */
		if (n < (ssize_t)sizeof(*ip) || from.sll_pkttype == PACKET_OUTGOING)
			continue;
		if (ip->version != 4 || ip->ihl < 5 || n < ip->ihl * 4)
			continue;
		inet_ntop(AF_INET, &ip->saddr, src, sizeof(src));
		inet_ntop(AF_INET, &ip->daddr, dst, sizeof(dst));
		printf("src=%s dst=%s proto=%u tos=0x%02x len=%u csum=%s\n", src, dst,
		       ip->protocol, ip->tos, ntohs(ip->tot_len),
		       header_checksum_ok(buf, ip->ihl * 4) ? "ok" : "bad");
		fflush(stdout);
	}
	return 0;
}
