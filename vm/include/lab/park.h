/* SPDX-License-Identifier: GPL-2.0 */
/*
 * For graders whose mistake shows only when one CPU is inside a kernel
 * function while another goes past it: hold the first CPU there, on cue,
 * until the test lets it go, instead of waiting for two vCPUs to meet by
 * luck (see park.bpf.c). The guest tool lab-park (lab-park.c) drives it
 * from a shell script:
 *
 *	coproc PARK { lab-park FUNCTION CPU; }
 *	read -r line <&"${PARK[0]}"	# "armed"
 *	...make CPU call FUNCTION...
 *	read -r line <&"${PARK[0]}"	# "parked": CPU is inside FUNCTION
 *	...make another CPU go past the same window...
 *	echo release >&"${PARK[1]}"
 *	read -r line <&"${PARK[0]}"	# "released", or "timed out"
 *
 * Shared by the stages' guest programs (the lab puts vm/include on their
 * include path); the BPF side includes only the cue below.
 */
#ifndef LAB_PARK_H
#define LAB_PARK_H

#include <linux/types.h>

/*
 * How long a parked CPU waits for its release before it goes on alone:
 * under TCG the other CPU may need seconds to start a process or two,
 * and RCU reports a CPU stalled only after 21.
 */
#define LAB_PARK_TIMEOUT_NS	(10ULL * 1000 * 1000 * 1000)

struct lab_park_cue {
	__u32 cpu;		/* the CPU to hold */
	__u32 armed;		/* 1: hold the next hit on cpu, then 0 */
	__u32 parked;		/* a hit is being held */
	__u32 released;		/* the test lets it go */
	__u32 timed_out;	/* it went on alone after LAB_PARK_TIMEOUT_NS */
	__u32 pad;
};

#endif
