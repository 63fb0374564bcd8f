/*
 * liblockstep-pmpi.so — an MPI communication profiler loaded with LD_PRELOAD, through the MPI profiling
 * interface (every MPI_X here calls PMPI_X).
 *
 * Per rank it counts, for each intercepted function and for each call family (point-to-point, collectives,
 * wait/test, one-sided): calls, seconds inside the call, and payload bytes. At MPI_Finalize it writes one JSON
 * line with those and the wall time from the end of MPI_Init to the start of MPI_Finalize, to the file named by
 * LOCKSTEP_PMPI_OUT (appended with a single write) or, when that names a directory, to a file of its own there.
 * Nothing is written when LOCKSTEP_PMPI_OUT is unset.
 *
 * Time is read with the TSC on x86-64 when the CPU says it is constant and non-stop (a few ns per read, against
 * ~30 ns for clock_gettime in a VM), converted to seconds by calibrating against CLOCK_MONOTONIC over the whole
 * run; elsewhere with clock_gettime.
 *
 * While the run lasts, each rank also publishes a live count of the calls that make progress (every intercepted
 * call but the polling ones: MPI_Test*, MPI_Iprobe) in a 64-byte memory file of its own, named LIVE_NAME
 * (memfd_create: the name is a label, in no directory; readlink of the rank's /proc/PID/fd entry shows
 * "/memfd:lockstep-pmpi (deleted)"). The rank holds it open and mapped until MPI_Finalize or exit, which clear its
 * magic, and the kernel frees it with the rank's last reference, however the rank ends. No other user can plant,
 * replace or hold such a file for a rank (there is no name in a shared directory to take first), nor read it: the
 * lockstep agent finds each rank's file through the rank itself (/proc/PID/fd, CAP_SYS_PTRACE and
 * CAP_DAC_READ_SEARCH) and reads it there. Its `auto` policy reads it to tell how fast the job progresses (a rank
 * spinning in MPI_Wait burns CPU but completes no more calls). LOCKSTEP_PMPI_LIVE=0 turns it off. Layout:
 * "LSPMPI1\0", the process's start time (clock ticks since boot, /proc/self/stat field 22), the count;
 * native-endian 64-bit words.
 *
 * Bytes are the payload this rank hands to MPI to send (for Recv: the bytes actually received; for Irecv: the
 * posted size). Counters are plain per-process integers: with MPI_THREAD_MULTIPLE and concurrent calls they are
 * approximate.
 *
 * Settings are read with secure_getenv: in a set-user-ID or set-group-ID program the profiler is preloaded into
 * (the loader preloads such a program only from its trusted directories), the environment of whoever ran it
 * is not believed, and the profiler writes no report and no live file of the caller's choosing.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "families.h"

/* The label of a rank's live file, which the agent looks for among the rank's open files. */
#define LIVE_NAME "lockstep-pmpi"
/* memfd_create's flag for a file that can never be made executable (Linux 6.3; older headers lack it). */
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

enum family { P2P, COLL, WAIT, RMA, NFAMILIES };
static const char *const FAMILY_NAMES[NFAMILIES] = { "p2p", "collective", "wait", "rma" };

#define ENUM_ENTRY(name, fam) F_##name,
enum function { LOCKSTEP_PMPI_FUNCTIONS(ENUM_ENTRY) NFUNCTIONS };
#define NAME_ENTRY(name, fam) "MPI_" #name,
static const char *const FUNCTION_NAMES[NFUNCTIONS] = { LOCKSTEP_PMPI_FUNCTIONS(NAME_ENTRY) };
#define FAMILY_ENTRY(name, fam) fam,
static const enum family FUNCTION_FAMILY[NFUNCTIONS] = { LOCKSTEP_PMPI_FUNCTIONS(FAMILY_ENTRY) };

struct counter {
    uint64_t calls, bytes, ticks;
};

static struct counter counters[NFUNCTIONS];

/* The live count the agent reads (see the top of this file). */
struct live {
    char magic[8];
    uint64_t start_time;
    uint64_t calls;
    uint64_t reserved[5];
};
static struct live *live;
static int live_fd = -1;
static uint64_t live_calls;
static uint64_t init_ns, init_ticks;
static int thread_level = -1;
static int use_tsc;

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The clock the wrappers read: TSC ticks where usable, else nanoseconds. */
static inline uint64_t ticks(void)
{
#if defined(__x86_64__)
    if (use_tsc)
        return __rdtsc();
#endif
    return now_ns();
}

/* Whether /proc/cpuinfo lists both constant_tsc and nonstop_tsc (a TSC that ticks at one rate in every state). */
static int tsc_usable(void)
{
#if defined(__x86_64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    int ok = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0) {
            ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
            break;
        }
    if (f)
        fclose(f);
    return ok;
#else
    return 0;
#endif
}

/* This process's start time in clock ticks since boot (field 22 of /proc/self/stat), 0 if unreadable. */
static uint64_t start_time(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* Ends the live count: its magic is cleared (a reader that holds the file sees the count is over), then the file
 * is unmapped and closed (the kernel frees it with the last reference). */
static void live_stop(void)
{
    if (!live)
        return;
    __atomic_store_n(&live->magic[0], 0, __ATOMIC_RELEASE);
    munmap(live, sizeof *live);
    live = NULL;
    close(live_fd);
    live_fd = -1;
}

/* Creates this rank's live file: a memory file of its own (see the top of this file), so that nothing another user
 * put in a shared directory can take its place or stop it. Kernels that refuse MFD_NOEXEC_SEAL (before 6.3) get
 * the file without it; where the kernel has no memfd_create the rank goes on without a live file (the agent then
 * measures it by the time its ranks run). */
static void live_start(void)
{
    const char *on = secure_getenv("LOCKSTEP_PMPI_LIVE");
    if (live || (on && strcmp(on, "0") == 0))
        return;
    int fd = memfd_create(LIVE_NAME, MFD_CLOEXEC | MFD_NOEXEC_SEAL);
    if (fd < 0 && errno == EINVAL)
        fd = memfd_create(LIVE_NAME, MFD_CLOEXEC);
    if (fd < 0)
        return;
    void *map = MAP_FAILED;
    if (ftruncate(fd, sizeof *live) == 0)
        map = mmap(NULL, sizeof *live, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        close(fd);
        return;
    }
    live = map;
    live_fd = fd;
    live->start_time = start_time();
    memcpy(live->magic, "LSPMPI1", 8);
    atexit(live_stop);
}

/* Marks the start of the measured run: called when MPI_Init returns. */
static void start_clock(void)
{
    use_tsc = tsc_usable();
    init_ns = now_ns();
    init_ticks = ticks();
    live_start();
}

/* Whether a call of f counts as progress in the live count (polling calls do not). */
static inline int makes_progress(enum function f)
{
    return f != F_Iprobe && f != F_Test && f != F_Testall && f != F_Testany && f != F_Testsome;
}

static inline void record(enum function f, uint64_t t0, uint64_t bytes)
{
    struct counter *c = &counters[f];
    c->ticks += ticks() - t0;
    c->calls++;
    c->bytes += bytes;
    if (live && makes_progress(f))
        __atomic_store_n(&live->calls, ++live_calls, __ATOMIC_RELAXED);
}

static inline uint64_t nbytes(int count, MPI_Datatype type)
{
    int size = 0;
    if (count <= 0 || type == MPI_DATATYPE_NULL)
        return 0;
    PMPI_Type_size(type, &size);
    return (uint64_t)count * (uint64_t)size;
}

/* Payload of a v-variant: the sum of counts over the communicator's ranks. */
static uint64_t nbytes_v(const int counts[], MPI_Datatype type, MPI_Comm comm)
{
    int n = 0;
    uint64_t total = 0;
    PMPI_Comm_size(comm, &n);
    for (int i = 0; i < n; i++)
        total += nbytes(counts[i], type);
    return total;
}

/* Wraps one call: time it and count it. */
#define TIMED(fn, bytes, call)                                                                                      \
    do {                                                                                                            \
        uint64_t t0_ = ticks();                                                                                    \
        int rc_ = call;                                                                                             \
        record(F_##fn, t0_, bytes);                                                                                 \
        return rc_;                                                                                                 \
    } while (0)

/* ---- setup and output ---- */

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    thread_level = MPI_THREAD_SINGLE;
    start_clock();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    thread_level = *provided;
    start_clock();
    return rc;
}

/* Appends to buf (capacity cap, length *len) like printf; output beyond cap is dropped. */
__attribute__((format(printf, 4, 5))) static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (*len < cap) {
        int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
        *len += n > 0 ? (size_t)n : 0;
    }
    va_end(ap);
}

/* Appends `s` as a JSON string (quotes, backslashes and control bytes escaped): the job name comes from the
 * environment, which the rank's user sets, and must not add keys of its own to the report. */
static void put_string(char *buf, size_t cap, size_t *len, const char *s)
{
    put(buf, cap, len, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            put(buf, cap, len, "\\%c", *p);
        else if (*p < 0x20)
            put(buf, cap, len, "\\u%04x", *p);
        else
            put(buf, cap, len, "%c", *p);
    }
    put(buf, cap, len, "\"");
}

static void write_report(uint64_t end_ns, uint64_t end_ticks)
{
    const char *out = secure_getenv("LOCKSTEP_PMPI_OUT");
    if (!out || !*out)
        return;
    int rank = 0, size = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[256] = "";
    gethostname(host, sizeof host - 1);

    struct counter fam[NFAMILIES] = { 0 }, all = { 0 };
    for (int f = 0; f < NFUNCTIONS; f++) {
        struct counter *c = &counters[f], *g = &fam[FUNCTION_FAMILY[f]];
        g->calls += c->calls, g->bytes += c->bytes, g->ticks += c->ticks;
        all.calls += c->calls, all.bytes += c->bytes, all.ticks += c->ticks;
    }
    double wall = (end_ns - init_ns) / 1e9;
    /* Seconds per tick, calibrated over the run (1e-9 when ticks are nanoseconds). */
    double spt = end_ticks > init_ticks ? wall / (double)(end_ticks - init_ticks) : 1e-9;
    double mpi = all.ticks * spt;
    static char buf[1 << 16];
    size_t len = 0, cap = sizeof buf - 2;
    const char *job = secure_getenv("LOCKSTEP_JOB");
    if (!job)
        job = secure_getenv("SLURM_JOB_ID");
    put(buf, cap, &len, "{\"rank\":%d,\"size\":%d,\"host\":", rank, size);
    put_string(buf, cap, &len, host);
    put(buf, cap, &len, ",\"pid\":%ld,", (long)getpid());
    if (job) {
        put(buf, cap, &len, "\"job\":");
        put_string(buf, cap, &len, job);
        put(buf, cap, &len, ",");
    }
    put(buf, cap, &len, "\"thread_level\":%d,\"wall_s\":%.9f,\"mpi_s\":%.9f,\"comm_ratio\":%.6f,", thread_level, wall,
        mpi, wall > 0 ? mpi / wall : 0.0);
    put(buf, cap, &len, "\"calls\":%llu,\"bytes\":%llu,\"families\":{", (unsigned long long)all.calls,
        (unsigned long long)all.bytes);
    for (int g = 0; g < NFAMILIES; g++)
        put(buf, cap, &len, "%s\"%s\":{\"calls\":%llu,\"time_s\":%.9f,\"bytes\":%llu}", g ? "," : "", FAMILY_NAMES[g],
            (unsigned long long)fam[g].calls, fam[g].ticks * spt, (unsigned long long)fam[g].bytes);
    put(buf, cap, &len, "},\"functions\":{");
    int first = 1;
    for (int f = 0; f < NFUNCTIONS; f++) {
        if (!counters[f].calls)
            continue;
        put(buf, cap, &len, "%s\"%s\":{\"calls\":%llu,\"time_s\":%.9f,\"bytes\":%llu}", first ? "" : ",",
            FUNCTION_NAMES[f], (unsigned long long)counters[f].calls, counters[f].ticks * spt,
            (unsigned long long)counters[f].bytes);
        first = 0;
    }
    put(buf, cap, &len, "}}");
    if (len > cap) /* truncated: keep the line well-formed JSON at least by saying so */
        len = (size_t)snprintf(buf, cap, "{\"rank\":%d,\"error\":\"report too long\"}", rank);
    buf[len++] = '\n';

    char path[4096];
    struct stat st;
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(path, sizeof path, "%s/pmpi.%s.%ld.rank%d.json", out, host, (long)getpid(), rank);
        out = path;
    }
    /* Never through a link, never blocking on a FIFO planted at the path, and only into a regular file. */
    int fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
        errno = EINVAL;
    }
    if (fd < 0 || write(fd, buf, len) != (ssize_t)len)
        fprintf(stderr, "liblockstep-pmpi: cannot write %s: %s\n", out, strerror(errno));
    if (fd >= 0)
        close(fd);
}

int MPI_Finalize(void)
{
    uint64_t end_ticks = ticks();
    live_stop();
    write_report(now_ns(), end_ticks);
    return PMPI_Finalize();
}

/* ---- point-to-point ---- */

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    TIMED(Send, nbytes(count, type), PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    TIMED(Ssend, nbytes(count, type), PMPI_Ssend(buf, count, type, dest, tag, comm));
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    TIMED(Bsend, nbytes(count, type), PMPI_Bsend(buf, count, type, dest, tag, comm));
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    TIMED(Rsend, nbytes(count, type), PMPI_Rsend(buf, count, type, dest, tag, comm));
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    TIMED(Isend, nbytes(count, type), PMPI_Isend(buf, count, type, dest, tag, comm, req));
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    TIMED(Issend, nbytes(count, type), PMPI_Issend(buf, count, type, dest, tag, comm, req));
}

int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    TIMED(Ibsend, nbytes(count, type), PMPI_Ibsend(buf, count, type, dest, tag, comm, req));
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req)
{
    TIMED(Irsend, nbytes(count, type), PMPI_Irsend(buf, count, type, dest, tag, comm, req));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    uint64_t t0 = ticks();
    int rc = PMPI_Recv(buf, count, type, source, tag, comm, st);
    int got = 0;
    if (rc == MPI_SUCCESS && PMPI_Get_count(st, type, &got) == MPI_SUCCESS && got == MPI_UNDEFINED)
        got = 0;
    record(F_Recv, t0, nbytes(got, type));
    return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    TIMED(Irecv, nbytes(count, type), PMPI_Irecv(buf, count, type, source, tag, comm, req));
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
                 MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
    TIMED(Sendrecv, nbytes(scount, stype),
          PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, status));
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int stag, int source, int rtag,
                         MPI_Comm comm, MPI_Status *status)
{
    TIMED(Sendrecv_replace, nbytes(count, type),
          PMPI_Sendrecv_replace(buf, count, type, dest, stag, source, rtag, comm, status));
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    TIMED(Probe, 0, PMPI_Probe(source, tag, comm, status));
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    TIMED(Iprobe, 0, PMPI_Iprobe(source, tag, comm, flag, status));
}

int MPI_Start(MPI_Request *req)
{
    TIMED(Start, 0, PMPI_Start(req));
}

int MPI_Startall(int n, MPI_Request reqs[])
{
    TIMED(Startall, 0, PMPI_Startall(n, reqs));
}

/* ---- wait and test ---- */

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    TIMED(Wait, 0, PMPI_Wait(req, status));
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    TIMED(Waitall, 0, PMPI_Waitall(n, reqs, statuses));
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    TIMED(Waitany, 0, PMPI_Waitany(n, reqs, index, status));
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    TIMED(Waitsome, 0, PMPI_Waitsome(n, reqs, outcount, indices, statuses));
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    TIMED(Test, 0, PMPI_Test(req, flag, status));
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    TIMED(Testall, 0, PMPI_Testall(n, reqs, flag, statuses));
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    TIMED(Testany, 0, PMPI_Testany(n, reqs, index, flag, status));
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    TIMED(Testsome, 0, PMPI_Testsome(n, reqs, outcount, indices, statuses));
}

/* ---- collectives: bytes are what this rank contributes (0 for an in-place send side) ---- */

#define SENT(buf, count, type) ((buf) == MPI_IN_PLACE ? 0 : nbytes(count, type))

int MPI_Barrier(MPI_Comm comm)
{
    TIMED(Barrier, 0, PMPI_Barrier(comm));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    TIMED(Bcast, nbytes(count, type), PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm)
{
    TIMED(Reduce, nbytes(count, type), PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    TIMED(Allreduce, nbytes(count, type), PMPI_Allreduce(sbuf, rbuf, count, type, op, comm));
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
               int root, MPI_Comm comm)
{
    TIMED(Gather, SENT(sbuf, scount, stype), PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm)
{
    TIMED(Gatherv, SENT(sbuf, scount, stype),
          PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                int root, MPI_Comm comm)
{
    int rank;
    PMPI_Comm_rank(comm, &rank);
    int n = 1;
    PMPI_Comm_size(comm, &n);
    TIMED(Scatter, rank == root ? SENT(sbuf, scount, stype) * (uint64_t)n : 0,
          PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *rbuf,
                 int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    int rank;
    PMPI_Comm_rank(comm, &rank);
    TIMED(Scatterv, rank == root ? nbytes_v(scounts, stype, comm) : 0,
          PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm)
{
    TIMED(Allgather, SENT(sbuf, scount, stype), PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                   const int displs[], MPI_Datatype rtype, MPI_Comm comm)
{
    TIMED(Allgatherv, SENT(sbuf, scount, stype),
          PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                 MPI_Comm comm)
{
    int n = 1;
    PMPI_Comm_size(comm, &n);
    TIMED(Alltoall, SENT(sbuf, scount, stype) * (uint64_t)n,
          PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf,
                  const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm)
{
    TIMED(Alltoallv, sbuf == MPI_IN_PLACE ? 0 : nbytes_v(scounts, stype, comm),
          PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm));
}

int MPI_Alltoallw(const void *sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[],
                  void *rbuf, const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm)
{
    uint64_t bytes = 0;
    if (sbuf != MPI_IN_PLACE) {
        int n = 1;
        PMPI_Comm_size(comm, &n);
        for (int i = 0; i < n; i++)
            bytes += nbytes(scounts[i], stypes[i]);
    }
    TIMED(Alltoallw, bytes, PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm));
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm)
{
    TIMED(Reduce_scatter, nbytes_v(rcounts, type, comm), PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm));
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    int n = 1;
    PMPI_Comm_size(comm, &n);
    TIMED(Reduce_scatter_block, nbytes(rcount, type) * (uint64_t)n,
          PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm));
}

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    TIMED(Scan, nbytes(count, type), PMPI_Scan(sbuf, rbuf, count, type, op, comm));
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    TIMED(Exscan, nbytes(count, type), PMPI_Exscan(sbuf, rbuf, count, type, op, comm));
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
    TIMED(Ibarrier, 0, PMPI_Ibarrier(comm, req));
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request *req)
{
    TIMED(Ibcast, nbytes(count, type), PMPI_Ibcast(buf, count, type, root, comm, req));
}

int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request *req)
{
    TIMED(Ireduce, nbytes(count, type), PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, req));
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request *req)
{
    TIMED(Iallreduce, nbytes(count, type), PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req));
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                   MPI_Comm comm, MPI_Request *req)
{
    TIMED(Iallgather, SENT(sbuf, scount, stype),
          PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm, MPI_Request *req)
{
    int n = 1;
    PMPI_Comm_size(comm, &n);
    TIMED(Ialltoall, SENT(sbuf, scount, stype) * (uint64_t)n,
          PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
}

/* ---- one-sided ---- */

int MPI_Put(const void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
            MPI_Datatype ttype, MPI_Win win)
{
    TIMED(Put, nbytes(ocount, otype), PMPI_Put(obuf, ocount, otype, target, tdisp, tcount, ttype, win));
}

int MPI_Get(void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype,
            MPI_Win win)
{
    TIMED(Get, nbytes(ocount, otype), PMPI_Get(obuf, ocount, otype, target, tdisp, tcount, ttype, win));
}

int MPI_Accumulate(const void *obuf, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
                   MPI_Datatype ttype, MPI_Op op, MPI_Win win)
{
    TIMED(Accumulate, nbytes(ocount, otype),
          PMPI_Accumulate(obuf, ocount, otype, target, tdisp, tcount, ttype, op, win));
}

int MPI_Get_accumulate(const void *obuf, int ocount, MPI_Datatype otype, void *rbuf, int rcount,
                       MPI_Datatype rtype, int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Op op,
                       MPI_Win win)
{
    TIMED(Get_accumulate, nbytes(ocount, otype),
          PMPI_Get_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, target, tdisp, tcount, ttype, op, win));
}

int MPI_Fetch_and_op(const void *obuf, void *rbuf, MPI_Datatype type, int target, MPI_Aint tdisp, MPI_Op op,
                     MPI_Win win)
{
    TIMED(Fetch_and_op, nbytes(1, type), PMPI_Fetch_and_op(obuf, rbuf, type, target, tdisp, op, win));
}

int MPI_Compare_and_swap(const void *obuf, const void *cbuf, void *rbuf, MPI_Datatype type, int target,
                         MPI_Aint tdisp, MPI_Win win)
{
    TIMED(Compare_and_swap, nbytes(1, type), PMPI_Compare_and_swap(obuf, cbuf, rbuf, type, target, tdisp, win));
}

int MPI_Win_fence(int assert, MPI_Win win)
{
    TIMED(Win_fence, 0, PMPI_Win_fence(assert, win));
}

int MPI_Win_lock(int type, int rank, int assert, MPI_Win win)
{
    TIMED(Win_lock, 0, PMPI_Win_lock(type, rank, assert, win));
}

int MPI_Win_unlock(int rank, MPI_Win win)
{
    TIMED(Win_unlock, 0, PMPI_Win_unlock(rank, win));
}

int MPI_Win_lock_all(int assert, MPI_Win win)
{
    TIMED(Win_lock_all, 0, PMPI_Win_lock_all(assert, win));
}

int MPI_Win_unlock_all(MPI_Win win)
{
    TIMED(Win_unlock_all, 0, PMPI_Win_unlock_all(win));
}

int MPI_Win_flush(int rank, MPI_Win win)
{
    TIMED(Win_flush, 0, PMPI_Win_flush(rank, win));
}

int MPI_Win_flush_all(MPI_Win win)
{
    TIMED(Win_flush_all, 0, PMPI_Win_flush_all(win));
}

int MPI_Win_start(MPI_Group group, int assert, MPI_Win win)
{
    TIMED(Win_start, 0, PMPI_Win_start(group, assert, win));
}

int MPI_Win_complete(MPI_Win win)
{
    TIMED(Win_complete, 0, PMPI_Win_complete(win));
}

int MPI_Win_post(MPI_Group group, int assert, MPI_Win win)
{
    TIMED(Win_post, 0, PMPI_Win_post(group, assert, win));
}

int MPI_Win_wait(MPI_Win win)
{
    TIMED(Win_wait, 0, PMPI_Win_wait(win));
}

int MPI_Win_sync(MPI_Win win)
{
    TIMED(Win_sync, 0, PMPI_Win_sync(win));
}
