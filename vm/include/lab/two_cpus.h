/* SPDX-License-Identifier: GPL-2.0 */
/*
 * For graders that make both of the guest's CPUs do the same thing at the
 * same moment: a lost update or a lost insert race only shows when two
 * CPUs really overlap, and under TCG each vCPU is a host thread that the
 * host may run one after the other. Shared by the stages' guest programs
 * (the lab puts vm/include on their include path).
 */
#ifndef LAB_TWO_CPUS_H
#define LAB_TWO_CPUS_H

#include <sched.h>

/* Run the calling thread on this CPU only; 0, or -1 with errno set. */
static inline int lab_pin_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/*
 * A spin barrier for exactly two threads, reusable round after round: the
 * second to arrive starts the next generation, and both leave together.
 * Spinning, not sleeping, so that neither thread waits for a wake-up.
 */
static int lab_barrier_arrived, lab_barrier_generation;

static inline void lab_two_cpu_barrier(void)
{
	int generation = __atomic_load_n(&lab_barrier_generation, __ATOMIC_ACQUIRE);

	if (__atomic_add_fetch(&lab_barrier_arrived, 1, __ATOMIC_ACQ_REL) == 2) {
		__atomic_store_n(&lab_barrier_arrived, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&lab_barrier_generation, generation + 1, __ATOMIC_RELEASE);
	} else {
		while (__atomic_load_n(&lab_barrier_generation, __ATOMIC_ACQUIRE) == generation)
			;
	}
}

#endif /* LAB_TWO_CPUS_H */
