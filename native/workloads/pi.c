/*
 * pi: a short, verifiable, CPU-bound parallel computation for placement demos and tests.
 *
 * Integrates 4/(1+x^2) over [0,1] with the midpoint rule, split into contiguous blocks over one thread per
 * PU the process may run on (its affinity mask, i.e. the job's cpuset), and checks the result against pi.
 * It prints the PUs it was allowed, the wall time and the result; --json prints one JSON object instead.
 * Exit status: 0 verified, 1 verification failed (or a failure of the system), 2 bad arguments (one line on
 * stderr, from launcher rank 0 only when an MPI launcher starts it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

struct block {
	long first, count; /* steps [first, first+count) */
	double h;          /* step width */
	double sum;        /* this block's partial sum */
};

static void *integrate(void *arg)
{
	struct block *b = arg;
	double sum = 0.0;
	for (long i = b->first; i < b->first + b->count; i++) {
		double x = b->h * ((double)i + 0.5);
		sum += 4.0 / (1.0 + x * x);
	}
	b->sum = sum;
	return NULL;
}

/* Writes the affinity mask as a Linux cpulist ("0-3,8") into buf. */
static void format_cpulist(const cpu_set_t *set, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int cpu = 0; cpu < CPU_SETSIZE && used < len; cpu++) {
		if (!CPU_ISSET(cpu, set))
			continue;
		int last = cpu;
		while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
			last++;
		int n = last == cpu ? snprintf(buf + used, len - used, "%s%d", used ? "," : "", cpu)
				    : snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", cpu, last);
		used += (size_t)n;
		cpu = last;
	}
}

/* Bounds: MAX_STEPS x MAX_THREADS fits a long (the blocks' bounds are steps * thread / threads); 10^14 steps, the
 * experiments' CPU hog that runs until it is stopped, is within it. MAX_THREADS keeps threads and their stacks within
 * what a node gives. */
#define MAX_STEPS 1000000000000000L
#define MAX_THREADS 1024

static const char usage[] =
	"usage: pi [--steps N] [--threads N] [--json]\n"
	"  --steps N     midpoint-rule steps, 1 to 1000000000000000 (default 200000000)\n"
	"  --threads N   threads, 1 to 1024 (default: one per CPU this process may run on)\n"
	"  --json        one JSON object instead of the table\n"
	"  -h, --help    print this help and exit\n"
	"Exit status: 0 verified, 1 verification failed (or a failure of the system), 2 bad arguments.\n";

int main(int argc, char **argv)
{
	long steps = 200000000, threads = 0;
	int json = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--steps"))
			steps = cli_option_long("pi", argc, argv, &i, 1, MAX_STEPS);
		else if (!strcmp(argv[i], "--threads"))
			threads = cli_option_long("pi", argc, argv, &i, 1, MAX_THREADS);
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			if (cli_launcher_rank() == 0)
				fputs(usage, stdout);
			return 0;
		} else
			cli_refuse("pi", "unknown argument '%.40s' (expected --steps N, --threads N, --json; see pi --help)",
				   argv[i]);
	}

	cpu_set_t allowed;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
		perror("pi: sched_getaffinity");
		return 1;
	}
	if (threads == 0)
		threads = CPU_COUNT(&allowed) < MAX_THREADS ? CPU_COUNT(&allowed) : MAX_THREADS;
	char cpus[1024];
	format_cpulist(&allowed, cpus, sizeof(cpus));

	struct block *blocks = calloc((size_t)threads, sizeof(*blocks));
	pthread_t *tids = calloc((size_t)threads, sizeof(*tids));
	if (!blocks || !tids) {
		fprintf(stderr, "pi: out of memory\n");
		return 1;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	double h = 1.0 / (double)steps;
	for (long t = 0; t < threads; t++) {
		blocks[t] = (struct block){ .first = steps * t / threads,
					    .count = steps * (t + 1) / threads - steps * t / threads,
					    .h = h };
		int err = pthread_create(&tids[t], NULL, integrate, &blocks[t]);
		if (err != 0) {
			fprintf(stderr, "pi: cannot create thread %ld of %ld: %s\n", t + 1, threads, strerror(err));
			return 1;
		}
	}
	double sum = 0.0;
	for (long t = 0; t < threads; t++) {
		pthread_join(tids[t], NULL);
		sum += blocks[t].sum;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	double pi = sum * h, error = fabs(pi - M_PI);
	/* The midpoint rule's error is O(h^2); rounding over many terms dominates beyond ~1e-12. */
	int verified = error < 1e-9;

	if (json)
		printf("{\"pi\":%.15f,\"error\":%.3e,\"steps\":%ld,\"threads\":%ld,\"cpus\":\"%s\","
		       "\"seconds\":%.6f,\"verified\":%s}\n",
		       pi, error, steps, threads, cpus, seconds, verified ? "true" : "false");
	else
		printf(" pi          = %.15f\n error       = %.3e\n steps       = %ld\n threads     = %ld\n"
		       " cpus        = %s\n time (s)    = %.6f\n Verification = %s\n",
		       pi, error, steps, threads, cpus, seconds, verified ? "SUCCESSFUL" : "UNSUCCESSFUL");
	free(blocks);
	free(tids);
	return verified ? 0 : 1;
}
