/*
 * What every algorithm of liblockstep-locks provides, and the helpers they share.
 */
#ifndef LOCKSTEP_LOCK_IMPL_H
#define LOCKSTEP_LOCK_IMPL_H

#include <sched.h>
#include <stdalign.h>
#include <stddef.h>

#include "lockstep_locks.h"

/* One algorithm: the size of its state and its operations on that state. */
struct ls_ops {
	const char *name;
	size_t size;
	void (*init)(void *state);
	int (*acquire)(void *state);
	int (*tryacquire)(void *state);
	void (*release)(void *state);
	void (*destroy)(void *state);
};

/* A lock: its algorithm, then the algorithm's state on a cache line of its own. */
struct ls_lock {
	const struct ls_ops *ops;
	alignas(64) unsigned char state[];
};

extern const struct ls_ops ls_pthread_ops, ls_ttas_ops, ls_ticket_ops, ls_mcs_ops, ls_cna_ops, ls_mcs_pt_ops,
	ls_cna_pt_ops, ls_shfl_ops;

/* The `destroy` of algorithms whose state holds no resources. */
void ls_nothing(void *state);

/* CPUs and NUMA nodes a LOCKSTEP_NUMA_MAP may name. */
#define LS_NUMA_MAX_CPUS 4096
#define LS_NUMA_MAX_NODES 1024

/* The NUMA node of the CPU the calling thread runs on (numa.c). */
int ls_numa_node(void);

/* Why LOCKSTEP_NUMA_MAP was ignored, or NULL. */
const char *ls_numa_error(void);

/* A pause hint for a spin loop. */
static inline void ls_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

/* Spins of a waiter before it starts yielding its CPU on every further round: without it, a waiter that
 * preempted the holder (more threads than CPUs) would burn its whole time slice before the holder can run. */
#define LS_SPIN_BEFORE_YIELD 1024

/* One round of waiting: a pause hint, and from round LS_SPIN_BEFORE_YIELD on a sched_yield. */
static inline void ls_wait_round(unsigned *rounds)
{
	if (++*rounds < LS_SPIN_BEFORE_YIELD)
		ls_pause();
	else
		sched_yield();
}

#endif
