/*
 * liblockstep-locks: one small API over several mutual-exclusion algorithms, chosen by name at run time.
 *
 *   ls_lock *l = ls_lock_create("mcs");   // NULL (errno EINVAL) for an unknown name
 *   ls_lock_acquire(l); ... ls_lock_release(l);
 *   if (ls_lock_tryacquire(l) == 0) { ... ls_lock_release(l); }
 *   ls_lock_destroy(l);
 *
 * Names: see ls_lock_names() — pthread, ttas, ticket, mcs, cna, mcs-pt, cna-pt, shfl. Every lock may be held by one
 * thread at a time and released only by the thread that holds it; a thread may hold several different locks at
 * once (up to LS_MAX_HELD mcs or cna locks).
 *
 * Environment, read at the first use:
 *   LOCKSTEP_NUMA_MAP   CPU-to-NUMA-node map for cna and cna-pt, "NODE:CPULIST;NODE:CPULIST..." (e.g.
 *                       "0:0-3;1:4-7"); unset: the node of the CPU, from the kernel
 *   LOCKSTEP_CNA_BOUND  local hand-overs after which cna and cna-pt serve waiters of other nodes, and the most
 *                       waiters of one node shfl groups in a row (default 256)
 * A malformed value is ignored (every CPU node 0; the default bound) and reported by ls_lock_config_error().
 */
#ifndef LOCKSTEP_LOCKS_H
#define LOCKSTEP_LOCKS_H

#ifdef __cplusplus
extern "C" {
#endif

/* What the library exports: these functions only (it is built with hidden visibility, so that its algorithms call
 * each other directly, not through the PLT). */
#define LS_API __attribute__((visibility("default")))

/* The lock lockstep recommends, and the one liblockstep-mutex puts under a program's mutexes when LOCKSTEP_LOCK is
 * unset: of the locks measured, the one never far behind glibc's mutex at any thread count and that survives
 * preemption (docs/locks.md has the measurements that chose it). */
#define LS_DEFAULT_LOCK "cna-pt"

/* Most queue-based locks one thread may hold at the same time. */
#define LS_MAX_HELD 32

/* An opaque lock. */
typedef struct ls_lock ls_lock;

/* A new, unheld lock of the algorithm called `name`, or NULL with errno set (EINVAL: unknown name, ENOMEM). */
LS_API ls_lock *ls_lock_create(const char *name);

/* Waits until the calling thread holds `l`. Returns 0. */
LS_API int ls_lock_acquire(ls_lock *l);

/* Takes `l` if no thread holds it: 0 when taken, EBUSY otherwise. */
LS_API int ls_lock_tryacquire(ls_lock *l);

/* Releases `l`, which the calling thread holds. */
LS_API void ls_lock_release(ls_lock *l);

/* Frees an unheld lock. */
LS_API void ls_lock_destroy(ls_lock *l);

/* The algorithm `l` runs. */
LS_API const char *ls_lock_name(const ls_lock *l);

/* NULL-terminated list of every algorithm name. */
LS_API const char *const *ls_lock_names(void);

/* A one-line description of the first malformed setting in the environment (see above), or NULL. */
LS_API const char *ls_lock_config_error(void);

#ifdef __cplusplus
}
#endif

#endif
