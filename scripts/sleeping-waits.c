/*
 * sleeping-waits.so — for scripts/policy-bound.py only: MPI ranks that sleep through their waits, so that the CPU
 * of a rank waiting for a message goes to another job (a yield does not leave the rank's cpu cgroup).
 *
 * Preloaded before lockstep's PMPI profiler, it takes the blocking calls the profiler passes on (PMPI_Send,
 * PMPI_Recv, PMPI_Sendrecv, PMPI_Sendrecv_replace, PMPI_Wait, PMPI_Waitall, PMPI_Barrier, PMPI_Bcast, PMPI_Reduce,
 * PMPI_Allreduce, PMPI_Alltoall, PMPI_Alltoallv) and makes each its non-blocking form, then tests it until done,
 * sleeping SLEEPING_WAITS_US microseconds (1 by default) between tests, with the timer slack at 1 ns. What the
 * profiler counts is unchanged: it counts the calls the program makes, and these tests are not among them (its
 * time inside calls now includes the sleeps). The collectives become the library's non-blocking ones (Open MPI:
 * libnbc), other algorithms that advance only when tested: what this measures is that too, not the fill alone.
 * Blocking calls not named here wait as the library does. A Sendrecv_replace of a datatype whose data is not one
 * contiguous block goes to the library's own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

static struct timespec pause_for = { 0, 1000 };

/* Reads the sleep between two tests once, and sets the timer slack so that the sleep is as asked. */
__attribute__((constructor)) static void setup(void)
{
    const char *us = getenv("SLEEPING_WAITS_US");
    if (us && *us) {
        long n = strtol(us, NULL, 10);
        if (n > 0 && n < 1000000)
            pause_for.tv_nsec = n * 1000;
    }
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

/* Tests the N requests (N <= 2) until all are done, sleeping between two tests; the error of the first that
 * failed, as the blocking call would return it (never MPI_ERR_IN_STATUS). */
static int settle(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    MPI_Status own[2];
    MPI_Status *st = statuses == MPI_STATUSES_IGNORE ? own : statuses;
    for (;;) {
        int done = 0;
        int rc = PMPI_Testall(n, reqs, &done, st);
        if (rc == MPI_ERR_IN_STATUS) {
            for (int i = 0; i < n; i++)
                if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING)
                    return st[i].MPI_ERROR;
        }
        if (rc != MPI_SUCCESS || done)
            return rc;
        nanosleep(&pause_for, NULL);
    }
}

/* One request started by CALL (which sets `req`), settled; STATUS as the blocking call's. */
#define ONE(call, status)                                                                                              \
    do {                                                                                                               \
        MPI_Request req;                                                                                               \
        int rc = call;                                                                                                 \
        return rc == MPI_SUCCESS ? settle(1, &req, (status)) : rc;                                                     \
    } while (0)

int PMPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    ONE(PMPI_Isend(buf, count, type, dest, tag, comm, &req), MPI_STATUSES_IGNORE);
}

int PMPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    ONE(PMPI_Irecv(buf, count, type, source, tag, comm, &req),
        status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status);
}

int PMPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
                  MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Request reqs[2];
    MPI_Status statuses[2];
    int rc = PMPI_Irecv(rbuf, rcount, rtype, source, rtag, comm, &reqs[0]);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = PMPI_Isend(sbuf, scount, stype, dest, stag, comm, &reqs[1]);
    if (rc != MPI_SUCCESS) {
        /* The receive is withdrawn, not waited for: its message may never come. */
        PMPI_Cancel(&reqs[0]);
        PMPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
        return rc;
    }
    rc = settle(2, reqs, statuses);
    if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE) {
        int kept = status->MPI_ERROR;
        *status = statuses[0];
        status->MPI_ERROR = kept;
    }
    return rc;
}

int PMPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int stag, int source, int rtag,
                          MPI_Comm comm, MPI_Status *status)
{
    int size = 0;
    MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
    int simple = PMPI_Type_size(type, &size) == MPI_SUCCESS && PMPI_Type_get_extent(type, &lb, &extent) == MPI_SUCCESS &&
                 PMPI_Type_get_true_extent(type, &true_lb, &true_extent) == MPI_SUCCESS && lb == 0 &&
                 extent == size && true_lb == 0 && true_extent == size;
    void *copy = count > 0 && size > 0 && simple ? malloc((size_t)size * (size_t)count) : NULL;
    if (!copy) {
        typedef int (*replace_fn)(void *, int, MPI_Datatype, int, int, int, int, MPI_Comm, MPI_Status *);
        replace_fn own = (replace_fn)dlsym(RTLD_NEXT, "PMPI_Sendrecv_replace");
        if (!own)
            return MPI_ERR_INTERN;
        return own(buf, count, type, dest, stag, source, rtag, comm, status);
    }
    int rc = PMPI_Sendrecv(buf, count, type, dest, stag, copy, count, type, source, rtag, comm, status);
    if (rc == MPI_SUCCESS)
        memcpy(buf, copy, (size_t)size * (size_t)count);
    free(copy);
    return rc;
}

int PMPI_Wait(MPI_Request *req, MPI_Status *status)
{
    return settle(1, req, status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status);
}

int PMPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    /* MPI_ERR_IN_STATUS is Waitall's own way to fail: the library's answer as it is. */
    for (;;) {
        int done = 0;
        int rc = PMPI_Testall(n, reqs, &done, statuses);
        if (rc != MPI_SUCCESS || done)
            return rc;
        nanosleep(&pause_for, NULL);
    }
}

int PMPI_Barrier(MPI_Comm comm)
{
    ONE(PMPI_Ibarrier(comm, &req), MPI_STATUSES_IGNORE);
}

int PMPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    ONE(PMPI_Ibcast(buf, count, type, root, comm, &req), MPI_STATUSES_IGNORE);
}

int PMPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm)
{
    ONE(PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, &req), MPI_STATUSES_IGNORE);
}

int PMPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    ONE(PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, &req), MPI_STATUSES_IGNORE);
}

int PMPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm)
{
    ONE(PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, &req), MPI_STATUSES_IGNORE);
}

int PMPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm)
{
    ONE(PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, &req),
        MPI_STATUSES_IGNORE);
}
