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
 *
 * --sweep ROWS runs every lock (or those --locks names) at every row of ROWS, a list of thread counts, each with
 * "+C" co-runners if given (1,2,4,8,16,16+16,32,64), in one process: for each row, --rounds rounds that each run
 * every lock once for DURATION seconds, the order rotated from round to round (so that whatever else the machine
 * does falls on every lock alike), the best run of each lock kept. It prints a Markdown table of throughput in
 * M ops/s with the ratio to pthread's (glibc's mutex) in the same row, and one of fairness (Jain); --json prints
 * one object per row and lock instead. pthread is always measured: it is what the ratios compare with.
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

#include "cli.h"
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
	"       lockbench --sweep ROWS --duration SECONDS [--locks LIST] [--rounds N] [OPTIONS]\n"
	"       lockbench --list\n"
	"\n"
	"Options:\n"
	"  --lock NAME           the lock (lockbench --list names them)\n"
	"  --threads N           threads taking it (1 to 4096)\n"
	"  --duration SECONDS    how long they run (more than 0, at most 3600)\n"
	"  --workload KIND       counter (default), rename (the kernel's directory lock), rename-user\n"
	"  --cs N                loop iterations inside each critical section (0 to 1000000000, default 100)\n"
	"  --cs-lines N          shared cache lines written inside it (0 to 4096, default 0)\n"
	"  --ncs N               loop iterations of private work between critical sections (0 to 1000000000,\n"
	"                        default 100)\n"
	"  --cs-block HOW        the holder leaves its CPU inside: yield, sleep:MICROSECONDS (1 to 1000000), write or\n"
	"                        fault\n"
	"  --corunners N         processes spinning on the CPUs, preempting holders and waiters (0 to 1024)\n"
	"  --numa-map MAP        emulated NUMA nodes for cna, cna-pt and shfl (refused with a lock that ignores it):\n"
	"                        NODE:CPULIST pairs, e.g. 0:0-3;1:4-7\n"
	"  --dir DIR             rename's shared directory (default: a new one under /dev/shm)\n"
	"  --json                one JSON object instead of the table\n"
	"  --sweep ROWS          every lock at every row of ROWS, thread counts with optional +co-runners, e.g.\n"
	"                        1,2,4,8,16,16+16,32,64: a table of M ops/s (and x pthread) and one of fairness\n"
	"                        (at most 64 rows, no empty one)\n"
	"  --locks LIST          the locks a sweep runs, e.g. pthread,cna-pt,shfl (default: every lock)\n"
	"  --rounds N            a sweep's interleaved rounds; each lock's best run counts (1 to 100, default 3)\n"
	"  --list                print the locks and exit (alone: no other option)\n"
	"  -h, --help            print this help and exit\n"
	"\n"
	"Exit status: 0 measured, 1 a failure of the system, 2 bad arguments (one line on stderr).\n"
	"Examples: lockbench --lock mcs --threads 4 --duration 2 --corunners 2\n"
	"          lockbench --sweep 1,2,4,8,16,16+16,32,64 --duration 1\n";

/* Says what was wrong with the command line, on one line (control characters escaped), and exits 2. */
static void __attribute__((noreturn, format(printf, 1, 2))) usage(const char *fmt, ...)
{
	char why[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	cli_refuse("lockbench", "%s (see lockbench --help)", why);
}

static long number(const char *flag, const char *text, long min, long max)
{
	long v;
	if (cli_long(text, min, max, &v) != 0)
		usage("bad %s '%.40s' (expected an integer from %ld to %ld)", flag, text, min, max);
	return v;
}

/* The locks that read the NUMA map (--numa-map, LOCKSTEP_NUMA_MAP); the others ignore it. */
static int numa_aware(const char *name)
{
	return strcmp(name, "cna") == 0 || strcmp(name, "cna-pt") == 0 || strcmp(name, "shfl") == 0;
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
	if (dir_fd < 0)
		usage("bad --dir '%.100s' (%s; expected a directory, on tmpfs)", dir, strerror(errno));
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
		long us = number("--cs-block sleep:MICROSECONDS", text + 6, 1, 1000000);
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
		usage("bad --cs-block '%.40s' (expected yield, sleep:MICROSECONDS, write or fault)", text);
	}
}

/* What the command line asks for (the workload's parameters are globals, read by the threads). */
struct config {
	const char *name, *workload, *dir;
	/* --sweep's rows and --locks' list (NULL: not a sweep; every lock). */
	const char *sweep, *locks;
	long threads, corunners, rounds;
	double duration;
	int json;
	/* --list, and how many other options came with it (none may). */
	int list, others;
	/* --numa-map given. */
	int numa_map;
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
		{ "sweep", required_argument, 0, 'S' },    { "locks", required_argument, 0, 'k' },
		{ "rounds", required_argument, 0, 'R' },   { 0, 0, 0, 0 },
	};
	int c;
	*cfg = (struct config){ .workload = "counter" };
	const char *block = NULL;
	cs_iters = 100;
	ncs_iters = 100;
	opterr = 0; /* getopt's own messages would be a second line; usage() says it */
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		cfg->others += c != 'L' && c != 'h';
		switch (c) {
		case 'l': cfg->name = optarg; break;
		case 't': cfg->threads = number("--threads", optarg, 1, 4096); break;
		case 'd':
			if (cli_double(optarg, 0.0, 3600.0, &cfg->duration) != 0 || !(cfg->duration > 0))
				usage("bad --duration '%.40s' (expected seconds, more than 0, at most 3600)", optarg);
			break;
		case 'c': cs_iters = number("--cs", optarg, 0, 1000000000); break;
		case 'C': cs_lines = number("--cs-lines", optarg, 0, MAX_LINES); break;
		case 'n': ncs_iters = number("--ncs", optarg, 0, 1000000000); break;
		case 'r': cfg->corunners = number("--corunners", optarg, 0, 1024); break;
		case 'w': cfg->workload = optarg; break;
		case 'm':
			setenv("LOCKSTEP_NUMA_MAP", optarg, 1);
			numa_flag = 1;
			cfg->numa_map = 1;
			break;
		case 'D': cfg->dir = optarg; break;
		case 'b': block = optarg; break;
		case 'j': cfg->json = 1; break;
		case 'S': cfg->sweep = optarg; break;
		case 'k': cfg->locks = optarg; break;
		case 'R': cfg->rounds = number("--rounds", optarg, 1, 100); break;
		case 'L': cfg->list = 1; break;
		case 'h': fputs(help, stdout); exit(0);
		case ':': usage("%.60s needs a value", argv[optind - 1]);
		default:
			if (optopt)
				usage("unknown option -%c", optopt);
			usage("unknown option %.60s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage("unexpected argument %.60s", argv[optind]);
	if (cfg->list) {
		if (cfg->others)
			usage("--list takes no other option");
		for (const char *const *n = ls_lock_names(); *n; n++)
			puts(*n);
		exit(0);
	}
	if (block)
		block_setup(block);
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
		usage("bad --workload '%.40s' (expected counter, rename or rename-user)", cfg->workload);
	if (cfg->kernel && cfg->name)
		usage("--lock does not apply to --workload rename (it measures the kernel's directory lock)");
	if (!cfg->kernel && cfg->dir)
		usage("--dir applies only to --workload rename");
	if (op != counter_op && cs_block != BLOCK_NONE)
		usage("--cs-block applies only to --workload counter");
	if (cfg->sweep) {
		if (op != counter_op)
			usage("--sweep runs --workload counter only");
		if (cfg->name || cfg->threads || cfg->corunners)
			usage("--sweep sets each run's lock, threads and co-runners (no --lock, --threads or --corunners)");
		if (cfg->duration == 0)
			usage("--sweep needs --duration (seconds per run)");
		if (ls_lock_config_error())
			usage("%s", config_error());
		return;
	}
	if (cfg->locks || cfg->rounds)
		usage("--locks and --rounds apply only to --sweep");
	if ((!cfg->name && !cfg->kernel) || !cfg->threads || cfg->duration == 0)
		usage("--lock (except for --workload rename), --threads and --duration are required");
	if (cfg->name) {
		lock = ls_lock_create(cfg->name);
		if (!lock)
			usage("unknown lock '%.40s' (lockbench --list names them)", cfg->name);
		if (ls_lock_config_error())
			usage("%s", config_error());
		if (cfg->numa_map && !numa_aware(cfg->name))
			usage("--numa-map does not apply to --lock %s (only cna, cna-pt and shfl read it)", cfg->name);
	}
	if (cfg->numa_map && cfg->kernel)
		usage("--numa-map does not apply to --workload rename (no lock of lockbench's runs)");
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
	if (!co) {
		fprintf(stderr, "lockbench: out of memory for %ld co-runners\n", n);
		exit(1);
	}
	for (long i = 0; i < n; i++) {
		co[i] = fork();
		if (co[i] < 0) {
			/* Never kill(-1): the ones started go, and lockbench ends. */
			int err = errno;
			for (long j = 0; j < i; j++)
				kill(co[j], SIGKILL);
			fprintf(stderr, "lockbench: cannot start co-runner %ld of %ld: %s\n", i + 1, n, strerror(err));
			exit(1);
		}
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
		int err = w[i].samples ? pthread_create(&w[i].thread, NULL, run, &w[i]) : ENOMEM;
		if (err != 0) { /* the others wait at the barrier for it: exiting ends them */
			fprintf(stderr, "lockbench: cannot start thread %ld of %ld: %s\n", i + 1, threads, strerror(err));
			exit(1);
		}
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

/* Jain's fairness index over the threads' operation counts (1: all equal); their sum goes to `ops`. */
static double fairness(const struct worker *w, long threads, long *ops)
{
	double sum = 0, sumsq = 0;
	*ops = 0;
	for (long i = 0; i < threads; i++) {
		*ops += w[i].ops;
		sum += (double)w[i].ops;
		sumsq += (double)w[i].ops * (double)w[i].ops;
	}
	return sumsq > 0 ? sum * sum / ((double)threads * sumsq) : 0;
}

/* Prints throughput, fairness and latency percentiles, as one JSON object or as text. */
static void report(const struct config *cfg, struct worker *w, double elapsed, int tmpfs)
{
	long threads = cfg->threads, ops, n = 0;
	double jain = fairness(w, threads, &ops);
	for (long i = 0; i < threads; i++)
		n += w[i].nsamples;
	unsigned long *all = malloc((size_t)(n ? n : 1) * sizeof *all);
	if (!all) {
		fprintf(stderr, "lockbench: out of memory for %ld latency samples\n", n);
		exit(1);
	}
	for (long i = 0, k = 0; i < threads; i++)
		for (long s = 0; s < w[i].nsamples; s++)
			all[k++] = w[i].samples[s];
	qsort(all, (size_t)n, sizeof *all, cmp);
#define PCT(p) (n ? all[(long)((double)(n - 1) * (p))] : 0)
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

/* --sweep: most rows and locks. */
#define MAX_ROWS 64
#define MAX_LOCKS 32

/* One row of a sweep: threads, and co-runners beside them. */
struct row {
	long threads, corunners;
};

/*
 * The next comma-separated item of *text (NULL after the last), copied into `item`; an empty item (",," or a
 * leading or trailing comma) or one longer than `size` is a usage error naming `flag` and `whole`.
 */
static const char *list_item(const char **text, char *item, size_t size, const char *flag, const char *whole)
{
	if (!*text)
		return NULL;
	const char *comma = strchr(*text, ',');
	size_t len = comma ? (size_t)(comma - *text) : strlen(*text);
	if (len == 0)
		usage("bad %s \"%.60s\": an empty item (expected a comma-separated list, e.g. %s)", flag, whole,
		      strcmp(flag, "--sweep") == 0 ? "1,2,4,16+16" : "pthread,cna-pt,shfl");
	if (len >= size)
		usage("bad %s \"%.60s\": item \"%.20s...\" is too long", flag, whole, *text);
	memcpy(item, *text, len);
	item[len] = 0;
	*text = comma ? comma + 1 : NULL;
	return item;
}

/* Parses --sweep's ROWS (`N` or `N+C`, comma-separated) into `rows`; returns how many. */
static int sweep_rows(const char *text, struct row *rows)
{
	int n = 0;
	char tok[32];
	for (const char *p = text; list_item(&p, tok, sizeof tok, "--sweep", text);) {
		if (n == MAX_ROWS)
			usage("bad --sweep (expected at most %d rows)", MAX_ROWS);
		char *plus = strchr(tok, '+');
		if (plus)
			*plus = 0;
		rows[n].threads = number("--sweep thread count", tok, 1, 4096);
		rows[n].corunners = plus ? number("--sweep co-runner count", plus + 1, 0, 1024) : 0;
		n++;
	}
	return n;
}

/* The locks a sweep runs: --locks' names (each known), else every lock; pthread first either way. */
static int sweep_locks(const char *text, const char **names)
{
	int n = 0;
	names[n++] = "pthread";
	if (!text) {
		for (const char *const *l = ls_lock_names(); *l && n < MAX_LOCKS; l++)
			if (strcmp(*l, "pthread") != 0)
				names[n++] = *l;
		return n;
	}
	char tok[32];
	for (const char *p = text; list_item(&p, tok, sizeof tok, "--locks", text);) {
		const char *const *l = ls_lock_names();
		while (*l && strcmp(*l, tok) != 0)
			l++;
		if (!*l)
			usage("bad --locks: unknown lock '%.40s' (lockbench --list names them)", tok);
		int seen = 0;
		for (int i = 0; i < n; i++)
			seen |= strcmp(names[i], *l) == 0;
		if (!seen && n < MAX_LOCKS)
			names[n++] = *l;
	}
	return n;
}

/* Runs lock `name` with the row's threads and co-runners for `duration` seconds; its throughput (ops/s) and, in
 * `jain`, its fairness. */
static double sweep_run(const char *name, struct row row, double duration, double *jain)
{
	lock = ls_lock_create(name);
	atomic_store_explicit(&stop, 0, memory_order_relaxed);
	handovers = local_handovers = 0;
	last_holder = -1;
	struct worker *w = calloc((size_t)row.threads, sizeof *w);
	if (!lock || !w) {
		fprintf(stderr, "lockbench: cannot create lock %s for %ld threads: %s\n", name, row.threads, strerror(errno));
		exit(1);
	}
	pid_t *co = start_corunners(row.corunners);
	double elapsed = measure(w, row.threads, duration);
	stop_corunners(co, row.corunners);
	pthread_barrier_destroy(&start);
	long ops;
	*jain = fairness(w, row.threads, &ops);
	for (long i = 0; i < row.threads; i++)
		free(w[i].samples);
	free(w);
	ls_lock_destroy(lock);
	lock = NULL;
	return (double)ops / elapsed;
}

/* The first column of a sweep's row: `16`, or `16 + 16` with co-runners. */
static void row_label(struct row row, char *out, size_t size)
{
	if (row.corunners)
		snprintf(out, size, "%ld + %ld", row.threads, row.corunners);
	else
		snprintf(out, size, "%ld", row.threads);
}

/* A table's head: the first column, then one per lock. */
static void table_head(const char *first, const char **names, int nlocks)
{
	printf("| %s |", first);
	for (int k = 0; k < nlocks; k++)
		printf(" %s |", names[k]);
	printf("\n|---|");
	for (int k = 0; k < nlocks; k++)
		printf("---|");
	printf("\n");
}

/* --sweep: every lock at every row, rounds interleaved, each lock's best run kept; prints the tables. */
static void sweep(const struct config *cfg)
{
	struct row rows[MAX_ROWS];
	const char *names[MAX_LOCKS];
	int nrows = sweep_rows(cfg->sweep, rows), nlocks = sweep_locks(cfg->locks, names), mapped = 0;
	for (int k = 0; k < nlocks; k++)
		mapped |= numa_aware(names[k]);
	if (cfg->numa_map && !mapped)
		usage("--numa-map does not apply to --locks %.60s (only cna, cna-pt and shfl read it)", cfg->locks);
	long rounds = cfg->rounds ? cfg->rounds : 3;
	static double best[MAX_ROWS][MAX_LOCKS], jain[MAX_ROWS][MAX_LOCKS];
	if (!cfg->json) {
		printf("lockbench --sweep: counter, cs %ld (+%ld lines), ncs %ld, %.2f s per run, best of %ld interleaved "
		       "round%s\n\nThroughput, M ops/s (x pthread in the same row):\n\n",
		       cs_iters, cs_lines, ncs_iters, cfg->duration, rounds, rounds == 1 ? "" : "s");
		table_head("threads (+ co-runners)", names, nlocks);
		fflush(stdout);
	}
	for (int r = 0; r < nrows; r++) {
		for (long round = 0; round < rounds; round++)
			for (int i = 0; i < nlocks; i++) {
				int k = (int)((i + round) % nlocks);
				double j, t = sweep_run(names[k], rows[r], cfg->duration, &j);
				if (t > best[r][k]) {
					best[r][k] = t;
					jain[r][k] = j;
				}
			}
		char label[48];
		row_label(rows[r], label, sizeof label);
		if (!cfg->json)
			printf("| %s |", label);
		for (int k = 0; k < nlocks; k++) {
			double ratio = best[r][0] > 0 ? best[r][k] / best[r][0] : 0;
			if (cfg->json)
				printf("{\"threads\":%ld,\"corunners\":%ld,\"lock\":\"%s\",\"throughput_ops_s\":%.1f,"
				       "\"x_pthread\":%.3f,\"fairness_jain\":%.4f,\"rounds\":%ld,\"duration_s\":%.3f}\n",
				       rows[r].threads, rows[r].corunners, names[k], best[r][k], ratio, jain[r][k], rounds,
				       cfg->duration);
			else
				printf(" %.2f (%.2f) |", best[r][k] / 1e6, ratio);
		}
		if (!cfg->json)
			printf("\n");
		fflush(stdout);
	}
	if (cfg->json)
		return;
	printf("\nFairness (Jain) of the same runs:\n\n");
	table_head("threads (+ co-runners)", names, nlocks);
	for (int r = 0; r < nrows; r++) {
		char label[48];
		row_label(rows[r], label, sizeof label);
		printf("| %s |", label);
		for (int k = 0; k < nlocks; k++)
			printf(" %.3f |", jain[r][k]);
		printf("\n");
	}
}

int main(int argc, char **argv)
{
	struct config cfg;
	parse_args(argc, argv, &cfg);
	choose_workload(&cfg);
	if (cfg.sweep) {
		sweep(&cfg);
		return 0;
	}
	struct worker *w = calloc((size_t)cfg.threads, sizeof *w);
	if (!w) {
		fprintf(stderr, "lockbench: out of memory for %ld threads\n", cfg.threads);
		return 1;
	}
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
