/*
 * shfl: the blocking shuffle lock (ShflLock) of Kashyap, Calciu, Cheng, Min and Kim ("Scalable and practical
 * locking with shuffling", SOSP 2019), written from the paper, with the adaptive waiting of mcs-pt and cna-pt
 * (park.h, spin.c) so that the three are compared on equal terms.
 *
 * The lock is a test-and-set word and an MCS queue of waiters. Any running thread takes the free word at once (lock
 * stealing), unless the queue's head has forbidden it (NO_STEAL) because others took the word while it waited; only
 * the head spins on the word, every other waiter waits on its own node for its turn. NUMA-awareness costs the
 * critical path nothing: the waiter that holds the shuffler role (one at a time) walks the queue behind its own node
 * and moves the waiters of its own NUMA node forward, behind the ones grouped before, so that the lock passes within
 * a node in batches (at most ls_cna_bound() in a row, so that the other nodes are served); then it passes the role
 * to the last waiter it grouped, which goes on from there. The role starts with the head of an empty queue and
 * moves with the head's place when no shuffle has passed it on.
 *
 * Blocking: a waiter spins while spinning pays (spin.c) and otherwise parks on its node; the head parks on the word
 * (PARKED, lifting NO_STEAL so that running threads take the lock meanwhile) and the release wakes it. The shuffler
 * wakes the parked waiters it groups, so that they run by the time their turn comes, off the critical path; a waiter
 * still parked when it is made head is woken by the release (as in ptlock.c).
 *
 * Who writes what: the word by compare-exchange (takers, the head setting PARKED or NO_STEAL) and by the release's
 * fetch-and; a node's `next` by the waiter that queues behind it (from NULL only) and by the shuffler (only links
 * that are not NULL, of nodes behind its own); a node's state by its owner (W -> K), the shuffler (K -> W) and the
 * hand-over (-> H); `shuffler` and `batch` by the holder of the role. A node behind the shuffler cannot become head
 * before the shuffler does, so the nodes it walks stay queued while it walks them.
 *
 * Memory orders: the word is the lock (acquire on taking it, release on freeing it); links and node states as in
 * ptlock.c; a role passes by a release store of `shuffler` that the new holder reads with acquire, so that it sees
 * the links and batches its predecessor in the role wrote (relaxed). holder, head_seen and hold_ns are hints.
 */
#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>

#include "lock_impl.h"
#include "park.h"
#include "queue.h"

/* Bits of the word. */
enum {
	/* Held. */
	LOCKED = 1,
	/* Held, and the queue's head sleeps (on the word, or on its node: sleeping_head); the release wakes it. */
	PARKED = 2,
	/* Only the queue's head may take the free word (while it shows it runs). */
	NO_STEAL = 4,
};

/* Nodes the shuffler walks at most per pass. */
#define WALK 64

struct shfl {
	/* Written by whoever holds or takes the lock, on one cache line. */
	atomic_int word;
	struct ls_holder holder;
	/* The head, asleep on its node when it was made head; the release wakes it. Guarded by the word. */
	struct ls_qnode *sleeping_head;
	/* Written by arriving threads. */
	alignas(64) _Atomic(struct ls_qnode *) tail;
	/* Written by the head while it waits, as in ptlock.c. */
	alignas(64) atomic_long head_seen;
	atomic_long hold_ns;
};

static void init(void *state)
{
	struct shfl *l = state;
	atomic_init(&l->word, 0);
	ls_holder_init(&l->holder);
	l->sleeping_head = NULL;
	atomic_init(&l->tail, NULL);
	atomic_init(&l->head_seen, 0);
	atomic_init(&l->hold_ns, 0);
}

/* Takes the free word ahead of the queue if stealing is allowed (or the head does not show it runs): 1 if taken. */
static int steal(struct shfl *l)
{
	/* Relaxed: look before the compare-exchange (see take in ptlock.c). */
	int w = atomic_load_explicit(&l->word, memory_order_relaxed);
	if (w & LOCKED)
		return 0;
	if (w & NO_STEAL) {
		/* Relaxed: a hint. */
		long seen = atomic_load_explicit(&l->head_seen, memory_order_relaxed);
		if (seen && ls_now_ns() - seen <= LS_PT_STALE_NS)
			return 0;
	}
	/* Acquire on success: pairs with the release's fetch-and. */
	if (!atomic_compare_exchange_strong_explicit(&l->word, &w, w | LOCKED, memory_order_acquire,
						     memory_order_relaxed))
		return 0;
	ls_holder_publish(&l->holder);
	return 1;
}

/* Wakes `n` if it is parked: it has been grouped near the head, or made head. */
static void wake_early(struct ls_qnode *n)
{
	int parked = LS_PT_PARKED;
	/* Relaxed: the owner reads its state again (acquire) after it wakes; nothing is published here. */
	if (atomic_compare_exchange_strong_explicit(&n->state, &parked, LS_PT_WAITING, memory_order_relaxed,
						    memory_order_relaxed))
		ls_unpark(&n->state);
}

/* One pass of the shuffler `s`: moves the waiters of its NUMA node that are queued behind it forward, behind the
 * last one it grouped, up to the batch bound; then hands the role to the last grouped waiter. */
static void shuffle(struct ls_qnode *s)
{
	unsigned bound = ls_cna_bound();
	struct ls_qnode *last = s, *prev = s;
	struct ls_qnode *curr = atomic_load_explicit(&s->next, memory_order_acquire);
	for (int walked = 0; curr && walked < WALK && last->batch < bound; walked++) {
		/* Acquire: pairs with the release by which a waiter links itself (its numa is seen). */
		struct ls_qnode *next = atomic_load_explicit(&curr->next, memory_order_acquire);
		if (!next)
			break; /* curr is the tail: its link belongs to the next thread that queues */
		if (curr->numa != s->numa) {
			prev = curr;
		} else {
			if (prev != last) {
				/* Unlink curr from behind prev, and link it behind last. */
				atomic_store_explicit(&prev->next, next, memory_order_relaxed);
				atomic_store_explicit(&curr->next,
						      atomic_load_explicit(&last->next, memory_order_relaxed),
						      memory_order_relaxed);
				atomic_store_explicit(&last->next, curr, memory_order_relaxed);
			} else {
				prev = curr;
			}
			curr->batch = last->batch + 1;
			wake_early(curr);
			last = curr;
		}
		curr = next;
	}
	if (last != s) {
		atomic_store_explicit(&s->shuffler, 0, memory_order_relaxed);
		/* Release: the links and batches written above are seen by the new holder of the role. */
		atomic_store_explicit(&last->shuffler, 1, memory_order_release);
	}
}

/* Waits until `n` heads the queue: spins while spinning pays, shuffling when it holds the role, else parks. */
static void wait_turn(struct shfl *l, struct ls_qnode *n)
{
	struct ls_spin spin;
	long budget = ls_spin_budget(&l->hold_ns);
	unsigned rounds = 0;
	ls_spin_begin(&spin, ls_now_ns(), &l->holder);
	/* Acquire: pairs with the hand-over's exchange. */
	while (atomic_load_explicit(&n->state, memory_order_acquire) != LS_PT_HEAD) {
		ls_pause();
		if (++rounds % LS_PT_CLOCK_EVERY)
			continue;
		/* Acquire: pairs with the release that passed the role. */
		if (atomic_load_explicit(&n->shuffler, memory_order_acquire))
			shuffle(n);
		if (ls_spin_pays(&spin, ls_now_ns(), &l->holder, budget))
			continue;
		int waiting = LS_PT_WAITING;
		/* Acquire on failure: the state became LS_PT_HEAD. */
		if (atomic_compare_exchange_strong_explicit(&n->state, &waiting, LS_PT_PARKED, memory_order_acquire,
							    memory_order_acquire)) {
			while (atomic_load_explicit(&n->state, memory_order_acquire) == LS_PT_PARKED)
				ls_park(&n->state, LS_PT_PARKED);
			ls_spin_begin(&spin, ls_now_ns(), &l->holder);
		}
	}
}

/* The head's wait for the word: spins showing a fresh head_seen while spinning pays, shuffling when it holds the
 * role, forbidding stealing once it has spun for LS_PT_STEAL_NS; otherwise parks on the word. */
static void take_as_head(struct shfl *l, struct ls_qnode *n)
{
	long start = ls_now_ns(), spun_since = start;
	struct ls_spin spin;
	long budget = ls_spin_budget(&l->hold_ns);
	unsigned rounds = 0;
	atomic_store_explicit(&l->head_seen, start, memory_order_relaxed);
	ls_spin_begin(&spin, start, &l->holder);
	for (;;) {
		/* Relaxed: look before the compare-exchange. */
		int w = atomic_load_explicit(&l->word, memory_order_relaxed);
		/* Acquire on success: pairs with the release's fetch-and. Taking clears NO_STEAL. */
		if (!(w & LOCKED) && atomic_compare_exchange_strong_explicit(&l->word, &w, LOCKED, memory_order_acquire,
									     memory_order_relaxed))
			break;
		ls_pause();
		if (++rounds % LS_PT_CLOCK_EVERY)
			continue;
		if (atomic_load_explicit(&n->shuffler, memory_order_acquire))
			shuffle(n);
		long now = ls_now_ns();
		if (ls_spin_pays(&spin, now, &l->holder, budget)) {
			atomic_store_explicit(&l->head_seen, now, memory_order_relaxed);
			if (!(w & NO_STEAL) && now - spun_since >= LS_PT_STEAL_NS)
				atomic_fetch_or_explicit(&l->word, NO_STEAL, memory_order_relaxed);
			continue;
		}
		/* Park on the held word, letting running threads steal meanwhile. */
		atomic_store_explicit(&l->head_seen, 0, memory_order_relaxed);
		if (w & LOCKED) {
			int parked = (w | PARKED) & ~NO_STEAL;
			/* Relaxed: parking publishes nothing; the release that wakes us is read by the next take. */
			if (atomic_compare_exchange_strong_explicit(&l->word, &w, parked, memory_order_relaxed,
								    memory_order_relaxed))
				ls_park(&l->word, parked);
		}
		now = ls_now_ns();
		spun_since = now;
		ls_spin_begin(&spin, now, &l->holder);
		atomic_store_explicit(&l->head_seen, now, memory_order_relaxed);
	}
	atomic_store_explicit(&l->head_seen, 0, memory_order_relaxed);
	ls_holder_publish(&l->holder);
	ls_hold_note(&l->hold_ns, ls_now_ns() - start);
}

/* Makes the waiter behind `n` (which holds the word) the head; a waiter asleep on its node is woken by the
 * release. NULL behind `n` and the tail still `n`: the queue is empty now. */
static void pass_head(struct shfl *l, struct ls_qnode *n)
{
	/* Acquire: pairs with the release by which the next waiter links itself. */
	struct ls_qnode *next = atomic_load_explicit(&n->next, memory_order_acquire);
	if (!next) {
		struct ls_qnode *expected = n;
		/* Release: the next thread to swap the tail is ordered after our use of the queue. */
		if (atomic_compare_exchange_strong_explicit(&l->tail, &expected, NULL, memory_order_release,
							    memory_order_relaxed))
			return;
		while (!(next = atomic_load_explicit(&n->next, memory_order_acquire)))
			ls_pause();
	}
	if (atomic_load_explicit(&n->shuffler, memory_order_relaxed))
		atomic_store_explicit(&next->shuffler, 1, memory_order_relaxed);
	/* Release: the new head sees our writes (role, batch, links). */
	if (atomic_exchange_explicit(&next->state, LS_PT_HEAD, memory_order_acq_rel) == LS_PT_PARKED) {
		l->sleeping_head = next;
		atomic_fetch_or_explicit(&l->word, PARKED, memory_order_relaxed);
	}
}

/* Queues, waits for the head's place and takes the word as head. Not inlined, so that the path of a thread that
 * steals the free word (below) saves no registers and keeps no stack frame. */
static __attribute__((noinline)) void queue(struct shfl *l)
{
	struct ls_qnode *n = ls_qnode_get();
	/* Relaxed: published by the exchange of the tail (release half). */
	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	atomic_store_explicit(&n->state, LS_PT_WAITING, memory_order_relaxed);
	atomic_store_explicit(&n->shuffler, 0, memory_order_relaxed);
	n->numa = ls_numa_node();
	n->batch = 0;
	/* Acq_rel: as in ptlock.c. */
	struct ls_qnode *prev = atomic_exchange_explicit(&l->tail, n, memory_order_acq_rel);
	if (prev) {
		/* Release: the predecessor (or a shuffler) reads the link with acquire, then our node. */
		atomic_store_explicit(&prev->next, n, memory_order_release);
		wait_turn(l, n);
	} else {
		atomic_store_explicit(&n->shuffler, 1, memory_order_relaxed);
	}
	take_as_head(l, n);
	pass_head(l, n);
	ls_qnode_put(n);
}

static int acquire(void *state)
{
	struct shfl *l = state;
	if (!steal(l))
		queue(l);
	return 0;
}

static int tryacquire(void *state)
{
	return steal(state) ? 0 : EBUSY;
}

static void release(void *state)
{
	struct shfl *l = state;
	struct ls_qnode *sleeper = l->sleeping_head;
	if (sleeper) /* no store on the uncontended path */
		l->sleeping_head = NULL;
	/* Release: hands the critical section's writes to the next taker. NO_STEAL stays (the head's). */
	if (atomic_fetch_and_explicit(&l->word, ~(LOCKED | PARKED), memory_order_release) & PARKED)
		ls_unpark_head(sleeper, &l->word);
}

const struct ls_ops ls_shfl_ops = { "shfl", sizeof(struct shfl), init, acquire, tryacquire, release, ls_nothing };
