/*
 * commprobe — a program whose communication share is known, to check the profiler against the truth.
 * Every rank sleeps --compute seconds outside MPI; odd ranks then wait in MPI_Barrier for even ranks, which sleep
 * --compute more first. Each rank prints one JSON line with what it measured itself: its wall time from MPI_Init
 * to MPI_Finalize and its time inside MPI calls.
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sleeps s seconds (0 to MAX_COMPUTE), again after a signal for what is left; any other error ends the sleep. */
static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Longest --compute: an hour (the even ranks sleep twice that). */
#define MAX_COMPUTE 3600.0

static const char usage[] =
    "usage: mpirun -n RANKS commprobe [--compute SECONDS]\n"
    "  --compute SECONDS   time every rank spends outside MPI (even ranks twice), 0 to 3600 (default 1)\n"
    "  -h, --help          print this help and exit\n"
    "Each rank prints one JSON line: its wall time from MPI_Init to MPI_Finalize and its time inside MPI.\n"
    "Exit status: 0 measured, 2 bad arguments.\n";

int main(int argc, char **argv)
{
    double compute = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            if (cli_launcher_rank() == 0)
                fputs(usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--compute")) {
            if (i + 1 >= argc)
                cli_refuse("commprobe", "--compute needs a value (seconds from 0 to %.0f)", MAX_COMPUTE);
            const char *text = argv[++i];
            if (cli_double(text, 0.0, MAX_COMPUTE, &compute) != 0)
                cli_refuse("commprobe", "bad --compute '%.40s' (expected seconds from 0 to %.0f)", text, MAX_COMPUTE);
        } else {
            cli_refuse("commprobe", "unknown argument '%.40s' (expected --compute SECONDS; see commprobe --help)",
                       argv[i]);
        }
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
