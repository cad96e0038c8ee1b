/*
 * bench.h - what coll_gpu_bench.c shares with its two optional parts:
 *   bench_nccl.c   the nccl backend (NCCL called directly on the same device buffers), built only
 *                  when configure found NCCL and CUDA (COLL_GPU_BENCH_NCCL);
 *   bench_floor.cu the latency floor of the cuda device (one empty kernel plus host-observed
 *                  completion) and the GPU compute phase of the overlap figure, built only
 *                  with the cuda backend (COLL_GPU_BENCH_FLOOR).
 * The main program never includes a CUDA or NCCL header: it sees only these declarations.
 */
#ifndef COLL_GPU_BENCH_H
#define COLL_GPU_BENCH_H

#include <stddef.h>

#include "dev.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    BENCH_ALLREDUCE,
    BENCH_BCAST,
    BENCH_ALLGATHER,
    BENCH_REDUCE_SCATTER_BLOCK,
    BENCH_ALLGATHERV, /* equal counts: the bytes of allgather */
    BENCH_ALLTOALL,
    BENCH_ALLTOALLV, /* equal counts: the bytes of alltoall */
    BENCH_REDUCE_SCATTER, /* equal counts: the bytes of reduce_scatter_block */
    BENCH_COLL_COUNT
} bench_coll_t;

/* ---- nccl backend (bench_nccl.c) ------------------------------------------------------- */

#ifndef COLL_GPU_BENCH_NO_MPI
#include <mpi.h>

typedef struct bench_nccl bench_nccl_t;

/* Collective over comm: every rank calls it and every rank gets the same verdict.  On success
 * *ctx holds an NCCL communicator over the ranks of comm (same rank order) and a CUDA stream on
 * device `ordinal`; on failure *ctx is NULL and why says what went wrong. */
int bench_nccl_init(bench_nccl_t **ctx, MPI_Comm comm, int ordinal, char *why, size_t len);
void bench_nccl_fini(bench_nccl_t *ctx);
/* "2.28.3", or why NCCL cannot be asked. */
void bench_nccl_version(char *buf, size_t len);
/* Whether NCCL has this type and op (0: it does; otherwise why not is written to why). */
int bench_nccl_supports(dev_dtype_t dtype, dev_op_t op, char *why, size_t len);
/* One collective on the stream, then cudaStreamSynchronize: when it returns the result is in
 * rbuf, as after an MPI call.  count follows MPI: allreduce and bcast the whole buffer, the
 * others one block (allgather: the elements each rank sends, alltoall: to each peer,
 * reduce_scatter: each rank gets).  NCCL has no v forms and no alltoall: allgatherv runs
 * ncclAllGather, alltoall and alltoallv one ncclSend and one ncclRecv per peer in a group. */
int bench_nccl_run(bench_nccl_t *ctx, bench_coll_t coll, const void *sbuf, void *rbuf,
                   size_t count, dev_dtype_t dtype, dev_op_t op, int root, char *why,
                   size_t len);
#endif

/* ---- latency floor (bench_floor.cu) ---------------------------------------------------- */

/* On device `ordinal`, the median over `reps` launches of
 *   spin_us: an empty kernel that writes a flag into mapped pinned host memory, the host
 *            spinning on that flag until it changes;
 *   sync_us: an empty kernel followed by cudaStreamSynchronize.
 * Returns 0, or -1 with the reason in why. */
int bench_floor_measure(int ordinal, int reps, double *spin_us, double *sync_us, char *why,
                        size_t len);
/* The compute phase of the overlap figure: a kernel of one warp that runs for us microseconds
 * on a stream of its own (start returns at once), and the wait for its end.  0, or -1 with the
 * reason in why. */
int bench_compute_start(double us, char *why, size_t len);
int bench_compute_wait(char *why, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* COLL_GPU_BENCH_H */
