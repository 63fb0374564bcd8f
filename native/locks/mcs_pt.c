/*
 * mcs-pt: mcs that survives preemption — the preemption-tolerant queue lock (ptlock.c) with FIFO
 * hand-over of the queue's head: waiters spin for a bounded time, then park; the lock goes to a running thread.
 */
#include "lock_impl.h"
#include "queue.h"

static void init(void *s)
{
	ls_ptlock_init(s);
}

static int acquire(void *s)
{
	return ls_ptlock_acquire(s, 0, ls_pass_fifo);
}

static int tryacquire(void *s)
{
	return ls_ptlock_tryacquire(s);
}

static void release(void *s)
{
	ls_ptlock_release(s);
}

const struct ls_ops ls_mcs_pt_ops = { "mcs-pt", sizeof(struct ls_ptlock), init, acquire, tryacquire, release,
					ls_nothing };
