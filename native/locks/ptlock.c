/*
 * The preemption-tolerant lock behind mcs-pt and cna-pt. Its shape is that of the kernel's paravirtual queued
 * spinlock (a lock word, and an MCS queue of threads waiting to be the one that takes it): waiters spin only while
 * the holder runs and for a few recent waits at most (park.h, spin.c), and otherwise park on a futex, so that a
 * holder that is preempted, or blocks inside its critical section, gets their CPU back; and
 * the lock is never handed to a thread, only the place at the head of the queue is: the head takes the word
 * itself when it runs. A waiter that parked and is made head is woken by the holder's release, as glibc wakes a
 * waiter at unlock: it parked because the holder did not run or the lock's waits were long, and a wake-up at the
 * hand-over would only put one more thread on the CPUs to find the lock still held. The head shows it runs by a
 * time stamp; while it does not (parked, woken but not yet scheduled, or preempted: no stamp for LS_PT_STALE_NS),
 * any running thread may take the free word out of turn, as in
 * time-published queue locks (He, Scherer and Scott, "Preemption adaptivity in time-published queue-based spin
 * locks", HiPC 2005): a thread that arrives, or a queued waiter, which then leaves the queue — its node stays in
 * place, marked LS_PT_LEFT, until the hand-over that reaches it skips it. So no thread that is not running holds up
 * the lock. A thread that arrives may also take the free word ahead of a running head, until that head has waited
 * LS_PT_STEAL_NS (no_steal), as a lock that steals does (ShflLock, glibc's mutex): on many cores a thread that
 * releases and soon retakes the lock then finds its cache lines still in its own cache, where a strict hand-over
 * moves them to another core at every acquisition; the head's window bounds what stealing costs it. A thread that
 * finds the word held and nobody queued first spins on the word for a few hundred rounds as the one *pending*
 * thread (the pending bit of the kernel's queued spinlock): two threads that take turns then pass the lock through
 * the word alone, without a queue node, its links and the head's clock reads. Within the
 * queue, waiters are served in the order of its hand-over rule (FIFO or CNA, queue.h). The holder is out of the
 * queue once it has the word, so release needs no queue node.
 *
 * Memory orders: the word is the lock (acquire on taking it, release on freeing it); the queue's links follow
 * qlock.c; a node's state moves by release/acquire pairs (the new head must see the previous head's last writes of
 * head_seen and no_steal, 0, before it writes its own; a skipping hand-over must be done with a left node before
 * its owner reuses it); head_seen and no_steal are otherwise hints (relaxed): whoever takes the word by
 * compare-exchange holds the lock, however it judged the head.
 *
 * States. Each step below names its transition of the pair (word, state of the caller's queue node), the node
 * "-" when the caller has none (it took the word without queueing, or it has the word and is out of the queue).
 * Word: F free, H held, P held with the queue's head parked on the word (the release must wake it). Node (queue.h):
 * W waiting to be head, K parked until made head, D head, L left the queue with the word, S skipped (back to the
 * pool).
 *
 *   arrive    (F,-) -take-------------------------------------------------> (H,-)   no head, or it lets it (no_steal)
 *             (H,-) -pending: spin, then take (as above) or give up---------> (H,-)   nobody queued nor pending
 *             (x,-) -exchange tail: a predecessor-------------------------> (x,W)   else (x,D): head at once
 *   wait      (x,W) -compare-exchange W->K (spinning stopped paying)--> (x,K)   sleeps on the node
 *             (x,W|K) -previous head's exchange ->D (and wake if K)------> (x,D)
 *             (F,W) -take, then compare-exchange W->L--------------------> (H,L)   head not running: out of turn
 *             (F,W) -take, then the compare-exchange finds D-------------> (H,D)   made head meanwhile
 *   head      (F,D) -take-------------------------------------------------> (H,D)
 *             (H,D) -exchange word ->P, returns H or P (sleeps on word)---> (P,D)   spinning stopped paying
 *             (F,D) -exchange word ->P, returns F-------------------------> (P,D)   holds it (the release wakes nobody)
 *   hand over (H|P,D) -exchange next's node ->D, store S on L nodes------> (H|P,-)   (P if next was K)
 *   release   (H|P,-) -exchange word ->F (and wake the head if P)--------> (F,-)   on its node if it was K
 *   left      (H,L) ... its owner's release as above; the hand-over that reaches L stores S, and only then does
 *             the pool take the node back (ls_qnode_leave).
 */
#include <errno.h>
#include <stdatomic.h>

#include "lock_impl.h"
#include "park.h"
#include "queue.h"

/* How a queued waiter's wait ended. */
enum turn { HEAD, HEAD_WITH_WORD, LEFT_WITH_WORD };

void ls_ptlock_init(struct ls_ptlock *l)
{
	atomic_init(&l->word, LS_PT_FREE);
	atomic_init(&l->tail, NULL);
	atomic_init(&l->head_seen, 0);
	atomic_init(&l->no_steal, 0);
	atomic_init(&l->pending, 0);
	ls_holder_init(&l->holder);
	atomic_init(&l->hold_ns, 0);
	l->sleeping_head = NULL;
	l->sec.head = l->sec.tail = NULL;
	l->sec.handovers = 0;
}

/* Takes the word if it is free: 1 when taken. (F,n) -> (H,n); the word unchanged otherwise. */
static int take(struct ls_ptlock *l)
{
	int expected = LS_PT_FREE;
	/* Relaxed load: look before the compare-exchange, so that waiters do not pull the line while it is held.
	 * Acquire on success: pairs with the release in ls_ptlock_release. Relaxed on failure: nothing taken. */
	if (atomic_load_explicit(&l->word, memory_order_relaxed) != LS_PT_FREE ||
	    !atomic_compare_exchange_strong_explicit(&l->word, &expected, LS_PT_HELD, memory_order_acquire,
						     memory_order_relaxed))
		return 0;
	ls_holder_publish(&l->holder);
	return 1;
}

/* Whether the queue's head has shown within LS_PT_STALE_NS of `now` that it runs. */
static int head_runs(struct ls_ptlock *l, long now)
{
	/* Relaxed: a hint (see the top of the file). */
	long seen = atomic_load_explicit(&l->head_seen, memory_order_relaxed);
	return seen && now - seen <= LS_PT_STALE_NS;
}

/* Whether a thread arriving now may take the word ahead of the queue: nobody queues, the head still lets arriving
 * threads steal, or it is not running. */
static int may_barge(struct ls_ptlock *l)
{
	/* Relaxed: hints (see the top of the file). */
	return !atomic_load_explicit(&l->tail, memory_order_relaxed) ||
	       !atomic_load_explicit(&l->no_steal, memory_order_relaxed) || !head_runs(l, ls_now_ns());
}

/* Waits until `n` heads the queue: spins while spinning pays (spin.c), then parks until the previous head wakes it.
 * While it spins, it takes the free word out of turn if the head does not run, and leaves the queue.
 * (x,W) -> (x,D) [HEAD], (F,W) -> (H,D) [HEAD_WITH_WORD], (F,W) -> (H,L) [LEFT_WITH_WORD]; via (x,K) when parked. */
static enum turn wait_turn(struct ls_ptlock *l, struct ls_qnode *n)
{
	struct ls_spin spin;
	long budget = ls_spin_budget(&l->hold_ns);
	unsigned rounds = 0;
	ls_spin_begin(&spin, ls_now_ns(), &l->holder);
	/* Acquire: pairs with the release exchange in pass_head. */
	while (atomic_load_explicit(&n->state, memory_order_acquire) == LS_PT_WAITING) {
		ls_pause();
		if (++rounds % LS_PT_CLOCK_EVERY)
			continue;
		long now = ls_now_ns();
		if (!head_runs(l, now) && ls_qnode_may_leave() && take(l)) {
			/* (H,W) -> (H,L), or finds (H,D). */
			int expected = LS_PT_WAITING;
			/* Acq_rel on success, acquire on failure: as the load above (C wants no weaker order on
			 * success); the skipping hand-over reads LS_PT_LEFT by its exchange on this same location. */
			if (atomic_compare_exchange_strong_explicit(&n->state, &expected, LS_PT_LEFT, memory_order_acq_rel,
								    memory_order_acquire))
				return LEFT_WITH_WORD;
			return HEAD_WITH_WORD; /* made head meanwhile */
		}
		if (ls_spin_pays(&spin, now, &l->holder, budget))
			continue;
		/* (x,W) -> (x,K), or finds (x,D). */
		int expected = LS_PT_WAITING;
		/* Acquire on failure: the state became LS_PT_HEAD, as for the load above (C wants no weaker order on
		 * success; parking itself publishes nothing: the previous head sees LS_PT_PARKED by its exchange). */
		if (atomic_compare_exchange_strong_explicit(&n->state, &expected, LS_PT_PARKED, memory_order_acquire,
							    memory_order_acquire)) {
			/* Acquire: as the load above. */
			while (atomic_load_explicit(&n->state, memory_order_acquire) == LS_PT_PARKED)
				ls_park(&n->state, LS_PT_PARKED);
		}
	}
	return HEAD;
}

/* The head's wait for the word: spins showing a fresh head_seen while spinning pays (spin.c), forbidding stealing
 * once it has spun for LS_PT_STEAL_NS, then parks on the word; the time it waited goes into the lock's average.
 * (F,D) -> (H,D) by take, or (x,D) -> (P,D) by the exchange below once parked. */
static void take_as_head(struct ls_ptlock *l)
{
	long start = ls_now_ns();
	struct ls_spin spin;
	long budget = ls_spin_budget(&l->hold_ns);
	unsigned rounds = 0;
	atomic_store_explicit(&l->head_seen, start, memory_order_relaxed);
	ls_spin_begin(&spin, start, &l->holder);
	while (!take(l)) {
		ls_pause();
		if (++rounds % LS_PT_CLOCK_EVERY)
			continue;
		long now = ls_now_ns();
		if (ls_spin_pays(&spin, now, &l->holder, budget)) {
			atomic_store_explicit(&l->head_seen, now, memory_order_relaxed);
			if (now - start >= LS_PT_STEAL_NS && !atomic_load_explicit(&l->no_steal, memory_order_relaxed))
				atomic_store_explicit(&l->no_steal, 1, memory_order_relaxed);
			continue;
		}
		/* Parked: arriving threads may take the word meanwhile. */
		atomic_store_explicit(&l->head_seen, 0, memory_order_relaxed);
		atomic_store_explicit(&l->no_steal, 0, memory_order_relaxed);
		/* (H|P,D) -> (P,D) asleep until released; (F,D) -> (P,D) holding. Acquire: when the word was free we
		 * now hold the lock (as in take). Marking it LS_PT_HELD_PARKED makes
		 * its holder's release wake us. */
		while (atomic_exchange_explicit(&l->word, LS_PT_HELD_PARKED, memory_order_acquire) != LS_PT_FREE)
			ls_park(&l->word, LS_PT_HELD_PARKED);
		ls_holder_publish(&l->holder);
		break;
	}
	atomic_store_explicit(&l->head_seen, 0, memory_order_relaxed);
	atomic_store_explicit(&l->no_steal, 0, memory_order_relaxed);
	ls_hold_note(&l->hold_ns, ls_now_ns() - start);
}

/* Moves the head's place from `me` (which holds the word) to the waiter the hand-over rule picks, waking it if it
 * parked; a waiter that left the queue is skipped, the rule applied again from its node.
 * Caller (H|P,D) -> (H|P,-); next W|K -> D, or L -> D -> S when skipped. */
static void pass_head(struct ls_ptlock *l, struct ls_qnode *me, ls_pass_fn pass)
{
	for (struct ls_qnode *next = pass(&l->sec, &l->tail, me); next;) {
		/* next: W|K -> D, or L -> D (then S below). Release: see the top of the file. Acquire: a left node's
		 * owner is done with it. */
		int was = atomic_exchange_explicit(&next->state, LS_PT_HEAD, memory_order_acq_rel);
		if (was == LS_PT_PARKED) {
			l->sleeping_head = next;
			atomic_store_explicit(&l->word, LS_PT_HELD_PARKED, memory_order_relaxed);
		}
		if (was != LS_PT_LEFT)
			return;
		struct ls_qnode *gone = next;
		next = pass(&l->sec, &l->tail, gone);
		/* skipped: D -> S. Release: done with the node; its owner may reuse it (ls_qnode_leave). */
		atomic_store_explicit(&gone->state, LS_QNODE_SKIPPED, memory_order_release);
	}
}

/* (x,-) -> (x,W) or (x,D), then wait_turn, take_as_head, pass_head: ends (H|P,-) holding the lock. Not inlined, so
 * that the path without queueing (below) saves no registers and keeps no stack frame. */
static __attribute__((noinline)) void queue(struct ls_ptlock *l, int numa_aware, ls_pass_fn pass)
{
	struct ls_qnode *n = ls_qnode_get();
	/* Relaxed: the node is published by the exchange of the tail (release half). */
	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	atomic_store_explicit(&n->state, LS_PT_WAITING, memory_order_relaxed);
	n->numa = numa_aware ? ls_numa_node() : 0;
	/* (x,-) -> (x,W) behind a predecessor, else (x,D). Acq_rel: release publishes the node to the predecessor
	 * that links it; acquire orders a link reset by the
	 * hand-over rule (which swapped the tail with release) before our write of that link. */
	struct ls_qnode *prev = atomic_exchange_explicit(&l->tail, n, memory_order_acq_rel);
	enum turn turn = HEAD;
	if (prev) {
		/* Release: the predecessor reads its link with acquire and then reads our node. */
		atomic_store_explicit(&prev->next, n, memory_order_release);
		turn = wait_turn(l, n);
	}
	if (turn == LEFT_WITH_WORD) {
		ls_qnode_leave(n);
		return;
	}
	if (turn == HEAD)
		take_as_head(l);
	else
		atomic_store_explicit(&l->head_seen, 0, memory_order_relaxed);
	pass_head(l, n, pass);
	ls_qnode_put(n);
}

/* A thread that found the word held and nobody queued, and became the pending thread: spins on the word for at most
 * LS_PT_PENDING_ROUNDS rounds, taking it when it may barge; gives up at once when it runs on the CPU the holder
 * published (the holder is not running). 1 when it took the word. (H,-) -> (H,-) waiting; (F,-) -> (H,-). Two
 * threads that take turns then hand the lock over through the word alone, as a test-and-set lock does, without the
 * queue's node, links and clock reads. */
static int spin_pending(struct ls_ptlock *l)
{
	for (unsigned rounds = 1; rounds <= LS_PT_PENDING_ROUNDS; rounds++) {
		ls_pause();
		if (may_barge(l) && take(l))
			return 1;
		/* Relaxed: a hint (spin.c). */
		if (rounds % 16 == 0 && atomic_load_explicit(&l->holder.cpu, memory_order_relaxed) == ls_self_cpu())
			break;
	}
	return 0;
}

/* (F,-) -> (H,-) without queueing, or after spinning as the pending thread; otherwise queue. */
int ls_ptlock_acquire(struct ls_ptlock *l, int numa_aware, ls_pass_fn pass)
{
	if (may_barge(l) && take(l))
		return 0;
	/* Relaxed: hints; the exchange only elects one pending thread, and take orders the lock. */
	if (!atomic_load_explicit(&l->tail, memory_order_relaxed) &&
	    !atomic_load_explicit(&l->pending, memory_order_relaxed) &&
	    !atomic_exchange_explicit(&l->pending, 1, memory_order_relaxed)) {
		int took = spin_pending(l);
		atomic_store_explicit(&l->pending, 0, memory_order_relaxed);
		if (took)
			return 0;
	}
	queue(l, numa_aware, pass);
	return 0;
}

int ls_ptlock_tryacquire(struct ls_ptlock *l)
{
	return take(l) ? 0 : EBUSY;
}

/* (H|P,-) -> (F,-), waking the head parked on the word when it was P. */
void ls_ptlock_release(struct ls_ptlock *l)
{
	/* Release: hands the critical section's writes to the next taker's acquire. */
	struct ls_qnode *sleeper = l->sleeping_head;
	if (sleeper) /* no store on the uncontended path */
		l->sleeping_head = NULL;
	if (atomic_exchange_explicit(&l->word, LS_PT_FREE, memory_order_release) == LS_PT_HELD_PARKED) {
		ls_unpark_head(sleeper, &l->word);
	}
}
