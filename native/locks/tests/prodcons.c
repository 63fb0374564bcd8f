/*
 * prodcons: an ordinary pthread program for the interposer tests (it knows nothing of lockstep). PRODUCERS
 * threads put ITEMS numbers each into a bounded ring guarded by a statically initialised mutex, with two condition
 * variables (one with CLOCK_MONOTONIC attributes, waited on with a timeout); CONSUMERS threads take them out. A
 * recursive mutex is taken twice per item and an error-checking one once (kinds the interposer leaves to glibc),
 * and pthread_mutex_timedlock must time out on a held mutex. Prints "OK" and exits 0 when every item arrived
 * exactly once; exits 1 otherwise.
 *
 *   prodcons [PRODUCERS CONSUMERS ITEMS]      (default 3 3 200000)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"

#define RING 16

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full;
static pthread_mutex_t recursive, errorcheck;
static long ring[RING];
static int head, count, producers_left;
static long items, consumed, sum, stats;

static void *produce(void *arg)
{
	long base = (long)arg * items;
	for (long i = 1; i <= items; i++) {
		pthread_mutex_lock(&mutex);
		while (count == RING) {
			struct timespec deadline;
			clock_gettime(CLOCK_MONOTONIC, &deadline);
			deadline.tv_nsec += 1000000;
			if (deadline.tv_nsec >= 1000000000) {
				deadline.tv_sec++;
				deadline.tv_nsec -= 1000000000;
			}
			int r = pthread_cond_timedwait(&not_full, &mutex, &deadline);
			if (r != 0 && r != ETIMEDOUT) {
				fprintf(stderr, "prodcons: pthread_cond_timedwait: error %d\n", r);
				exit(1);
			}
		}
		ring[(head + count++) % RING] = base + i;
		pthread_cond_signal(&not_empty);
		pthread_mutex_unlock(&mutex);
	}
	pthread_mutex_lock(&mutex);
	producers_left--;
	pthread_cond_broadcast(&not_empty);
	pthread_mutex_unlock(&mutex);
	return NULL;
}

static void *consume(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&mutex);
		while (count == 0 && producers_left > 0)
			pthread_cond_wait(&not_empty, &mutex);
		if (count == 0) {
			pthread_mutex_unlock(&mutex);
			return NULL;
		}
		long v = ring[head];
		head = (head + 1) % RING;
		count--;
		consumed++;
		sum += v;
		pthread_cond_signal(&not_full);
		pthread_mutex_unlock(&mutex);
		pthread_mutex_lock(&recursive);
		pthread_mutex_lock(&recursive);
		if (pthread_mutex_lock(&errorcheck) != 0 || pthread_mutex_lock(&errorcheck) != EDEADLK) {
			fprintf(stderr, "prodcons: the error-checking mutex did not report a relock\n");
			exit(1);
		}
		stats++;
		pthread_mutex_unlock(&errorcheck);
		pthread_mutex_unlock(&recursive);
		pthread_mutex_unlock(&recursive);
	}
}

int main(int argc, char **argv)
{
	int producers = 3, consumers = 3;
	items = 200000;
	if (argc != 1 && argc != 4) {
		fprintf(stderr, "usage: prodcons [PRODUCERS CONSUMERS ITEMS]\n");
		return 2;
	}
	long p = producers, c = consumers;
	if (argc == 4 && (cli_long(argv[1], 1, 64, &p) != 0 || cli_long(argv[2], 1, 64, &c) != 0 ||
			  cli_long(argv[3], 1, 10000000, &items) != 0)) {
		fprintf(stderr, "prodcons: bad arguments (expected 1-64 producers, 1-64 consumers, 1 to 10^7 items)\n");
		return 2;
	}
	producers = (int)p;
	consumers = (int)c;
	pthread_condattr_t cattr;
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&not_full, &cattr);
	pthread_mutexattr_t mattr;
	pthread_mutexattr_init(&mattr);
	pthread_mutexattr_settype(&mattr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&recursive, &mattr);
	pthread_mutexattr_settype(&mattr, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&errorcheck, &mattr);

	/* A timed lock of a held mutex times out. */
	pthread_mutex_t held;
	pthread_mutex_init(&held, NULL);
	pthread_mutex_lock(&held);
	struct timespec soon;
	clock_gettime(CLOCK_REALTIME, &soon);
	soon.tv_nsec += 20000000;
	if (soon.tv_nsec >= 1000000000) {
		soon.tv_sec++;
		soon.tv_nsec -= 1000000000;
	}
	int timed = pthread_mutex_timedlock(&held, &soon);
	pthread_mutex_unlock(&held);
	pthread_mutex_destroy(&held);

	producers_left = producers;
	pthread_t t[128];
	for (long i = 0; i < producers; i++)
		pthread_create(&t[i], NULL, produce, (void *)i);
	for (int i = 0; i < consumers; i++)
		pthread_create(&t[producers + i], NULL, consume, NULL);
	for (int i = 0; i < producers + consumers; i++)
		pthread_join(t[i], NULL);
	long n = (long)producers * items;
	long want = n * (n + 1) / 2;
	int ok = consumed == n && sum == want && stats == n && timed == ETIMEDOUT;
	printf("prodcons: %d producers, %d consumers: %ld items (want %ld), sum %ld (want %ld), timed lock %s: %s\n",
	       producers, consumers, consumed, n, sum, want, timed == ETIMEDOUT ? "timed out" : "DID NOT time out",
	       ok ? "OK" : "FAILED");
	return ok ? 0 : 1;
}
