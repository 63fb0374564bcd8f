/*
 * The preemption-tolerant lock behind mcs-pt and cna-pt. Its shape is that of the kernel's paravirtual queued
 * spinlock (a lock word, and an MCS queue of threads waiting to be the one that takes it): waiters spin for a
 * bounded time (LS_PT_SPIN_NS) and then park on a futex, so that a preempted lock holder gets their CPU back; and
 * the lock is never handed to a thread, only the place at the head of the queue is: the head takes the word
 * itself when it runs. The head is woken when it becomes head, so its wake-up overlaps the holder's critical
 * section. While the head does not run (parked, woken but not yet scheduled, or preempted: it has not shown a
 * time stamp for LS_PT_STALE_NS), a thread that arrives may take the free word ahead of the queue, as in
 * time-published queue locks (He, Scherer and Scott, "Preemption adaptivity in time-published queue-based spin
 * locks", HiPC 2005) — so no waiter that is not running holds up the lock. With every thread running the queue
 * is served in the order of its hand-over rule (FIFO or CNA, queue.h). The holder leaves the queue when it takes
 * the word, so release needs no queue node.
 *
 * Memory orders: the word is the lock (acquire on taking it, release on freeing it); the queue's links follow
 * qlock.c; the move of the head's place (a node's state) is a release/acquire pair so that the previous head's
 * last write of head_seen (0) is ordered before the new head's first; head_seen is otherwise a hint (relaxed):
 * whoever takes the word by compare-exchange holds the lock, however it judged the head.
 */
#include <errno.h>
#include <stdatomic.h>

#include "lock_impl.h"
#include "park.h"
#include "queue.h"

/* Values of the word. */
enum { PT_FREE, PT_HELD, PT_HELD_PARKED };

/* Values of a queue node's state. */
enum { PT_WAITING, PT_HEAD, PT_PARKED };

void ls_ptlock_init(struct ls_ptlock *l)
{
	atomic_init(&l->word, PT_FREE);
	atomic_init(&l->tail, NULL);
	atomic_init(&l->head_seen, 0);
	l->sec.head = l->sec.tail = NULL;
	l->sec.handovers = 0;
}

/* Takes the word if it is free: 1 when taken. */
static int take(struct ls_ptlock *l)
{
	int expected = PT_FREE;
	/* Relaxed load: look before the compare-exchange, so that waiters do not pull the line while it is held.
	 * Acquire on success: pairs with the release in ls_ptlock_release. Relaxed on failure: nothing taken. */
	return atomic_load_explicit(&l->word, memory_order_relaxed) == PT_FREE &&
	       atomic_compare_exchange_strong_explicit(&l->word, &expected, PT_HELD, memory_order_acquire,
						       memory_order_relaxed);
}

/* Whether a thread arriving now may take the word ahead of the queue: nobody queues, or the head is not running. */
static int may_barge(struct ls_ptlock *l)
{
	/* Relaxed: hints (see the top of the file). */
	if (!atomic_load_explicit(&l->tail, memory_order_relaxed))
		return 1;
	long seen = atomic_load_explicit(&l->head_seen, memory_order_relaxed);
	return !seen || ls_now_ns() - seen > LS_PT_STALE_NS;
}

/* Waits until `n` heads the queue: spins for LS_PT_SPIN_NS, then parks until the previous head wakes it. */
static void wait_turn(struct ls_qnode *n)
{
	long start = 0;
	unsigned rounds = 0;
	/* Acquire: pairs with the release exchange in pass_head. */
	while (atomic_load_explicit(&n->state, memory_order_acquire) == PT_WAITING) {
		ls_pause();
		if (++rounds % LS_PT_CLOCK_EVERY)
			continue;
		long now = ls_now_ns();
		if (!start) {
			start = now;
			continue;
		}
		if (now - start < LS_PT_SPIN_NS)
			continue;
		int expected = PT_WAITING;
		/* Acquire on failure: the state became PT_HEAD, as for the load above (C wants no weaker order on
		 * success; parking itself publishes nothing: the previous head sees PT_PARKED by its exchange). */
		if (atomic_compare_exchange_strong_explicit(&n->state, &expected, PT_PARKED, memory_order_acquire,
							    memory_order_acquire)) {
			/* Acquire: as the load above. */
			while (atomic_load_explicit(&n->state, memory_order_acquire) == PT_PARKED)
				ls_park(&n->state, PT_PARKED);
		}
	}
}

/* The head's wait for the word: spins for LS_PT_SPIN_NS showing a fresh head_seen, then parks on the word. */
static void take_as_head(struct ls_ptlock *l)
{
	long start = ls_now_ns();
	unsigned rounds = 0;
	atomic_store_explicit(&l->head_seen, start, memory_order_relaxed);
	while (!take(l)) {
		ls_pause();
		if (++rounds % LS_PT_CLOCK_EVERY)
			continue;
		long now = ls_now_ns();
		if (now - start < LS_PT_SPIN_NS) {
			atomic_store_explicit(&l->head_seen, now, memory_order_relaxed);
			continue;
		}
		/* Parked: arriving threads may take the word meanwhile. */
		atomic_store_explicit(&l->head_seen, 0, memory_order_relaxed);
		/* Acquire: when the word was free we now hold the lock (as in take). Marking it PT_HELD_PARKED makes
		 * its holder's release wake us. */
		while (atomic_exchange_explicit(&l->word, PT_HELD_PARKED, memory_order_acquire) != PT_FREE)
			ls_park(&l->word, PT_HELD_PARKED);
		break;
	}
	atomic_store_explicit(&l->head_seen, 0, memory_order_relaxed);
}

/* Makes `n` the head of the queue, waking it if it parked. */
static void pass_head(struct ls_qnode *n)
{
	/* Release: see the top of the file. */
	if (atomic_exchange_explicit(&n->state, PT_HEAD, memory_order_release) == PT_PARKED)
		ls_unpark(&n->state);
}

int ls_ptlock_acquire(struct ls_ptlock *l, int numa, ls_pass_fn pass)
{
	if (may_barge(l) && take(l))
		return 0;
	struct ls_qnode *n = ls_qnode_get();
	/* Relaxed: the node is published by the exchange of the tail (release half). */
	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	atomic_store_explicit(&n->state, PT_WAITING, memory_order_relaxed);
	n->numa = numa;
	/* Acq_rel: release publishes the node to the predecessor that links it; acquire orders a link reset by the
	 * hand-over rule (which swapped the tail with release) before our write of that link. */
	struct ls_qnode *prev = atomic_exchange_explicit(&l->tail, n, memory_order_acq_rel);
	if (prev) {
		/* Release: the predecessor reads its link with acquire and then reads our node. */
		atomic_store_explicit(&prev->next, n, memory_order_release);
		wait_turn(n);
	}
	take_as_head(l);
	struct ls_qnode *next = pass(&l->sec, &l->tail, n);
	if (next)
		pass_head(next);
	ls_qnode_put(n);
	return 0;
}

int ls_ptlock_tryacquire(struct ls_ptlock *l)
{
	return take(l) ? 0 : EBUSY;
}

void ls_ptlock_release(struct ls_ptlock *l)
{
	/* Release: hands the critical section's writes to the next taker's acquire. */
	if (atomic_exchange_explicit(&l->word, PT_FREE, memory_order_release) == PT_HELD_PARKED)
		ls_unpark(&l->word);
}
