// SPDX-License-Identifier: GPL-2.0
/*
 * Watch the LRU list work through its trace events (the bpf_lru group): fill a
 * common LRU hash map, look three keys in four up from a BPF program (only
 * BPF-side lookups set the ref bit), then insert as many new keys again.
 * The referenced nodes end up on the active list, which grows past the
 * inactive one, so the list must shrink, rotate both lists, and keep
 * counts that fit the map in every event.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>

#include "kselftest_harness.h"

#define CAPACITY	1000
#define TRACEFS		"/sys/kernel/tracing/"

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		perror(path);
		exit(KSFT_FAIL);
	}
	close(fd);
}

/*
 * A socket filter that looks up, in the LRU map, the key user space left
 * in slot 0 of a one-slot array ("the mailbox"). Run with BPF_PROG_TEST_RUN,
 * it is the cheapest way to make a lookup that sets the ref bit.
 */
static int load_ref_setter(int mailbox_fd, int lru_fd)
{
	struct bpf_insn insns[] = {
		/* *(u32 *)(fp - 4) = 0: the mailbox slot */
		{ .code = BPF_ST | BPF_MEM | BPF_W, .dst_reg = BPF_REG_10, .off = -4 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .imm = -4 },
		{ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1,
		  .src_reg = BPF_PSEUDO_MAP_FD, .imm = mailbox_fd },
		{ 0 },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_map_lookup_elem },
		{ .code = BPF_JMP | BPF_JEQ | BPF_K, .dst_reg = BPF_REG_0, .off = 4 },
		/* r2 = the key stored in the mailbox; look it up in the LRU map */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_0 },
		{ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1,
		  .src_reg = BPF_PSEUDO_MAP_FD, .imm = lru_fd },
		{ 0 },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_map_lookup_elem },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};

	return bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "lru_set_ref", "GPL", insns,
			     sizeof(insns) / sizeof(insns[0]), NULL);
}

static int lookup_with_ref(int prog_fd, int mailbox_fd, __u64 key)
{
	__u32 slot = 0;
	char packet[64] = {};
	LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = packet, .data_size_in = sizeof(packet));

	if (bpf_map_update_elem(mailbox_fd, &slot, &key, BPF_ANY))
		return -1;
	return bpf_prog_test_run_opts(prog_fd, &run);
}

struct counts {
	long events, shrink, rotate_active, rotate_inactive, flush, pop_shrink;
	long bad_counts, bad_shrink, forced;
};

static long field(const char *line, const char *name)
{
	const char *at = strstr(line, name);

	return at ? strtol(at + strlen(name), NULL, 0) : -1;
}

static void tally_trace(struct __test_metadata *_metadata, struct counts *c)
{
	char line[512];
	FILE *trace = fopen(TRACEFS "trace", "r");

	ASSERT_NE(NULL, trace);
	while (fgets(line, sizeof(line), trace)) {
		long active = field(line, " active="), inactive = field(line, " inactive=");
		long free = field(line, " free=");

		if (line[0] == '#' || !strstr(line, "bpf_lru_"))
			continue;
		c->events++;
		/* The global list never holds more nodes than the map has. */
		if (active < 0 || inactive < 0 || free < 0 || active + inactive + free > CAPACITY)
			c->bad_counts++;
		if (strstr(line, "bpf_lru_shrink:")) {
			c->shrink++;
			if (field(line, " freed=") < 1 || field(line, " freed=") > field(line, " target="))
				c->bad_shrink++;
			if (field(line, " forced=") == 1)
				c->forced++;
		} else if (strstr(line, "bpf_lru_rotate_active:")) {
			c->rotate_active++;
		} else if (strstr(line, "bpf_lru_rotate_inactive:")) {
			c->rotate_inactive++;
		} else if (strstr(line, "bpf_lru_local_flush:")) {
			c->flush++;
		} else if (strstr(line, "bpf_lru_pop_free:") && strstr(line, "path=shrink")) {
			c->pop_shrink++;
		}
	}
	fclose(trace);
}

TEST(lru_events_show_shrink_and_rotation_with_consistent_counts)
{
	struct counts c = {};
	int lru_fd, mailbox_fd, prog_fd;
	__u64 key, value = 0, referenced_kept = 0, unreferenced_kept = 0;
	cpu_set_t one_cpu;

	/* One CPU: every pop and flush goes through the same local list. */
	CPU_ZERO(&one_cpu);
	CPU_SET(0, &one_cpu);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(one_cpu), &one_cpu));

	lru_fd = bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "lab_lru", sizeof(key), sizeof(value),
				CAPACITY, NULL);
	ASSERT_LE(0, lru_fd);
	mailbox_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "lab_mailbox", sizeof(__u32),
				    sizeof(key), 1, NULL);
	ASSERT_LE(0, mailbox_fd);
	prog_fd = load_ref_setter(mailbox_fd, lru_fd);
	ASSERT_LE(0, prog_fd) TH_LOG("loading the ref-setting program: %s", strerror(errno));

	write_file(TRACEFS "buffer_size_kb", "4096");
	write_file(TRACEFS "trace", "");
	write_file(TRACEFS "events/bpf_lru/enable", "1");

	for (key = 0; key < CAPACITY; key++)
		ASSERT_EQ(0, bpf_map_update_elem(lru_fd, &key, &value, BPF_ANY));
	/* Keys 4n+1, 4n+2, 4n+3 earn a second chance; keys 4n are never used again. */
	for (key = 0; key < CAPACITY; key++)
		if (key % 4)
			ASSERT_EQ(0, lookup_with_ref(prog_fd, mailbox_fd, key));
	for (key = CAPACITY; key < 2 * CAPACITY; key++)
		ASSERT_EQ(0, bpf_map_update_elem(lru_fd, &key, &value, BPF_ANY));

	write_file(TRACEFS "events/bpf_lru/enable", "0");
	tally_trace(_metadata, &c);
	TH_LOG("%ld events: %ld shrink, %ld rotate_active, %ld rotate_inactive, %ld flush",
	       c.events, c.shrink, c.rotate_active, c.rotate_inactive, c.flush);

	EXPECT_LT(0, c.shrink);
	EXPECT_LT(0, c.pop_shrink);
	EXPECT_LT(0, c.rotate_active);
	EXPECT_LT(0, c.rotate_inactive);
	EXPECT_LT(0, c.flush);
	EXPECT_EQ(0, c.bad_counts);
	EXPECT_EQ(0, c.bad_shrink);
	/* Unreferenced nodes were always there to evict: no forced shrink. */
	EXPECT_EQ(0, c.forced);

	for (key = 0; key < CAPACITY; key++) {
		if (bpf_map_lookup_elem(lru_fd, &key, &value))
			continue;
		if (key % 4)
			referenced_kept++;
		else
			unreferenced_kept++;
	}
	TH_LOG("old keys kept: %llu referenced, %llu unreferenced",
	       referenced_kept, unreferenced_kept);
	/* The second chance is the point of the ref bit: per key, referenced
	 * ones (three times as many) must survive more often.
	 */
	EXPECT_GT(referenced_kept, 3 * unreferenced_kept);

	close(prog_fd);
	close(mailbox_fd);
	close(lru_fd);
}

TEST_HARNESS_MAIN
