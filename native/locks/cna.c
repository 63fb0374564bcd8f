/*
 * cna: the compact NUMA-aware lock of Dice and Kogan ("Compact NUMA-aware locks", EuroSys 2019) — an MCS queue
 * (qlock.c) whose holder hands the lock to the first waiter on its own NUMA node, setting remote waiters aside in
 * a secondary queue that is served when no local waiter is left or after LOCKSTEP_CNA_BOUND local hand-overs
 * (queue.h, pass.c). A thread's node is that of the CPU it queues on (numa.c; LOCKSTEP_NUMA_MAP emulates nodes).
 */
#include "lock_impl.h"
#include "queue.h"

static void init(void *s)
{
	ls_qlock_init(s);
}

static int acquire(void *s)
{
	return ls_qlock_acquire(s, ls_numa_node());
}

static int tryacquire(void *s)
{
	return ls_qlock_tryacquire(s, ls_numa_node());
}

static void release(void *s)
{
	ls_qlock_release(s, ls_pass_cna);
}

const struct ls_ops ls_cna_ops = { "cna", sizeof(struct ls_qlock), init, acquire, tryacquire, release, ls_nothing };
