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

extern const struct ls_ops ls_pthread_ops, ls_ttas_ops, ls_ticket_ops, ls_mcs_ops;

/* Spins of a waiter before it starts yielding its CPU on every further round: without it, a waiter that
 * preempted the holder (more threads than CPUs) would burn its whole time slice before the holder can run. */
#define LS_SPIN_BEFORE_YIELD 1024

/* One round of waiting: a pause hint, and from round LS_SPIN_BEFORE_YIELD on a sched_yield. */
static inline void ls_wait_round(unsigned *rounds)
{
	if (++*rounds < LS_SPIN_BEFORE_YIELD) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#elif defined(__aarch64__)
		__asm__ volatile("yield");
#endif
	} else {
		sched_yield();
	}
}

#endif
