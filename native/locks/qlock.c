/*
 * The spinning queue lock behind mcs and cna, after Mellor-Crummey and Scott ("Algorithms for scalable
 * synchronization on shared-memory multiprocessors", ACM TOCS 1991): a thread appends its node to the queue with
 * one exchange of the tail and spins on its own node until its predecessor grants it the lock; the holder grants
 * the waiter its hand-over rule picks (queue.h). The holder's node is kept in the lock so that release(lock)
 * finds it. A granted waiter that is not running holds up everyone behind it: this lock collapses when threads
 * outnumber CPUs (see ptlock.c for the variant that does not).
 *
 * States, as (tail, state of the caller's node): tail N null, Q a queue; node W waiting, G granted (holds the lock).
 *
 *   acquire    (N,-) -exchange tail---------------------------------> (Q,G)   the queue was empty: holds it
 *              (Q,-) -exchange tail, link behind the predecessor-----> (Q,W) -predecessor's grant-> (Q,G)
 *   tryacquire (N,-) -compare-exchange tail N->node-----------------> (Q,G);  (Q,-) unchanged: EBUSY
 *   release    (Q,G) -the rule picks a waiter: store G on its node---> (Q,-)
 *              (Q,G) -the rule finds none: compare-exchange tail->N--> (N,-)
 */
#include <errno.h>
#include <stdatomic.h>

#include "lock_impl.h"
#include "queue.h"

/* Values of a node's state: WAITING written by its owner before it queues, GRANTED by the previous holder. */
enum { WAITING, GRANTED };

void ls_qlock_init(struct ls_qlock *l)
{
	atomic_init(&l->tail, NULL);
	l->holder = NULL;
	l->sec.head = l->sec.tail = NULL;
	l->sec.handovers = 0;
}

/* A fresh node of the calling thread, on NUMA node `numa`. */
static struct ls_qnode *fresh(int numa)
{
	struct ls_qnode *n = ls_qnode_get();
	/* Relaxed: the node is published by the exchange or compare-exchange of the tail (release half). */
	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	atomic_store_explicit(&n->state, WAITING, memory_order_relaxed);
	n->numa = numa;
	return n;
}

/* (N,-) -> (Q,G) at once, or (Q,-) -> (Q,W) -> (Q,G) when the predecessor grants. */
int ls_qlock_acquire(struct ls_qlock *l, int numa)
{
	struct ls_qnode *n = fresh(numa);
	unsigned rounds = 0;
	/* Acq_rel: release publishes the node's initialisation to the predecessor that links it; acquire, when the
	 * queue was empty, synchronises with the last holder's release of the tail. */
	struct ls_qnode *prev = atomic_exchange_explicit(&l->tail, n, memory_order_acq_rel);
	if (prev) {
		/* Release: the predecessor reads its link with acquire and then reads our node. */
		atomic_store_explicit(&prev->next, n, memory_order_release);
		/* Acquire: pairs with the grant (release) below: the previous holder's critical section is visible. */
		while (atomic_load_explicit(&n->state, memory_order_acquire) == WAITING)
			ls_wait_round(&rounds);
	}
	l->holder = n;
	return 0;
}

/* (N,-) -> (Q,G); with a queue, nothing changes and the answer is EBUSY. */
int ls_qlock_tryacquire(struct ls_qlock *l, int numa)
{
	struct ls_qnode *n = fresh(numa);
	struct ls_qnode *expected = NULL;
	/* Acq_rel on success as the exchange in acquire; relaxed on failure: nothing was published. The lock is free
	 * exactly when the tail is NULL (set-aside waiters keep it non-NULL). */
	if (!atomic_compare_exchange_strong_explicit(&l->tail, &expected, n, memory_order_acq_rel,
						     memory_order_relaxed)) {
		ls_qnode_put(n);
		return EBUSY;
	}
	l->holder = n;
	return 0;
}

/* (Q,G) -> (Q,-), the next waiter W -> G; or (Q,G) -> (N,-) when the rule empties the queue (pass.c). */
void ls_qlock_release(struct ls_qlock *l, ls_pass_fn pass)
{
	struct ls_qnode *n = l->holder;
	struct ls_qnode *next = pass(&l->sec, &l->tail, n);
	/* next: W -> G. Release: hands the critical section's writes to the waiter's acquire load of its state. */
	if (next)
		atomic_store_explicit(&next->state, GRANTED, memory_order_release);
	ls_qnode_put(n);
}
