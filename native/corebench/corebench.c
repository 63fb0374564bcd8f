/*
 * corebench — a small open CPU benchmark in the shape of Geekbench 5: crypto, integer and floating-point
 * workloads, single-thread and multi-thread (one pinned thread per PU of the cpuset it runs in), a score per
 * workload (1000 = one thread of the reference machine), per category (geometric mean of its workloads) and overall
 * (weighted 5 % crypto, 65 % integer, 30 % floating point).
 *
 *   corebench [--mode single|multi|both] [--seconds S] [--json]
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "workload.h"

static const struct workload *const WORKLOADS[] = { &WL_AES_XTS, &WL_DEFLATE, &WL_SORT, &WL_HASH,
                                                    &WL_PARSE,   &WL_MATMUL,  &WL_NBODY, &WL_STENCIL };
#define NWORKLOADS (int)(sizeof WORKLOADS / sizeof WORKLOADS[0])
static const char *const CATEGORY_NAMES[NCATEGORIES] = { "crypto", "integer", "fp" };
static const double CATEGORY_WEIGHTS[NCATEGORIES] = { 0.05, 0.65, 0.30 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One thread's run of one workload. */
struct job {
    const struct workload *w;
    int cpu;
    double seconds, amount, elapsed;
    int ok;
    pthread_barrier_t *start;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(j->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    void *state = j->w->setup();
    j->w->run(state); /* warm caches and pages */
    pthread_barrier_wait(j->start);
    double t0 = now(), amount = 0.0;
    do
        amount += j->w->run(state);
    while (now() - t0 < j->seconds);
    j->elapsed = now() - t0;
    j->amount = amount;
    j->ok = j->w->check(state);
    j->w->teardown(state);
    return NULL;
}

/* Runs workload w on the given CPUs at once; returns the summed rate, or -1 when a result was wrong. */
static double measure(const struct workload *w, const int *cpus, int n, double seconds)
{
    struct job *jobs = calloc(n, sizeof *jobs);
    pthread_t *threads = calloc(n, sizeof *threads);
    if (!jobs || !threads) {
        fprintf(stderr, "corebench: out of memory for %d threads\n", n);
        exit(1);
    }
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, n);
    for (int i = 0; i < n; i++) {
        jobs[i] = (struct job){ .w = w, .cpu = cpus[i], .seconds = seconds, .start = &start };
        int err = pthread_create(&threads[i], NULL, worker, &jobs[i]);
        if (err != 0) { /* the others wait at the barrier for it: nothing to join */
            fprintf(stderr, "corebench: cannot create thread %d of %d: %s\n", i + 1, n, strerror(err));
            exit(1);
        }
    }
    double rate = 0.0;
    int ok = 1;
    for (int i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
        rate += jobs[i].amount / jobs[i].elapsed;
        ok &= jobs[i].ok;
    }
    pthread_barrier_destroy(&start);
    free(jobs), free(threads);
    return ok ? rate : -1.0;
}

/* Scores of one mode. */
struct result {
    int threads;
    double rate[NWORKLOADS], score[NWORKLOADS], category[NCATEGORIES], overall;
};

static int run_mode(const int *cpus, int n, double seconds, struct result *r)
{
    r->threads = n;
    double logsum[NCATEGORIES] = { 0 };
    int count[NCATEGORIES] = { 0 };
    for (int i = 0; i < NWORKLOADS; i++) {
        const struct workload *w = WORKLOADS[i];
        r->rate[i] = measure(w, cpus, n, seconds);
        if (r->rate[i] < 0) {
            fprintf(stderr, "corebench: workload %s computed a wrong result\n", w->name);
            return 1;
        }
        r->score[i] = 1000.0 * r->rate[i] / w->reference_rate;
        logsum[w->category] += log(r->score[i]);
        count[w->category]++;
    }
    r->overall = 0.0;
    for (int c = 0; c < NCATEGORIES; c++) {
        r->category[c] = exp(logsum[c] / count[c]);
        r->overall += CATEGORY_WEIGHTS[c] * r->category[c];
    }
    return 0;
}

/* The CPUs this process may run on, as a list and in Linux cpulist form. */
static int allowed_cpus(int *cpus, char *list, size_t cap)
{
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    int n = 0;
    size_t len = 0;
    list[0] = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        int end = c;
        while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set))
            end++;
        len += (size_t)snprintf(list + len, cap - len, len ? ",%d" : "%d", c);
        if (end > c)
            len += (size_t)snprintf(list + len, cap - len, "-%d", end);
        for (; c <= end; c++)
            cpus[n++] = c;
        c = end;
    }
    return n;
}

/* One rate and score column pair of the table; blank when the mode did not run or there is no rate. */
static void cells(int ran, double rate, double score)
{
    if (!ran) {
        printf(" %12s %7s", "-", "-");
        return;
    }
    if (isnan(rate))
        printf(" %12s", "");
    else
        printf(" %12.2f", rate);
    printf(" %7.0f", score);
}

static void print_json_mode(const char *name, const struct result *r)
{
    printf("\"%s\":{\"threads\":%d,\"workloads\":{", name, r->threads);
    for (int i = 0; i < NWORKLOADS; i++)
        printf("%s\"%s\":{\"category\":\"%s\",\"rate\":%.3f,\"unit\":\"%s\",\"score\":%.0f}", i ? "," : "",
               WORKLOADS[i]->name, CATEGORY_NAMES[WORKLOADS[i]->category], r->rate[i], WORKLOADS[i]->unit,
               r->score[i]);
    printf("}");
    for (int c = 0; c < NCATEGORIES; c++)
        printf(",\"%s\":%.0f", CATEGORY_NAMES[c], r->category[c]);
    printf(",\"overall\":%.0f}", r->overall);
}

static const char usage[] =
    "usage: corebench [--mode single|multi|both] [--seconds S] [--json]\n"
    "  --mode MODE   single (one thread), multi (one pinned thread per PU of the cpuset) or both (default)\n"
    "  --seconds S   seconds per workload, more than 0, at most 600 (default 1)\n"
    "  --json        one JSON object instead of the table\n"
    "  -h, --help    print this help and exit\n"
    "Exit status: 0 scored, 1 a workload computed a wrong result (or a failure of the system), 2 bad arguments.\n";

int main(int argc, char **argv)
{
    double seconds = 1.0;
    int single = 1, multi = 1, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
            if (cli_launcher_rank() == 0)
                fputs(usage, stdout);
            return 0;
        } else if (!strcmp(flag, "--json")) {
            json = 1;
        } else if (!strcmp(flag, "--seconds") || !strcmp(flag, "--mode")) {
            if (i + 1 >= argc)
                cli_refuse("corebench", "%s needs a value (%s)", flag,
                           flag[2] == 's' ? "seconds, more than 0, at most 600" : "single, multi or both");
            const char *v = argv[++i];
            if (flag[2] == 's') {
                if (cli_double(v, 0.0, 600.0, &seconds) != 0 || !(seconds > 0))
                    cli_refuse("corebench", "bad --seconds '%.40s' (expected seconds, more than 0, at most 600)", v);
            } else {
                single = !strcmp(v, "single") || !strcmp(v, "both");
                multi = !strcmp(v, "multi") || !strcmp(v, "both");
                if (!single && !multi)
                    cli_refuse("corebench", "unknown mode '%.40s' (expected single, multi or both)", v);
            }
        } else {
            cli_refuse("corebench", "unknown argument '%.40s' (expected --mode MODE, --seconds S, --json; see "
                       "corebench --help)", flag);
        }
    }
    static int cpus[CPU_SETSIZE];
    char list[4096];
    int n = allowed_cpus(cpus, list, sizeof list);

    struct result s = { 0 }, m = { 0 };
    if ((single && run_mode(cpus, 1, seconds, &s)) || (multi && run_mode(cpus, n, seconds, &m)))
        return 1;

    if (json) {
        printf("{\"cpus\":\"%s\",\"pus\":%d,\"seconds_per_workload\":%g", list, n, seconds);
        if (single)
            printf(","), print_json_mode("single", &s);
        if (multi)
            printf(","), print_json_mode("multi", &m);
        printf("}\n");
        return 0;
    }
    printf("corebench: %d PU(s) in this cpuset (%s), %g s per workload; 1000 = one thread of the reference machine\n\n",
           n, list, seconds);
    printf("%-10s %-8s %-16s %12s %7s %12s %7s\n", "workload", "category", "unit", "single", "score", "multi", "score");
    for (int i = 0; i < NWORKLOADS; i++) {
        const struct workload *w = WORKLOADS[i];
        printf("%-10s %-8s %-16s", w->name, CATEGORY_NAMES[w->category], w->unit);
        cells(single, s.rate[i], s.score[i]);
        cells(multi, m.rate[i], m.score[i]);
        printf("\n");
    }
    printf("\n");
    for (int c = 0; c <= NCATEGORIES; c++) {
        printf("%-36s", c < NCATEGORIES ? CATEGORY_NAMES[c] : "overall (5/65/30)");
        cells(single, NAN, c < NCATEGORIES ? s.category[c] : s.overall);
        cells(multi, NAN, c < NCATEGORIES ? m.category[c] : m.overall);
        printf("\n");
    }
    return 0;
}
