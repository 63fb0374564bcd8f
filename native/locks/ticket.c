/*
 * ticket: Lamport's bakery in its ticket form (Mellor-Crummey and Scott, "Algorithms for scalable synchronization
 * on shared-memory multiprocessors", ACM TOCS 1991). A thread takes the next ticket and waits until the lock
 * serves it: strict FIFO, so a preempted waiter holds up everyone behind it.
 */
#include <errno.h>
#include <stdatomic.h>

#include "lock_impl.h"

struct ticket {
	atomic_uint next;
	atomic_uint serving;
};

static void init(void *s)
{
	struct ticket *l = s;
	atomic_init(&l->next, 0);
	atomic_init(&l->serving, 0);
}

static int acquire(void *s)
{
	struct ticket *l = s;
	unsigned rounds = 0;
	/* Relaxed: taking a ticket orders nothing; the wait below synchronises with the holder's release. */
	unsigned mine = atomic_fetch_add_explicit(&l->next, 1, memory_order_relaxed);
	/* Acquire: pairs with the release in release(), so the previous holder's writes are visible. */
	while (atomic_load_explicit(&l->serving, memory_order_acquire) != mine)
		ls_wait_round(&rounds);
	return 0;
}

static int tryacquire(void *s)
{
	struct ticket *l = s;
	/* Acquire: if the ticket taken below is the one served, this load is what synchronises with the previous
	 * holder's release store (as the wait in acquire() does). */
	unsigned serving = atomic_load_explicit(&l->serving, memory_order_acquire);
	unsigned expected = serving;
	/* Taking ticket `serving` succeeds only if nobody waits: acquire on success for the same reason, relaxed on
	 * failure (nothing was taken). */
	if (atomic_compare_exchange_strong_explicit(&l->next, &expected, serving + 1, memory_order_acquire,
						    memory_order_relaxed))
		return 0;
	return EBUSY;
}

static void release(void *s)
{
	struct ticket *l = s;
	/* Relaxed load: only the holder writes `serving`. Release store: hands the critical section's writes to the
	 * next ticket's acquire load. */
	unsigned serving = atomic_load_explicit(&l->serving, memory_order_relaxed);
	atomic_store_explicit(&l->serving, serving + 1, memory_order_release);
}

const struct ls_ops ls_ticket_ops = { "ticket", sizeof(struct ticket), init, acquire, tryacquire, release, ls_nothing };
