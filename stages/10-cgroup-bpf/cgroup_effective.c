// SPDX-License-Identifier: GPL-2.0
/*
 * Which programs run for a cgroup's sockets: the effective array that
 * compute_effective_progs() builds for each cgroup from its own programs
 * and its ancestors', under the rules __cgroup_bpf_attach() and
 * __cgroup_bpf_detach() enforce (kernel/bpf/cgroup.c; the rules are the
 * comment above BPF_F_ALLOW_OVERRIDE in include/uapi/linux/bpf.h).
 *
 * The tree is base/A, A/B, A/B/C, A/D and a sibling of A, base/O, that
 * no test attaches to. Every program is an egress "tally": it adds one
 * to its own counter and writes its place in the run (a shared clock,
 * fetched and incremented) to its own slot, then returns its verdict.
 * So one datagram shows which programs ran and in which order, and what
 * BPF_PROG_QUERY with BPF_F_QUERY_EFFECTIVE lists can be checked against
 * what ran. Lists are compared as strings of the programs' names, in the
 * kernel's order, so that a failure shows the whole list.
 *
 * The datagrams are UDP over the loopback, from a socket made in the
 * cgroup under test to a receiver in the test's home cgroup. An egress
 * verdict of 0 makes sendto() fail with EPERM; 1 lets the datagram
 * reach the receiver.
 *
 * What a wrong effective array shows here:
 *   - ancestors skipped or the walk stopped early: a program on A is
 *     missing from C (prog_on_a_is_effective_in_a_b_c_and_d);
 *   - the wrong order: multi_runs_own_programs_then_the_parents;
 *   - a non-MULTI ancestor counted below a program: override_*, the
 *     uapi example, a_none_program_attached_above_later_*;
 *   - an entry being detached (its prog NULL) not skipped: the array ends
 *     at the hole (detaching_the_middle_of_three_*);
 *   - sizes: every length from 3 to 66 is listed and run
 *     (multi_holds_64_programs_*); an array one item short reads its
 *     terminator from the next slab object, which this can show only if
 *     that memory is not zero (without KASAN, nothing can be sure to);
 *   - an item given another entry's cgroup storage, or none (which the
 *     program's bpf_get_local_storage() then dereferences: an oops):
 *     each_array_item_carries_its_own_cgroup_storage;
 *   - a fill that writes into the shared empty array
 *     (bpf_empty_prog_array) while the count said 0: O, which has no
 *     programs, then lists one; every test's teardown checks O.
 * The race at the end checks that a sender only ever sees whole arrays.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <time.h>

/* The harness leaves a handler's parameter unused: -Wextra would say so. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#include "lab/two_cpus.h"
#include "cgroup_bpf.h"

/* The kernel's limit per cgroup and attach type (BPF_CGROUP_MAX_PROGS). */
#define MAX_PER_CGROUP	64

/* Program slots: each tally program counts and places itself in its own. */
#define MAX_PROGS	160
#define CLOCK_KEY	0
#define COUNT_KEY(slot)	(1 + (slot))
#define PLACE_KEY(slot)	(1 + MAX_PROGS + (slot))
#define TALLY_KEYS	(1 + 2 * MAX_PROGS)

#define RECV_MS		2000
#define TEXTS		4
#define TEXT_LEN	2048

enum { A, B, C, D, O, NR_CG };

static const char *const cg_rel[NR_CG] = {
	[A] = "A", [B] = "A/B", [C] = "A/B/C", [D] = "A/D", [O] = "O",
};

struct prog {
	int fd;
	__u32 id;
	char name[16];
};

FIXTURE(tree) {
	struct cg_fs fs;
	char path[NR_CG][CG_PATH_MAX];
	int cg[NR_CG];
	int tx[NR_CG];		/* a UDP socket made in each cgroup */
	int rx;			/* the receiver, at home */
	struct cg_addr rx_addr;
	int tally;		/* the clock, counts and places */
	struct prog prog[MAX_PROGS];
	int nprogs;
	char text[TEXTS][TEXT_LEN];
	int next_text;
	unsigned int serial;
};

/*
 * A tally program in the next free slot, loaded for egress and named
 * for the lists: its fd.
 */
static int tally(struct __test_metadata *_metadata, FIXTURE_DATA(tree) *self,
		 const char *name, int verdict)
{
	int slot = self->nprogs;
	struct prog *p = &self->prog[slot];
	struct cg_prog insns;

	ASSERT_GT(MAX_PROGS, slot);
	memset(&insns, 0, sizeof(insns));
	cg_emit_lookup(&insns, self->tally, CLOCK_KEY);
	cg_emit(&insns, BPF_MOV64_REG(BPF_REG_7, BPF_REG_0));
	cg_emit_lookup(&insns, self->tally, PLACE_KEY(slot));
	cg_emit(&insns, BPF_MOV64_REG(BPF_REG_8, BPF_REG_0));
	cg_emit_lookup(&insns, self->tally, COUNT_KEY(slot));
	cg_emit_count_at_r0(&insns, 0);
	/* The place in the run: the clock before this program ticked, + 1. */
	cg_emit(&insns, BPF_MOV64_IMM(BPF_REG_1, 1));
	cg_emit(&insns, BPF_ATOMIC_OP(BPF_DW, BPF_ADD | BPF_FETCH,
				      BPF_REG_7, BPF_REG_1, 0));
	cg_emit(&insns, BPF_ALU64_IMM(BPF_ADD, BPF_REG_1, 1));
	cg_emit(&insns, BPF_STX_MEM(BPF_DW, BPF_REG_8, BPF_REG_1, 0));
	cg_emit_exit(&insns, verdict);

	p->fd = cg_prog_load(&insns, name, EGRESS);
	ASSERT_LE(0, p->fd) TH_LOG("loading %s: %s\n%s", name,
				   strerror(-p->fd), cg_verifier_log);
	p->id = cg_prog_id(p->fd);
	ASSERT_NE(0U, p->id);
	snprintf(p->name, sizeof(p->name), "%s", name);
	self->nprogs++;
	return p->fd;
}

/* Names a program loaded elsewhere; the teardown closes it with the rest. */
static void adopt(struct __test_metadata *_metadata, FIXTURE_DATA(tree) *self,
		  int fd, const char *name)
{
	struct prog *p = &self->prog[self->nprogs];

	ASSERT_LE(0, fd) TH_LOG("loading %s: %s\n%s", name, strerror(-fd),
				cg_verifier_log);
	ASSERT_GT(MAX_PROGS, self->nprogs);
	p->fd = fd;
	p->id = cg_prog_id(fd);
	ASSERT_NE(0U, p->id);
	snprintf(p->name, sizeof(p->name), "%s", name);
	self->nprogs++;
}

static int slot_of(FIXTURE_DATA(tree) *self, int fd)
{
	int i;

	for (i = 0; i < self->nprogs; i++)
		if (self->prog[i].fd == fd)
			return i;
	return -1;
}

/* How many datagrams the program behind fd has seen. */
static long long count(FIXTURE_DATA(tree) *self, int fd)
{
	int slot = slot_of(self, fd);

	return slot < 0 ? -1 : cg_map_u64(self->tally, COUNT_KEY(slot));
}

static void reset(struct __test_metadata *_metadata,
		  FIXTURE_DATA(tree) *self)
{
	__u64 zero = 0;
	__u32 key;

	for (key = 0; key < TALLY_KEYS; key++) {
		ASSERT_EQ(0, cg_map_set(self->tally, key, &zero));
	}
}

static char *text(FIXTURE_DATA(tree) *self)
{
	char *buf = self->text[self->next_text];

	self->next_text = (self->next_text + 1) % TEXTS;
	buf[0] = '\0';
	return buf;
}

static void append(char *buf, const char *word)
{
	size_t len = strlen(buf);

	snprintf(buf + len, TEXT_LEN - len, "%s%s", len ? " " : "", word);
}

static const char *name_of(FIXTURE_DATA(tree) *self, __u32 id, char *unknown)
{
	int i;

	for (i = 0; i < self->nprogs; i++)
		if (self->prog[i].id == id)
			return self->prog[i].name;
	sprintf(unknown, "#%u", id);
	return unknown;
}

/* The programs a query lists, by name, in the kernel's order. */
static const char *listed(FIXTURE_DATA(tree) *self, int cg_fd,
			  enum bpf_attach_type type, __u32 query_flags)
{
	__u32 ids[2 * MAX_PROGS], cnt = 2 * MAX_PROGS, i;
	char *buf = text(self), unknown[16];
	int ret;

	ret = cg_query(cg_fd, type, query_flags, ids, &cnt, NULL);
	if (ret) {
		snprintf(buf, TEXT_LEN, "query failed: %s", strerror(-ret));
		return buf;
	}
	for (i = 0; i < cnt; i++)
		append(buf, name_of(self, ids[i], unknown));
	return buf;
}

static const char *effective(FIXTURE_DATA(tree) *self, int i)
{
	return listed(self, self->cg[i], EGRESS, BPF_F_QUERY_EFFECTIVE);
}

static const char *attached(FIXTURE_DATA(tree) *self, int i)
{
	return listed(self, self->cg[i], EGRESS, 0);
}

/*
 * The programs that ran since the last reset(), in the order they ran.
 * If the clock ticked more often than that (a program ran twice: its
 * place is its last), the clock is appended, so the list cannot match.
 */
static const char *run_order(FIXTURE_DATA(tree) *self)
{
	long long place[MAX_PROGS], ticks = cg_map_u64(self->tally, CLOCK_KEY);
	char *buf = text(self), clock[32];
	long long at;
	int i, names = 0;

	for (i = 0; i < self->nprogs; i++)
		place[i] = cg_map_u64(self->tally, PLACE_KEY(i));
	for (at = 1; at <= ticks; at++) {
		for (i = 0; i < self->nprogs; i++) {
			if (place[i] == at) {
				append(buf, self->prog[i].name);
				names++;
			}
		}
	}
	if (ticks != names) {
		snprintf(clock, sizeof(clock), "(clock %lld)", ticks);
		append(buf, clock);
	}
	return buf;
}

/*
 * One datagram from the socket fd to the receiver: 0 if it arrived,
 * the errno of sendto() if that refused it, ENOMSG if sendto() took it
 * and it never arrived.
 */
static int sent_from_fd(FIXTURE_DATA(tree) *self, int fd)
{
	char out[32], in[64];
	int err, len;

	snprintf(out, sizeof(out), "datagram %u", ++self->serial);
	err = cg_send(fd, &self->rx_addr, out, strlen(out));
	if (err)
		return err;
	len = cg_recv(self->rx, in, sizeof(in), RECV_MS);
	if (len != (int)strlen(out) || memcmp(in, out, len))
		return ENOMSG;
	return 0;
}

static int sent_from(FIXTURE_DATA(tree) *self, int i)
{
	return sent_from_fd(self, self->tx[i]);
}

FIXTURE_SETUP(tree)
{
	int i;

	self->rx = self->tally = -1;
	for (i = 0; i < NR_CG; i++)
		self->cg[i] = self->tx[i] = -1;
	ASSERT_EQ(0, cg_fs_setup(&self->fs, "cgroup_effective"));
	for (i = 0; i < NR_CG; i++) {
		ASSERT_EQ(0, cg_mkdir(&self->fs, cg_rel[i], self->path[i]));
		self->cg[i] = cg_open(self->path[i]);
		ASSERT_LE(0, self->cg[i]);
	}
	self->tally = cg_map_create(sizeof(__u64), TALLY_KEYS);
	ASSERT_LE(0, self->tally) TH_LOG("%s", strerror(-self->tally));
	self->rx = cg_udp_socket_in(&self->fs, self->fs.home, AF_INET,
				    &self->rx_addr);
	ASSERT_LE(0, self->rx) TH_LOG("%s", strerror(-self->rx));
	for (i = 0; i < NR_CG; i++) {
		self->tx[i] = cg_udp_socket_in(&self->fs, self->path[i],
					       AF_INET, NULL);
		ASSERT_LE(0, self->tx[i]) TH_LOG("%s", strerror(-self->tx[i]));
	}
	/* A program above base would be in every list below. */
	ASSERT_STREQ("", effective(self, A))
		TH_LOG("an egress program is attached above %s", self->fs.base);
	ASSERT_STREQ("", listed(self, self->cg[A], INGRESS,
				BPF_F_QUERY_EFFECTIVE));
}

FIXTURE_TEARDOWN(tree)
{
	int i;

	/*
	 * Every test: nothing done inside A may show outside it. O's array
	 * is the shared empty one, so a program in it was written there.
	 */
	if (self->cg[O] >= 0) {
		EXPECT_STREQ("", effective(self, O))
			TH_LOG("a program reached a cgroup outside A");
	}
	for (i = 0; i < NR_CG; i++) {
		if (self->tx[i] >= 0)
			close(self->tx[i]);
		if (self->cg[i] >= 0)
			close(self->cg[i]);
	}
	for (i = 0; i < self->nprogs; i++)
		close(self->prog[i].fd);
	if (self->rx >= 0)
		close(self->rx);
	if (self->tally >= 0)
		close(self->tally);
	cg_fs_cleanup(&self->fs);
}

TEST_F(tree, prog_on_a_is_effective_in_a_b_c_and_d)
{
	int p = tally(_metadata, self, "p", CG_PASS);
	int i;

	ASSERT_EQ(0, cg_attach(self->cg[A], p, EGRESS, NONE));
	EXPECT_STREQ("p", effective(self, A));
	EXPECT_STREQ("p", effective(self, B));
	EXPECT_STREQ("p", effective(self, C));
	EXPECT_STREQ("p", effective(self, D));
	EXPECT_STREQ("", effective(self, O));
	/* Effective is not attached: B holds nothing of its own. */
	EXPECT_STREQ("", attached(self, B));
	EXPECT_STREQ("p", attached(self, A));
	for (i = A; i <= D; i++) {
		EXPECT_EQ(0, sent_from(self, i)) TH_LOG("from %s", cg_rel[i]);
	}
	EXPECT_EQ(0, sent_from(self, O));
	EXPECT_EQ(4, count(self, p));
}

TEST_F(tree, verdict_0_on_a_refuses_sends_from_a_b_c_and_d)
{
	int p = tally(_metadata, self, "drop", CG_DROP);
	int i;

	ASSERT_EQ(0, cg_attach(self->cg[A], p, EGRESS, NONE));
	for (i = A; i <= D; i++) {
		EXPECT_EQ(EPERM, sent_from(self, i))
			TH_LOG("from %s", cg_rel[i]);
	}
	EXPECT_EQ(0, sent_from(self, O));
	/* A refused datagram was still seen: the program decided. */
	EXPECT_EQ(4, count(self, p));
}

TEST_F(tree, multi_runs_own_programs_then_the_parents)
{
	int a1 = tally(_metadata, self, "a1", CG_PASS);
	int a2 = tally(_metadata, self, "a2", CG_PASS);
	int b1 = tally(_metadata, self, "b1", CG_PASS);
	int b2 = tally(_metadata, self, "b2", CG_PASS);
	int c1 = tally(_metadata, self, "c1", CG_PASS);
	int c2 = tally(_metadata, self, "c2", CG_PASS);
	int i;

	/*
	 * Attached across the levels in a mixed order: the array's order
	 * is the cgroup's (own first), and within a cgroup the attach order.
	 */
	ASSERT_EQ(0, cg_attach(self->cg[A], a1, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[C], c1, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[B], b1, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[A], a2, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[C], c2, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[B], b2, EGRESS, MULTI));

	EXPECT_STREQ("c1 c2 b1 b2 a1 a2", effective(self, C));
	EXPECT_STREQ("b1 b2 a1 a2", effective(self, B));
	EXPECT_STREQ("a1 a2", effective(self, A));
	EXPECT_STREQ("a1 a2", effective(self, D));
	EXPECT_STREQ("b1 b2", attached(self, B));

	reset(_metadata, self);
	ASSERT_EQ(0, sent_from(self, C));
	EXPECT_STREQ("c1 c2 b1 b2 a1 a2", run_order(self));
	/* Every program runs for every datagram. */
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(0, sent_from(self, C));
	}
	for (i = 0; i < self->nprogs; i++) {
		EXPECT_EQ(5, count(self, self->prog[i].fd))
			TH_LOG("%s", self->prog[i].name);
	}

	reset(_metadata, self);
	ASSERT_EQ(0, sent_from(self, D));
	EXPECT_STREQ("a1 a2", run_order(self));
}

/*
 * C holds nothing: the first programs found are B's, and A's join them
 * because A itself allows MULTI, whatever C (which has no flags) says.
 */
TEST_F(tree, a_cgroup_without_programs_runs_every_multi_ancestor)
{
	int a1 = tally(_metadata, self, "a1", CG_PASS);
	int b1 = tally(_metadata, self, "b1", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[A], a1, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[B], b1, EGRESS, MULTI));

	EXPECT_STREQ("", attached(self, C));
	EXPECT_STREQ("b1 a1", effective(self, C));
	reset(_metadata, self);
	ASSERT_EQ(0, sent_from(self, C));
	EXPECT_STREQ("b1 a1", run_order(self));
}

TEST_F(tree, multi_refuses_the_same_program_twice)
{
	int p = tally(_metadata, self, "p", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[B], p, EGRESS, MULTI));
	EXPECT_EQ(-EINVAL, cg_attach(self->cg[B], p, EGRESS, MULTI));
	EXPECT_STREQ("p", effective(self, C));
}

TEST_F(tree, none_on_a_refuses_every_attach_below_it)
{
	int p = tally(_metadata, self, "p", CG_PASS);
	int q = tally(_metadata, self, "q", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[A], p, EGRESS, NONE));
	EXPECT_EQ(-EPERM, cg_attach(self->cg[B], q, EGRESS, NONE));
	EXPECT_EQ(-EPERM, cg_attach(self->cg[B], q, EGRESS, OVERRIDE));
	EXPECT_EQ(-EPERM, cg_attach(self->cg[B], q, EGRESS, MULTI));
	/* Through B, which has no programs to decide. */
	EXPECT_EQ(-EPERM, cg_attach(self->cg[C], q, EGRESS, MULTI));
	EXPECT_EQ(-EPERM, cg_attach(self->cg[D], q, EGRESS, OVERRIDE));
	EXPECT_STREQ("p", effective(self, C));
	EXPECT_STREQ("p", effective(self, D));
}

TEST_F(tree, override_on_a_yields_to_b_in_b_and_c_but_not_d)
{
	int pa = tally(_metadata, self, "pa", CG_DROP);
	int pb = tally(_metadata, self, "pb", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[A], pa, EGRESS, OVERRIDE));
	ASSERT_EQ(0, cg_attach(self->cg[B], pb, EGRESS, OVERRIDE));
	EXPECT_STREQ("pa", effective(self, A));
	EXPECT_STREQ("pb", effective(self, B));
	EXPECT_STREQ("pb", effective(self, C));
	EXPECT_STREQ("pa", effective(self, D));
	EXPECT_EQ(EPERM, sent_from(self, A));
	EXPECT_EQ(0, sent_from(self, B));
	EXPECT_EQ(0, sent_from(self, C));
	EXPECT_EQ(EPERM, sent_from(self, D));
	EXPECT_EQ(2, count(self, pa));
	EXPECT_EQ(2, count(self, pb));
}

TEST_F(tree, a_none_program_below_an_override_forbids_attach_below_it)
{
	int pa = tally(_metadata, self, "pa", CG_PASS);
	int pb = tally(_metadata, self, "pb", CG_PASS);
	int pc = tally(_metadata, self, "pc", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[A], pa, EGRESS, OVERRIDE));
	ASSERT_EQ(0, cg_attach(self->cg[B], pb, EGRESS, NONE));
	EXPECT_STREQ("pb", effective(self, C));
	/* The nearest ancestor with programs decides, and B says no. */
	EXPECT_EQ(-EPERM, cg_attach(self->cg[C], pc, EGRESS, OVERRIDE));
	EXPECT_EQ(0, cg_attach(self->cg[D], pc, EGRESS, NONE));
	EXPECT_STREQ("pc", effective(self, D));
}

/*
 * Nothing looks down the tree when a program is attached: A may take a
 * NONE program while B holds one. B's own program still hides it.
 */
TEST_F(tree, a_none_program_attached_above_later_does_not_join_below)
{
	int pb = tally(_metadata, self, "pb", CG_PASS);
	int pa = tally(_metadata, self, "pa", CG_DROP);

	ASSERT_EQ(0, cg_attach(self->cg[B], pb, EGRESS, OVERRIDE));
	ASSERT_EQ(0, cg_attach(self->cg[A], pa, EGRESS, NONE));
	EXPECT_STREQ("pb", effective(self, B));
	EXPECT_STREQ("pb", effective(self, C));
	EXPECT_STREQ("pa", effective(self, A));
	EXPECT_STREQ("pa", effective(self, D));
	EXPECT_EQ(0, sent_from(self, C));
	EXPECT_EQ(0, count(self, pa));
	EXPECT_EQ(1, count(self, pb));
}

TEST_F(tree, attach_flags_must_match_the_cgroups_programs)
{
	int pb = tally(_metadata, self, "pb", CG_PASS);
	int pb2 = tally(_metadata, self, "pb2", CG_PASS);
	int m1 = tally(_metadata, self, "m1", CG_PASS);
	int m2 = tally(_metadata, self, "m2", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[B], pb, EGRESS, OVERRIDE));
	EXPECT_EQ(-EPERM, cg_attach(self->cg[B], pb2, EGRESS, NONE));
	EXPECT_EQ(-EPERM, cg_attach(self->cg[B], pb2, EGRESS, MULTI));
	EXPECT_STREQ("pb", effective(self, C));
	/* The same flags again: the new program replaces the old one. */
	EXPECT_EQ(0, cg_attach(self->cg[B], pb2, EGRESS, OVERRIDE));
	EXPECT_STREQ("pb2", attached(self, B));
	EXPECT_STREQ("pb2", effective(self, C));

	ASSERT_EQ(0, cg_attach(self->cg[D], m1, EGRESS, MULTI));
	EXPECT_EQ(-EPERM, cg_attach(self->cg[D], m2, EGRESS, NONE));
	EXPECT_EQ(-EPERM, cg_attach(self->cg[D], m2, EGRESS, OVERRIDE));
	EXPECT_EQ(-EINVAL, cg_attach(self->cg[D], m2, EGRESS,
				     OVERRIDE | MULTI));
	EXPECT_STREQ("m1", effective(self, D));
}

TEST_F(tree, detaching_b_brings_a_back_into_b_and_c)
{
	int pa = tally(_metadata, self, "pa", CG_DROP);
	int pb = tally(_metadata, self, "pb", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[A], pa, EGRESS, OVERRIDE));
	ASSERT_EQ(0, cg_attach(self->cg[B], pb, EGRESS, OVERRIDE));
	ASSERT_EQ(0, sent_from(self, C));
	ASSERT_EQ(0, cg_detach(self->cg[B], pb, EGRESS));
	EXPECT_STREQ("", attached(self, B));
	EXPECT_STREQ("pa", effective(self, B));
	EXPECT_STREQ("pa", effective(self, C));
	EXPECT_EQ(EPERM, sent_from(self, B));
	EXPECT_EQ(EPERM, sent_from(self, C));
	EXPECT_EQ(1, count(self, pb));
	EXPECT_EQ(2, count(self, pa));
}

TEST_F(tree, detaching_from_a_multi_b_leaves_a_in_b_and_c)
{
	int pa = tally(_metadata, self, "pa", CG_PASS);
	int pb = tally(_metadata, self, "pb", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[A], pa, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[B], pb, EGRESS, MULTI));
	EXPECT_STREQ("pb pa", effective(self, C));
	ASSERT_EQ(0, cg_detach(self->cg[B], pb, EGRESS));
	EXPECT_STREQ("pa", effective(self, B));
	EXPECT_STREQ("pa", effective(self, C));
	reset(_metadata, self);
	ASSERT_EQ(0, sent_from(self, C));
	EXPECT_STREQ("pa", run_order(self));
}

TEST_F(tree, detach_from_a_cgroup_without_programs_is_enoent)
{
	int p = tally(_metadata, self, "p", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[A], p, EGRESS, OVERRIDE));
	/* B inherits p, but holds nothing to detach. */
	EXPECT_EQ(-ENOENT, cg_detach(self->cg[B], p, EGRESS));
	EXPECT_EQ(-ENOENT, cg_detach(self->cg[B], -1, EGRESS));
	EXPECT_STREQ("p", effective(self, B));
}

TEST_F(tree, detach_of_a_program_a_multi_cgroup_does_not_hold_is_enoent)
{
	int pa = tally(_metadata, self, "pa", CG_PASS);
	int pb = tally(_metadata, self, "pb", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[A], pa, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[B], pb, EGRESS, MULTI));
	EXPECT_EQ(-ENOENT, cg_detach(self->cg[B], pa, EGRESS));
	/* In MULTI mode the program must be named (find_detach_entry()). */
	EXPECT_EQ(-EINVAL, cg_detach(self->cg[B], -1, EGRESS));
	EXPECT_STREQ("pb pa", effective(self, C));
}

/* Backward compatibility: NONE and OVERRIDE detach their one program. */
TEST_F(tree, override_detach_removes_the_program_whatever_fd_is_given)
{
	int pb = tally(_metadata, self, "pb", CG_PASS);
	int other = tally(_metadata, self, "other", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[B], pb, EGRESS, OVERRIDE));
	EXPECT_EQ(0, cg_detach(self->cg[B], other, EGRESS));
	EXPECT_STREQ("", attached(self, B));
	EXPECT_STREQ("", effective(self, C));
}

TEST_F(tree, detaching_the_middle_of_three_keeps_the_others_in_order)
{
	int a1 = tally(_metadata, self, "a1", CG_PASS);
	int b1 = tally(_metadata, self, "b1", CG_PASS);
	int b2 = tally(_metadata, self, "b2", CG_PASS);
	int b3 = tally(_metadata, self, "b3", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[A], a1, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[B], b1, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[B], b2, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[B], b3, EGRESS, MULTI));
	/*
	 * While the arrays are recomputed, b2's entry is still on B's list
	 * with no program: an array that keeps it ends at the hole.
	 */
	ASSERT_EQ(0, cg_detach(self->cg[B], b2, EGRESS));
	EXPECT_STREQ("b1 b3", attached(self, B));
	EXPECT_STREQ("b1 b3 a1", effective(self, B));
	EXPECT_STREQ("b1 b3 a1", effective(self, C));
	reset(_metadata, self);
	ASSERT_EQ(0, sent_from(self, C));
	EXPECT_STREQ("b1 b3 a1", run_order(self));
	EXPECT_EQ(0, count(self, b2));
}

TEST_F(tree, last_detach_forgets_the_cgroups_flags)
{
	int m = tally(_metadata, self, "m", CG_PASS);
	int n = tally(_metadata, self, "n", CG_PASS);

	ASSERT_EQ(0, cg_attach(self->cg[B], m, EGRESS, MULTI));
	EXPECT_EQ(-EPERM, cg_attach(self->cg[B], n, EGRESS, NONE));
	ASSERT_EQ(0, cg_detach(self->cg[B], m, EGRESS));
	EXPECT_EQ(0, cg_attach(self->cg[B], n, EGRESS, NONE));
	EXPECT_STREQ("n", effective(self, C));
}

/*
 * B fills up one program at a time; after each, C's array (C's own,
 * B's, A's) is listed and must be exact: every length from 3 to 66.
 */
TEST_F(tree, multi_holds_64_programs_and_refuses_the_65th)
{
	char expected[TEXT_LEN] = "c1", name[16];
	int a1 = tally(_metadata, self, "a1", CG_PASS);
	int c1 = tally(_metadata, self, "c1", CG_PASS);
	int i, p;

	ASSERT_EQ(0, cg_attach(self->cg[A], a1, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[C], c1, EGRESS, MULTI));
	for (i = 1; i <= MAX_PER_CGROUP; i++) {
		char with_a1[TEXT_LEN];

		snprintf(name, sizeof(name), "b%d", i);
		p = tally(_metadata, self, name, CG_PASS);
		ASSERT_EQ(0, cg_attach(self->cg[B], p, EGRESS, MULTI))
			TH_LOG("attaching %s", name);
		append(expected, name);
		snprintf(with_a1, sizeof(with_a1), "%s a1", expected);
		ASSERT_STREQ(with_a1, effective(self, C));
	}
	strcat(expected, " a1");
	p = tally(_metadata, self, "b65", CG_PASS);
	EXPECT_EQ(-E2BIG, cg_attach(self->cg[B], p, EGRESS, MULTI));
	EXPECT_STREQ(expected, effective(self, C));
	reset(_metadata, self);
	ASSERT_EQ(0, sent_from(self, C));
	EXPECT_STREQ(expected, run_order(self));
}

/*
 * One program on A and on B: each attachment has its own cgroup storage
 * (bpf_get_local_storage()), and each item of C's array must carry the
 * storage of the entry it came from. The program counts in it.
 */
TEST_F(tree, each_array_item_carries_its_own_cgroup_storage)
{
	union bpf_attr attr;
	struct cg_prog insns;
	__u64 id, a_count = 0, b_count = 0;
	struct stat st;
	int map, p;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_CGROUP_STORAGE;
	attr.key_size = sizeof(__u64);	/* the cgroup's id alone */
	attr.value_size = sizeof(__u64);
	map = sys_bpf(BPF_MAP_CREATE, &attr);
	ASSERT_LE(0, map) TH_LOG("%s", strerror(errno));
	memset(&insns, 0, sizeof(insns));
	cg_emit_map_fd(&insns, BPF_REG_1, map);
	cg_emit(&insns, BPF_MOV64_IMM(BPF_REG_2, 0));
	cg_emit(&insns, BPF_EMIT_CALL(BPF_FUNC_get_local_storage));
	cg_emit_count_at_r0(&insns, 0);
	cg_emit_exit(&insns, CG_PASS);
	p = cg_prog_load(&insns, "p", EGRESS);
	adopt(_metadata, self, p, "p");

	ASSERT_EQ(0, cg_attach(self->cg[A], p, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[B], p, EGRESS, MULTI));
	EXPECT_STREQ("p p", effective(self, C));
	ASSERT_EQ(0, sent_from(self, C));
	ASSERT_EQ(0, sent_from(self, C));
	ASSERT_EQ(0, sent_from(self, B));
	ASSERT_EQ(0, sent_from(self, D));
	/* A cgroup's id is its directory's inode number (kernfs_id_ino()). */
	ASSERT_EQ(0, stat(self->path[A], &st));
	id = st.st_ino;
	EXPECT_EQ(0, cg_map_lookup(map, &id, &a_count));
	ASSERT_EQ(0, stat(self->path[B], &st));
	id = st.st_ino;
	EXPECT_EQ(0, cg_map_lookup(map, &id, &b_count));
	EXPECT_EQ(4ULL, a_count);	/* from C twice, B and D */
	EXPECT_EQ(3ULL, b_count);	/* from C twice and B */
	close(map);
}

TEST_F(tree, a_cgroup_made_after_attach_inherits_the_effective_programs)
{
	int a1 = tally(_metadata, self, "a1", CG_PASS);
	int b1 = tally(_metadata, self, "b1", CG_PASS);
	char path[CG_PATH_MAX];
	int e, tx;

	ASSERT_EQ(0, cg_attach(self->cg[A], a1, EGRESS, MULTI));
	ASSERT_EQ(0, cg_attach(self->cg[B], b1, EGRESS, MULTI));
	ASSERT_EQ(0, cg_mkdir(&self->fs, "A/B/C/E", path));
	e = cg_open(path);
	ASSERT_LE(0, e);
	EXPECT_STREQ("b1 a1", listed(self, e, EGRESS, BPF_F_QUERY_EFFECTIVE));
	tx = cg_udp_socket_in(&self->fs, path, AF_INET, NULL);
	ASSERT_LE(0, tx);
	reset(_metadata, self);
	EXPECT_EQ(0, sent_from_fd(self, tx));
	EXPECT_STREQ("b1 a1", run_order(self));
	/* Later changes reach it like any other descendant. */
	ASSERT_EQ(0, cg_detach(self->cg[B], b1, EGRESS));
	EXPECT_STREQ("a1", listed(self, e, EGRESS, BPF_F_QUERY_EFFECTIVE));
	close(tx);
	close(e);
}

/*
 * The example in include/uapi/linux/bpf.h, above BPF_F_ALLOW_OVERRIDE:
 * cgrp1 (MULTI A, B) -> cgrp2 (OVERRIDE C) -> cgrp3 (MULTI D) ->
 * cgrp4 (OVERRIDE E) -> cgrp5 (NONE F). An event in cgrp5 runs F, D, A,
 * B; without F, E, D, A, B; without F and D, E, A, B; without F, E and
 * D, C, A, B. Below the first program found, only MULTI cgroups add.
 */
/*
 * The chain of the uapi example as it stands, one line per cgroup:
 * "step cgroup mode attached... | effective...", for the chapter's picture
 * (chain_dot.py). Written only where the lab collects outputs.
 */
static void record_chain(FIXTURE_DATA(tree) *self, const char *step,
			 const int *cg, const char *const *mode, int n)
{
	FILE *out = fopen("/lab/out/uapi-example.txt", "a");
	int i;

	if (!out)
		return;
	for (i = 0; i < n; i++) {
		fprintf(out, "%s L%d %s %s |", step, i + 1, mode[i],
			listed(self, cg[i], EGRESS, 0));
		fprintf(out, " %s\n",
			listed(self, cg[i], EGRESS, BPF_F_QUERY_EFFECTIVE));
	}
	fclose(out);
}

static const char *const uapi_mode[] = {
	"MULTI", "OVERRIDE", "MULTI", "OVERRIDE", "NONE",
};

/*
 * The chain of include/uapi/linux/bpf.h's example: cg[0] to cg[4] are
 * cgrp1 to cgrp5 (named L1 to L5), with A and B on L1, C on L2, D on L3,
 * E on L4 and F on L5, attached as uapi_mode[] says; prog[] is A to F.
 * Returns a UDP socket made in L5.
 */
static int uapi_chain(struct __test_metadata *_metadata,
		      FIXTURE_DATA(tree) *self, int *cg, int *prog)
{
	static const char *const rel[] = {
		"L1", "L1/L2", "L1/L2/L3", "L1/L2/L3/L4", "L1/L2/L3/L4/L5",
	};
	static const char *const name[] = { "A", "B", "C", "D", "E", "F" };
	static const int on[] = { 0, 0, 1, 2, 3, 4 };
	static const __u32 flags[] = {
		BPF_F_ALLOW_MULTI, BPF_F_ALLOW_OVERRIDE, BPF_F_ALLOW_MULTI,
		BPF_F_ALLOW_OVERRIDE, 0,
	};
	char path[5][CG_PATH_MAX];
	int i, tx;

	for (i = 0; i < 5; i++) {
		ASSERT_EQ(0, cg_mkdir(&self->fs, rel[i], path[i])) {
			return -1;
		}
		cg[i] = cg_open(path[i]);
		ASSERT_LE(0, cg[i]) {
			return -1;
		}
	}
	for (i = 0; i < 6; i++)
		prog[i] = tally(_metadata, self, name[i], CG_PASS);
	for (i = 0; i < 6; i++) {
		ASSERT_EQ(0, cg_attach(cg[on[i]], prog[i], EGRESS, flags[on[i]]))
			TH_LOG("attaching %s", name[i]);
	}
	tx = cg_udp_socket_in(&self->fs, path[4], AF_INET, NULL);
	ASSERT_LE(0, tx) {
		return -1;
	}
	return tx;
}

/* With every program attached: L5 runs F, then D, A and B. */
TEST_F(tree, uapi_example_runs_f_d_a_b)
{
	int cg[5], prog[6], tx, i;

	tx = uapi_chain(_metadata, self, cg, prog);
	ASSERT_LE(0, tx);
	EXPECT_STREQ("F D A B",
		     listed(self, cg[4], EGRESS, BPF_F_QUERY_EFFECTIVE));
	EXPECT_STREQ("E D A B",
		     listed(self, cg[3], EGRESS, BPF_F_QUERY_EFFECTIVE));
	EXPECT_STREQ("C A B",
		     listed(self, cg[1], EGRESS, BPF_F_QUERY_EFFECTIVE));
	reset(_metadata, self);
	EXPECT_EQ(0, sent_from_fd(self, tx));
	EXPECT_STREQ("F D A B", run_order(self));

	close(tx);
	for (i = 0; i < 5; i++)
		close(cg[i]);
}

/* Then F, D and E are detached, and L5 falls back on what is left. */
TEST_F(tree, uapi_example_falls_back_on_detach)
{
	int cg[5], prog[6], tx, i;
	enum { pa, pb, pc, pd, pe, pf };

	tx = uapi_chain(_metadata, self, cg, prog);
	ASSERT_LE(0, tx);
	record_chain(self, "attached", cg, uapi_mode, 5);

	ASSERT_EQ(0, cg_detach(cg[4], prog[pf], EGRESS));
	EXPECT_STREQ("E D A B",
		     listed(self, cg[4], EGRESS, BPF_F_QUERY_EFFECTIVE));
	reset(_metadata, self);
	EXPECT_EQ(0, sent_from_fd(self, tx));
	EXPECT_STREQ("E D A B", run_order(self));

	ASSERT_EQ(0, cg_detach(cg[2], prog[pd], EGRESS));
	EXPECT_STREQ("E A B",
		     listed(self, cg[4], EGRESS, BPF_F_QUERY_EFFECTIVE));

	ASSERT_EQ(0, cg_detach(cg[3], prog[pe], EGRESS));
	record_chain(self, "detached", cg, uapi_mode, 5);
	EXPECT_STREQ("C A B",
		     listed(self, cg[4], EGRESS, BPF_F_QUERY_EFFECTIVE));
	reset(_metadata, self);
	EXPECT_EQ(0, sent_from_fd(self, tx));
	EXPECT_STREQ("C A B", run_order(self));
	/* And the middle of the chain sees its own part of it. */
	EXPECT_STREQ("C A B",
		     listed(self, cg[2], EGRESS, BPF_F_QUERY_EFFECTIVE));

	close(tx);
	for (i = 0; i < 5; i++)
		close(cg[i]);
}

TEST_F(tree, attach_types_are_independent)
{
	struct cg_prog insns;
	int pe = tally(_metadata, self, "pe", CG_PASS);
	int pi;

	cg_prog_verdict(&insns, CG_PASS);
	pi = cg_prog_load(&insns, "pi", INGRESS);
	adopt(_metadata, self, pi, "pi");

	ASSERT_EQ(0, cg_attach(self->cg[A], pi, INGRESS, NONE));
	/* A's NONE ingress program says nothing about egress. */
	EXPECT_EQ(0, cg_attach(self->cg[B], pe, EGRESS, NONE));
	EXPECT_STREQ("pe", effective(self, C));
	EXPECT_STREQ("pi", listed(self, self->cg[C], INGRESS,
				  BPF_F_QUERY_EFFECTIVE));
}

/*
 * The race: one thread attaches and detaches programs on B, round after
 * round, while a thread on every other CPU sends from its own socket in
 * C. The arrays C goes through, with K on A for good:
 *
 *	state 0: K	1: X K	2: X Y K	3: Y K
 *
 * X and Y are on B (MULTI); X counts and passes, Y counts and drops,
 * K counts and passes. The programs count per CPU, and each sender has
 * a CPU to itself, so after each sendto() the sender knows exactly
 * which programs saw its datagram. The toggling thread bumps race.seq
 * before each attach or detach (odd: changing) and after it (even:
 * settled), so a sender that reads the same even seq before and after
 * its sendto() knows the array it must have met; across a change, a
 * program that is in the arrays on both sides of it must still have
 * seen the datagram, and one in neither must not. Always:
 *	- K saw it (it never leaves);
 *	- sendto() failed with EPERM exactly when Y saw it.
 * The toggler waits in each settled state until every sender has sent
 * in it, so every state is met, whatever the scheduling.
 */
#define RACE_ROUNDS	200
#define RACE_WAIT_S	10

struct race_counts {
	__u64 x, y, k;
};

struct race;

struct race_sender {
	struct race *race;
	pthread_t thread;
	int cpu, fd;
	int error;		/* setup failed: an errno */
	long sends, wrong, settled[4];
	int seen;		/* the last settled seq sent in, or -1 */
	char first_wrong[160];
};

struct race {
	int seq, stop, map;
	struct cg_addr to;
	struct race_sender sender[CPU_SETSIZE];
	int nsenders;
};

static bool race_x_in(int seq)
{
	int state = (seq / 2) % 4;

	return state == 1 || state == 2;
}

static bool race_y_in(int seq)
{
	int state = (seq / 2) % 4;

	return state == 2 || state == 3;
}

/* Are X and Y in every array C can have had between s1 and s2? */
static void race_expect(int s1, int s2, int *x, int *y)
{
	int q, lo = s1 & ~1, hi = (s2 + 1) & ~1;

	*x = race_x_in(lo);
	*y = race_y_in(lo);
	for (q = lo + 2; q <= hi && q <= lo + 8; q += 2) {
		if (race_x_in(q) != *x)
			*x = -1;
		if (race_y_in(q) != *y)
			*y = -1;
	}
}

static void race_check(struct race_sender *s, int s1, int s2, int err,
		       const struct race_counts *d)
{
	int x, y;
	bool ok;

	race_expect(s1, s2, &x, &y);
	ok = d->k == 1 && d->x <= 1 && d->y <= 1 &&
	     (err == 0 || err == EPERM) && (err == EPERM) == (d->y == 1) &&
	     (x < 0 || d->x == (__u64)x) && (y < 0 || d->y == (__u64)y);
	if (ok)
		return;
	if (!s->wrong++)
		snprintf(s->first_wrong, sizeof(s->first_wrong),
			 "cpu %d, seq %d..%d: sendto %s, counted x %llu y %llu k %llu (expected x %d y %d, -1: either)",
			 s->cpu, s1, s2, err ? strerror(err) : "ok",
			 (unsigned long long)d->x, (unsigned long long)d->y,
			 (unsigned long long)d->k, x, y);
}

static void *race_send(void *arg)
{
	struct race_sender *s = arg;
	struct race *r = s->race;
	struct race_counts before, after, delta;
	int s1, s2, err;

	if (lab_pin_to_cpu(s->cpu) || cg_map_get(r->map, s->cpu, &before)) {
		s->error = errno;
		return NULL;
	}
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		s1 = __atomic_load_n(&r->seq, __ATOMIC_SEQ_CST);
		err = cg_send(s->fd, &r->to, "race", 4);
		/* The hook ran inside sendto(): seq is read after it. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		s2 = __atomic_load_n(&r->seq, __ATOMIC_SEQ_CST);
		if (cg_map_get(r->map, s->cpu, &after)) {
			s->error = errno;
			return NULL;
		}
		delta.x = after.x - before.x;
		delta.y = after.y - before.y;
		delta.k = after.k - before.k;
		before = after;
		race_check(s, s1, s2, err, &delta);
		s->sends++;
		if (s1 == s2 && !(s1 & 1)) {
			s->settled[(s1 / 2) % 4]++;
			__atomic_store_n(&s->seen, s1, __ATOMIC_RELEASE);
		}
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Until every sender has sent in the settled state seq: false on timeout. */
static bool race_wait(struct race *r, int seq)
{
	double deadline = now_s() + RACE_WAIT_S;
	int i;

	for (i = 0; i < r->nsenders; i++) {
		struct race_sender *s = &r->sender[i];

		while (__atomic_load_n(&s->seen, __ATOMIC_ACQUIRE) < seq) {
			if (s->error || now_s() > deadline)
				return false;
		}
	}
	return true;
}

static int race_seq(struct race *r)
{
	return __atomic_load_n(&r->seq, __ATOMIC_SEQ_CST);
}

/* One change of C's array: 0, or the attach's or detach's -errno. */
static int race_step(struct race *r, int cg_fd, int prog_fd, bool attach)
{
	int ret;

	__atomic_add_fetch(&r->seq, 1, __ATOMIC_SEQ_CST);
	if (attach)
		ret = cg_attach(cg_fd, prog_fd, EGRESS, MULTI);
	else
		ret = cg_detach(cg_fd, prog_fd, EGRESS);
	__atomic_add_fetch(&r->seq, 1, __ATOMIC_SEQ_CST);
	return ret;
}

TEST_F_TIMEOUT(tree, sends_during_attach_and_detach_meet_whole_arrays, 120)
{
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct race *r;
	struct cg_prog insns;
	int k, x, y, rx, i, step, stalled, ret = 0;
	long sends = 0, wrong = 0;
	__u64 k_total = 0;

	if (ncpus < 2)
		SKIP(return, "the race needs two CPUs, this machine has %ld",
		     ncpus);
	if (ncpus > CPU_SETSIZE)
		ncpus = CPU_SETSIZE;
	r = calloc(1, sizeof(*r));
	ASSERT_NE(NULL, r);
	r->map = cg_map_create(sizeof(struct race_counts), ncpus);
	ASSERT_LE(0, r->map);
	cg_prog_count_cpu(&insns, r->map, offsetof(struct race_counts, k),
			  CG_PASS);
	k = cg_prog_load(&insns, "k", EGRESS);
	cg_prog_count_cpu(&insns, r->map, offsetof(struct race_counts, x),
			  CG_PASS);
	x = cg_prog_load(&insns, "x", EGRESS);
	cg_prog_count_cpu(&insns, r->map, offsetof(struct race_counts, y),
			  CG_DROP);
	y = cg_prog_load(&insns, "y", EGRESS);
	adopt(_metadata, self, k, "k");
	adopt(_metadata, self, x, "x");
	adopt(_metadata, self, y, "y");
	ASSERT_EQ(0, cg_attach(self->cg[A], k, EGRESS, MULTI));
	/* A receiver of its own: the flood may fill its queue. */
	rx = cg_udp_socket_in(&self->fs, self->fs.home, AF_INET, &r->to);
	ASSERT_LE(0, rx);

	/* Every socket before any thread: joining C moves them all. */
	for (i = 0; i < ncpus - 1; i++) {
		struct race_sender *s = &r->sender[i];

		s->race = r;
		s->cpu = i + 1;
		s->seen = -1;
		s->fd = cg_udp_socket_in(&self->fs, self->path[C], AF_INET,
					 NULL);
		ASSERT_LE(0, s->fd);
	}
	ASSERT_EQ(0, lab_pin_to_cpu(0));
	for (i = 0; i < ncpus - 1; i++) {
		struct race_sender *s = &r->sender[i];

		ASSERT_EQ(0, pthread_create(&s->thread, NULL, race_send, s));
		r->nsenders++;
	}

	/* Round after round: attach X, attach Y, detach X, detach Y. */
	stalled = race_wait(r, 0) ? -1 : 0;
	for (step = 0; step < 4 * RACE_ROUNDS && stalled < 0; step++) {
		ret = race_step(r, self->cg[B], step % 2 ? y : x, step % 4 < 2);
		if (ret)
			break;
		if (!race_wait(r, race_seq(r)))
			stalled = race_seq(r);
	}
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < r->nsenders; i++) {
		struct race_sender *s = &r->sender[i];
		struct race_counts total;

		pthread_join(s->thread, NULL);
		TH_LOG("cpu %d: %ld sends; settled in K: %ld, X K: %ld, "
		       "X Y K: %ld, Y K: %ld", s->cpu, s->sends,
		       s->settled[0], s->settled[1], s->settled[2],
		       s->settled[3]);
		EXPECT_EQ(0, s->error) TH_LOG("cpu %d: %s", s->cpu,
					      strerror(s->error));
		if (s->wrong)
			TH_LOG("%s", s->first_wrong);
		sends += s->sends;
		wrong += s->wrong;
		if (!cg_map_get(r->map, s->cpu, &total))
			k_total += total.k;
		close(s->fd);
	}
	EXPECT_EQ(0, ret) TH_LOG("attach or detach failed: %s",
				 strerror(-ret));
	EXPECT_EQ(-1, stalled) TH_LOG("no send from every sender in seq %d",
				      stalled);
	EXPECT_EQ(0, wrong);
	/* The counts add up: K saw every datagram, once. */
	EXPECT_EQ(sends, (long)k_total);
	EXPECT_STREQ("k", listed(self, self->cg[C], EGRESS,
				 BPF_F_QUERY_EFFECTIVE));
	close(rx);
	close(r->map);
	free(r);
}

TEST_HARNESS_MAIN
