/*
 * cna-pt: cna that survives preemption — the preemption-tolerant queue lock (ptlock.c) whose queue's head
 * moves by cna's rule (local waiters first, the others after LOCKSTEP_CNA_BOUND local hand-overs): waiters spin for
 * a bounded time, then park; the lock goes to a running thread.
 */
#include "lock_impl.h"
#include "queue.h"

static void init(void *s)
{
	ls_ptlock_init(s);
}

static int acquire(void *s)
{
	return ls_ptlock_acquire(s, 1, ls_pass_cna);
}

static int tryacquire(void *s)
{
	return ls_ptlock_tryacquire(s);
}

static void release(void *s)
{
	ls_ptlock_release(s);
}

const struct ls_ops ls_cna_pt_ops = { "cna-pt", sizeof(struct ls_ptlock), init, acquire, tryacquire, release,
					ls_nothing };
