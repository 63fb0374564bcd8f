/*
 * pingpong — MPI latency between ranks 0 and 1: --size BYTES messages bounced --iterations N times, repeated
 * --repeats R times; prints the median one-way latency in microseconds (and JSON with --json). Used to measure
 * the profiler's cost per call (run with and without LD_PRELOAD=liblockstep-pmpi.so).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static long arg_long(const char *name, const char *value, long min)
{
    char *end;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || *end || v < min) {
        fprintf(stderr, "pingpong: %s needs an integer >= %ld\n", name, min);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    long size = 8, iterations = 10000, repeats = 5;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size"))
            size = arg_long("--size", argv[++i < argc ? i : 0], 0);
        else if (!strcmp(argv[i], "--iterations"))
            iterations = arg_long("--iterations", argv[++i < argc ? i : 0], 1);
        else if (!strcmp(argv[i], "--repeats"))
            repeats = arg_long("--repeats", argv[++i < argc ? i : 0], 1);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr, "pingpong: unknown argument '%s' (expected --size, --iterations, --repeats, --json)\n",
                    argv[i]);
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    int rank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs != 2) {
        if (rank == 0)
            fprintf(stderr, "pingpong: needs exactly 2 processes, got %d\n", nprocs);
        MPI_Finalize();
        return 2;
    }
    char *buf = calloc(size ? size : 1, 1);
    double *lat = malloc(repeats * sizeof(double));
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
