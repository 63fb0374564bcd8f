/*
 * The MPI functions the profiler intercepts, by call family. X(name, family) for each; the wrappers themselves
 * are in lockstep_pmpi.c.
 */
#define LOCKSTEP_PMPI_FUNCTIONS(X)                                                                                  \
    X(Send, P2P) X(Ssend, P2P) X(Bsend, P2P) X(Rsend, P2P) X(Isend, P2P) X(Issend, P2P) X(Ibsend, P2P)             \
    X(Irsend, P2P) X(Recv, P2P) X(Irecv, P2P) X(Sendrecv, P2P) X(Sendrecv_replace, P2P) X(Probe, P2P)              \
    X(Iprobe, P2P) X(Start, P2P) X(Startall, P2P)                                                                   \
    X(Wait, WAIT) X(Waitall, WAIT) X(Waitany, WAIT) X(Waitsome, WAIT) X(Test, WAIT) X(Testall, WAIT)               \
    X(Testany, WAIT) X(Testsome, WAIT)                                                                              \
    X(Barrier, COLL) X(Bcast, COLL) X(Reduce, COLL) X(Allreduce, COLL) X(Gather, COLL) X(Gatherv, COLL)           \
    X(Scatter, COLL) X(Scatterv, COLL) X(Allgather, COLL) X(Allgatherv, COLL) X(Alltoall, COLL)                    \
    X(Alltoallv, COLL) X(Alltoallw, COLL) X(Reduce_scatter, COLL) X(Reduce_scatter_block, COLL) X(Scan, COLL)     \
    X(Exscan, COLL) X(Ibarrier, COLL) X(Ibcast, COLL) X(Ireduce, COLL) X(Iallreduce, COLL) X(Iallgather, COLL)    \
    X(Ialltoall, COLL)                                                                                              \
    X(Put, RMA) X(Get, RMA) X(Accumulate, RMA) X(Get_accumulate, RMA) X(Fetch_and_op, RMA)                         \
    X(Compare_and_swap, RMA) X(Win_fence, RMA) X(Win_lock, RMA) X(Win_unlock, RMA) X(Win_lock_all, RMA)            \
    X(Win_unlock_all, RMA) X(Win_flush, RMA) X(Win_flush_all, RMA) X(Win_start, RMA) X(Win_complete, RMA)          \
    X(Win_post, RMA) X(Win_wait, RMA) X(Win_sync, RMA)
