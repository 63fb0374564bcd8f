/*
 * liblockstep-mutex: an LD_PRELOAD interposer that runs an unmodified program's pthread mutexes on the lock named
 * by LOCKSTEP_LOCK (any name of liblockstep-locks; unset or empty: LS_DEFAULT_LOCK; "pthread": glibc's own mutex).
 *
 *   LD_PRELOAD=build/lib/liblockstep-mutex.so ./program                  # the default lock
 *   LD_PRELOAD=build/lib/liblockstep-mutex.so LOCKSTEP_LOCK=shfl ./program
 *
 * Replaced: mutexes of the default, normal and adaptive kinds, private to the process. Recursive, error-checking,
 * robust, priority-inheritance/-protection and process-shared mutexes stay glibc's. A replaced mutex keeps a
 * pointer to its lock inside the pthread_mutex_t (in glibc's robust-list field, unused by those kinds) and gets
 * its lock at the first use, so PTHREAD_MUTEX_INITIALIZER works. Condition variables are replaced as well (a
 * sequence number and a futex inside the pthread_cond_t), since glibc's cannot wait on a lock it does not know;
 * they work with every mutex, replaced or not, and keep the clock of their attributes (pthread_condattr_setclock)
 * and of pthread_cond_clockwait. A timed lock of a replaced mutex polls trylock every 50 µs until its deadline.
 *
 * A bad LOCKSTEP_LOCK, LOCKSTEP_NUMA_MAP or LOCKSTEP_CNA_BOUND prints one line on stderr and leaves every mutex
 * glibc's. LOCKSTEP_MUTEX_VERBOSE=1 prints, at exit, how many mutexes ran on which lock. Every setting is read
 * with secure_getenv: a set-user-ID or set-group-ID program it is preloaded into (the loader preloads such a
 * program only from its trusted directories) runs on the default lock and says nothing, whatever its caller set.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lockstep_locks.h"

_Static_assert(offsetof(pthread_mutex_t, __data.__list) % sizeof(void *) == 0 &&
		       sizeof(((pthread_mutex_t *)0)->__data.__list) >= sizeof(void *),
	       "a pointer fits in the robust-list field of pthread_mutex_t");

/* glibc's kind bits that do not change how a mutex is taken (lock elision hints). */
#define KIND_ELISION_BITS (256 | 512)

/* glibc's functions, for the mutexes (or the whole program) left to glibc. */
static struct {
	int (*init)(pthread_mutex_t *, const pthread_mutexattr_t *);
	int (*destroy)(pthread_mutex_t *);
	int (*lock)(pthread_mutex_t *);
	int (*trylock)(pthread_mutex_t *);
	int (*timedlock)(pthread_mutex_t *, const struct timespec *);
	int (*clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
	int (*unlock)(pthread_mutex_t *);
	int (*cond_init)(pthread_cond_t *, const pthread_condattr_t *);
	int (*cond_destroy)(pthread_cond_t *);
	int (*cond_wait)(pthread_cond_t *, pthread_mutex_t *);
	int (*cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
	int (*cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
	int (*cond_signal)(pthread_cond_t *);
	int (*cond_broadcast)(pthread_cond_t *);
} real;

static pthread_once_t once = PTHREAD_ONCE_INIT;
/* The lock replaced mutexes run on; NULL: every mutex and condition variable is glibc's. */
static const char *lock_name;
static atomic_long replaced;
/* A copy of stderr for the report at exit (programs such as xz close stderr before they exit); -1: no report. */
static int report_fd = -1;

static void report(void)
{
	dprintf(report_fd, "liblockstep-mutex: %ld mutexes ran on %s\n", atomic_load(&replaced),
		lock_name ? lock_name : "pthread (glibc)");
}

static void *lookup(const char *symbol)
{
	void *f = dlsym(RTLD_NEXT, symbol);
	if (!f) {
		fprintf(stderr, "liblockstep-mutex: %s not found in the libraries after it\n", symbol);
		abort();
	}
	return f;
}

static void setup(void)
{
	real.init = lookup("pthread_mutex_init");
	real.destroy = lookup("pthread_mutex_destroy");
	real.lock = lookup("pthread_mutex_lock");
	real.trylock = lookup("pthread_mutex_trylock");
	real.timedlock = lookup("pthread_mutex_timedlock");
	real.clocklock = lookup("pthread_mutex_clocklock");
	real.unlock = lookup("pthread_mutex_unlock");
	real.cond_init = lookup("pthread_cond_init");
	real.cond_destroy = lookup("pthread_cond_destroy");
	real.cond_wait = lookup("pthread_cond_wait");
	real.cond_timedwait = lookup("pthread_cond_timedwait");
	real.cond_clockwait = lookup("pthread_cond_clockwait");
	real.cond_signal = lookup("pthread_cond_signal");
	real.cond_broadcast = lookup("pthread_cond_broadcast");
	const char *v = secure_getenv("LOCKSTEP_MUTEX_VERBOSE");
	if (v && *v && strcmp(v, "0") != 0 && (report_fd = fcntl(2, F_DUPFD_CLOEXEC, 3)) >= 0)
		atexit(report);
	const char *name = secure_getenv("LOCKSTEP_LOCK");
	if (!name || !*name)
		name = LS_DEFAULT_LOCK;
	if (strcmp(name, "pthread") == 0)
		return;
	ls_lock *probe = ls_lock_create(name);
	if (!probe) {
		char known[256] = "";
		for (const char *const *n = ls_lock_names(); *n; n++)
			snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", *known ? ", " : "", *n);
		fprintf(stderr, "liblockstep-mutex: unknown LOCKSTEP_LOCK \"%.64s\" (expected one of %s); using the "
				"pthread mutex\n", name, known);
		return;
	}
	ls_lock_destroy(probe);
	const char *why = ls_lock_config_error();
	if (why) {
		fprintf(stderr, "liblockstep-mutex: %s; using the pthread mutex\n", why);
		return;
	}
	lock_name = name;
}

/* Whether `m` is of a kind that is replaced: default/normal or adaptive, private, not robust, no priority
 * protocol (glibc's kind: the type in the low bits, the other properties as flags above them). */
static int replaceable(const pthread_mutex_t *m)
{
	int kind = m->__data.__kind & ~KIND_ELISION_BITS;
	return kind == PTHREAD_MUTEX_TIMED_NP || kind == PTHREAD_MUTEX_ADAPTIVE_NP;
}

/* Where a replaced mutex keeps its lock: glibc's robust-list field. */
static _Atomic(ls_lock *) *slot_of(pthread_mutex_t *m)
{
	return (_Atomic(ls_lock *) *)(void *)&m->__data.__list;
}

/* The lock behind `m`, created at its first use; NULL when `m` stays glibc's. */
static ls_lock *lock_of(pthread_mutex_t *m)
{
	pthread_once(&once, setup);
	if (!lock_name || !replaceable(m))
		return NULL;
	_Atomic(ls_lock *) *slot = slot_of(m);
	/* Acquire: pairs with the release below, so the lock's initialisation by the thread that created it is seen. */
	ls_lock *l = atomic_load_explicit(slot, memory_order_acquire);
	if (l)
		return l;
	ls_lock *fresh = ls_lock_create(lock_name);
	if (!fresh) {
		fprintf(stderr, "liblockstep-mutex: cannot create a %s lock: %s\n", lock_name, strerror(errno));
		abort();
	}
	/* Release on success: publishes the new lock (above). Acquire on failure: another thread's lock, as above. */
	if (atomic_compare_exchange_strong_explicit(slot, &l, fresh, memory_order_release, memory_order_acquire)) {
		/* Relaxed: a statistic. */
		atomic_fetch_add_explicit(&replaced, 1, memory_order_relaxed);
		return fresh;
	}
	ls_lock_destroy(fresh);
	return l;
}

int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
	pthread_once(&once, setup);
	/* glibc's init clears the whole mutex (our slot too) and sets its kind, which lock_of reads. */
	return real.init(m, attr);
}

int pthread_mutex_destroy(pthread_mutex_t *m)
{
	pthread_once(&once, setup);
	/* Relaxed: destroying a mutex another thread still uses is undefined; the destroyer owns it. */
	if (lock_name && replaceable(m))
		ls_lock_destroy(atomic_exchange_explicit(slot_of(m), NULL, memory_order_relaxed));
	return real.destroy(m);
}

int pthread_mutex_lock(pthread_mutex_t *m)
{
	ls_lock *l = lock_of(m);
	return l ? ls_lock_acquire(l) : real.lock(m);
}

int pthread_mutex_trylock(pthread_mutex_t *m)
{
	ls_lock *l = lock_of(m);
	return l ? ls_lock_tryacquire(l) : real.trylock(m);
}

/* Whether `deadline` is malformed (POSIX: EINVAL). */
static int malformed(const struct timespec *deadline)
{
	return deadline->tv_nsec < 0 || deadline->tv_nsec >= 1000000000;
}

/* Tries `l` every 50 µs until `clock` reaches `deadline`: 0, ETIMEDOUT, or EINVAL for a malformed deadline. */
static int poll_lock(ls_lock *l, clockid_t clock, const struct timespec *deadline)
{
	if (malformed(deadline))
		return EINVAL;
	for (;;) {
		if (ls_lock_tryacquire(l) == 0)
			return 0;
		struct timespec now;
		clock_gettime(clock, &now);
		if (now.tv_sec > deadline->tv_sec || (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec))
			return ETIMEDOUT;
		struct timespec nap = { 0, 50000 };
		nanosleep(&nap, NULL);
	}
}

int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *deadline)
{
	ls_lock *l = lock_of(m);
	return l ? poll_lock(l, CLOCK_REALTIME, deadline) : real.timedlock(m, deadline);
}

int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock, const struct timespec *deadline)
{
	ls_lock *l = lock_of(m);
	if (l && clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC)
		return EINVAL;
	return l ? poll_lock(l, clock, deadline) : real.clocklock(m, clock, deadline);
}

int pthread_mutex_unlock(pthread_mutex_t *m)
{
	ls_lock *l = lock_of(m);
	if (!l)
		return real.unlock(m);
	ls_lock_release(l);
	return 0;
}

/* A replaced condition variable, inside the pthread_cond_t. */
struct cond {
	/* Bumped by every signal and broadcast; waiters sleep on it. */
	atomic_uint seq;
	/* Threads inside a wait. */
	atomic_uint waiters;
	/* The clock of timed waits (from the attributes; 0 = CLOCK_REALTIME, the default). */
	int clock;
};

_Static_assert(sizeof(struct cond) <= sizeof(pthread_cond_t), "the replacement fits in pthread_cond_t");

int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *attr)
{
	pthread_once(&once, setup);
	if (!lock_name)
		return real.cond_init(c, attr);
	memset(c, 0, sizeof *c);
	clockid_t clock = CLOCK_REALTIME;
	if (attr)
		pthread_condattr_getclock(attr, &clock);
	((struct cond *)(void *)c)->clock = clock;
	return 0;
}

int pthread_cond_destroy(pthread_cond_t *c)
{
	pthread_once(&once, setup);
	return lock_name ? 0 : real.cond_destroy(c);
}

/* Waits on `c` with `m` released, until a signal or (if `deadline`) `clock` reaches it: 0 or ETIMEDOUT. */
static int wait_on(struct cond *c, pthread_mutex_t *m, clockid_t clock, const struct timespec *deadline)
{
	if (deadline && malformed(deadline))
		return EINVAL;
	if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC)
		return EINVAL;
	/* Seq_cst with the signaller's bump and load of `waiters`: either it sees us waiting, or we see its bump. */
	atomic_fetch_add(&c->waiters, 1);
	unsigned seq = atomic_load(&c->seq);
	pthread_mutex_unlock(m);
	/* Shared futex (not _PRIVATE): a condition variable may live in memory shared between processes. */
	long r = syscall(SYS_futex, &c->seq, FUTEX_WAIT_BITSET | (clock == CLOCK_REALTIME ? FUTEX_CLOCK_REALTIME : 0),
			 seq, deadline, NULL, FUTEX_BITSET_MATCH_ANY);
	int timed_out = r == -1 && errno == ETIMEDOUT;
	/* Relaxed: only counts; the wake-up itself is ordered by the mutex taken below. */
	atomic_fetch_sub_explicit(&c->waiters, 1, memory_order_relaxed);
	pthread_mutex_lock(m);
	return timed_out ? ETIMEDOUT : 0;
}

int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	pthread_once(&once, setup);
	return lock_name ? wait_on((struct cond *)(void *)c, m, CLOCK_REALTIME, NULL) : real.cond_wait(c, m);
}

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *deadline)
{
	pthread_once(&once, setup);
	if (!lock_name)
		return real.cond_timedwait(c, m, deadline);
	struct cond *cv = (struct cond *)(void *)c;
	return wait_on(cv, m, cv->clock, deadline);
}

int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock, const struct timespec *deadline)
{
	pthread_once(&once, setup);
	return lock_name ? wait_on((struct cond *)(void *)c, m, clock, deadline)
			 : real.cond_clockwait(c, m, clock, deadline);
}

/* Wakes up to `n` waiters of `c`. */
static int wake(struct cond *c, int n)
{
	/* Seq_cst: see wait_on. */
	atomic_fetch_add(&c->seq, 1);
	if (atomic_load(&c->waiters))
		syscall(SYS_futex, &c->seq, FUTEX_WAKE, n, NULL, NULL, 0);
	return 0;
}

int pthread_cond_signal(pthread_cond_t *c)
{
	pthread_once(&once, setup);
	return lock_name ? wake((struct cond *)(void *)c, 1) : real.cond_signal(c);
}

int pthread_cond_broadcast(pthread_cond_t *c)
{
	pthread_once(&once, setup);
	return lock_name ? wake((struct cond *)(void *)c, INT_MAX) : real.cond_broadcast(c);
}
