/*
 * What every MPI kernel shares: command-line parsing, usage errors, and the NPB-style result block.
 */
#ifndef LOCKSTEP_KERNEL_H
#define LOCKSTEP_KERNEL_H

#include <stdarg.h>

/** Parsed command line of a kernel. */
struct kernel_args {
    char cls;    /**< problem class: S, W, A, B or C */
    int json;    /**< print one JSON line instead of the result block */
    int perturb; /**< test-only: disturb the input so that verification must fail */
};

/** Identity and world of the running kernel, filled by kernel_init. */
struct kernel_ctx {
    const char *name;  /**< short name, e.g. "ep" */
    int rank;          /**< rank in MPI_COMM_WORLD */
    int nprocs;        /**< size of MPI_COMM_WORLD */
    struct kernel_args args;
};

/** The numbers a run reports. */
struct kernel_result {
    char size[64];      /**< problem size as NPB prints it, e.g. "256x256x256" */
    int iterations;     /**< timed iterations */
    double time;        /**< seconds, the slowest rank's */
    double mops;        /**< total Mop/s */
    const char *optype; /**< "Operation type" line */
    int verified;       /**< 1 when the result matches the reference */
    const char *extra;  /**< extra JSON members (without braces), or NULL */
};

/**
 * Parses argv before MPI_Init: --class X (one of `classes`), --json, --perturb, --help. Bad arguments: launcher
 * rank 0 prints one line on stderr, every rank exits with status 2 without starting MPI; --help: rank 0 prints the
 * usage on stdout, every rank exits 0. Then calls MPI_Init; a rank count that is not a power of two from 1 to 16
 * is refused as kernel_usage refuses. Returns the position of the chosen class in `classes` (the kernels' class
 * tables follow that order).
 */
int kernel_init(struct kernel_ctx *k, const char *name, const char *classes, int *argc, char ***argv);

/**
 * A usage error found after MPI_Init, the same on every rank: rank 0 prints "NAME: message" on stderr (one line);
 * every rank finalizes MPI and exits with status 2 (no MPI_Abort: no abort banner).
 */
__attribute__((noreturn, format(printf, 2, 3))) void kernel_usage(const struct kernel_ctx *k, const char *fmt, ...);

/**
 * A failure of the system on this rank alone (out of memory): "NAME: rank R: message" on stderr, then MPI_Abort
 * with status 1 (the other ranks may be waiting for this one in a collective call).
 */
__attribute__((noreturn, format(printf, 2, 3))) void kernel_fail(const struct kernel_ctx *k, const char *fmt, ...);

/** Rank 0 prints the result block (or JSON); returns the exit status: 0 when verified, 1 otherwise. */
int kernel_report(const struct kernel_ctx *k, const struct kernel_result *r);

/** Returns the slowest rank's value of t (a collective call). */
double kernel_max_time(double t);

/** Relative difference |a - b| / |b| (|a - b| when b is 0). */
double kernel_relerr(double a, double b);

/**
 * The rows of the squarest grid of `nprocs` ranks (a power of two) with no more rows than columns: the columns
 * are then as many as the rows or twice as many (1 x 1, 1 x 2, 2 x 2, 2 x 4, 4 x 4).
 */
int kernel_grid_rows(int nprocs);

#endif
