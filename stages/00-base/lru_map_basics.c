// SPDX-License-Identifier: GPL-2.0
/*
 * The promises of an LRU hash map that every later chapter builds on,
 * checked through the bpf(2) syscall: it can be created, it never holds
 * more than max_entries, and inserting past capacity evicts instead of
 * failing with E2BIG as a plain hash map does.
 */
#include <errno.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "kselftest_harness.h"

#define CAPACITY 512

static int count_keys(int fd)
{
	__u32 key;
	int n = 0;
	int err;

	for (err = bpf_map_get_next_key(fd, NULL, &key); !err;
	     err = bpf_map_get_next_key(fd, &key, &key))
		n++;
	return n;
}

static int make_map(enum bpf_map_type type, __u32 flags)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = flags);

	return bpf_map_create(type, "lab_basics", sizeof(__u32), sizeof(__u64),
			      CAPACITY, &opts);
}

TEST(lru_map_can_be_created)
{
	int fd = make_map(BPF_MAP_TYPE_LRU_HASH, 0);

	ASSERT_LE(0, fd) TH_LOG("bpf_map_create: %s", strerror(errno));
	close(fd);
}

TEST(lru_map_evicts_instead_of_failing)
{
	int fd = make_map(BPF_MAP_TYPE_LRU_HASH, 0);
	__u64 value = 1;
	__u32 key;

	ASSERT_LE(0, fd);
	for (key = 0; key < 4 * CAPACITY; key++)
		ASSERT_EQ(0, bpf_map_update_elem(fd, &key, &value, BPF_ANY))
			TH_LOG("update of key %u: %s", key, strerror(errno));
	EXPECT_LE(count_keys(fd), CAPACITY);
	EXPECT_LT(0, count_keys(fd));
	/* The newest key is the last thing an LRU would give up. */
	key = 4 * CAPACITY - 1;
	EXPECT_EQ(0, bpf_map_lookup_elem(fd, &key, &value));
	close(fd);
}

TEST(percpu_lru_map_evicts_instead_of_failing)
{
	int fd = make_map(BPF_MAP_TYPE_LRU_HASH, BPF_F_NO_COMMON_LRU);
	__u64 value = 1;
	__u32 key;

	ASSERT_LE(0, fd);
	for (key = 0; key < 4 * CAPACITY; key++)
		ASSERT_EQ(0, bpf_map_update_elem(fd, &key, &value, BPF_ANY));
	EXPECT_LE(count_keys(fd), CAPACITY);
	close(fd);
}

TEST(plain_hash_map_fails_when_full)
{
	int fd = make_map(BPF_MAP_TYPE_HASH, 0);
	__u64 value = 1;
	__u32 key;

	ASSERT_LE(0, fd);
	for (key = 0; key < CAPACITY; key++)
		ASSERT_EQ(0, bpf_map_update_elem(fd, &key, &value, BPF_ANY));
	/* libbpf 1.x returns the negative errno itself. */
	EXPECT_EQ(-E2BIG, bpf_map_update_elem(fd, &key, &value, BPF_ANY));
	close(fd);
}

TEST_HARNESS_MAIN
