/*
 * Waiting that adapts (park.h): a waiter of a preemption-tolerant lock spins only while the lock's holder runs, and
 * no longer than the lock's recent waits suggest; otherwise it parks at once, as the kernel's own mutex spins only
 * while the owner is on a CPU. Every taker of the lock word publishes its thread id and the CPU it runs on (two
 * stores to the word's cache line on the uncontended path). A waiter knows that the holder does not run
 *   - at once, when the waiter itself runs on the holder's CPU (the holder was preempted by it, or yielded, slept
 *     or blocked there): one read of the waiter's CPU (rseq or vDSO) per look;
 *   - otherwise from the holder's CPU-time clock, which advances between two looks LS_PT_LOOK_NS apart while the
 *     holder runs and not while it is preempted, yielded, sleeping, blocked in I/O or faulting in a page (one
 *     system call per LS_PT_LOOK_NS of spinning; the first a LS_PT_LOOK_NS into the wait, as the call takes the
 *     holder's run-queue lock, and a wait that short is the common case).
 * A holder that migrated after it published its CPU may be taken for one that does not run: the waiter parks
 * early, which costs time, never correctness. docs/locks.md has the rule's measurements.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "park.h"

/* The calling thread's kernel thread id, cached per thread. */
static int self_tid(void)
{
	static _Thread_local int tid;
	if (!tid)
		tid = gettid();
	return tid;
}

/* The CPU time of thread `tid` of this process in ns, -1 when it cannot be read (no such thread). The clock id is
 * the kernel's per-thread scheduler clock of `tid` (what pthread_getcpuclockid gives for that thread). */
static long cpu_ns(int tid)
{
	if (tid <= 0)
		return -1; /* 0 would name the calling thread's own clock */
	clockid_t clock = (clockid_t)(~(unsigned)tid << 3) | 6;
	struct timespec ts;
	if (clock_gettime(clock, &ts) != 0)
		return -1;
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Looks at the holder named by *holder at `now`: 1 when it ran since the last look (or is a new holder). */
static int look(struct ls_spin *s, long now, struct ls_holder *holder)
{
	/* Relaxed: a hint; whoever takes the word by compare-exchange holds the lock, however it judged. */
	int tid = atomic_load_explicit(&holder->tid, memory_order_relaxed);
	long cpu = cpu_ns(tid);
	int ran = tid != s->holder || cpu != s->holder_cpu;
	s->holder = tid;
	s->holder_cpu = cpu;
	s->looked = now;
	return ran;
}

void ls_holder_publish(struct ls_holder *holder)
{
	/* Relaxed: a hint (see look). */
	atomic_store_explicit(&holder->tid, self_tid(), memory_order_relaxed);
	atomic_store_explicit(&holder->cpu, sched_getcpu(), memory_order_relaxed);
}

void ls_spin_begin(struct ls_spin *s, long now)
{
	s->start = now;
	s->looked = now;
	s->holder = 0;
	s->holder_cpu = -1;
}

int ls_spin_pays(struct ls_spin *s, long now, struct ls_holder *holder, long budget)
{
	/* Relaxed: a hint (see look). */
	if (now - s->start >= budget || atomic_load_explicit(&holder->cpu, memory_order_relaxed) == sched_getcpu())
		return 0;
	return now - s->looked < LS_PT_LOOK_NS || look(s, now, holder);
}

long ls_spin_budget(atomic_long *hold_ns)
{
	/* Relaxed: an estimate. */
	long budget = LS_PT_SPIN_HOLDS * atomic_load_explicit(hold_ns, memory_order_relaxed);
	return budget < LS_PT_MIN_SPIN_NS ? LS_PT_MIN_SPIN_NS : budget > LS_PT_SPIN_NS ? 0 : budget;
}

void ls_hold_note(atomic_long *hold_ns, long waited)
{
	/* Relaxed: an estimate; a lost update among concurrent heads (there is one head at a time) does not matter. */
	long avg = atomic_load_explicit(hold_ns, memory_order_relaxed);
	atomic_store_explicit(hold_ns, avg + (waited - avg) / 8, memory_order_relaxed);
}
