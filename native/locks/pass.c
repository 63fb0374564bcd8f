/*
 * Hand-over rules of the queue locks. The CNA rule is that of Dice and Kogan ("Compact NUMA-aware locks",
 * EuroSys 2019): the holder scans the main queue for the first waiter on its own NUMA node and hands the lock to
 * it, moving the remote waiters it passed to a secondary queue; when no local waiter is queued, or after a bounded
 * number of local hand-overs while waiters are set aside (the paper draws this at random; a counter makes the
 * bound exact), the secondary queue is put back in front of the main queue and its first waiter is served. The
 * paper carries the secondary queue in the holder's node to keep the lock one word; here it lives in the lock,
 * guarded by the lock itself.
 *
 * Memory orders: links are read with acquire, pairing with the release store by which a waiter links itself
 * behind its predecessor, so that the waiter's `numa` is seen. Links of waiters already in the queue are rewritten
 * with relaxed stores: those waiters only read their own link after they get the lock (or, in the
 * preemption-tolerant locks, the lock word), which orders the rewrite before the read.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "queue.h"
#include "lock_impl.h"

/* The waiter linked behind `me`, waiting for the link when a waiter has swapped the tail but not linked yet;
 * NULL when the queue ends at `me` and *tail was set to `last` (NULL: the lock is free). */
static struct ls_qnode *behind(_Atomic(struct ls_qnode *) *tail, struct ls_qnode *me, struct ls_qnode *last)
{
	unsigned rounds = 0;
	struct ls_qnode *next = atomic_load_explicit(&me->next, memory_order_acquire);
	if (next)
		return next;
	struct ls_qnode *expected = me;
	/* Release: the next thread to swap the tail acquires what the holder wrote, including the link reset of
	 * `last` (it writes that link next). Relaxed on failure: a waiter is linking, its link is read below. */
	if (atomic_compare_exchange_strong_explicit(tail, &expected, last, memory_order_release, memory_order_relaxed))
		return NULL;
	while (!(next = atomic_load_explicit(&me->next, memory_order_acquire)))
		ls_wait_round(&rounds);
	return next;
}

struct ls_qnode *ls_pass_fifo(struct ls_cna_secondary *sec, _Atomic(struct ls_qnode *) *tail, struct ls_qnode *me)
{
	(void)sec;
	return behind(tail, me, NULL);
}

/* Puts the set-aside waiters in front of `next` and returns the first. With `next` NULL they already are the
 * whole queue (the tail was swapped to their last) and the last one's link is left alone: a new waiter may
 * already have linked itself there. */
static struct ls_qnode *flush(struct ls_cna_secondary *sec, struct ls_qnode *next)
{
	struct ls_qnode *first = sec->head;
	/* Relaxed: see the top of the file. */
	if (next)
		atomic_store_explicit(&sec->tail->next, next, memory_order_relaxed);
	sec->head = sec->tail = NULL;
	sec->handovers = 0;
	return first;
}

struct ls_qnode *ls_pass_cna(struct ls_cna_secondary *sec, _Atomic(struct ls_qnode *) *tail, struct ls_qnode *me)
{
	struct ls_qnode *next = behind(tail, me, sec->head ? sec->tail : NULL);
	if (!next)
		return sec->head ? flush(sec, NULL) : NULL;
	if (sec->head && sec->handovers >= ls_cna_bound())
		return flush(sec, next);
	struct ls_qnode *before = NULL, *local = next;
	while (local->numa != me->numa) {
		struct ls_qnode *after = atomic_load_explicit(&local->next, memory_order_acquire);
		if (!after) {
			/* No local waiter linked yet: the set-aside waiters go first, then the queue in order. */
			return sec->head ? flush(sec, next) : next;
		}
		before = local;
		local = after;
	}
	if (before) {
		/* Relaxed: see the top of the file. */
		atomic_store_explicit(&before->next, NULL, memory_order_relaxed);
		if (sec->head)
			atomic_store_explicit(&sec->tail->next, next, memory_order_relaxed);
		else
			sec->head = next;
		sec->tail = before;
	}
	if (sec->head)
		sec->handovers++;
	return local;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned bound = LS_CNA_DEFAULT_BOUND;
static char error[200];

static void load(void)
{
	const char *text = secure_getenv("LOCKSTEP_CNA_BOUND");
	if (!text)
		return;
	char *end;
	errno = 0;
	unsigned long v = strtoul(text, &end, 10);
	if (errno || *end || end == text || text[0] == '-' || v < 1 || v > 1000000000)
		snprintf(error, sizeof error,
			 "bad LOCKSTEP_CNA_BOUND \"%.32s\" (expected local hand-overs, 1 to 1000000000; default %d)", text,
			 LS_CNA_DEFAULT_BOUND);
	else
		bound = (unsigned)v;
}

unsigned ls_cna_bound(void)
{
	pthread_once(&once, load);
	return bound;
}

const char *ls_cna_bound_error(void)
{
	pthread_once(&once, load);
	return error[0] ? error : NULL;
}
