// SPDX-License-Identifier: GPL-2.0
/*
 * lab-park FUNCTION CPU: hold the next call of the kernel's FUNCTION on
 * CPU inside FUNCTION until told to let it go (see park.h).
 *
 * Prints "armed" once the kprobe is in place, "parked" once CPU is held,
 * and, after a line on standard input (or its end), "released", or
 * "timed out" if the CPU went on alone before that. Exits 1 if nothing
 * was parked within 10 s.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "lab/park.h"

#define OBJECT "/usr/lib/lab/park.bpf.o"

static void die(const char *what, int err)
{
	fprintf(stderr, "lab-park: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(2);
}

int main(int argc, char **argv)
{
	volatile struct lab_park_cue *cue;
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_link *link;
	struct bpf_map *map;
	char line[64];
	int i, err;

	if (argc != 3) {
		fprintf(stderr, "usage: lab-park FUNCTION CPU\n");
		return 2;
	}
	obj = bpf_object__open_file(OBJECT, NULL);
	if (!obj)
		die(OBJECT, errno);
	err = bpf_object__load(obj);
	if (err)
		die("loading " OBJECT, err);
	prog = bpf_object__find_program_by_name(obj, "lab_park");
	map = bpf_object__find_map_by_name(obj, "cue");
	if (!prog || !map)
		die(OBJECT, ENOENT);
	cue = mmap(NULL, sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE, MAP_SHARED,
		   bpf_map__fd(map), 0);
	if (cue == MAP_FAILED)
		die("mmap of the cue", errno);
	link = bpf_program__attach_kprobe(prog, false, argv[1]);
	if (!link)
		die(argv[1], errno);

	cue->cpu = atoi(argv[2]);
	/*
	 * Never on the CPU it holds: that CPU spins in the kernel with
	 * preemption off, and could not run the release.
	 */
	{
		cpu_set_t others;
		int n = sysconf(_SC_NPROCESSORS_CONF);

		CPU_ZERO(&others);
		for (i = 0; i < n; i++)
			if (i != (int)cue->cpu)
				CPU_SET(i, &others);
		if (sched_setaffinity(0, sizeof(others), &others))
			die("sched_setaffinity", errno);
	}
	__atomic_store_n(&cue->armed, 1, __ATOMIC_RELEASE);
	printf("armed\n");
	fflush(stdout);

	for (i = 0; i < 1000 && !__atomic_load_n(&cue->parked, __ATOMIC_ACQUIRE); i++)
		usleep(10000);
	if (!cue->parked) {
		printf("not parked\n");
		return 1;
	}
	printf("parked\n");
	fflush(stdout);

	if (!fgets(line, sizeof(line), stdin))
		line[0] = '\0';
	__atomic_store_n(&cue->released, 1, __ATOMIC_RELEASE);
	/* Let the held CPU see it before the kprobe goes. */
	usleep(100000);
	printf("%s\n", cue->timed_out ? "timed out" : "released");
	fflush(stdout);
	bpf_link__destroy(link);
	bpf_object__close(obj);
	return 0;
}
