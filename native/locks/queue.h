/*
 * The queues of the queue-based locks (mcs, cna and their preemption-tolerant variants): queue nodes, the
 * per-thread pool they come from, and the hand-over rules. A waiter spins on a flag in its own node, so that a
 * hand-over touches one remote cache line.
 */
#ifndef LOCKSTEP_QUEUE_H
#define LOCKSTEP_QUEUE_H

#include <stdalign.h>
#include <stdatomic.h>

#include "park.h"

/* One waiter in a lock's queue, on a cache line of its own. */
struct ls_qnode {
	/* The waiter queued behind this one: written by that waiter when it links itself (and rewritten by a cna
	 * holder that sets waiters aside), read by this node's owner when it heads the queue. */
	_Atomic(struct ls_qnode *) next;
	/* What the owner waits for; its values belong to the lock (mcs and cna: 0 waiting, 1 granted). */
	atomic_int state;
	/* The NUMA node the owner ran on when it queued (cna, shfl). */
	int numa;
	/* shfl: whether the owner holds the shuffler role (written by the previous holder of the role), and the
	 * node's place in its batch of same-node waiters (written by the shuffler that grouped it). */
	atomic_int shuffler;
	unsigned batch;
} __attribute__((aligned(64)));

/* The release's wake of a lock's head (ptlock.c, shfl.c): the head made head while it slept on its node
 * (`sleeper`, NULL if none) is woken there; if it was no longer asleep there it may have gone on to park on the
 * lock's word, which the release has freed before this call, so the word is woken too. */
static inline void ls_unpark_head(struct ls_qnode *sleeper, atomic_int *word)
{
	if (!sleeper || !ls_unpark(&sleeper->state))
		ls_unpark(word);
}

/* A free node of the calling thread's pool; aborts with a message when the thread already uses LS_MAX_HELD. */
struct ls_qnode *ls_qnode_get(void);

/* Gives `n`, taken by the calling thread, back to its pool. */
void ls_qnode_put(struct ls_qnode *n);

/* A node's state once a hand-over has skipped it (whatever the lock's other values). */
#define LS_QNODE_SKIPPED (-1)

/* The calling thread stops waiting on `n`, which stays in its queue until a hand-over skips it and sets its state
 * to LS_QNODE_SKIPPED (release); the pool takes it back then. A thread that exits with such nodes waits for that
 * first (the node's memory is the thread's). */
void ls_qnode_leave(struct ls_qnode *n);

/* Whether the calling thread may leave another node (fewer than half its pool are left in queues), so that
 * nodes left behind never exhaust the pool. */
int ls_qnode_may_leave(void);


/*
 * Hand-over rules, shared by a lock and its preemption-tolerant variant: FIFO (mcs, mcs-pt) and compact
 * NUMA-aware (cna, cna-pt). A rule is called by the thread whose node heads the queue and which holds the lock;
 * it returns the waiter that comes next, or NULL when the queue ended at the caller and is now empty.
 */

/* Waiters from other NUMA nodes set aside by cna, in queue order; only the lock's holder touches it. */
struct ls_cna_secondary {
	struct ls_qnode *head, *tail;
	/* Hand-overs to local waiters since the first waiter was set aside. */
	unsigned handovers;
};

/* A hand-over rule: `me` is the calling thread's node, at the head of the queue whose last node is *tail. */
typedef struct ls_qnode *(*ls_pass_fn)(struct ls_cna_secondary *sec, _Atomic(struct ls_qnode *) *tail,
				       struct ls_qnode *me);

/* FIFO: the waiter queued behind `me`. */
struct ls_qnode *ls_pass_fifo(struct ls_cna_secondary *sec, _Atomic(struct ls_qnode *) *tail, struct ls_qnode *me);

/* CNA: the first waiter on `me`'s NUMA node, the waiters before it set aside; the set-aside ones first when
 * no local waiter is queued or after ls_cna_bound() local hand-overs. */
struct ls_qnode *ls_pass_cna(struct ls_cna_secondary *sec, _Atomic(struct ls_qnode *) *tail, struct ls_qnode *me);

/* Local hand-overs after which cna serves the set-aside waiters: LOCKSTEP_CNA_BOUND, LS_CNA_DEFAULT_BOUND when it
 * is unset or malformed. */
unsigned ls_cna_bound(void);

/* The default of ls_cna_bound(). */
#define LS_CNA_DEFAULT_BOUND 256

/* Why LOCKSTEP_CNA_BOUND was ignored, or NULL. */
const char *ls_cna_bound_error(void);

/* The state of an mcs or cna lock (in this header for the deterministic cna test, which watches the tail). */
struct ls_qlock {
	_Atomic(struct ls_qnode *) tail;
	/* The holder's node: written by the holder after it acquired, read by it at release. */
	struct ls_qnode *holder;
	struct ls_cna_secondary sec;
};

/* The spinning queue lock behind mcs and cna (qlock.c). `numa` is the caller's NUMA node (0 when unused). */
void ls_qlock_init(struct ls_qlock *l);
int ls_qlock_acquire(struct ls_qlock *l, int numa);
int ls_qlock_tryacquire(struct ls_qlock *l, int numa);
void ls_qlock_release(struct ls_qlock *l, ls_pass_fn pass);

/* Values of an mcs-pt or cna-pt lock's word (the state graph is at the top of ptlock.c). */
enum {
	/* Written by the release (exchange). */
	LS_PT_FREE,
	/* Written by whoever takes the free word (compare-exchange): an arriving thread, a waiter, the head. */
	LS_PT_HELD,
	/* Written by the head before it parks on the word (exchange); the release that sees it wakes the head. */
	LS_PT_HELD_PARKED,
};

/* Values of a queue node's state in an mcs-pt or cna-pt lock (and LS_QNODE_SKIPPED). */
enum {
	/* Written by the node's owner when it queues (before publishing the node). */
	LS_PT_WAITING,
	/* Written by the previous head's hand-over (exchange), or at once by the owner when the queue was empty. */
	LS_PT_HEAD,
	/* Written by the owner before it parks (compare-exchange from LS_PT_WAITING). */
	LS_PT_PARKED,
	/* Written by the owner that took the word out of turn (compare-exchange from LS_PT_WAITING); the hand-over
	 * that reaches the node then writes LS_QNODE_SKIPPED. */
	LS_PT_LEFT,
};

/* The state of an mcs-pt or cna-pt lock (ptlock.c). */
struct ls_ptlock {
	/* Written by whoever holds or takes the lock, on one cache line. */
	/* LS_PT_FREE, LS_PT_HELD or LS_PT_HELD_PARKED: the lock itself, taken by whoever runs (the queue's head, or a
	 * thread arriving when the head lets it, or a waiter when the head is not running). */
	atomic_int word;
	/* The last thread that took the word (park.h: waiters spin only while it runs). */
	struct ls_holder holder;
	/* 1 while a thread that found the word held and nobody queued spins on the word before it queues (one such
	 * thread at a time, as the pending bit of the kernel's queued spinlock). */
	atomic_int pending;
	/* The queue's head when it is asleep on its node and the release must wake it, guarded by the word. */
	struct ls_qnode *sleeping_head;
	/* cna-pt's set-aside waiters, guarded by the word. */
	struct ls_cna_secondary sec;
	/* The queue of threads waiting to become its head, written by arriving threads: a line of its own. */
	alignas(64) _Atomic(struct ls_qnode *) tail;
	/* Written by the queue's head while it waits, read by spinning waiters: a line of its own. */
	/* CLOCK_MONOTONIC ns at which the head last showed it was running (spinning on the word); 0: no running
	 * head (none, parked, or not yet started spinning). */
	alignas(64) atomic_long head_seen;
	/* 1 once the head has waited LS_PT_STEAL_NS for the word: arriving threads then queue behind it while it shows
	 * it runs; 0 again when it takes the word or parks. */
	atomic_int no_steal;
	/* The head's average wait for the word in ns (park.h: how long waiters spin at most). */
	atomic_long hold_ns;
};

/* The preemption-tolerant lock behind mcs-pt and cna-pt (ptlock.c). `numa_aware`: whether `pass` reads the waiters'
 * NUMA nodes, looked up only when the caller queues (a thread that takes the free word never asks). */
void ls_ptlock_init(struct ls_ptlock *l);
int ls_ptlock_acquire(struct ls_ptlock *l, int numa_aware, ls_pass_fn pass);
int ls_ptlock_tryacquire(struct ls_ptlock *l);
void ls_ptlock_release(struct ls_ptlock *l);

#endif
