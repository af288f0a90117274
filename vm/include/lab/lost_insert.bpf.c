// SPDX-License-Identifier: GPL-2.0
/*
 * The other CPU that wins an insert race, on cue.
 *
 * A BPF program that counts into a hash map looks a key up, and when it
 * is missing inserts it with BPF_NOEXIST; another CPU may insert the same
 * key in between, and the program must then add to that CPU's entry. Two
 * vCPUs land in that window, a few instructions wide, only by luck, and a
 * busy host may never give them that luck. This program makes the race
 * happen every time: lab/lost_insert.h attaches it to the entry of the
 * map's update function (htab_map_update_elem(), or
 * htab_lru_map_update_elem() for an LRU map), and when the program under
 * test is about to insert an armed key, this inserts it first, with the
 * value armed for it, as the other CPU would have. Each armed key is won
 * once.
 *
 * target is the map under test, shared through bpf_map__reuse_fd(); armed
 * gets the target's key and value sizes before it is loaded. Updates from
 * user space never get here: the bpf() syscall makes them with BPF tracing
 * programs held off, and so is this program's own insert.
 */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "lost_insert.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u64));
	__uint(max_entries, 1);
} target SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u64));
	__uint(max_entries, LAB_LOST_INSERT_KEYS);
} armed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct lab_lost_insert_cue);
	__uint(max_entries, 1);
} cue SEC(".maps");

SEC("kprobe")
int BPF_KPROBE(lab_lost_insert, void *map, void *key)
{
	__u8 armed_key[LAB_LOST_INSERT_KEY_MAX] = {};
	struct lab_lost_insert_cue *c;
	__u32 zero = 0, key_size;
	void *value;

	c = bpf_map_lookup_elem(&cue, &zero);
	if (!c)
		return 0;
	key_size = c->key_size;
	if (key_size > sizeof(armed_key) ||
	    bpf_probe_read_kernel(armed_key, key_size, key))
		return 0;
	value = bpf_map_lookup_elem(&armed, armed_key);
	if (!value)
		return 0;
	if (!bpf_map_update_elem(&target, armed_key, value, BPF_NOEXIST))
		__sync_fetch_and_add(&c->won, 1);
	bpf_map_delete_elem(&armed, armed_key);
	return 0;
}

char _license[] SEC("license") = "GPL";
