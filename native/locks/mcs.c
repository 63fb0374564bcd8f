/*
 * mcs: the queue lock of Mellor-Crummey and Scott (ACM TOCS 1991) — FIFO hand-over, each waiter spinning on its
 * own node (qlock.c, queue.h). Strictly fair; a preempted waiter holds up everyone behind it.
 */
#include "lock_impl.h"
#include "queue.h"

static void init(void *s)
{
	ls_qlock_init(s);
}

static int acquire(void *s)
{
	return ls_qlock_acquire(s, 0);
}

static int tryacquire(void *s)
{
	return ls_qlock_tryacquire(s, 0);
}

static void release(void *s)
{
	ls_qlock_release(s, ls_pass_fifo);
}

const struct ls_ops ls_mcs_ops = { "mcs", sizeof(struct ls_qlock), init, acquire, tryacquire, release, ls_nothing };
