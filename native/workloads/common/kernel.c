#include "kernel.h"

#include "cli.h"

#include <ctype.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kernel_usage(const struct kernel_ctx *k, const char *fmt, ...)
{
    if (k->rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        cli_vsay(k->name, fmt, ap);
        va_end(ap);
    }
    MPI_Finalize();
    exit(2);
}

void kernel_fail(const struct kernel_ctx *k, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: rank %d: %s\n", k->name, k->rank, what);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* The usage --help prints. */
static void print_help(const char *name, const char *classes)
{
    printf("usage: mpirun -n RANKS %s [--class CLASS] [--json]\n"
           "  RANKS          a power of two from 1 to 16\n"
           "  --class CLASS  problem size, one of %s (default S)\n"
           "  --json         one JSON line instead of the result block\n"
           "  -h, --help     print this help and exit\n"
           "Exit status: 0 verified, 1 verification failed (or a failure of the system), 2 bad arguments or rank "
           "count.\n",
           name, classes);
}

int kernel_init(struct kernel_ctx *k, const char *name, const char *classes, int *argc, char ***argv)
{
    /* The arguments first, without MPI: every rank refuses the same ones, launcher rank 0 alone says so. */
    k->name = name;
    k->rank = 0;
    k->nprocs = 0;
    k->args = (struct kernel_args){ .cls = 'S' };
    char **av = *argv;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(av[i], "--class") == 0 || strcmp(av[i], "-c") == 0) {
            if (i + 1 >= *argc)
                cli_refuse(name, "%s needs a value (one of %s)", av[i], classes);
            const char *c = av[++i];
            if (strlen(c) != 1 || !strchr(classes, c[0]))
                cli_refuse(name, "unknown class '%.40s' (expected one of %s)", c, classes);
            k->args.cls = c[0];
        } else if (strcmp(av[i], "--json") == 0) {
            k->args.json = 1;
        } else if (strcmp(av[i], "--perturb") == 0) {
            k->args.perturb = 1;
        } else if (strcmp(av[i], "--help") == 0 || strcmp(av[i], "-h") == 0) {
            if (cli_launcher_rank() == 0)
                print_help(name, classes);
            exit(0);
        } else {
            cli_refuse(name, "unknown argument '%.40s' (expected --class CLASS, --json; see %s --help)", av[i],
                       name);
        }
    }
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &k->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &k->nprocs);
    if (k->nprocs > 16 || (k->nprocs & (k->nprocs - 1)) != 0)
        kernel_usage(k, "cannot run on %d processes (expected a power of two from 1 to 16)", k->nprocs);
    return (int)(strchr(classes, k->args.cls) - classes);
}

double kernel_max_time(double t)
{
    double max;
    MPI_Allreduce(&t, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

double kernel_relerr(double a, double b)
{
    return b == 0.0 ? fabs(a - b) : fabs((a - b) / b);
}

int kernel_grid_rows(int nprocs)
{
    int rows = 1;
    while (rows * rows * 4 <= nprocs)
        rows *= 2;
    return rows;
}

/* JSON string literal for s: the kernels only print ASCII without quotes or backslashes. */
static void json_str(const char *key, const char *s, int comma)
{
    printf("\"%s\":\"%s\"%s", key, s, comma ? "," : "");
}

int kernel_report(const struct kernel_ctx *k, const struct kernel_result *r)
{
    if (k->rank != 0)
        return r->verified ? 0 : 1;
    char cls[2] = { k->args.cls, 0 };
    const char *verdict = r->verified ? "SUCCESSFUL" : "UNSUCCESSFUL";
    if (k->args.json) {
        printf("{");
        json_str("kernel", k->name, 1);
        json_str("class", cls, 1);
        json_str("size", r->size, 1);
        printf("\"iterations\":%d,\"time_s\":%.6f,\"processes\":%d,\"mops_total\":%.2f,\"mops_per_process\":%.2f,",
               r->iterations, r->time, k->nprocs, r->mops, r->mops / k->nprocs);
        json_str("operation_type", r->optype, 1);
        printf("\"verified\":%s%s%s}\n", r->verified ? "true" : "false", r->extra ? "," : "", r->extra ? r->extra : "");
    } else {
        char upper[16] = { 0 };
        for (size_t i = 0; k->name[i] && i < sizeof upper - 1; i++)
            upper[i] = (char)toupper((unsigned char)k->name[i]);
        printf("\n\n %s Benchmark Completed.\n", upper);
        printf(" Class           = %24s\n", cls);
        printf(" Size            = %24s\n", r->size);
        printf(" Iterations      = %24d\n", r->iterations);
        printf(" Time in seconds = %24.2f\n", r->time);
        printf(" Total processes = %24d\n", k->nprocs);
        printf(" Mop/s total     = %24.2f\n", r->mops);
        printf(" Mop/s/process   = %24.2f\n", r->mops / k->nprocs);
        printf(" Operation type  = %24s\n", r->optype);
        printf(" Verification    = %24s\n", verdict);
        printf(" Version         = %24s\n", "lockstep 0.1");
    }
    fflush(stdout);
    return r->verified ? 0 : 1;
}
