/*
 * Parking for the preemption-tolerant locks: a thread that has waited long enough sleeps in the kernel on a
 * futex instead of spinning, and the thread that changes the word it sleeps on wakes it.
 */
#ifndef LOCKSTEP_PARK_H
#define LOCKSTEP_PARK_H

#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#endif
#include <time.h>
#include <unistd.h>

#include "lock_impl.h"

/* The longest a waiter spins before it parks, whatever the hold times: long enough to cover the hand-overs of a
 * lock whose holders all run, short against a scheduler time slice (a preempted holder comes back only after one). */
#define LS_PT_SPIN_NS 50000L

/* The shortest spin budget: a hand-over to a running waiter, with the wake-up of the next head overlapped. */
#define LS_PT_MIN_SPIN_NS 5000L

/* The spin budget in recent waits for the lock: a waiter spins up to this many times the average time the queue's
 * head waited for the lock word. */
#define LS_PT_SPIN_HOLDS 4

/* How often a spinning waiter looks at whether the holder runs (its CPU time advanced since the last look). */
#define LS_PT_LOOK_NS 1000L

/* A head that has not shown it runs for this long is taken for preempted: arriving threads may take the lock. */
#define LS_PT_STALE_NS 20000L

/* How long the queue's head lets running threads take the free word ahead of it (lock stealing: a thread that
 * releases and retakes the lock keeps its cache lines hot) before it forbids that, so that no head waits much longer
 * than this plus one hold while it runs. */
#define LS_PT_STEAL_NS 5000L

/* Spin rounds (pause hints) between two looks at the clock. */
#define LS_PT_CLOCK_EVERY 64

/* The most rounds (a pause hint and a read of the word) a pending thread spins before it queues. */
#define LS_PT_PENDING_ROUNDS 256

/* CLOCK_MONOTONIC in ns (never 0 on a running system). */
static inline long ls_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* What every taker of a preemption-tolerant lock's word publishes about itself (spin.c). Written only by the
 * thread that holds the word, each field only when it changed, except `takes`. */
struct ls_holder {
	/* Its kernel thread id, and the CPU it ran on when it took the word. */
	atomic_int tid, cpu;
	/* How many times the word was taken (wrapping): a waiter that sees it move knows the lock moves, without a
	 * look at the holder's CPU-time clock. */
	atomic_uint takes;
};

/* A waiter's view of the lock's holder, by which it decides whether spinning still pays (spin.c): spin only while
 * the holder runs, and no longer than recent waits for the lock suggest; otherwise park at once. */
struct ls_spin {
	/* When the wait began, and when the holder was last looked at (CLOCK_MONOTONIC ns). */
	long start, looked;
	/* The lock's `takes`, and the holder's CPU time (ns; -1: unreadable or not read during this hold), at that
	 * look. */
	unsigned takes;
	long holder_cpu;
};

/* A lock's holder before anyone took its word. */
void ls_holder_init(struct ls_holder *holder);

/* The calling thread's kernel thread id, cached per thread. Initial-exec TLS: one load from the thread pointer on
 * the uncontended path, where the general model calls __tls_get_addr; four bytes fit the static TLS that the C
 * library keeps for libraries loaded later. */
static inline int ls_self_tid(void)
{
	static _Thread_local int tid __attribute__((tls_model("initial-exec")));
	if (!tid)
		tid = gettid();
	return tid;
}

/* The CPU the calling thread runs on: the kernel's rseq area that the C library registered for the thread (what
 * sched_getcpu reads, without the call), else sched_getcpu. */
static inline int ls_self_cpu(void)
{
#ifdef RSEQ_SIG
	if (__rseq_size) {
		const struct rseq *area = (const void *)((char *)__builtin_thread_pointer() + __rseq_offset);
		/* Volatile: the kernel rewrites it whenever the thread migrates. Negative: not registered yet. */
		int cpu = (int)*(const volatile uint32_t *)&area->cpu_id;
		if (cpu >= 0)
			return cpu;
	}
#endif
	return sched_getcpu();
}

/* Publishes the calling thread, which has just taken the lock word, as the lock's holder (inline: it is on the
 * uncontended path). */
static inline void ls_holder_publish(struct ls_holder *holder)
{
	/* Relaxed: hints (see look); only the holder writes these, so its own loads are exact. */
	int tid = ls_self_tid(), cpu = ls_self_cpu();
	if (atomic_load_explicit(&holder->tid, memory_order_relaxed) != tid)
		atomic_store_explicit(&holder->tid, tid, memory_order_relaxed);
	if (atomic_load_explicit(&holder->cpu, memory_order_relaxed) != cpu)
		atomic_store_explicit(&holder->cpu, cpu, memory_order_relaxed);
	unsigned takes = atomic_load_explicit(&holder->takes, memory_order_relaxed);
	atomic_store_explicit(&holder->takes, takes + 1, memory_order_relaxed);
}

/* Starts a wait at `now` for the lock whose holder is `holder`. */
void ls_spin_begin(struct ls_spin *s, long now, struct ls_holder *holder);

/* Whether a waiter should go on spinning at `now`: it has spun for less than `budget` ns, it does not run on the
 * CPU the holder published, and the holder has run since the last look (looks at most every LS_PT_LOOK_NS): the
 * word was taken again since (no system call), or else the holder's CPU-time clock advanced. */
int ls_spin_pays(struct ls_spin *s, long now, struct ls_holder *holder, long budget);

/* A waiter's spin budget from a lock's average wait of its head (*hold_ns), within LS_PT_MIN_SPIN_NS and
 * LS_PT_SPIN_NS. */
long ls_spin_budget(atomic_long *hold_ns);

/* Folds one wait of the head for the lock word (ns) into *hold_ns (a moving average over about 8 waits). */
void ls_hold_note(atomic_long *hold_ns, long waited);

/* Sleeps while *word == value (returns at once otherwise, or spuriously). Private futex: the locks are not
 * shared between processes. */
static inline void ls_park(atomic_int *word, int value)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

/* Wakes one thread parked on `word`; returns how many were woken (0 or 1; 0 on error). */
static inline int ls_unpark(atomic_int *word)
{
	long woken = syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	return woken > 0 ? (int)woken : 0;
}

#endif
