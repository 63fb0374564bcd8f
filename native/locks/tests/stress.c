/*
 * stress: mutual exclusion of one lock under contention. THREADS threads each enter the critical section ROUNDS
 * times (every eighth time through tryacquire, retried until it succeeds); inside, a plain shared counter is
 * incremented and two plain variables are moved apart and back, with the invariant a == b checked on entry.
 * Exit 0 when the counter is THREADS * ROUNDS and the invariant always held, 1 otherwise, 2 on bad arguments.
 *
 *   stress LOCK THREADS ROUNDS
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lockstep_locks.h"

static ls_lock *lock;
static long rounds;
static long counter;
static volatile long a, b;
static int broken;
static pthread_barrier_t start;

static void *worker(void *arg)
{
	(void)arg;
	/* Everyone starts together, so that the threads really contend. */
	pthread_barrier_wait(&start);
	for (long i = 0; i < rounds; i++) {
		if (i % 8 == 7) {
			while (ls_lock_tryacquire(lock) != 0)
				sched_yield();
		} else {
			ls_lock_acquire(lock);
		}
		if (a != b)
			broken = 1;
		a = a + 1;
		counter++;
		b = b + 1;
		ls_lock_release(lock);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: stress LOCK THREADS ROUNDS\n");
		return 2;
	}
	int threads = atoi(argv[2]);
	rounds = atol(argv[3]);
	if (threads < 1 || threads > 1024 || rounds < 1) {
		fprintf(stderr, "stress: bad THREADS %s or ROUNDS %s (expected 1-1024 and at least 1)\n", argv[2], argv[3]);
		return 2;
	}
	lock = ls_lock_create(argv[1]);
	if (!lock) {
		fprintf(stderr, "stress: cannot create lock %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	pthread_t *t = calloc((size_t)threads, sizeof *t);
	pthread_barrier_init(&start, NULL, (unsigned)threads);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	long want = (long)threads * rounds;
	int ok = counter == want && !broken && ls_lock_tryacquire(lock) == 0;
	printf("%s: %d threads x %ld rounds: counter %ld (want %ld), invariant %s\n", argv[1], threads, rounds,
	       counter, want, broken ? "BROKEN" : "held");
	ls_lock_release(lock);
	ls_lock_destroy(lock);
	pthread_barrier_destroy(&start);
	free(t);
	return ok ? 0 : 1;
}
