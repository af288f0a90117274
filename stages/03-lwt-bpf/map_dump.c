// SPDX-License-Identifier: GPL-2.0
/*
 * lwt-map-dump PINNED-MAP: print a pinned hash map whose values are
 * 64-bit counters, one "KEY VALUE" line per entry, the key in hex bytes
 * as they lie in memory (an IPv4 address key reads in network order),
 * per-CPU values summed. The exercise graders read a student's counters
 * with it.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct bpf_map_info info = {};
	__u32 info_len = sizeof(info);
	unsigned char key[64], next[64];
	void *prev = NULL;
	int fd, cpus = 1, percpu, i;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PINNED-MAP\n", argv[0]);
		return 2;
	}
	fd = bpf_obj_get(argv[1]);
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &info_len)) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	percpu = info.type == BPF_MAP_TYPE_PERCPU_HASH ||
		 info.type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
	if (percpu)
		cpus = libbpf_num_possible_cpus();
	if (info.value_size != 8 || info.key_size > sizeof(key) || cpus < 1) {
		fprintf(stderr, "%s: not a map of 64-bit counters\n", argv[1]);
		return 1;
	}
	while (!bpf_map_get_next_key(fd, prev, next)) {
		unsigned long long values[cpus], sum = 0;

		memcpy(key, next, info.key_size);
		prev = key;
		if (bpf_map_lookup_elem(fd, key, values))
			continue;	/* deleted meanwhile */
		for (i = 0; i < cpus; i++)
			sum += values[i];
		for (i = 0; i < (int)info.key_size; i++)
			printf("%02x", key[i]);
		printf(" %llu\n", sum);
	}
	return 0;
}
