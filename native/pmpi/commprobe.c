/*
 * commprobe — a program whose communication share is known, to check the profiler against the truth.
 * Every rank sleeps --compute seconds outside MPI; odd ranks then wait in MPI_Barrier for even ranks, which sleep
 * --compute more first. Each rank prints one JSON line with what it measured itself: its wall time from MPI_Init
 * to MPI_Finalize and its time inside MPI calls.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(int argc, char **argv)
{
    double compute = 1.0;
    if (argc == 3 && !strcmp(argv[1], "--compute")) {
        char *end;
        compute = strtod(argv[2], &end);
        if (*end || compute < 0) {
            fprintf(stderr, "commprobe: --compute needs seconds >= 0\n");
            return 2;
        }
    } else if (argc != 1) {
        fprintf(stderr, "commprobe: usage: commprobe [--compute SECONDS]\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    double t_init = now(), in_mpi = 0.0;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    sleep_s(rank % 2 ? compute : 2 * compute);
    double t0 = now();
    MPI_Barrier(MPI_COMM_WORLD);
    in_mpi += now() - t0;
    double wall = now() - t_init;
    printf("{\"rank\":%d,\"wall_s\":%.6f,\"mpi_s\":%.6f,\"comm_ratio\":%.6f}\n", rank, wall, in_mpi, in_mpi / wall);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
