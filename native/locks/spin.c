/*
 * Waiting that adapts (park.h): a waiter of a preemption-tolerant lock spins only while the lock's holder runs, and
 * no longer than the lock's recent waits suggest; otherwise it parks at once, as the kernel's own mutex spins only
 * while the owner is on a CPU. Every taker of the lock word publishes its thread id and the CPU it runs on (stored
 * only when they changed: a thread that retakes the lock on the same CPU writes neither) and counts the take. A
 * waiter knows that the holder does not run
 *   - at once, when the waiter itself runs on the holder's CPU (the holder was preempted by it, or yielded, slept
 *     or blocked there): one read of the waiter's CPU (rseq or vDSO) per look;
 *   - otherwise from the holder's CPU-time clock, which advances between two looks LS_PT_LOOK_NS apart while the
 *     holder runs and not while it is preempted, yielded, sleeping, blocked in I/O or faulting in a page. Reading
 *     another thread's clock is a system call that takes the holder's run-queue lock, so a waiter reads it only
 *     when it must: not while the lock moves (the take count changed since the last look: whoever took it ran),
 *     so only once one hold has lasted a look or more, and then at most once per LS_PT_LOOK_NS.
 * A holder that migrated after it published its CPU may be taken for one that does not run: the waiter parks
 * early, which costs time, never correctness. docs/locks.md has the rule's measurements.
 */
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "park.h"

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

/* Looks at the lock's holder at `now`: 1 when it ran since the last look (the word was taken again, or the holder's
 * CPU-time clock advanced; the first read of a hold's clock counts as running). */
static int look(struct ls_spin *s, long now, struct ls_holder *holder)
{
	/* Relaxed: hints; whoever takes the word by compare-exchange holds the lock, however it judged. */
	unsigned takes = atomic_load_explicit(&holder->takes, memory_order_relaxed);
	s->looked = now;
	if (takes != s->takes) {
		s->takes = takes;
		s->holder_cpu = -1;
		return 1;
	}
	long cpu = cpu_ns(atomic_load_explicit(&holder->tid, memory_order_relaxed));
	int ran = s->holder_cpu == -1 || cpu != s->holder_cpu;
	s->holder_cpu = cpu;
	return ran;
}

void ls_holder_init(struct ls_holder *holder)
{
	atomic_init(&holder->tid, 0);
	atomic_init(&holder->cpu, -1);
	atomic_init(&holder->takes, 0);
}

void ls_spin_begin(struct ls_spin *s, long now, struct ls_holder *holder)
{
	s->start = now;
	s->looked = now;
	/* Relaxed: a hint (see look). */
	s->takes = atomic_load_explicit(&holder->takes, memory_order_relaxed);
	s->holder_cpu = -1;
}

int ls_spin_pays(struct ls_spin *s, long now, struct ls_holder *holder, long budget)
{
	/* Relaxed: a hint (see look). */
	if (now - s->start >= budget || atomic_load_explicit(&holder->cpu, memory_order_relaxed) == ls_self_cpu())
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
