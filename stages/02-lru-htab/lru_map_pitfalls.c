// SPDX-License-Identifier: GPL-2.0
/*
 * What users of BPF_MAP_TYPE_LRU_HASH trip over, each one measured on the
 * running kernel. Every test asserts the behaviour the chapter describes
 * and appends what it measured to $LAB_RESULTS/lru-pitfalls.md (default
 * /lab/out), so the chapter shows this kernel's figures.
 *
 * The lookups that must set the ref bit, as a BPF program's do, go through
 * lru_dist_datapath.bpf.o (the stage's test_lru_dist_datapath object): one
 * BPF_PROG_TEST_RUN looks up a batch of keys in its "lru" map.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "kselftest_harness.h"
#include "lru_dist_datapath.h"

#define OBJECT "/usr/lib/lab/lru_dist_datapath.bpf.o"
/* bpf_lru_list.c's batch sizes in 6.1 */
#define LOCAL_FREE_TARGET 128
#define PERCPU_FREE_TARGET 4

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static int online_cpus(void)
{
	return sysconf(_SC_NPROCESSORS_ONLN);
}

static void record(const char *pitfall, const char *fmt, ...)
{
	const char *dir = getenv("LAB_RESULTS") ?: "/lab/out";
	char path[256], text[512];
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	printf("# %s: %s\n", pitfall, text);
	snprintf(path, sizeof(path), "%s/lru-pitfalls.md", dir);
	f = fopen(path, "a");
	if (!f)
		return;
	if (ftell(f) == 0)
		fprintf(f, "| Pitfall | Measured on this kernel |\n| --- | --- |\n");
	fprintf(f, "| %s | %s |\n", pitfall, text);
	fclose(f);
}

static int lru_map(__u32 max_entries, __u32 flags)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = flags);

	return bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "lab_pitfall", sizeof(__u64),
			      sizeof(__u64), max_entries, &opts);
}

static int count_keys(int fd)
{
	__u64 key;
	int n = 0, err;

	for (err = bpf_map_get_next_key(fd, NULL, &key); !err;
	     err = bpf_map_get_next_key(fd, &key, &key))
		n++;
	return n;
}

static int insert_range(int fd, __u64 first, __u64 n)
{
	__u64 value = 1;

	for (__u64 key = first; key < first + n; key++)
		if (bpf_map_update_elem(fd, &key, &value, BPF_NOEXIST))
			return -errno;
	return 0;
}

static int present_in_range(int fd, __u64 first, __u64 n)
{
	__u64 value;
	int present = 0;

	for (__u64 key = first; key < first + n; key++)
		present += !bpf_map_lookup_elem(fd, &key, &value);
	return present;
}

/* Look keys up from a BPF program, which sets their ref bits. */
static int program_lookup_range(struct bpf_object *obj, __u64 first, __u64 n)
{
	static struct lru_dist_batch batch;
	unsigned char packet[64] = {};
	__u32 zero = 0;
	LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = packet,
		    .data_size_in = sizeof(packet), .repeat = 1);
	int batch_fd = bpf_object__find_map_fd_by_name(obj, "batch");
	int prog_fd = bpf_program__fd(bpf_object__find_program_by_name(obj, "replay_keys"));

	if (n > LRU_DIST_BATCH)
		return -E2BIG;
	batch.nr_keys = n;
	for (__u64 i = 0; i < n; i++)
		batch.keys[i] = first + i;
	if (bpf_map_update_elem(batch_fd, &zero, &batch, BPF_ANY) ||
	    bpf_prog_test_run_opts(prog_fd, &run) ||
	    bpf_map_lookup_elem(batch_fd, &zero, &batch))
		return -errno;
	/* every key was present: the program inserted nothing */
	return batch.nr_misses;
}

static struct bpf_object *load_object(__u32 max_entries)
{
	struct bpf_object *obj = bpf_object__open_file(OBJECT, NULL);

	if (!obj)
		return NULL;
	bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "lru"), max_entries);
	if (bpf_object__load(obj)) {
		bpf_object__close(obj);
		return NULL;
	}
	return obj;
}

/*
 * The first insert into a full common LRU map evicts a whole batch
 * (LOCAL_FREE_TARGET nodes go to the CPU's local free list), so the map
 * is left well below max_entries; the percpu LRU frees PERCPU_FREE_TARGET.
 */
TEST(batch_eviction_leaves_map_less_than_full)
{
	const __u32 max = 1024;
	int common, percpu, ncpus = libbpf_num_possible_cpus();
	int after_common, after_percpu;

	pin(0);
	common = lru_map(max, 0);
	percpu = lru_map(max * ncpus, BPF_F_NO_COMMON_LRU);
	ASSERT_LE(0, common);
	ASSERT_LE(0, percpu);
	ASSERT_EQ(0, insert_range(common, 0, max));
	ASSERT_EQ(0, insert_range(percpu, 0, max));
	ASSERT_EQ(max, count_keys(common));
	ASSERT_EQ(max, count_keys(percpu));
	ASSERT_EQ(0, insert_range(common, max, 1));
	ASSERT_EQ(0, insert_range(percpu, max, 1));
	after_common = count_keys(common);
	after_percpu = count_keys(percpu);
	record("batch eviction leaves the map less than full",
	       "%u entries on CPU 0, full; one more insert leaves %d (common LRU) "
	       "and %d (percpu LRU, %u per CPU)", max, after_common, after_percpu, max);
	/* One insert evicted many elements at once, not one. */
	EXPECT_GT((int)max - LOCAL_FREE_TARGET / 2, after_common);
	EXPECT_GT((int)max, after_percpu);
	close(common);
	close(percpu);
}

/*
 * A CPU that once inserted holds up to LOCAL_FREE_TARGET free nodes in its
 * local list. In a small map, another CPU then runs out of free nodes long
 * before the map is full, and evicts.
 */
TEST(small_map_on_many_cpus_loses_entries_early)
{
	const __u32 max = 2 * LOCAL_FREE_TARGET;
	const __u32 inserts = max - LOCAL_FREE_TARGET / 2;
	int fd, present, total;

	if (online_cpus() < 2)
		SKIP(return, "needs two CPUs");
	fd = lru_map(max, 0);
	ASSERT_LE(0, fd);
	pin(1);
	ASSERT_EQ(0, insert_range(fd, 1000000, 1));
	pin(0);
	ASSERT_EQ(0, insert_range(fd, 0, inserts));
	present = present_in_range(fd, 0, inserts);
	total = count_keys(fd);
	record("small maps on many CPUs lose entries early",
	       "max_entries %u; 1 insert on CPU 1, then %u on CPU 0: %d of CPU 0's keys "
	       "were evicted, with %d entries in the map", max, inserts, inserts - present,
	       total);
	EXPECT_LT(present, (int)inserts);
	EXPECT_LT(total, (int)max);
	close(fd);
}

/*
 * Each CPU's list of a percpu LRU map only sees that CPU's inserts: recent
 * keys on one CPU are evicted while older keys on another survive.
 */
TEST(percpu_lru_loses_the_global_lru_order)
{
	const __u32 per_cpu = 256;
	int fd, old_kept, recent_kept;

	if (online_cpus() < 2)
		SKIP(return, "needs two CPUs");
	fd = lru_map(per_cpu * libbpf_num_possible_cpus(), BPF_F_NO_COMMON_LRU);
	ASSERT_LE(0, fd);
	pin(1);
	ASSERT_EQ(0, insert_range(fd, 100000, per_cpu));	/* oldest keys */
	pin(0);
	ASSERT_EQ(0, insert_range(fd, 200000, per_cpu));	/* newer */
	ASSERT_EQ(0, insert_range(fd, 300000, per_cpu / 2));	/* newest */
	old_kept = present_in_range(fd, 100000, per_cpu);
	recent_kept = present_in_range(fd, 200000, per_cpu);
	record("percpu LRU loses the global LRU property",
	       "%u keys inserted on CPU 1, then %u newer and %u newest on CPU 0: "
	       "%d of the oldest (CPU 1) survive, %d of the newer (CPU 0)",
	       per_cpu, per_cpu, per_cpu / 2, old_kept, recent_kept);
	EXPECT_EQ((int)per_cpu, old_kept);
	EXPECT_GE((int)per_cpu / 2, recent_kept);
	close(fd);
}

/*
 * Only a lookup from a BPF program sets the ref bit; a lookup through the
 * bpf(2) syscall leaves it clear (htab_lru_map_lookup_elem_sys()), so it
 * does not protect an element from eviction.
 */
TEST(syscall_lookup_does_not_set_the_ref_bit)
{
	const __u32 max = 1024, hot = 64;
	struct bpf_object *obj;
	int fd, kept[2];

	pin(0);
	for (int by_program = 0; by_program < 2; by_program++) {
		obj = load_object(max);
		ASSERT_NE(NULL, obj) TH_LOG("loading %s", OBJECT);
		fd = bpf_object__find_map_fd_by_name(obj, "lru");
		ASSERT_EQ(0, insert_range(fd, 0, max));
		/* the oldest keys, the first to go, are looked up */
		if (by_program) {
			ASSERT_EQ(0, program_lookup_range(obj, 0, hot));
		} else {
			ASSERT_EQ((int)hot, present_in_range(fd, 0, hot));
		}
		ASSERT_EQ(0, insert_range(fd, max, 1));
		kept[by_program] = present_in_range(fd, 0, hot);
		bpf_object__close(obj);
	}
	record("a syscall lookup does not protect an element",
	       "full map of %u; the %u oldest keys looked up, then one insert: %d survive "
	       "after syscall lookups, %d after lookups in a BPF program",
	       max, hot, kept[0], kept[1]);
	EXPECT_EQ(0, kept[0]);
	EXPECT_EQ((int)hot, kept[1]);
}

TEST_HARNESS_MAIN
