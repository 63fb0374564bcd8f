/*
 * Parking for the preemption-tolerant locks: a thread that has waited long enough sleeps in the kernel on a
 * futex instead of spinning, and the thread that changes the word it sleeps on wakes it.
 */
#ifndef LOCKSTEP_PARK_H
#define LOCKSTEP_PARK_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lock_impl.h"

/* How long a waiter spins before it parks: long enough to cover the hand-overs of a lock whose holders all run,
 * short against a scheduler time slice (a preempted holder comes back only after one). */
#define LS_PT_SPIN_NS 50000L

/* A head that has not shown it runs for this long is taken for preempted: arriving threads may take the lock. */
#define LS_PT_STALE_NS 20000L

/* Spin rounds between two looks at the clock. */
#define LS_PT_CLOCK_EVERY 64

/* CLOCK_MONOTONIC in ns (never 0 on a running system). */
static inline long ls_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Sleeps while *word == value (returns at once otherwise, or spuriously). Private futex: the locks are not
 * shared between processes. */
static inline void ls_park(atomic_int *word, int value)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

/* Wakes one thread parked on `word`. */
static inline void ls_unpark(atomic_int *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#endif
