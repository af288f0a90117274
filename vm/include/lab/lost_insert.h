/* SPDX-License-Identifier: GPL-2.0 */
/*
 * For graders of BPF programs that insert into a hash map with
 * BPF_NOEXIST: lose the insert race on cue, every time, instead of
 * waiting for two vCPUs to overlap by luck (see lost_insert.bpf.c).
 *
 *	struct lab_lost_insert race;
 *
 *	lab_lost_insert_attach(&race, OBJECT, map_fd, "htab_map_update_elem");
 *	lab_lost_insert_arm(&race, &key, &value);	// for each new key
 *	...run the program under test on those keys...
 *	won = lab_lost_insert_detach(&race);	// how many inserts it won
 *
 * Shared by the stages' guest programs (the lab puts vm/include on their
 * include path); the BPF side includes only the cue below.
 */
#ifndef LAB_LOST_INSERT_H
#define LAB_LOST_INSERT_H

#include <linux/types.h>

#define LAB_LOST_INSERT_KEY_MAX 64	/* bytes */
#define LAB_LOST_INSERT_KEYS 4096

struct lab_lost_insert_cue {
	__u32 key_size;
	__u32 pad;
	__u64 won;	/* inserts made first */
};

#ifndef __bpf__
#include <errno.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

struct lab_lost_insert {
	struct bpf_object *obj;
	struct bpf_link *link;
	int armed_fd, cue_fd;
};

/* Load OBJECT against the map TARGET_FD and attach it to the entry of
 * FUNCTION, the kernel's update function for that map's type. 0, or a
 * negative errno. */
static inline int lab_lost_insert_attach(struct lab_lost_insert *race, const char *object,
					 int target_fd, const char *function)
{
	struct bpf_map_info info = {};
	__u32 info_size = sizeof(info);
	struct lab_lost_insert_cue cue = {};
	struct bpf_map *armed;
	__u32 zero = 0;
	int err;

	*race = (struct lab_lost_insert){ .armed_fd = -1, .cue_fd = -1 };
	if (bpf_obj_get_info_by_fd(target_fd, &info, &info_size))
		return -errno;
	if (info.key_size > LAB_LOST_INSERT_KEY_MAX)
		return -E2BIG;
	race->obj = bpf_object__open_file(object, NULL);
	if (!race->obj)
		return -errno;
	armed = bpf_object__find_map_by_name(race->obj, "armed");
	err = bpf_map__reuse_fd(bpf_object__find_map_by_name(race->obj, "target"), target_fd);
	if (!err)
		err = bpf_map__set_key_size(armed, info.key_size);
	if (!err)
		err = bpf_map__set_value_size(armed, info.value_size);
	if (!err)
		err = bpf_object__load(race->obj);
	if (err)
		return err;
	race->armed_fd = bpf_map__fd(armed);
	race->cue_fd = bpf_object__find_map_fd_by_name(race->obj, "cue");
	cue.key_size = info.key_size;
	if (bpf_map_update_elem(race->cue_fd, &zero, &cue, BPF_ANY))
		return -errno;
	race->link = bpf_program__attach_kprobe(
		bpf_object__find_program_by_name(race->obj, "lab_lost_insert"), false, function);
	return race->link ? 0 : -errno;
}

/* The next insert of KEY by a BPF program finds it there, with VALUE. */
static inline int lab_lost_insert_arm(struct lab_lost_insert *race, const void *key,
				      const void *value)
{
	return bpf_map_update_elem(race->armed_fd, key, value, BPF_ANY) ? -errno : 0;
}

/* Detach; how many inserts it made first, or a negative errno. */
static inline long long lab_lost_insert_detach(struct lab_lost_insert *race)
{
	struct lab_lost_insert_cue cue = {};
	__u32 zero = 0;
	long long won = -EINVAL;

	bpf_link__destroy(race->link);
	if (race->cue_fd >= 0)
		won = bpf_map_lookup_elem(race->cue_fd, &zero, &cue) ? -errno : (long long)cue.won;
	bpf_object__close(race->obj);
	*race = (struct lab_lost_insert){ .armed_fd = -1, .cue_fd = -1 };
	return won;
}
#endif /* !__bpf__ */

#endif /* LAB_LOST_INSERT_H */
