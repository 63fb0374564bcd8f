/*
 * mcs: the queue lock of Mellor-Crummey and Scott ("Algorithms for scalable synchronization on shared-memory
 * multiprocessors", ACM TOCS 1991). Each waiter spins on a flag in its own queue node, so a release touches one
 * remote line; FIFO, so a preempted waiter holds up everyone behind it. Queue nodes come from a small per-thread
 * pool (a thread may hold up to LS_MAX_HELD queue locks at once); the holder's node is kept in the lock so that
 * the generic release(lock) finds it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lock_impl.h"

struct mcs_node {
	_Atomic(struct mcs_node *) next;
	atomic_int waiting;
} __attribute__((aligned(64)));

struct mcs {
	_Atomic(struct mcs_node *) tail;
	/* The holder's node: written by the holder after it acquired, read by it at release (no other thread). */
	struct mcs_node *holder;
};

static _Thread_local struct mcs_node pool[LS_MAX_HELD];
static _Thread_local uint64_t used;

static struct mcs_node *node_get(void)
{
	if (used == UINT64_MAX >> (64 - LS_MAX_HELD)) {
		fprintf(stderr, "liblockstep-locks: a thread holds more than %d queue locks at once\n", LS_MAX_HELD);
		abort();
	}
	int i = __builtin_ctzll(~used);
	used |= 1ull << i;
	return &pool[i];
}

static void node_put(struct mcs_node *n)
{
	used &= ~(1ull << (n - pool));
}

static void init(void *s)
{
	struct mcs *l = s;
	atomic_init(&l->tail, NULL);
	l->holder = NULL;
}

static int acquire(void *s)
{
	struct mcs *l = s;
	struct mcs_node *n = node_get();
	unsigned rounds = 0;
	/* Relaxed: the node is published by the exchange (release half) below. */
	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	atomic_store_explicit(&n->waiting, 1, memory_order_relaxed);
	/* Acq_rel: release publishes the node's initialisation to the predecessor that links it; acquire, when the
	 * queue was empty, synchronises with the last holder's release of the tail. */
	struct mcs_node *prev = atomic_exchange_explicit(&l->tail, n, memory_order_acq_rel);
	if (prev) {
		/* Release: the predecessor reads `next` with acquire and then writes our flag. */
		atomic_store_explicit(&prev->next, n, memory_order_release);
		/* Acquire: pairs with the predecessor's release store of the flag: its critical section is visible. */
		while (atomic_load_explicit(&n->waiting, memory_order_acquire))
			ls_wait_round(&rounds);
	}
	l->holder = n;
	return 0;
}

static int tryacquire(void *s)
{
	struct mcs *l = s;
	struct mcs_node *n = node_get();
	struct mcs_node *expected = NULL;
	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	atomic_store_explicit(&n->waiting, 1, memory_order_relaxed);
	/* Acq_rel on success as the exchange in acquire(); relaxed on failure: nothing was published. */
	if (!atomic_compare_exchange_strong_explicit(&l->tail, &expected, n, memory_order_acq_rel,
						     memory_order_relaxed)) {
		node_put(n);
		return EBUSY;
	}
	l->holder = n;
	return 0;
}

static void release(void *s)
{
	struct mcs *l = s;
	struct mcs_node *n = l->holder;
	unsigned rounds = 0;
	/* Acquire: the successor's node initialisation (published by its release store of our `next`). */
	struct mcs_node *next = atomic_load_explicit(&n->next, memory_order_acquire);
	if (!next) {
		struct mcs_node *expected = n;
		/* Release: the next thread to find the queue empty acquires our critical section through the tail. */
		if (atomic_compare_exchange_strong_explicit(&l->tail, &expected, NULL, memory_order_release,
							    memory_order_relaxed)) {
			node_put(n);
			return;
		}
		/* A successor swapped the tail but has not linked itself yet: wait for the link. */
		while (!(next = atomic_load_explicit(&n->next, memory_order_acquire)))
			ls_wait_round(&rounds);
	}
	/* Release: hands the critical section's writes to the successor's acquire load of its flag. */
	atomic_store_explicit(&next->waiting, 0, memory_order_release);
	node_put(n);
}

static void destroy(void *s)
{
	(void)s;
}

const struct ls_ops ls_mcs_ops = { "mcs", sizeof(struct mcs), init, acquire, tryacquire, release, destroy };
