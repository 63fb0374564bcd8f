/*
 * lockbench: fixed-duration lock benchmark (issue 9). THREADS threads take the lock for DURATION seconds, each
 * round a critical section of CS loop iterations on shared data, then NCS iterations of private work; optional
 * CORUNNERS processes spin on the CPUs to preempt holders and waiters as a host preempts vCPUs. Output: total
 * operations, throughput, Jain's fairness index over the threads' counts, acquire latency p50/p99/p99.9 (sampled
 * every 16th acquisition), per-thread counts; --json prints one object.
 *
 *   lockbench --lock NAME --threads N --duration SECONDS [--cs N] [--ncs N] [--corunners N] [--json]
 *   lockbench --list
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lockstep_locks.h"

/* Acquire latencies kept per thread (every SAMPLE_EVERY-th acquisition). */
#define SAMPLES 65536
#define SAMPLE_EVERY 16

struct worker {
	pthread_t thread;
	long ops;
	long nsamples;
	unsigned long *samples;
};

static ls_lock *lock;
static long cs_iters, ncs_iters;
static atomic_int stop;
static pthread_barrier_t start;
static volatile unsigned long shared_data[8];

static unsigned long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long)ts.tv_sec * 1000000000ul + (unsigned long)ts.tv_nsec;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	unsigned long private = 0;
	pthread_barrier_wait(&start);
	/* Relaxed: the flag only ends the loop; nothing is published through it. */
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int sample = w->ops % SAMPLE_EVERY == 0 && w->nsamples < SAMPLES;
		unsigned long t0 = sample ? now_ns() : 0;
		ls_lock_acquire(lock);
		if (sample)
			w->samples[w->nsamples++] = now_ns() - t0;
		for (long i = 0; i < cs_iters; i++)
			shared_data[i % 8]++;
		ls_lock_release(lock);
		for (long i = 0; i < ncs_iters; i++)
			private = private * 31 + (unsigned long)i;
		w->ops++;
	}
	shared_data[0] += private == 42; /* keeps the private work from being optimised away */
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return (x > y) - (x < y);
}

static void usage(const char *why)
{
	fprintf(stderr, "lockbench: %s (usage: lockbench --lock NAME --threads N --duration SECONDS [--cs N] [--ncs N] "
			"[--corunners N] [--json] | --list)\n", why);
	exit(2);
}

static long number(const char *flag, const char *text, long min)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || *end || v < min) {
		char why[128];
		snprintf(why, sizeof why, "bad %s %s (expected an integer of at least %ld)", flag, text, min);
		usage(why);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "lock", required_argument, 0, 'l' },    { "threads", required_argument, 0, 't' },
		{ "duration", required_argument, 0, 'd' }, { "cs", required_argument, 0, 'c' },
		{ "ncs", required_argument, 0, 'n' },      { "corunners", required_argument, 0, 'r' },
		{ "json", no_argument, 0, 'j' },           { "list", no_argument, 0, 'L' },
		{ 0, 0, 0, 0 },
	};
	const char *name = NULL;
	long threads = 0, corunners = 0;
	double duration = 0;
	int json = 0, c;
	cs_iters = 100;
	ncs_iters = 100;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'l': name = optarg; break;
		case 't': threads = number("--threads", optarg, 1); break;
		case 'd': {
			char *end;
			duration = strtod(optarg, &end);
			if (*end || !(duration > 0) || duration > 3600)
				usage("bad --duration (expected seconds, more than 0, at most 3600)");
			break;
		}
		case 'c': cs_iters = number("--cs", optarg, 0); break;
		case 'n': ncs_iters = number("--ncs", optarg, 0); break;
		case 'r': corunners = number("--corunners", optarg, 0); break;
		case 'j': json = 1; break;
		case 'L':
			for (const char *const *n = ls_lock_names(); *n; n++)
				puts(*n);
			return 0;
		default: usage("unknown option");
		}
	}
	if (optind < argc)
		usage("unexpected argument");
	if (!name || !threads || duration == 0)
		usage("--lock, --threads and --duration are required");
	if (threads > 4096)
		usage("bad --threads (at most 4096)");
	lock = ls_lock_create(name);
	if (!lock) {
		char why[160];
		snprintf(why, sizeof why, "unknown lock %s (lockbench --list names them)", name);
		usage(why);
	}
	pid_t *co = calloc((size_t)corunners + 1, sizeof *co);
	for (long i = 0; i < corunners; i++) {
		co[i] = fork();
		if (co[i] == 0) {
			for (volatile unsigned long x = 0;; x++)
				;
		}
	}
	struct worker *w = calloc((size_t)threads, sizeof *w);
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (long i = 0; i < threads; i++) {
		w[i].samples = malloc(SAMPLES * sizeof *w[i].samples);
		pthread_create(&w[i].thread, NULL, run, &w[i]);
	}
	pthread_barrier_wait(&start);
	unsigned long t0 = now_ns();
	struct timespec d = { (time_t)duration, (long)((duration - (double)(time_t)duration) * 1e9) };
	nanosleep(&d, NULL);
	atomic_store_explicit(&stop, 1, memory_order_relaxed);
	for (long i = 0; i < threads; i++)
		pthread_join(w[i].thread, NULL);
	double elapsed = (double)(now_ns() - t0) / 1e9;
	for (long i = 0; i < corunners; i++) {
		kill(co[i], SIGKILL);
		waitpid(co[i], NULL, 0);
	}
	long ops = 0, n = 0;
	double sum = 0, sumsq = 0;
	for (long i = 0; i < threads; i++) {
		ops += w[i].ops;
		n += w[i].nsamples;
		sum += (double)w[i].ops;
		sumsq += (double)w[i].ops * (double)w[i].ops;
	}
	unsigned long *all = malloc((size_t)(n ? n : 1) * sizeof *all);
	for (long i = 0, k = 0; i < threads; i++)
		for (long s = 0; s < w[i].nsamples; s++)
			all[k++] = w[i].samples[s];
	qsort(all, (size_t)n, sizeof *all, cmp);
#define PCT(p) (n ? all[(long)((double)(n - 1) * (p))] : 0)
	double jain = sumsq > 0 ? sum * sum / ((double)threads * sumsq) : 0;
	if (json) {
		printf("{\"lock\":\"%s\",\"threads\":%ld,\"duration_s\":%.3f,\"cs\":%ld,\"ncs\":%ld,\"corunners\":%ld,"
		       "\"ops\":%ld,\"throughput_ops_s\":%.1f,\"fairness_jain\":%.4f,\"p50_ns\":%lu,\"p99_ns\":%lu,"
		       "\"p999_ns\":%lu,\"per_thread\":[",
		       name, threads, elapsed, cs_iters, ncs_iters, corunners, ops, (double)ops / elapsed, jain,
		       PCT(0.5), PCT(0.99), PCT(0.999));
		for (long i = 0; i < threads; i++)
			printf("%s%ld", i ? "," : "", w[i].ops);
		printf("]}\n");
	} else {
		printf("lock %s, %ld threads, %.2f s, cs %ld, ncs %ld, corunners %ld\n", name, threads, elapsed, cs_iters,
		       ncs_iters, corunners);
		printf("  ops %ld  throughput %.0f ops/s  fairness (Jain) %.3f\n", ops, (double)ops / elapsed, jain);
		printf("  acquire latency p50 %lu ns  p99 %lu ns  p99.9 %lu ns\n", PCT(0.5), PCT(0.99), PCT(0.999));
	}
	return 0;
}
