// SPDX-License-Identifier: GPL-2.0
/*
 * Drive a common LRU hash map into one insert that must shrink, in a
 * known order, so that a debugger or a trace can watch every step of
 * bpf_lru_pop_free(): flush, active rotation, inactive rotation, shrink.
 *
 * The map has CAPACITY = 2 * LOCAL_FREE_TARGET entries and everything runs
 * on CPU 0, so the local free list empties exactly when the map is full:
 *
 *   insert keys 0-127     the first pop takes 128 free nodes to CPU 0
 *   reference 0-63        from BPF, while they are pending
 *   insert keys 128-255   the refill flushes 0-63 to active, 64-127 to inactive
 *   reference 0-31, 64-79 and 128-223
 *   insert key 256        the watched insert: the global free list is empty
 *
 * Only BPF-side lookups set the ref bit (syscall lookups have not since
 * 2019), so a tiny BPF_PROG_TYPE_SYSCALL program does the lookups.
 *
 * The keys the watched insert evicted are printed on stdout. With a
 * directory argument, they are also saved there as overfill-evicted.txt,
 * next to overfill-trace.txt, the bpf_lru trace events of that insert.
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

#define CAPACITY	256
#define TRACEFS		"/sys/kernel/tracing/"

static void die(const char *what)
{
	fprintf(stderr, "lru_overfill_by_one: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		die(path);
	close(fd);
}

static void copy_file(const char *from, const char *to)
{
	char buf[4096];
	ssize_t n;
	int in = open(from, O_RDONLY);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (in < 0 || out < 0)
		die(to);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			die(to);
	close(in);
	close(out);
}

/*
 * A BPF_PROG_TYPE_SYSCALL program whose context is the __u32 key to look up:
 *   key = *(u32 *)ctx; bpf_map_lookup_elem(lru, &key); return 0;
 */
static int load_toucher(int lru_fd)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_1 },
		{ .code = BPF_STX | BPF_MEM | BPF_W, .dst_reg = BPF_REG_10, .src_reg = BPF_REG_2,
		  .off = -4 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .imm = -4 },
		{ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1,
		  .src_reg = BPF_PSEUDO_MAP_FD, .imm = lru_fd },
		{ 0 },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_map_lookup_elem },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .prog_flags = BPF_F_SLEEPABLE);

	return bpf_prog_load(BPF_PROG_TYPE_SYSCALL, "lru_touch", "GPL", insns,
			     sizeof(insns) / sizeof(insns[0]), &opts);
}

static void touch(int prog_fd, __u32 first, __u32 last)
{
	__u32 key;

	for (key = first; key <= last; key++) {
		LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = &key, .ctx_size_in = sizeof(key));

		if (bpf_prog_test_run_opts(prog_fd, &run))
			die("BPF_PROG_TEST_RUN");
	}
}

static void insert(int lru_fd, __u32 first, __u32 last)
{
	__u64 value = 0;
	__u32 key;

	for (key = first; key <= last; key++)
		if (bpf_map_update_elem(lru_fd, &key, &value, BPF_ANY))
			die("BPF_MAP_UPDATE_ELEM");
}

/* Print the runs of keys below @end that are no longer in the map. */
static void print_evicted(FILE *out, int lru_fd, __u32 end)
{
	unsigned int evicted = 0;
	__u64 value;
	__u32 key, first = 0;
	int in_run = 0;

	fprintf(out, "evicted:");
	for (key = 0; key <= end; key++) {
		/* A syscall lookup: it does not set the ref bit. */
		int gone = key < end && bpf_map_lookup_elem(lru_fd, &key, &value) != 0;

		if (gone && !in_run)
			first = key;
		if (!gone && in_run)
			fprintf(out, " %u-%u", first, key - 1);
		in_run = gone;
		evicted += gone;
	}
	fprintf(out, " (%u keys)\n", evicted);
}

int main(int argc, char **argv)
{
	const char *out_dir = argc > 1 ? argv[1] : NULL;
	__u32 new_key = CAPACITY;
	__u64 value;
	cpu_set_t cpu0;
	int lru_fd, prog_fd;
	char path[256];

	/* One CPU: one local free list, one pending list, a fixed order. */
	CPU_ZERO(&cpu0);
	CPU_SET(0, &cpu0);
	if (sched_setaffinity(0, sizeof(cpu0), &cpu0))
		die("sched_setaffinity");

	lru_fd = bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "lab_overfill", sizeof(__u32),
				sizeof(__u64), CAPACITY, NULL);
	if (lru_fd < 0)
		die("BPF_MAP_CREATE");
	prog_fd = load_toucher(lru_fd);
	if (prog_fd < 0)
		die("BPF_PROG_LOAD");

	insert(lru_fd, 0, 127);
	touch(prog_fd, 0, 63);
	insert(lru_fd, 128, 255);
	touch(prog_fd, 0, 31);
	touch(prog_fd, 64, 79);
	touch(prog_fd, 128, 223);

	if (out_dir) {
		write_file(TRACEFS "trace", "");
		write_file(TRACEFS "events/bpf_lru/enable", "1");
	}
	insert(lru_fd, new_key, new_key);
	if (out_dir) {
		write_file(TRACEFS "events/bpf_lru/enable", "0");
		snprintf(path, sizeof(path), "%s/overfill-trace.txt", out_dir);
		copy_file(TRACEFS "trace", path);
	}

	if (bpf_map_lookup_elem(lru_fd, &new_key, &value))
		die("the new key is not in the map");
	print_evicted(stdout, lru_fd, new_key);
	if (out_dir) {
		FILE *evicted;

		snprintf(path, sizeof(path), "%s/overfill-evicted.txt", out_dir);
		evicted = fopen(path, "w");
		if (!evicted)
			die(path);
		print_evicted(evicted, lru_fd, new_key);
		fclose(evicted);
	}
	return 0;
}
