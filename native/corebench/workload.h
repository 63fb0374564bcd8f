/*
 * corebench workloads: each prepares its own data, then does units of work on demand. One thread runs one
 * instance; the multi-thread mode runs one instance per PU.
 */
#ifndef LOCKSTEP_COREBENCH_WORKLOAD_H
#define LOCKSTEP_COREBENCH_WORKLOAD_H

/** The three categories of Geekbench 5, weighted 5 / 65 / 30 % in the overall score. */
enum category { CRYPTO, INTEGER, FLOAT, NCATEGORIES };

/** One workload. */
struct workload {
    const char *name;
    enum category category;
    const char *unit;       /**< unit of the rate, e.g. "MB/s" */
    double reference_rate;  /**< rate that scores 1000 (one thread of the reference machine, see docs) */
    void *(*setup)(void);   /**< allocates and fills the instance's data; NULL on failure */
    double (*run)(void *);  /**< does one unit of work; returns its size in `unit` x seconds (e.g. MB) */
    int (*check)(void *);   /**< after running: 1 when the result is right */
    void (*teardown)(void *);
};

extern const struct workload WL_AES_XTS, WL_DEFLATE, WL_SORT, WL_HASH, WL_PARSE, WL_MATMUL, WL_NBODY, WL_STENCIL;

#endif
