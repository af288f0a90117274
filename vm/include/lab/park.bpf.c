// SPDX-License-Identifier: GPL-2.0
/*
 * Hold a CPU inside a kernel function, on cue.
 *
 * Some mistakes show only when one CPU is inside a window of a function
 * (between announcing something and marking it announced, say) while
 * another CPU goes past the same window. Two vCPUs meet there only by
 * luck. This kprobe program, attached to a function called inside that
 * window, holds the first hit on the armed CPU in a bounded spin until
 * the test releases it, so that the other CPU goes past while the first
 * is surely inside. It never holds more than one hit per arming, and
 * never longer than LAB_PARK_TIMEOUT_NS: a test that forgets to release
 * it sees "timed out", not a hung guest.
 */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "park.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct lab_park_cue);
	__uint(max_entries, 1);
	/* lab-park writes the release straight into it. */
	__uint(map_flags, BPF_F_MMAPABLE);
} cue SEC(".maps");

struct wait {
	struct lab_park_cue *cue;
	__u64 deadline;
};

#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))

static long still_parked(__u32 i, void *data)
{
	struct wait *w = data;

	if (READ_ONCE(w->cue->released))
		return 1;
	if (bpf_ktime_get_ns() > w->deadline) {
		w->cue->timed_out = 1;
		return 1;
	}
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(lab_park)
{
	__u32 zero = 0;
	struct wait w;

	w.cue = bpf_map_lookup_elem(&cue, &zero);
	if (!w.cue || bpf_get_smp_processor_id() != w.cue->cpu)
		return 0;
	if (__sync_val_compare_and_swap(&w.cue->armed, 1, 0) != 1)
		return 0;
	w.deadline = bpf_ktime_get_ns() + LAB_PARK_TIMEOUT_NS;
	READ_ONCE(w.cue->parked) = 1;
	/*
	 * bpf_loop() stops after 1 << 23 rounds, which a CPU goes through
	 * in well under the timeout (a second or less, even under TCG):
	 * enough of them to outlast it, each ending at the release or the
	 * deadline.
	 */
	for (int round = 0; round < 128; round++) {
		if (READ_ONCE(w.cue->released) || READ_ONCE(w.cue->timed_out))
			break;
		bpf_loop(1 << 23, still_parked, &w, 0);
	}
	if (!READ_ONCE(w.cue->released))
		w.cue->timed_out = 1;
	return 0;
}

char _license[] SEC("license") = "GPL";
