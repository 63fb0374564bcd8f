/*
 * pingpong — MPI latency between ranks 0 and 1: --size BYTES messages bounced --iterations N times, repeated
 * --repeats R times; prints the median one-way latency in microseconds (and JSON with --json). Used to measure
 * the profiler's cost per call (run with and without LD_PRELOAD=liblockstep-pmpi.so). Arguments are checked before
 * MPI_Init (launcher rank 0 alone prints the one line; exit status 2), the rank count after it.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Bounds: a message fits an MPI count (int) with room; 10^12 iterations is a run of days (tests run 10^9 as a job
 * that lasts until it is stopped), and the per-repeat latency is one division by it. */
#define MAX_SIZE (64L << 20)
#define MAX_ITERATIONS 1000000000000L
#define MAX_REPEATS 1000L

static const char usage[] =
    "usage: mpirun -n 2 pingpong [--size BYTES] [--iterations N] [--repeats R] [--json]\n"
    "  --size BYTES     message size, 0 to 67108864 (default 8)\n"
    "  --iterations N   round trips per repeat, 1 to 1000000000000 (default 10000)\n"
    "  --repeats R      repeats, the median reported, 1 to 1000 (default 5)\n"
    "  --json           one JSON object instead of the line\n"
    "  -h, --help       print this help and exit\n"
    "Exit status: 0 measured, 1 a failure of the system, 2 bad arguments or not 2 ranks.\n";

int main(int argc, char **argv)
{
    long size = 8, iterations = 10000, repeats = 5;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size"))
            size = cli_option_long("pingpong", argc, argv, &i, 0, MAX_SIZE);
        else if (!strcmp(argv[i], "--iterations"))
            iterations = cli_option_long("pingpong", argc, argv, &i, 1, MAX_ITERATIONS);
        else if (!strcmp(argv[i], "--repeats"))
            repeats = cli_option_long("pingpong", argc, argv, &i, 1, MAX_REPEATS);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            if (cli_launcher_rank() == 0)
                fputs(usage, stdout);
            return 0;
        } else
            cli_refuse("pingpong",
                       "unknown argument '%.40s' (expected --size, --iterations, --repeats, --json; see pingpong "
                       "--help)",
                       argv[i]);
    }
    MPI_Init(&argc, &argv);
    int rank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs != 2) {
        if (rank == 0)
            fprintf(stderr, "pingpong: cannot run on %d processes (expected exactly 2: mpirun -n 2 pingpong)\n",
                    nprocs);
        MPI_Finalize();
        return 2;
    }
    char *buf = calloc(size ? (size_t)size : 1, 1);
    double *lat = malloc((size_t)repeats * sizeof(double));
    if (!buf || !lat) {
        fprintf(stderr, "pingpong: rank %d: out of memory for %ld-byte messages\n", rank, size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long r = -1; r < repeats; r++) { /* r = -1: warm-up */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < iterations; i++) {
            if (rank == 0) {
                MPI_Send(buf, (int)size, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)size, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)size, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)size, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
        }
        if (r >= 0)
            lat[r] = (MPI_Wtime() - t0) / iterations / 2 * 1e6;
    }
    qsort(lat, repeats, sizeof(double), cmp_double);
    double median = repeats % 2 ? lat[repeats / 2] : (lat[repeats / 2 - 1] + lat[repeats / 2]) / 2;
    if (rank == 0) {
        if (json)
            printf("{\"size\":%ld,\"iterations\":%ld,\"repeats\":%ld,\"latency_us\":%.4f}\n", size, iterations,
                   repeats, median);
        else
            printf("pingpong: %ld bytes, one-way latency %.3f us (median of %ld x %ld round trips)\n", size, median,
                   repeats, iterations);
    }
    free(buf), free(lat);
    MPI_Finalize();
    return 0;
}
