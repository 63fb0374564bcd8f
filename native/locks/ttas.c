/*
 * ttas: test-and-test-and-set with bounded exponential backoff (Anderson, "The performance of spin lock
 * alternatives for shared-memory multiprocessors", IEEE TPDS 1990). Waiters read the word until it looks free,
 * then try to swap it; a failed swap doubles the waiter's backoff up to a bound, so that the line is not
 * hammered by every waiter at each release. No fairness: the thread that happens to swap first wins.
 */
#include <errno.h>
#include <stdatomic.h>

#include "lock_impl.h"

struct ttas {
	atomic_int locked;
};

/* Longest backoff, in pause rounds. */
#define MAX_BACKOFF 1024

static void init(void *s)
{
	struct ttas *l = s;
	atomic_init(&l->locked, 0);
}

static int acquire(void *s)
{
	struct ttas *l = s;
	unsigned rounds = 0, backoff = 1;
	for (;;) {
		/* Relaxed: only a hint that the lock may be free; the exchange below is what orders. */
		while (atomic_load_explicit(&l->locked, memory_order_relaxed))
			ls_wait_round(&rounds);
		/* Acquire: the critical section must see everything the previous holder wrote before its release. */
		if (!atomic_exchange_explicit(&l->locked, 1, memory_order_acquire))
			return 0;
		for (unsigned i = 0; i < backoff; i++)
			ls_wait_round(&rounds);
		backoff = backoff < MAX_BACKOFF ? backoff * 2 : MAX_BACKOFF;
	}
}

static int tryacquire(void *s)
{
	struct ttas *l = s;
	/* Relaxed read first (no write to a busy line); acquire on the exchange as in acquire(). */
	if (atomic_load_explicit(&l->locked, memory_order_relaxed) ||
	    atomic_exchange_explicit(&l->locked, 1, memory_order_acquire))
		return EBUSY;
	return 0;
}

static void release(void *s)
{
	struct ttas *l = s;
	/* Release: publishes the critical section's writes to the next acquirer's acquire exchange. */
	atomic_store_explicit(&l->locked, 0, memory_order_release);
}

const struct ls_ops ls_ttas_ops = { "ttas", sizeof(struct ttas), init, acquire, tryacquire, release, ls_nothing };
