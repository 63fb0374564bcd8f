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
 * Calls MPI_Init and parses argv: --class X (one of `classes`), --json, --perturb. Exits with status 2 and one
 * line on stderr (rank 0) on bad arguments, and when the rank count is not a power of two from 1 to 16.
 * Returns the position of the chosen class in `classes` (the kernels' class tables follow that order).
 */
int kernel_init(struct kernel_ctx *k, const char *name, const char *classes, int *argc, char ***argv);

/** Rank 0 prints "NAME: message" on stderr; every rank finalizes MPI and exits with status 2. */
__attribute__((noreturn, format(printf, 2, 3))) void kernel_usage(const struct kernel_ctx *k, const char *fmt, ...);

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
