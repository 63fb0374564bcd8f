/*
 * The per-thread pool of queue nodes: LS_MAX_HELD nodes in thread-local storage and a bitmask of the used ones.
 * A node is taken when its thread queues on a lock and given back when the thread no longer needs it (mcs and
 * cna: at release; the preemption-tolerant variants: when the lock is taken), so a thread holds at most
 * LS_MAX_HELD queue locks at once. A node its thread left in a queue (a preemption-tolerant waiter that took the
 * lock out of turn) comes back once a hand-over has skipped it; a thread does not exit before that.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "queue.h"
#include "lock_impl.h"

_Static_assert(LS_MAX_HELD <= 64, "the pool's bitmask has 64 bits");

static _Thread_local struct ls_qnode pool[LS_MAX_HELD];
static _Thread_local uint64_t used;
/* Nodes left in a queue, not yet skipped (a subset of `used`). */
static _Thread_local uint64_t left;

/* Takes back the left nodes a hand-over has skipped. */
static void reclaim(void)
{
	for (uint64_t rest = left; rest; rest &= rest - 1) {
		int i = __builtin_ctzll(rest);
		/* Acquire: pairs with the skipping hand-over's release, which is done with the node. */
		if (atomic_load_explicit(&pool[i].state, memory_order_acquire) == LS_QNODE_SKIPPED) {
			left &= ~(1ull << i);
			used &= ~(1ull << i);
		}
	}
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t at_exit;

/* At thread exit: waits until no queue holds one of this thread's nodes any more. */
static void wait_for_left(void *unused)
{
	(void)unused;
	for (reclaim(); left; reclaim())
		sched_yield();
}

static void make_key(void)
{
	pthread_key_create(&at_exit, wait_for_left);
}

void ls_qnode_leave(struct ls_qnode *n)
{
	pthread_once(&once, make_key);
	/* Any non-NULL value makes the key's destructor run at thread exit. */
	pthread_setspecific(at_exit, pool);
	left |= 1ull << (n - pool);
}

int ls_qnode_may_leave(void)
{
	if (left)
		reclaim();
	return __builtin_popcountll(left) < LS_MAX_HELD / 2;
}

struct ls_qnode *ls_qnode_get(void)
{
	if (left)
		reclaim();
	if (used == UINT64_MAX >> (64 - LS_MAX_HELD)) {
		fprintf(stderr, "liblockstep-locks: a thread holds more than %d queue locks at once\n", LS_MAX_HELD);
		abort();
	}
	int i = __builtin_ctzll(~used);
	used |= 1ull << i;
	return &pool[i];
}

void ls_qnode_put(struct ls_qnode *n)
{
	used &= ~(1ull << (n - pool));
}
