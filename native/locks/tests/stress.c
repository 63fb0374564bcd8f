/*
 * stress: mutual exclusion of one lock under contention. THREADS threads take the lock for SECONDS seconds (every
 * eighth time through tryacquire, retried until it succeeds); inside, a plain shared counter is incremented, two
 * plain variables are moved apart and back with the invariant a == b checked on entry, and hand-overs between
 * threads are counted. Exit 0 when the counter equals the sum of the threads' own counts, the invariant always
 * held and (with several threads) the lock changed hands at least 100 times; 1 otherwise; 2 on bad arguments.
 * BLOCK makes the holder leave its CPU inside the critical section, between the two moves: `yield` (sched_yield)
 * or `sleep` (nanosleep of 20 µs), as holders that wait for I/O or sleep do; then 2 hand-overs are enough (a
 * barging lock keeps a yielding holder's lock for long runs).
 * The hand-overs show that the threads contended, which is the test's premise, not a property of the lock: on a
 * loaded machine a barging lock changes hands seldom (its other takers are preempted), so the run goes on past
 * SECONDS, in steps of 10 ms, until the hand-overs are there or ten times SECONDS have passed.
 *
 *   stress LOCK THREADS SECONDS [yield|sleep]
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "lockstep_locks.h"

static ls_lock *lock;
static atomic_int stop;
static long counter, handovers;
/* `handovers` as the main thread may read it while the workers run (they write both inside the lock). */
static atomic_long handovers_seen;
static volatile long a, b;
static long last = -1;
static int broken;
static pthread_barrier_t start;
/* BLOCK: 0 none, 1 yield, 2 sleep. */
static int block;

struct worker {
	pthread_t thread;
	long id, ops;
};

static void *run(void *arg)
{
	struct worker *w = arg;
	/* Everyone starts together, so that the threads really contend. */
	pthread_barrier_wait(&start);
	/* Relaxed: the flag only ends the loop; the counts are read after join. */
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (w->ops % 8 == 7) {
			while (ls_lock_tryacquire(lock) != 0)
				sched_yield();
		} else {
			ls_lock_acquire(lock);
		}
		if (a != b)
			broken = 1;
		a = a + 1;
		if (block == 1)
			sched_yield();
		else if (block == 2)
			nanosleep(&(struct timespec){ .tv_nsec = 20000 }, NULL);
		counter++;
		if (last != w->id)
			/* Relaxed: a count for the main thread's loop; the exact one is `handovers`, read after join. */
			atomic_store_explicit(&handovers_seen, ++handovers, memory_order_relaxed);
		last = w->id;
		b = b + 1;
		ls_lock_release(lock);
		w->ops++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: stress LOCK THREADS SECONDS [yield|sleep]\n");
		return 2;
	}
	if (argc == 5) {
		block = strcmp(argv[4], "yield") == 0 ? 1 : strcmp(argv[4], "sleep") == 0 ? 2 : -1;
		if (block < 0) {
			fprintf(stderr, "stress: bad BLOCK %s (expected yield or sleep)\n", argv[4]);
			return 2;
		}
	}
	long threads_arg = 0;
	double seconds = 0;
	if (cli_long(argv[2], 1, 1024, &threads_arg) != 0 || cli_double(argv[3], 0, 600, &seconds) != 0 ||
	    !(seconds > 0)) {
		fprintf(stderr, "stress: bad THREADS %s or SECONDS %s (expected 1-1024 and more than 0, at most 600)\n",
			argv[2], argv[3]);
		return 2;
	}
	int threads = (int)threads_arg;
	lock = ls_lock_create(argv[1]);
	if (!lock) {
		fprintf(stderr, "stress: cannot create lock %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	struct worker *w = calloc((size_t)threads, sizeof *w);
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++) {
		w[i].id = i;
		pthread_create(&w[i].thread, NULL, run, &w[i]);
	}
	pthread_barrier_wait(&start);
	long needed = threads == 1 ? 0 : block ? 2 : 100;
	struct timespec d = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
	nanosleep(&d, NULL);
	double ran = seconds;
	for (long steps = (long)(seconds * 900); steps > 0; steps--) {
		if (atomic_load_explicit(&handovers_seen, memory_order_relaxed) >= needed)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
		ran += 0.01;
	}
	atomic_store_explicit(&stop, 1, memory_order_relaxed);
	long want = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(w[i].thread, NULL);
		want += w[i].ops;
	}
	/* A barging lock (ttas, pthread) whose holder yields keeps the lock for long runs: with BLOCK, a few hand-overs
	 * show that threads contended. */
	int contended = handovers >= needed;
	int ok = counter == want && !broken && contended && ls_lock_tryacquire(lock) == 0;
	printf("%s: %d threads, %.1f s: counter %ld (want %ld), invariant %s, %ld hand-overs between threads\n", argv[1],
	       threads, ran, counter, want, broken ? "BROKEN" : "held", handovers);
	ls_lock_release(lock);
	ls_lock_destroy(lock);
	pthread_barrier_destroy(&start);
	free(w);
	return ok ? 0 : 1;
}
