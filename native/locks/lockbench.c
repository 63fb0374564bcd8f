/*
 * lockbench: fixed-duration lock benchmark (docs/locks.md). THREADS threads run one workload for DURATION seconds:
 *
 *   counter      take the lock, a critical section of CS loop iterations and CS_LINES cache lines written on
 *                shared data (and, with --cs-block, a step that takes the holder off its CPU), release, then NCS
 *                iterations of private work (latency: the acquisition)
 *   rename       FxMark's MWRL: each thread renames its own file back and forth inside one shared directory on
 *                tmpfs, so that the kernel's directory lock is what is measured (no user-space lock; latency: the
 *                rename)
 *   rename-user  its user-space twin: the same renames in an in-memory directory (a hash table of names) guarded
 *                by the chosen lock (latency: the rename)
 *
 * Optional CORUNNERS processes spin on the CPUs to preempt holders and waiters as a host preempts vCPUs; a NUMA map
 * (--numa-map, or LOCKSTEP_NUMA_MAP) emulates NUMA nodes for cna, cna-pt and shfl. Output: operations, throughput,
 * Jain's fairness index over the threads' counts, latency p50/p99/p99.9 (every 16th operation), per-thread counts;
 * on a machine with several real NUMA nodes, `counter` also counts the hand-overs between threads and how many
 * stayed on one node (getcpu inside the critical section: the order a NUMA-aware lock achieves, where the cost of
 * remote memory cannot be measured, as in a VM); --json prints one object.
 *
 *   lockbench --lock NAME --threads N --duration SECONDS [--cs N] [--cs-lines N] [--ncs N] [--corunners N]
 *             [--cs-block yield|sleep:MICROSECONDS|write|fault] [--workload counter|rename|rename-user]
 *             [--numa-map MAP] [--dir DIR] [--json]
 *
 * --cs-block: inside every critical section the holder yields its CPU (sched_yield), sleeps (nanosleep), writes
 * 4 KiB to a file (pwrite to an unlinked file under $TMPDIR or /tmp) or touches a fresh page (madvise DONTNEED, then
 * a write: a page fault) — what real holders do when they wait for I/O, sleep or fault.
 *   lockbench --list
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/magic.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lockstep_locks.h"

/* Latencies kept per thread (every SAMPLE_EVERY-th operation). */
#define SAMPLES 65536
#define SAMPLE_EVERY 16
/* Most cache lines a critical section may touch. */
#define MAX_LINES 4096
/* Buckets of the in-memory directory, and the other names it holds (a directory is rarely empty). */
#define BUCKETS 1024
#define BYSTANDERS 4096

struct worker {
	pthread_t thread;
	long id, ops, nsamples;
	unsigned long *samples;
	/* rename-user: this thread's entry; rename: which of its two names the file has now. */
	struct entry *entry;
	int flip;
};

/* A name in the in-memory directory. */
struct entry {
	struct entry *next;
	char name[32];
};

static ls_lock *lock;
static long cs_iters, cs_lines, ncs_iters;
static atomic_int stop;
static pthread_barrier_t start;
static volatile unsigned long shared_data[MAX_LINES * 8] __attribute__((aligned(64)));
/* counter on several real NUMA nodes: hand-overs between threads and those on one node, under the lock. */
static int track_nodes;
static long handovers, local_handovers, last_holder = -1;
static unsigned last_node;
static int dir_fd = -1;
/* --cs-block: what the holder does inside the critical section to leave its CPU. */
static enum { BLOCK_NONE, BLOCK_YIELD, BLOCK_SLEEP, BLOCK_WRITE, BLOCK_FAULT } cs_block;
static const char *cs_block_name = "none";
static struct timespec block_sleep;
static int block_fd = -1;
/* The page BLOCK_WRITE writes and BLOCK_FAULT drops and touches again. */
static char *block_page;
static long page_size;
static struct entry *buckets[BUCKETS];

static unsigned long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long)ts.tv_sec * 1000000000ul + (unsigned long)ts.tv_nsec;
}

/* The holder's step off its CPU (--cs-block). */
static void block_in_cs(void)
{
	switch (cs_block) {
	case BLOCK_NONE: break;
	case BLOCK_YIELD: sched_yield(); break;
	case BLOCK_SLEEP: nanosleep(&block_sleep, NULL); break;
	case BLOCK_WRITE:
		if (pwrite(block_fd, block_page, (size_t)page_size, 0) < 0) {
			perror("lockbench: --cs-block write");
			exit(1);
		}
		break;
	case BLOCK_FAULT:
		madvise(block_page, (size_t)page_size, MADV_DONTNEED);
		block_page[0]++;
		break;
	}
}

static void counter_op(struct worker *w, int sample)
{
	unsigned long t0 = sample ? now_ns() : 0;
	ls_lock_acquire(lock);
	if (sample)
		w->samples[w->nsamples++] = now_ns() - t0;
	for (long i = 0; i < cs_iters; i++)
		shared_data[i % 8]++;
	for (long i = 0; i < cs_lines; i++)
		shared_data[i * 8]++;
	if (track_nodes) {
		unsigned cpu, node;
		getcpu(&cpu, &node);
		if (last_holder >= 0 && last_holder != w->id) {
			handovers++;
			local_handovers += node == last_node;
		}
		last_holder = w->id;
		last_node = node;
	}
	block_in_cs();
	ls_lock_release(lock);
}

/* The file name of thread `id` with its flip `f`. */
static void file_name(char *out, size_t size, long id, int f)
{
	snprintf(out, size, "lockbench-%ld.%c", id, f ? 'b' : 'a');
}

static void rename_op(struct worker *w, int sample)
{
	char from[48], to[48];
	file_name(from, sizeof from, w->id, w->flip);
	file_name(to, sizeof to, w->id, !w->flip);
	unsigned long t0 = sample ? now_ns() : 0;
	if (renameat(dir_fd, from, dir_fd, to) != 0) {
		perror("lockbench: rename");
		exit(1);
	}
	if (sample)
		w->samples[w->nsamples++] = now_ns() - t0;
	w->flip = !w->flip;
}

static unsigned bucket_of(const char *name)
{
	unsigned h = 2166136261u; /* FNV-1a */
	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h % BUCKETS;
}

static void dir_insert(struct entry *e)
{
	unsigned b = bucket_of(e->name);
	e->next = buckets[b];
	buckets[b] = e;
}

static void rename_user_op(struct worker *w, int sample)
{
	struct entry *e = w->entry;
	char to[32];
	file_name(to, sizeof to, w->id, !w->flip);
	unsigned long t0 = sample ? now_ns() : 0;
	ls_lock_acquire(lock);
	/* Look the old name up as a directory would, unlink it, rename, link the new name. */
	struct entry **p = &buckets[bucket_of(e->name)];
	while (*p && strcmp((*p)->name, e->name) != 0)
		p = &(*p)->next;
	if (*p != e) {
		fprintf(stderr, "lockbench: %s vanished from the in-memory directory\n", e->name);
		exit(1);
	}
	*p = e->next;
	memcpy(e->name, to, sizeof to);
	dir_insert(e);
	ls_lock_release(lock);
	if (sample)
		w->samples[w->nsamples++] = now_ns() - t0;
	w->flip = !w->flip;
}

static void (*op)(struct worker *, int);

static void *run(void *arg)
{
	struct worker *w = arg;
	unsigned long private = 0;
	pthread_barrier_wait(&start);
	/* Relaxed: the flag only ends the loop; nothing is published through it. */
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		op(w, w->ops % SAMPLE_EVERY == 0 && w->nsamples < SAMPLES);
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

/* The usage lockbench --help prints. */
static const char help[] =
	"lockbench: fixed-duration lock benchmark (docs/locks.md)\n"
	"\n"
	"Usage: lockbench --lock NAME --threads N --duration SECONDS [OPTIONS]\n"
	"       lockbench --workload rename --threads N --duration SECONDS [--dir DIR] [OPTIONS]\n"
	"       lockbench --list\n"
	"\n"
	"Options:\n"
	"  --lock NAME           the lock (lockbench --list names them)\n"
	"  --threads N           threads taking it (1 to 4096)\n"
	"  --duration SECONDS    how long they run (more than 0, at most 3600)\n"
	"  --workload KIND       counter (default), rename (the kernel's directory lock), rename-user\n"
	"  --cs N                loop iterations inside each critical section (default 100)\n"
	"  --cs-lines N          shared cache lines written inside it\n"
	"  --ncs N               loop iterations of private work between critical sections (default 100)\n"
	"  --cs-block HOW        the holder leaves its CPU inside: yield, sleep:MICROSECONDS, write or fault\n"
	"  --corunners N         processes spinning on the CPUs, preempting holders and waiters\n"
	"  --numa-map MAP        emulated NUMA nodes for cna, cna-pt and shfl: NODE:CPULIST pairs, e.g. 0:0-3;1:4-7\n"
	"  --dir DIR             rename's shared directory (default: a new one under /dev/shm)\n"
	"  --json                one JSON object instead of the table\n"
	"  --list                print the locks and exit\n"
	"  -h, --help            print this help and exit\n"
	"\n"
	"Example: lockbench --lock mcs --threads 4 --duration 2 --corunners 2\n";

/* Says what was wrong with the command line, on one line, and exits 2. */
static void __attribute__((noreturn)) usage(const char *why)
{
	fprintf(stderr, "lockbench: %s (see lockbench --help)\n", why);
	exit(2);
}

static long number(const char *flag, const char *text, long min, long max)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || *end || end == text || v < min || v > max) {
		char why[160];
		snprintf(why, sizeof why, "bad %s %s (expected an integer from %ld to %ld)", flag, text, min, max);
		usage(why);
	}
	return v;
}

/* rename: the shared directory (DIR, or a new one under /dev/shm, named in `made`) with one file per thread. */
static void rename_setup(const char *dir, char *made, size_t size, long threads, int *tmpfs)
{
	if (!dir) {
		snprintf(made, size, "/dev/shm/lockbench.XXXXXX");
		if (!mkdtemp(made)) {
			fprintf(stderr, "lockbench: cannot create a directory under /dev/shm: %s\n", strerror(errno));
			exit(1);
		}
		dir = made;
	}
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY);
	if (dir_fd < 0) {
		char why[320];
		snprintf(why, sizeof why, "bad --dir %s (%s; expected a directory, on tmpfs)", dir, strerror(errno));
		usage(why);
	}
	struct statfs fs;
	*tmpfs = fstatfs(dir_fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
	for (long i = 0; i < threads; i++) {
		char name[48];
		file_name(name, sizeof name, i, 0);
		int fd = openat(dir_fd, name, O_CREAT | O_WRONLY | O_TRUNC, 0600);
		if (fd < 0) {
			fprintf(stderr, "lockbench: cannot create %s/%s: %s\n", dir, name, strerror(errno));
			exit(1);
		}
		close(fd);
	}
}

/* rename: removes the threads' files, and the directory if lockbench created it. */
static void rename_cleanup(struct worker *w, long threads, const char *made)
{
	for (long i = 0; i < threads; i++) {
		char name[48];
		file_name(name, sizeof name, i, w[i].flip);
		unlinkat(dir_fd, name, 0);
	}
	close(dir_fd);
	if (*made)
		rmdir(made);
}

/* Parses --cs-block's value and prepares what the step needs; a bad value is a usage error. */
static void block_setup(const char *text)
{
	cs_block_name = text;
	page_size = sysconf(_SC_PAGESIZE);
	if (strcmp(text, "none") == 0) {
		cs_block = BLOCK_NONE;
	} else if (strcmp(text, "yield") == 0) {
		cs_block = BLOCK_YIELD;
	} else if (strncmp(text, "sleep:", 6) == 0) {
		long us = number("--cs-block sleep:", text + 6, 1, 1000000);
		cs_block = BLOCK_SLEEP;
		block_sleep = (struct timespec){ .tv_sec = us / 1000000, .tv_nsec = us % 1000000 * 1000 };
	} else if (strcmp(text, "write") == 0 || strcmp(text, "fault") == 0) {
		cs_block = text[0] == 'w' ? BLOCK_WRITE : BLOCK_FAULT;
		block_page = mmap(NULL, (size_t)page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (block_page == MAP_FAILED) {
			perror("lockbench: mmap");
			exit(1);
		}
		if (cs_block == BLOCK_WRITE) {
			const char *tmp = getenv("TMPDIR");
			char path[4096];
			snprintf(path, sizeof path, "%s/lockbench-write.XXXXXX", tmp && *tmp ? tmp : "/tmp");
			block_fd = mkstemp(path);
			if (block_fd < 0) {
				fprintf(stderr, "lockbench: cannot create %s: %s\n", path, strerror(errno));
				exit(1);
			}
			unlink(path);
		}
	} else {
		usage("bad --cs-block (expected yield, sleep:MICROSECONDS, write or fault)");
	}
}

/* What the command line asks for (the workload's parameters are globals, read by the threads). */
struct config {
	const char *name, *workload, *dir;
	long threads, corunners;
	double duration;
	int json;
	/* --workload rename: the kernel's directory lock, no lock of ours. */
	int kernel;
};

/* Whether the NUMA map came from --numa-map (its errors then name the flag, not the environment variable). */
static int numa_flag;

/* The locks' configuration error, naming --numa-map where the map came from it. */
static const char *config_error(void)
{
	static char said[320];
	const char *e = ls_lock_config_error();
	const char *var = strstr(e, "LOCKSTEP_NUMA_MAP");
	if (!numa_flag || !var)
		return e;
	snprintf(said, sizeof said, "%.*s--numa-map%s", (int)(var - e), e, var + strlen("LOCKSTEP_NUMA_MAP"));
	return said;
}

/* Parses the command line into `cfg` and the workload globals; --list prints the locks and exits. */
static void parse_args(int argc, char **argv, struct config *cfg)
{
	static const struct option opts[] = {
		{ "lock", required_argument, 0, 'l' },     { "threads", required_argument, 0, 't' },
		{ "duration", required_argument, 0, 'd' }, { "cs", required_argument, 0, 'c' },
		{ "cs-lines", required_argument, 0, 'C' }, { "ncs", required_argument, 0, 'n' },
		{ "corunners", required_argument, 0, 'r' }, { "workload", required_argument, 0, 'w' },
		{ "numa-map", required_argument, 0, 'm' }, { "dir", required_argument, 0, 'D' },
		{ "json", no_argument, 0, 'j' },           { "list", no_argument, 0, 'L' },
		{ "cs-block", required_argument, 0, 'b' }, { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;
	*cfg = (struct config){ .workload = "counter" };
	cs_iters = 100;
	ncs_iters = 100;
	opterr = 0; /* getopt's own messages would be a second line; usage() says it */
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'l': cfg->name = optarg; break;
		case 't': cfg->threads = number("--threads", optarg, 1, 4096); break;
		case 'd': {
			char *end;
			cfg->duration = strtod(optarg, &end);
			if (*end || !(cfg->duration > 0) || cfg->duration > 3600)
				usage("bad --duration (expected seconds, more than 0, at most 3600)");
			break;
		}
		case 'c': cs_iters = number("--cs", optarg, 0, 1000000000); break;
		case 'C': cs_lines = number("--cs-lines", optarg, 0, MAX_LINES); break;
		case 'n': ncs_iters = number("--ncs", optarg, 0, 1000000000); break;
		case 'r': cfg->corunners = number("--corunners", optarg, 0, 1024); break;
		case 'w': cfg->workload = optarg; break;
		case 'm':
			setenv("LOCKSTEP_NUMA_MAP", optarg, 1);
			numa_flag = 1;
			break;
		case 'D': cfg->dir = optarg; break;
		case 'b': block_setup(optarg); break;
		case 'j': cfg->json = 1; break;
		case 'L':
			for (const char *const *n = ls_lock_names(); *n; n++)
				puts(*n);
			exit(0);
		case 'h': fputs(help, stdout); exit(0);
		case ':': {
			char why[160];
			snprintf(why, sizeof why, "%.100s needs a value", argv[optind - 1]);
			usage(why);
		}
		default: {
			char why[160];
			if (optopt)
				snprintf(why, sizeof why, "unknown option -%c", optopt);
			else
				snprintf(why, sizeof why, "unknown option %.100s", argv[optind - 1]);
			usage(why);
		}
		}
	}
	if (optind < argc) {
		char why[160];
		snprintf(why, sizeof why, "unexpected argument %.100s", argv[optind]);
		usage(why);
	}
}

/* Checks the options against each other and sets the workload's operation and lock. */
static void choose_workload(struct config *cfg)
{
	cfg->kernel = strcmp(cfg->workload, "rename") == 0;
	if (cfg->kernel)
		op = rename_op;
	else if (strcmp(cfg->workload, "rename-user") == 0)
		op = rename_user_op;
	else if (strcmp(cfg->workload, "counter") == 0) {
		op = counter_op;
		track_nodes = access("/sys/devices/system/node/node1", F_OK) == 0;
	}
	else
		usage("bad --workload (expected counter, rename or rename-user)");
	if (cfg->kernel && cfg->name)
		usage("--lock does not apply to --workload rename (it measures the kernel's directory lock)");
	if (!cfg->kernel && cfg->dir)
		usage("--dir applies only to --workload rename");
	if (op != counter_op && cs_block != BLOCK_NONE)
		usage("--cs-block applies only to --workload counter");
	if ((!cfg->name && !cfg->kernel) || !cfg->threads || cfg->duration == 0)
		usage("--lock (except for --workload rename), --threads and --duration are required");
	if (cfg->name) {
		lock = ls_lock_create(cfg->name);
		if (!lock) {
			char why[160];
			snprintf(why, sizeof why, "unknown lock %s (lockbench --list names them)", cfg->name);
			usage(why);
		}
		if (ls_lock_config_error())
			usage(config_error());
	}
}

/* rename-user: the user-space directory, bystander entries and one entry per thread. */
static void rename_user_setup(struct worker *w, long threads)
{
	for (long i = 0; i < BYSTANDERS; i++) {
		struct entry *e = calloc(1, sizeof *e);
		snprintf(e->name, sizeof e->name, "bystander-%ld", i);
		dir_insert(e);
	}
	for (long i = 0; i < threads; i++) {
		w[i].entry = calloc(1, sizeof *w[i].entry);
		file_name(w[i].entry->name, sizeof w[i].entry->name, i, 0);
		dir_insert(w[i].entry);
	}
}

/* Forks `n` co-runners that spin until killed (or until lockbench dies); returns their PIDs. */
static pid_t *start_corunners(long n)
{
	pid_t *co = calloc((size_t)n + 1, sizeof *co);
	for (long i = 0; i < n; i++) {
		co[i] = fork();
		if (co[i] == 0) {
			/* A co-runner dies with lockbench, and does not hold its output open. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() == 1)
				_exit(0);
			int null = open("/dev/null", O_WRONLY);
			dup2(null, 1);
			dup2(null, 2);
			for (volatile unsigned long x = 0;; x++)
				;
		}
	}
	return co;
}

/* Kills and reaps the co-runners. */
static void stop_corunners(pid_t *co, long n)
{
	for (long i = 0; i < n; i++) {
		kill(co[i], SIGKILL);
		waitpid(co[i], NULL, 0);
	}
	free(co);
}

/* Runs the threads for `duration` seconds from a common start; returns the seconds they ran. */
static double measure(struct worker *w, long threads, double duration)
{
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (long i = 0; i < threads; i++) {
		w[i].id = i;
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
	return (double)(now_ns() - t0) / 1e9;
}

/* Prints throughput, fairness and latency percentiles, as one JSON object or as text. */
static void report(const struct config *cfg, struct worker *w, double elapsed, int tmpfs)
{
	long threads = cfg->threads, ops = 0, n = 0;
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
	const char *lock_label = cfg->name ? cfg->name : "kernel";
	const char *map = getenv("LOCKSTEP_NUMA_MAP");
	const char *latency = op == counter_op ? "acquire" : "rename";
	if (cfg->json) {
		printf("{\"lock\":\"%s\",\"threads\":%ld,\"workload\":\"%s\",\"duration_s\":%.3f,\"cs\":%ld,"
		       "\"cs_lines\":%ld,\"cs_block\":\"%s\",\"ncs\":%ld,\"corunners\":%ld,\"numa_map\":\"%s\",\"ops\":%ld,"
		       "\"throughput_ops_s\":%.1f,\"fairness_jain\":%.4f,\"latency\":\"%s\",\"p50_ns\":%lu,"
		       "\"p99_ns\":%lu,\"p999_ns\":%lu,",
		       lock_label, threads, cfg->workload, elapsed, cs_iters, cs_lines, cs_block_name, ncs_iters,
		       cfg->corunners, map ? map : "", ops, (double)ops / elapsed, jain, latency, PCT(0.5), PCT(0.99), PCT(0.999));
		if (cfg->kernel)
			printf("\"tmpfs\":%s,", tmpfs ? "true" : "false");
		if (track_nodes)
			printf("\"handovers\":%ld,\"local_handovers\":%ld,", handovers, local_handovers);
		printf("\"per_thread\":[");
		for (long i = 0; i < threads; i++)
			printf("%s%ld", i ? "," : "", w[i].ops);
		printf("]}\n");
	} else {
		printf("%s, lock %s, %ld threads, %.2f s, cs %ld (+%ld lines%s%s), ncs %ld, corunners %ld%s%s\n",
		       cfg->workload, lock_label, threads, elapsed, cs_iters, cs_lines,
		       cs_block == BLOCK_NONE ? "" : ", block ", cs_block == BLOCK_NONE ? "" : cs_block_name, ncs_iters,
		       cfg->corunners, map ? ", numa map " : "", map ? map : "");
		printf("  ops %ld  throughput %.0f ops/s  fairness (Jain) %.3f\n", ops, (double)ops / elapsed, jain);
		printf("  %s latency p50 %lu ns  p99 %lu ns  p99.9 %lu ns\n", latency, PCT(0.5), PCT(0.99), PCT(0.999));
		if (track_nodes)
			printf("  hand-overs between threads %ld, on one NUMA node %.1f %%\n", handovers,
			       handovers ? 100.0 * (double)local_handovers / (double)handovers : 0.0);
		if (cfg->kernel && !tmpfs)
			printf("  note: the directory is not on tmpfs; the file system's own costs are measured too\n");
	}
#undef PCT
	free(all);
}

int main(int argc, char **argv)
{
	struct config cfg;
	parse_args(argc, argv, &cfg);
	choose_workload(&cfg);
	struct worker *w = calloc((size_t)cfg.threads, sizeof *w);
	char made[64] = "";
	int tmpfs = 0;
	if (cfg.kernel)
		rename_setup(cfg.dir, made, sizeof made, cfg.threads, &tmpfs);
	if (op == rename_user_op)
		rename_user_setup(w, cfg.threads);
	pid_t *co = start_corunners(cfg.corunners);
	double elapsed = measure(w, cfg.threads, cfg.duration);
	stop_corunners(co, cfg.corunners);
	if (cfg.kernel)
		rename_cleanup(w, cfg.threads, made);
	report(&cfg, w, elapsed, tmpfs);
	return 0;
}
