// SPDX-License-Identifier: GPL-2.0
/*
 * What __cgroup_bpf_run_filter_skb() (kernel/bpf/cgroup.c) promises the
 * packets of a cgroup's sockets, as a UDP socket sees it, over IPv4 and
 * IPv6 on the loopback:
 *   - ingress (from sk_filter_trim_cap()): a verdict of 0 drops the
 *     datagram, which the receiving socket counts as an InErrors; 1
 *     delivers it unchanged;
 *   - egress (from ip_finish_output() and ip6_finish_output()): 0 makes
 *     sendto() fail with EPERM; 2 drops with a congestion notice, which
 *     UDP reports as ENOBUFS only under IP_RECVERR; 3 sends, and sendto()
 *     succeeds; 2 and 3 are for programs loaded for egress only;
 *   - every program of the effective array runs, whatever an earlier
 *     one said, and one drop (or one notice) decides for all;
 *   - the socket's cgroup decides, not the current task's: on the
 *     loopback the receiver's ingress programs run in the sender's
 *     context, and a task may have moved since it made its socket;
 *   - only AF_INET and AF_INET6 sockets are filtered: an AF_UNIX
 *     datagram also passes sk_filter(), and must not meet the programs;
 *   - the program sees the packet from its network header on, whether
 *     the hook's skb->data is there (egress) or past it (ingress), by
 *     helper and by direct access up to data_end, and the socket the
 *     packet belongs to in skb->sk;
 *   - __sk_buff->cb is zeroed for each program and put back after it:
 *     the kernel keeps its own state there (IPCB, IP6CB, UDP's cscov),
 *     which a program must neither read nor be able to change;
 *   - every CPU at once: each datagram is seen exactly once.
 *
 * Each test runs in a network namespace of its own, so that the
 * /proc/net/snmp counters it reads move only with its own datagrams.
 * The cgroups are base/X and base/Y; "home" is the cgroup the test
 * started in, which has no programs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <net/if.h>
#include <sys/ioctl.h>

/* The harness leaves a handler's parameter unused: -Wextra would say so. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#include "lab/two_cpus.h"
#include "cgroup_bpf.h"

#define PAYLOAD		100
#define BIG_PAYLOAD	2048	/* see cb_is_restored_after_ingress_programs */
#define ARRIVE_MS	2000	/* a datagram that must arrive */
#define ABSENT_MS	300	/* one that must not */
#define KEYS		16
#define RACE_SENDS	2000	/* datagrams per CPU */

/*
 * include/linux/ipv6.h's, which user space does not see. The cb tests
 * rely on 6.1's layouts of the kernel's control blocks, with
 * CONFIG_IPV6_MIP6 off (the stage's config asks for that).
 */
#define IP6SKB_HOPBYHOP	32

#define CB_OFF(i)	((short)(offsetof(struct __sk_buff, cb) + 4 * (i)))

FIXTURE(skb) {
	struct cg_fs fs;
	char x[CG_PATH_MAX], y[CG_PATH_MAX];
	int cx, cy;
	int map;		/* KEYS u64 counters and readings */
	int prog[KEYS];
	int nprogs;
};

FIXTURE_VARIANT(skb) {
	int family;
	int hdr_len;		/* the network header the programs see */
};

FIXTURE_VARIANT_ADD(skb, ipv4) {
	.family = AF_INET,
	.hdr_len = 20,
};

FIXTURE_VARIANT_ADD(skb, ipv6) {
	.family = AF_INET6,
	.hdr_len = 40,
};

static int loopback_up(void)
{
	struct ifreq ifr;
	int fd, ret = 0;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr))
		ret = -errno;
	ifr.ifr_flags |= IFF_UP;
	if (!ret && ioctl(fd, SIOCSIFFLAGS, &ifr))
		ret = -errno;
	close(fd);
	return ret;
}

FIXTURE_SETUP(skb)
{
	int fd;

	self->cx = self->cy = self->map = -1;
	ASSERT_EQ(0, unshare(CLONE_NEWNET)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, loopback_up());
	fd = socket(variant->family, SOCK_DGRAM, 0);
	ASSERT_LE(0, fd) TH_LOG("no UDP over this family: %s",
				strerror(errno));
	close(fd);
	ASSERT_EQ(0, cg_fs_setup(&self->fs, "cgroup_skb_filter"));
	ASSERT_EQ(0, cg_mkdir(&self->fs, "X", self->x));
	ASSERT_EQ(0, cg_mkdir(&self->fs, "Y", self->y));
	self->cx = cg_open(self->x);
	self->cy = cg_open(self->y);
	ASSERT_LE(0, self->cx);
	ASSERT_LE(0, self->cy);
	self->map = cg_map_create(sizeof(__u64), KEYS);
	ASSERT_LE(0, self->map) TH_LOG("%s", strerror(-self->map));
}

FIXTURE_TEARDOWN(skb)
{
	int i;

	for (i = 0; i < self->nprogs; i++)
		close(self->prog[i]);
	if (self->map >= 0)
		close(self->map);
	if (self->cx >= 0)
		close(self->cx);
	if (self->cy >= 0)
		close(self->cy);
	cg_fs_cleanup(&self->fs);
}

/* Loads insns, to be closed by the teardown: the fd. */
static int load(struct __test_metadata *_metadata, FIXTURE_DATA(skb) *self,
		const struct cg_prog *insns, const char *name,
		enum bpf_attach_type expected)
{
	int fd = cg_prog_load(insns, name, expected);

	ASSERT_LE(0, fd) TH_LOG("loading %s: %s\n%s", name, strerror(-fd),
				cg_verifier_log);
	ASSERT_GT(KEYS, self->nprogs);
	self->prog[self->nprogs++] = fd;
	return fd;
}

/* map[key] += 1; return verdict; loaded for the attach type it is for. */
static int counter(struct __test_metadata *_metadata, FIXTURE_DATA(skb) *self,
		   __u32 key, int verdict, enum bpf_attach_type type)
{
	struct cg_prog insns;

	cg_prog_count(&insns, self->map, key, 0, verdict);
	return load(_metadata, self, &insns, "counter", type);
}

static long long reading(FIXTURE_DATA(skb) *self, __u32 key)
{
	return cg_map_u64(self->map, key);
}

/* A UDP socket of the variant's family, made in the cgroup at path. */
static int udp_in(struct __test_metadata *_metadata, FIXTURE_DATA(skb) *self,
		  int family, const char *path, struct cg_addr *addr)
{
	int fd = cg_udp_socket_in(&self->fs, path, family, addr);

	ASSERT_LE(0, fd) TH_LOG("socket in %s: %s", path, strerror(-fd));
	return fd;
}

static void fill(unsigned char *buf, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(seed + 7 * i);
}

/*
 * Did fd receive exactly the len bytes fill(seed) makes, within ms?
 * 1 if so, 0 if nothing came, -1 if something else came.
 */
static int received(int fd, size_t len, unsigned int seed, int ms)
{
	unsigned char want[BIG_PAYLOAD], got[BIG_PAYLOAD + 64];
	int n = cg_recv(fd, got, sizeof(got), ms);

	if (n == -EAGAIN)
		return 0;
	fill(want, len, seed);
	return n == (int)len && !memcmp(want, got, len) ? 1 : -1;
}

static int send_fill(int fd, const struct cg_addr *to, size_t len,
		     unsigned int seed)
{
	unsigned char buf[BIG_PAYLOAD];

	fill(buf, len, seed);
	return cg_send(fd, to, buf, len);
}

/*
 * A counter of the namespace's SNMP statistics: proto "Udp" or "Ip",
 * field as /proc/net/snmp names it ("InErrors"); for IPv6 the same from
 * /proc/net/snmp6 ("Udp6InErrors"). -1 if it is not there.
 */
static long long snmp(int family, const char *proto, const char *field)
{
	char line[4096], values[4096], name[64], *tok, *val, *save1, *save2;
	long long result = -1;
	size_t plen = strlen(proto);
	FILE *file;

	if (family == AF_INET6) {
		long long value;

		file = fopen("/proc/net/snmp6", "r");
		if (!file)
			return -1;
		snprintf(line, sizeof(line), "%s6%s", proto, field);
		while (fscanf(file, "%63s %lld", name, &value) == 2) {
			if (!strcmp(name, line)) {
				result = value;
				break;
			}
		}
		fclose(file);
		return result;
	}
	file = fopen("/proc/net/snmp", "r");
	if (!file)
		return -1;
	/* Pairs of lines: "Udp: InDatagrams NoPorts ...", "Udp: 1 2 ...". */
	while (fgets(line, sizeof(line), file) &&
	       fgets(values, sizeof(values), file)) {
		if (strncmp(line, proto, plen) || line[plen] != ':')
			continue;
		tok = strtok_r(line + plen + 1, " \n", &save1);
		val = strtok_r(values + plen + 1, " \n", &save2);
		while (tok && val) {
			if (!strcmp(tok, field)) {
				result = atoll(val);
				break;
			}
			tok = strtok_r(NULL, " \n", &save1);
			val = strtok_r(NULL, " \n", &save2);
		}
		break;
	}
	fclose(file);
	return result;
}

static int set_int(int fd, int level, int name, int value)
{
	return setsockopt(fd, level, name, &value, sizeof(value)) ? -errno : 0;
}

static int set_recverr(int fd, int family)
{
	if (family == AF_INET)
		return set_int(fd, IPPROTO_IP, IP_RECVERR, 1);
	return set_int(fd, IPPROTO_IPV6, IPV6_RECVERR, 1);
}

TEST_F(skb, ingress_verdict_0_drops_the_datagram_and_counts_an_in_error)
{
	int p = counter(_metadata, self, 0, CG_DROP, INGRESS);
	struct cg_addr to;
	int rx, tx;
	long long errors;

	ASSERT_EQ(0, cg_attach(self->cx, p, INGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->x, &to);
	tx = udp_in(_metadata, self, variant->family, self->fs.home, NULL);
	errors = snmp(variant->family, "Udp", "InErrors");
	ASSERT_LE(0, errors);
	/* The sender is told nothing: the drop is the receiver's. */
	EXPECT_EQ(0, send_fill(tx, &to, PAYLOAD, 1));
	EXPECT_EQ(0, received(rx, PAYLOAD, 1, ABSENT_MS));
	EXPECT_EQ(errors + 1, snmp(variant->family, "Udp", "InErrors"));
	EXPECT_EQ(1, reading(self, 0));
}

TEST_F(skb, ingress_verdict_1_delivers_the_datagram_intact)
{
	int p = counter(_metadata, self, 0, CG_PASS, INGRESS);
	struct cg_addr to;
	int rx, tx;
	long long errors;

	ASSERT_EQ(0, cg_attach(self->cx, p, INGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->x, &to);
	tx = udp_in(_metadata, self, variant->family, self->fs.home, NULL);
	errors = snmp(variant->family, "Udp", "InErrors");
	EXPECT_EQ(0, send_fill(tx, &to, PAYLOAD, 2));
	/* Intact: the header pushed back for the program is pulled again. */
	EXPECT_EQ(1, received(rx, PAYLOAD, 2, ARRIVE_MS));
	EXPECT_EQ(errors, snmp(variant->family, "Udp", "InErrors"));
	EXPECT_EQ(1, reading(self, 0));
}

TEST_F(skb, egress_verdict_0_fails_sendto_with_eperm)
{
	int p = counter(_metadata, self, 0, CG_DROP, EGRESS);
	struct cg_addr to;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, p, EGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->fs.home, &to);
	tx = udp_in(_metadata, self, variant->family, self->x, NULL);
	EXPECT_EQ(EPERM, send_fill(tx, &to, PAYLOAD, 3));
	EXPECT_EQ(0, received(rx, PAYLOAD, 3, ABSENT_MS));
	EXPECT_EQ(1, reading(self, 0));
}

TEST_F(skb, egress_verdict_1_sends_the_datagram_intact)
{
	int p = counter(_metadata, self, 0, CG_PASS, EGRESS);
	struct cg_addr to;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, p, EGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->fs.home, &to);
	tx = udp_in(_metadata, self, variant->family, self->x, NULL);
	EXPECT_EQ(0, send_fill(tx, &to, PAYLOAD, 4));
	EXPECT_EQ(1, received(rx, PAYLOAD, 4, ARRIVE_MS));
	EXPECT_EQ(1, reading(self, 0));
}

/* The task moves; its sockets stay where they were made. */
TEST_F(skb, egress_follows_the_sockets_cgroup_not_the_tasks)
{
	int px = counter(_metadata, self, 0, CG_DROP, EGRESS);
	int py = counter(_metadata, self, 1, CG_PASS, EGRESS);
	struct cg_addr to;
	int rx, tx_x, tx_y;

	ASSERT_EQ(0, cg_attach(self->cx, px, EGRESS, NONE));
	ASSERT_EQ(0, cg_attach(self->cy, py, EGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->fs.home, &to);
	tx_x = udp_in(_metadata, self, variant->family, self->x, NULL);
	tx_y = udp_in(_metadata, self, variant->family, self->y, NULL);

	ASSERT_EQ(0, cg_join(self->y));
	EXPECT_EQ(EPERM, send_fill(tx_x, &to, PAYLOAD, 5));
	ASSERT_EQ(0, cg_join(self->x));
	EXPECT_EQ(0, send_fill(tx_y, &to, PAYLOAD, 6));
	ASSERT_EQ(0, cg_join(self->fs.home));
	EXPECT_EQ(1, received(rx, PAYLOAD, 6, ARRIVE_MS));
	EXPECT_EQ(1, reading(self, 0));
	EXPECT_EQ(1, reading(self, 1));
}

/*
 * On the loopback the receiver's ingress programs run in the sender's
 * context (softirq, on the way out of its sendto()): a runner that
 * asked the current task would ask the sender's cgroup.
 */
TEST_F(skb, ingress_follows_the_sockets_cgroup_not_the_tasks)
{
	int px = counter(_metadata, self, 0, CG_DROP, INGRESS);
	int py = counter(_metadata, self, 1, CG_PASS, INGRESS);
	struct cg_addr to_x, to_y;
	int rx_x, rx_y, tx;

	ASSERT_EQ(0, cg_attach(self->cx, px, INGRESS, NONE));
	ASSERT_EQ(0, cg_attach(self->cy, py, INGRESS, NONE));
	rx_x = udp_in(_metadata, self, variant->family, self->x, &to_x);
	rx_y = udp_in(_metadata, self, variant->family, self->y, &to_y);
	tx = udp_in(_metadata, self, variant->family, self->fs.home, NULL);

	ASSERT_EQ(0, cg_join(self->y));
	EXPECT_EQ(0, send_fill(tx, &to_x, PAYLOAD, 7));
	ASSERT_EQ(0, cg_join(self->x));
	EXPECT_EQ(0, send_fill(tx, &to_y, PAYLOAD, 8));
	ASSERT_EQ(0, cg_join(self->fs.home));
	EXPECT_EQ(0, received(rx_x, PAYLOAD, 7, ABSENT_MS));
	EXPECT_EQ(1, received(rx_y, PAYLOAD, 8, ARRIVE_MS));
	EXPECT_EQ(1, reading(self, 0));
	EXPECT_EQ(1, reading(self, 1));
}

/*
 * What a program sees, into map[key + 0..3]: skb->len; the packet's
 * first byte read with bpf_skb_load_bytes() at offset 0 (0xdead if the
 * helper failed); the same byte read directly between __sk_buff's data
 * and data_end (0xbeef if data_end says there is none); and the cookie
 * of the socket bpf_get_socket_cookie() finds in skb->sk (0 if none).
 */
#define SEEN_LEN	0
#define SEEN_BYTE	1
#define SEEN_DIRECT	2
#define SEEN_COOKIE	3

static int packet_probe(struct __test_metadata *_metadata,
			FIXTURE_DATA(skb) *self, __u32 key,
			enum bpf_attach_type type)
{
	struct cg_prog p;

	memset(&p, 0, sizeof(p));
	cg_emit(&p, BPF_MOV64_REG(BPF_REG_6, BPF_REG_1));
	cg_emit(&p, BPF_LDX_MEM(BPF_W, BPF_REG_7, BPF_REG_6,
				offsetof(struct __sk_buff, len)));
	/* r8 = the first byte, by the helper */
	cg_emit(&p, BPF_ST_MEM(BPF_DW, BPF_REG_10, -16, 0));
	cg_emit(&p, BPF_MOV64_REG(BPF_REG_1, BPF_REG_6));
	cg_emit(&p, BPF_MOV64_IMM(BPF_REG_2, 0));
	cg_emit(&p, BPF_MOV64_REG(BPF_REG_3, BPF_REG_10));
	cg_emit(&p, BPF_ALU64_IMM(BPF_ADD, BPF_REG_3, -16));
	cg_emit(&p, BPF_MOV64_IMM(BPF_REG_4, 1));
	cg_emit(&p, BPF_EMIT_CALL(BPF_FUNC_skb_load_bytes));
	cg_emit(&p, BPF_LDX_MEM(BPF_B, BPF_REG_8, BPF_REG_10, -16));
	cg_emit(&p, BPF_JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 1));
	cg_emit(&p, BPF_MOV64_IMM(BPF_REG_8, 0xdead));
	/* r9 = the first byte, read directly if data_end allows */
	cg_emit(&p, BPF_MOV64_IMM(BPF_REG_9, 0xbeef));
	cg_emit(&p, BPF_LDX_MEM(BPF_W, BPF_REG_2, BPF_REG_6,
				offsetof(struct __sk_buff, data)));
	cg_emit(&p, BPF_LDX_MEM(BPF_W, BPF_REG_3, BPF_REG_6,
				offsetof(struct __sk_buff, data_end)));
	cg_emit(&p, BPF_MOV64_REG(BPF_REG_4, BPF_REG_2));
	cg_emit(&p, BPF_ALU64_IMM(BPF_ADD, BPF_REG_4, 1));
	cg_emit(&p, BPF_JMP_REG(BPF_JGT, BPF_REG_4, BPF_REG_3, 1));
	cg_emit(&p, BPF_LDX_MEM(BPF_B, BPF_REG_9, BPF_REG_2, 0));
	/* fp-24 = the socket's cookie */
	cg_emit(&p, BPF_MOV64_REG(BPF_REG_1, BPF_REG_6));
	cg_emit(&p, BPF_EMIT_CALL(BPF_FUNC_get_socket_cookie));
	cg_emit(&p, BPF_STX_MEM(BPF_DW, BPF_REG_10, BPF_REG_0, -24));

	cg_emit_lookup(&p, self->map, key + SEEN_LEN);
	cg_emit(&p, BPF_STX_MEM(BPF_DW, BPF_REG_0, BPF_REG_7, 0));
	cg_emit_lookup(&p, self->map, key + SEEN_BYTE);
	cg_emit(&p, BPF_STX_MEM(BPF_DW, BPF_REG_0, BPF_REG_8, 0));
	cg_emit_lookup(&p, self->map, key + SEEN_DIRECT);
	cg_emit(&p, BPF_STX_MEM(BPF_DW, BPF_REG_0, BPF_REG_9, 0));
	cg_emit_lookup(&p, self->map, key + SEEN_COOKIE);
	cg_emit(&p, BPF_LDX_MEM(BPF_DW, BPF_REG_1, BPF_REG_10, -24));
	cg_emit(&p, BPF_STX_MEM(BPF_DW, BPF_REG_0, BPF_REG_1, 0));
	cg_emit_exit(&p, CG_PASS);
	return load(_metadata, self, &p, "packet_probe", type);
}

/* The first byte of an IP header: version 4 and 5 words, or version 6. */
static void expect_ip_header(struct __test_metadata *_metadata,
			     FIXTURE_DATA(skb) *self, int family, __u32 key)
{
	if (family == AF_INET) {
		EXPECT_EQ(0x45, reading(self, key + SEEN_BYTE));
		EXPECT_EQ(0x45, reading(self, key + SEEN_DIRECT));
	} else {
		EXPECT_EQ(6, reading(self, key + SEEN_BYTE) >> 4);
		EXPECT_EQ(6, reading(self, key + SEEN_DIRECT) >> 4);
	}
}

/*
 * The hook finds skb->data past the IP header (UDP's receive path is at
 * the UDP header): the program must see the IP total length and the IP
 * header's first byte, and the receiver the payload, intact.
 * Nothing else runs a program on this skb, so data_end is the runner's.
 */
TEST_F(skb, ingress_programs_see_the_packet_from_the_network_header)
{
	int p = packet_probe(_metadata, self, 0, INGRESS);
	struct cg_addr to;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, p, INGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->x, &to);
	tx = udp_in(_metadata, self, variant->family, self->fs.home, NULL);
	ASSERT_EQ(0, send_fill(tx, &to, PAYLOAD, 9));
	EXPECT_EQ(1, received(rx, PAYLOAD, 9, ARRIVE_MS));
	EXPECT_EQ(variant->hdr_len + 8 + PAYLOAD, reading(self, SEEN_LEN));
	expect_ip_header(_metadata, self, variant->family, 0);
}

TEST_F(skb, egress_programs_see_the_packet_from_the_network_header)
{
	int p = packet_probe(_metadata, self, 0, EGRESS);
	struct cg_addr to;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, p, EGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->fs.home, &to);
	tx = udp_in(_metadata, self, variant->family, self->x, NULL);
	ASSERT_EQ(0, send_fill(tx, &to, PAYLOAD, 19));
	EXPECT_EQ(1, received(rx, PAYLOAD, 19, ARRIVE_MS));
	EXPECT_EQ(variant->hdr_len + 8 + PAYLOAD, reading(self, SEEN_LEN));
	expect_ip_header(_metadata, self, variant->family, 0);
}

static __u64 cookie(int fd)
{
	__u64 value = 0;
	socklen_t len = sizeof(value);

	if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &value, &len))
		return 0;
	return value;
}

/*
 * The loopback orphans the skb on the way out, and an unconnected UDP
 * socket is not found by early demux: on ingress, skb->sk is the
 * receiving socket only because the runner sets it for the program.
 */
TEST_F(skb, programs_see_the_socket_of_the_cgroup)
{
	int in = packet_probe(_metadata, self, 0, INGRESS);
	int out = packet_probe(_metadata, self, 4, EGRESS);
	struct cg_addr to;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, in, INGRESS, NONE));
	ASSERT_EQ(0, cg_attach(self->cx, out, EGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->x, &to);
	tx = udp_in(_metadata, self, variant->family, self->x, NULL);
	ASSERT_NE(0ULL, cookie(rx));
	ASSERT_NE(0ULL, cookie(tx));
	ASSERT_EQ(0, send_fill(tx, &to, PAYLOAD, 20));
	EXPECT_EQ(1, received(rx, PAYLOAD, 20, ARRIVE_MS));
	EXPECT_EQ((long long)cookie(rx), reading(self, SEEN_COOKIE))
		TH_LOG("ingress");
	EXPECT_EQ((long long)cookie(tx), reading(self, 4 + SEEN_COOKIE))
		TH_LOG("egress");
}

TEST_F(skb, egress_verdict_2_drops_and_recverr_sendto_says_enobufs)
{
	int p = counter(_metadata, self, 0, CG_DROP_CN, EGRESS);
	struct cg_addr to;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, p, EGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->fs.home, &to);
	tx = udp_in(_metadata, self, variant->family, self->x, NULL);
	ASSERT_EQ(0, set_recverr(tx, variant->family));
	EXPECT_EQ(ENOBUFS, send_fill(tx, &to, PAYLOAD, 10));
	EXPECT_EQ(0, received(rx, PAYLOAD, 10, ABSENT_MS));
	EXPECT_EQ(1, reading(self, 0));
}

/* udp_send_skb() hides ENOBUFS unless asked, and counts it instead. */
TEST_F(skb, egress_verdict_2_drops_and_plain_sendto_succeeds)
{
	int p = counter(_metadata, self, 0, CG_DROP_CN, EGRESS);
	struct cg_addr to;
	long long sndbuf_errors;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, p, EGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->fs.home, &to);
	tx = udp_in(_metadata, self, variant->family, self->x, NULL);
	sndbuf_errors = snmp(variant->family, "Udp", "SndbufErrors");
	ASSERT_LE(0, sndbuf_errors);
	EXPECT_EQ(0, send_fill(tx, &to, PAYLOAD, 11));
	EXPECT_EQ(0, received(rx, PAYLOAD, 11, ABSENT_MS));
	EXPECT_EQ(sndbuf_errors + 1,
		  snmp(variant->family, "Udp", "SndbufErrors"));
	EXPECT_EQ(1, reading(self, 0));
}

TEST_F(skb, egress_verdict_3_sends_and_sendto_succeeds)
{
	int p = counter(_metadata, self, 0, CG_PASS_CN, EGRESS);
	struct cg_addr to;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, p, EGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->fs.home, &to);
	tx = udp_in(_metadata, self, variant->family, self->x, NULL);
	/* Even asked for errors: NET_XMIT_CN is not one. */
	ASSERT_EQ(0, set_recverr(tx, variant->family));
	EXPECT_EQ(0, send_fill(tx, &to, PAYLOAD, 12));
	EXPECT_EQ(1, received(rx, PAYLOAD, 12, ARRIVE_MS));
	EXPECT_EQ(1, reading(self, 0));
}

TEST_F(skb, verdicts_2_and_3_need_programs_loaded_for_egress)
{
	struct cg_prog insns;
	int p;

	cg_prog_verdict(&insns, CG_DROP_CN);
	/* expected_attach_type 0 is also what a loader that sets none asks. */
	EXPECT_EQ(-EINVAL, cg_prog_load(&insns, "ret2", INGRESS));
	cg_prog_verdict(&insns, CG_PASS_CN);
	EXPECT_EQ(-EINVAL, cg_prog_load(&insns, "ret3", INGRESS));
	/* Loaded for egress, such a program may not go anywhere else. */
	p = load(_metadata, self, &insns, "ret3", EGRESS);
	EXPECT_EQ(-EINVAL, cg_attach(self->cx, p, INGRESS, NONE));
	EXPECT_EQ(0, cg_attach(self->cx, p, EGRESS, NONE));
}

TEST_F(skb, every_program_runs_after_one_drops)
{
	int drop = counter(_metadata, self, 0, CG_DROP, EGRESS);
	int pass = counter(_metadata, self, 1, CG_PASS, EGRESS);
	struct cg_addr to;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, drop, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cx, pass, EGRESS, MULTI));
	rx = udp_in(_metadata, self, variant->family, self->fs.home, &to);
	tx = udp_in(_metadata, self, variant->family, self->x, NULL);
	EXPECT_EQ(EPERM, send_fill(tx, &to, PAYLOAD, 13));
	EXPECT_EQ(0, received(rx, PAYLOAD, 13, ABSENT_MS));
	EXPECT_EQ(1, reading(self, 0));
	EXPECT_EQ(1, reading(self, 1));
}

/*
 * One program passes with a notice, the next drops: the drop wins, and
 * the notice turns it into NET_XMIT_DROP (cgroup.c:1446-1448), which
 * UDP reports as ENOBUFS under IP_RECVERR instead of EPERM.
 */
TEST_F(skb, a_congestion_notice_turns_a_drop_into_enobufs)
{
	int cn = counter(_metadata, self, 0, CG_PASS_CN, EGRESS);
	int drop = counter(_metadata, self, 1, CG_DROP, EGRESS);
	struct cg_addr to;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, cn, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cx, drop, EGRESS, MULTI));
	rx = udp_in(_metadata, self, variant->family, self->fs.home, &to);
	tx = udp_in(_metadata, self, variant->family, self->x, NULL);
	ASSERT_EQ(0, set_recverr(tx, variant->family));
	EXPECT_EQ(ENOBUFS, send_fill(tx, &to, PAYLOAD, 14));
	EXPECT_EQ(0, received(rx, PAYLOAD, 14, ABSENT_MS));
	EXPECT_EQ(1, reading(self, 0));
	EXPECT_EQ(1, reading(self, 1));
}

/*
 * The program is live for this cgroup's inet sockets (the control), and
 * never meets its AF_UNIX ones, although unix_dgram_sendmsg() runs the
 * receiver's sk_filter() (net/unix/af_unix.c:1991).
 */
TEST_F(skb, unix_datagrams_pass_an_ingress_program_that_drops_inet)
{
	int p = counter(_metadata, self, 0, CG_DROP, INGRESS);
	struct cg_addr to;
	char buf[16];
	int sv[2], rx, tx, ret;

	ASSERT_EQ(0, cg_attach(self->cx, p, INGRESS, NONE));
	ASSERT_EQ(0, cg_join(self->x));
	ret = socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv);
	ASSERT_EQ(0, cg_join(self->fs.home));
	ASSERT_EQ(0, ret);
	ASSERT_EQ(4, send(sv[0], "unix", 4, 0));
	EXPECT_EQ(4, cg_recv(sv[1], buf, sizeof(buf), ARRIVE_MS));
	EXPECT_EQ(0, reading(self, 0));

	rx = udp_in(_metadata, self, variant->family, self->x, &to);
	tx = udp_in(_metadata, self, variant->family, self->fs.home, NULL);
	EXPECT_EQ(0, send_fill(tx, &to, PAYLOAD, 15));
	EXPECT_EQ(0, received(rx, PAYLOAD, 15, ABSENT_MS));
	EXPECT_EQ(1, reading(self, 0));
	close(sv[0]);
	close(sv[1]);
}

/*
 * map[key] = cb[0] | ... | cb[4] as the program found them; map[key + 1]
 * += 1; then it scribbles over all five words.
 */
static int cb_probe(struct __test_metadata *_metadata,
		    FIXTURE_DATA(skb) *self, __u32 key,
		    enum bpf_attach_type type)
{
	struct cg_prog p;
	int i;

	memset(&p, 0, sizeof(p));
	cg_emit(&p, BPF_MOV64_REG(BPF_REG_6, BPF_REG_1));
	cg_emit(&p, BPF_MOV64_IMM(BPF_REG_7, 0));
	for (i = 0; i < 5; i++) {
		cg_emit(&p, BPF_LDX_MEM(BPF_W, BPF_REG_1, BPF_REG_6,
					CB_OFF(i)));
		cg_emit(&p, BPF_ALU64_REG(BPF_OR, BPF_REG_7, BPF_REG_1));
	}
	cg_emit_lookup(&p, self->map, key);
	cg_emit(&p, BPF_STX_MEM(BPF_DW, BPF_REG_0, BPF_REG_7, 0));
	cg_emit_lookup(&p, self->map, key + 1);
	cg_emit_count_at_r0(&p, 0);
	for (i = 0; i < 5; i++) {
		cg_emit(&p, BPF_MOV64_IMM(BPF_REG_1, 0x0c0de000 + i));
		cg_emit(&p, BPF_STX_MEM(BPF_W, BPF_REG_6, BPF_REG_1,
					CB_OFF(i)));
	}
	cg_emit_exit(&p, CG_PASS);
	return load(_metadata, self, &p, "cb_probe", type);
}

/*
 * On ingress the first program would find UDP's checksum coverage in
 * cb[4] (udp_skb_cb's cscov, the datagram's length); every second
 * program would find the first one's scribbles.
 */
TEST_F(skb, cb_is_zeroed_for_each_program)
{
	int in1 = cb_probe(_metadata, self, 0, INGRESS);
	int in2 = cb_probe(_metadata, self, 2, INGRESS);
	int out1 = cb_probe(_metadata, self, 4, EGRESS);
	int out2 = cb_probe(_metadata, self, 6, EGRESS);
	struct cg_addr to;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, in1, INGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cx, in2, INGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cx, out1, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cx, out2, EGRESS, MULTI));
	rx = udp_in(_metadata, self, variant->family, self->x, &to);
	tx = udp_in(_metadata, self, variant->family, self->x, NULL);
	ASSERT_EQ(0, send_fill(tx, &to, PAYLOAD, 16));
	EXPECT_EQ(1, received(rx, PAYLOAD, 16, ARRIVE_MS));
	EXPECT_EQ(1, reading(self, 1));
	EXPECT_EQ(1, reading(self, 3));
	EXPECT_EQ(1, reading(self, 5));
	EXPECT_EQ(1, reading(self, 7));
	EXPECT_EQ(0, reading(self, 0)) TH_LOG("first ingress program");
	EXPECT_EQ(0, reading(self, 2)) TH_LOG("second ingress program");
	EXPECT_EQ(0, reading(self, 4)) TH_LOG("first egress program");
	EXPECT_EQ(0, reading(self, 6)) TH_LOG("second egress program");
}

/* cb[word] = value; map[0] += 1; return 1; */
static int cb_writer(struct __test_metadata *_metadata,
		     FIXTURE_DATA(skb) *self, int word, __u32 value,
		     enum bpf_attach_type type)
{
	struct cg_prog p;

	memset(&p, 0, sizeof(p));
	/* BPF_ST may not store into the context: the value goes by r2. */
	cg_emit(&p, BPF_MOV64_REG(BPF_REG_6, BPF_REG_1));
	cg_emit(&p, BPF_MOV64_IMM(BPF_REG_2, value));
	cg_emit(&p, BPF_STX_MEM(BPF_W, BPF_REG_6, BPF_REG_2, CB_OFF(word)));
	cg_emit_lookup(&p, self->map, 0);
	cg_emit_count_at_r0(&p, 0);
	cg_emit_exit(&p, CG_PASS);
	return load(_metadata, self, &p, "cb_writer", type);
}

/*
 * The program writes where the socket layer keeps a received packet's
 * IP options length (IPCB's opt.optlen, cb[1]'s low byte) or its IPv6
 * hop-by-hop flag (IP6CB's flags, cb[2]'s low half). Put back, the
 * receiver asking for options (IP_RECVOPTS, IPV6_RECVHOPOPTS) gets
 * none; left, it gets a header that was never sent. The payload is
 * big enough that the IPv6 "header" it would get, read from the UDP
 * header, fits in the packet whatever the port (ipv6_get_exthdr_len()).
 */
TEST_F(skb, cb_is_restored_after_ingress_programs)
{
	bool v4 = variant->family == AF_INET;
	int p = cb_writer(_metadata, self, v4 ? 1 : 2,
			  v4 ? 4 : IP6SKB_HOPBYHOP, INGRESS);
	char control[512];
	unsigned char buf[BIG_PAYLOAD + 64], want[BIG_PAYLOAD];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control,
		.msg_controllen = sizeof(control),
	};
	struct pollfd pfd;
	struct cg_addr to;
	ssize_t n;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, p, INGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->x, &to);
	tx = udp_in(_metadata, self, variant->family, self->fs.home, NULL);
	if (v4) {
		ASSERT_EQ(0, set_int(rx, IPPROTO_IP, IP_RECVOPTS, 1));
	} else {
		ASSERT_EQ(0, set_int(rx, IPPROTO_IPV6, IPV6_RECVHOPOPTS, 1));
	}
	ASSERT_EQ(0, send_fill(tx, &to, BIG_PAYLOAD, 17));
	pfd.fd = rx;
	pfd.events = POLLIN;
	ASSERT_EQ(1, poll(&pfd, 1, ARRIVE_MS));
	n = recvmsg(rx, &msg, MSG_DONTWAIT);
	ASSERT_EQ(BIG_PAYLOAD, n);
	fill(want, BIG_PAYLOAD, 17);
	EXPECT_EQ(0, memcmp(want, buf, BIG_PAYLOAD));
	EXPECT_EQ(0UL, msg.msg_controllen)
		TH_LOG("option control messages for a packet without options");
	EXPECT_EQ(1, reading(self, 0));
}

/*
 * The program writes where the output path keeps a packet's largest
 * fragment size (frag_max_size: cb[3]'s high half in IPCB, cb[2]'s in
 * IP6CB). Put back, the datagram leaves whole; left, it leaves in
 * fragments, which the namespace's FragCreates counts.
 */
TEST_F(skb, cb_is_restored_after_egress_programs)
{
	bool v4 = variant->family == AF_INET;
	int p = cb_writer(_metadata, self, v4 ? 3 : 2,
			  (v4 ? 576 : 1280) << 16, EGRESS);
	long long frags;
	struct cg_addr to;
	int rx, tx;

	ASSERT_EQ(0, cg_attach(self->cx, p, EGRESS, NONE));
	rx = udp_in(_metadata, self, variant->family, self->fs.home, &to);
	tx = udp_in(_metadata, self, variant->family, self->x, NULL);
	/* No DF, so that a fragmenting output fragments (not refuses). */
	if (v4) {
		ASSERT_EQ(0, set_int(tx, IPPROTO_IP, IP_MTU_DISCOVER,
				     IP_PMTUDISC_DONT));
	} else {
		ASSERT_EQ(0, set_int(tx, IPPROTO_IPV6, IPV6_MTU_DISCOVER,
				     IPV6_PMTUDISC_DONT));
	}
	frags = snmp(variant->family, "Ip", "FragCreates");
	ASSERT_LE(0, frags);
	EXPECT_EQ(0, send_fill(tx, &to, BIG_PAYLOAD, 18));
	EXPECT_EQ(1, received(rx, BIG_PAYLOAD, 18, ARRIVE_MS));
	EXPECT_EQ(frags, snmp(variant->family, "Ip", "FragCreates"));
	EXPECT_EQ(1, reading(self, 0));
}

/*
 * Every CPU at once, each with its own sender and receiver in X: the
 * egress and the ingress program (atomic adds) must each count exactly
 * RACE_SENDS datagrams per CPU, and every datagram must arrive.
 */
struct flood {
	pthread_t thread;
	int cpu, tx, rx;
	struct cg_addr to;
	int *ready, nthreads;
	long failed, lost;
};

static void *flood_run(void *arg)
{
	struct flood *f = arg;
	unsigned char buf[64];
	int i;

	if (lab_pin_to_cpu(f->cpu))
		f->failed = -1;
	/* Arrive even so, or the others would wait for ever. */
	__atomic_add_fetch(f->ready, 1, __ATOMIC_ACQ_REL);
	if (f->failed)
		return NULL;
	while (__atomic_load_n(f->ready, __ATOMIC_ACQUIRE) < f->nthreads)
		;
	for (i = 0; i < RACE_SENDS; i++) {
		fill(buf, sizeof(buf), i);
		if (cg_send(f->tx, &f->to, buf, sizeof(buf)))
			f->failed++;
		else if (received(f->rx, sizeof(buf), i, ARRIVE_MS) != 1)
			f->lost++;
	}
	return NULL;
}

TEST_F_TIMEOUT(skb, every_cpu_counts_each_datagram_once, 120)
{
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	int out = counter(_metadata, self, 0, CG_PASS, EGRESS);
	int in = counter(_metadata, self, 1, CG_PASS, INGRESS);
	struct flood *flood;
	int ready = 0, i;
	long failed = 0, lost = 0;

	if (ncpus < 2)
		SKIP(return, "needs two CPUs, this machine has %ld", ncpus);
	if (ncpus > CPU_SETSIZE)
		ncpus = CPU_SETSIZE;
	ASSERT_EQ(0, cg_attach(self->cx, out, EGRESS, NONE));
	ASSERT_EQ(0, cg_attach(self->cx, in, INGRESS, NONE));
	flood = calloc(ncpus, sizeof(*flood));
	ASSERT_NE(NULL, flood);
	for (i = 0; i < ncpus; i++) {
		flood[i].cpu = i;
		flood[i].ready = &ready;
		flood[i].nthreads = ncpus;
		flood[i].rx = udp_in(_metadata, self, variant->family, self->x,
				     &flood[i].to);
		flood[i].tx = udp_in(_metadata, self, variant->family, self->x,
				     NULL);
	}
	for (i = 0; i < ncpus; i++) {
		ASSERT_EQ(0, pthread_create(&flood[i].thread, NULL, flood_run,
					    &flood[i]));
	}
	for (i = 0; i < ncpus; i++) {
		pthread_join(flood[i].thread, NULL);
		EXPECT_LE(0, flood[i].failed) TH_LOG("cpu %d: no affinity", i);
		failed += flood[i].failed;
		lost += flood[i].lost;
		close(flood[i].tx);
		close(flood[i].rx);
	}
	EXPECT_EQ(0, failed);
	EXPECT_EQ(0, lost);
	EXPECT_EQ(RACE_SENDS * ncpus, reading(self, 0)) TH_LOG("egress");
	EXPECT_EQ(RACE_SENDS * ncpus, reading(self, 1)) TH_LOG("ingress");
	free(flood);
}

TEST_HARNESS_MAIN
