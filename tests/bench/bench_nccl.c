/*
 * bench_nccl.c - the benchmark's nccl backend: NCCL called directly, side by side with MPI.
 *
 * Same processes, same device buffers, same sizes as the mpi backend.  Rank 0 draws the NCCL
 * unique id and broadcasts it with MPI (a host buffer); every rank joins one NCCL communicator
 * with its MPI rank.  Each call is enqueued on a CUDA stream and followed by
 * cudaStreamSynchronize, so that, as with MPI's blocking collectives, the data is final when the
 * timed call returns.
 *
 * Built only when configure found NCCL and the CUDA runtime (HAVE_NCCL); the rest of the
 * benchmark sees only bench.h.
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

struct bench_nccl {
    ncclComm_t comm;
    cudaStream_t stream;
    int nranks;
};

void bench_nccl_version(char *buf, size_t len)
{
    int v = 0;
    if (ncclSuccess != ncclGetVersion(&v)) {
        snprintf(buf, len, "unknown");
        return;
    }
    /* NCCL >= 2.9 encodes major*10000 + minor*100 + patch */
    snprintf(buf, len, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}

static int map_type(dev_dtype_t dtype, ncclDataType_t *out)
{
    switch (dtype) {
    case DEV_T_INT8:   *out = ncclInt8;    return 0;
    case DEV_T_UINT8:  *out = ncclUint8;   return 0;
    case DEV_T_INT32:  *out = ncclInt32;   return 0;
    case DEV_T_UINT32: *out = ncclUint32;  return 0;
    case DEV_T_INT64:  *out = ncclInt64;   return 0;
    case DEV_T_UINT64: *out = ncclUint64;  return 0;
    case DEV_T_FLOAT:  *out = ncclFloat32; return 0;
    case DEV_T_DOUBLE: *out = ncclFloat64; return 0;
    default:           return -1;
    }
}

static int map_op(dev_op_t op, ncclRedOp_t *out)
{
    switch (op) {
    case DEV_OP_SUM:  *out = ncclSum;  return 0;
    case DEV_OP_PROD: *out = ncclProd; return 0;
    case DEV_OP_MIN:  *out = ncclMin;  return 0;
    case DEV_OP_MAX:  *out = ncclMax;  return 0;
    default:          return -1;
    }
}

int bench_nccl_supports(dev_dtype_t dtype, dev_op_t op, char *why, size_t len)
{
    ncclDataType_t t;
    ncclRedOp_t o;
    if (0 != map_type(dtype, &t)) {
        snprintf(why, len, "NCCL has no %s type", dev_dtype_name(dtype));
        return -1;
    }
    if (0 != map_op(op, &o)) {
        snprintf(why, len, "NCCL has no %s op", dev_op_name(op));
        return -1;
    }
    return 0;
}

/* Every rank's verdict, so that no rank enters ncclCommInitRank while another gave up. */
static int all_ok(MPI_Comm comm, int ok)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    return all;
}

int bench_nccl_init(bench_nccl_t **ctx, MPI_Comm comm, int ordinal, char *why, size_t len)
{
    struct {
        int ok;
        ncclUniqueId id;
    } root_msg;
    ncclComm_t ncomm = NULL;
    cudaStream_t stream = NULL;
    cudaError_t cerr;
    ncclResult_t nerr;
    int rank, size, ok = 1;

    *ctx = NULL;
    why[0] = '\0';
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);

    cerr = cudaSetDevice(ordinal);
    if (cudaSuccess == cerr) {
        cerr = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    }
    if (cudaSuccess != cerr) {
        snprintf(why, len, "rank %d: CUDA device %d: %s", rank, ordinal, cudaGetErrorString(cerr));
        ok = 0;
    }
    if (!all_ok(comm, ok)) {
        goto fail;
    }

    memset(&root_msg, 0, sizeof(root_msg));
    if (0 == rank) {
        nerr = ncclGetUniqueId(&root_msg.id);
        root_msg.ok = ncclSuccess == nerr;
        if (!root_msg.ok) {
            snprintf(why, len, "ncclGetUniqueId: %s", ncclGetErrorString(nerr));
        }
    }
    MPI_Bcast(&root_msg, (int) sizeof(root_msg), MPI_BYTE, 0, comm);
    if (!root_msg.ok) {
        if ('\0' == why[0]) {
            snprintf(why, len, "ncclGetUniqueId failed on rank 0");
        }
        goto fail;
    }

    nerr = ncclCommInitRank(&ncomm, size, root_msg.id, rank);
    if (ncclSuccess != nerr) {
        snprintf(why, len, "rank %d: ncclCommInitRank: %s%s%s", rank, ncclGetErrorString(nerr),
                 ncclGetLastError(NULL)[0] ? ": " : "", ncclGetLastError(NULL));
        ncomm = NULL;
        ok = 0;
    }
    if (!all_ok(comm, ok)) {
        goto fail;
    }

    *ctx = (bench_nccl_t *) calloc(1, sizeof(**ctx));
    if (NULL == *ctx) {
        snprintf(why, len, "out of memory");
        goto fail;
    }
    (*ctx)->comm = ncomm;
    (*ctx)->stream = stream;
    (*ctx)->nranks = size;
    return 0;

fail:
    if ('\0' == why[0]) {
        snprintf(why, len, "failed on another rank");
    }
    if (NULL != ncomm) {
        ncclCommDestroy(ncomm);
    }
    if (NULL != stream) {
        cudaStreamDestroy(stream);
    }
    return -1;
}

void bench_nccl_fini(bench_nccl_t *ctx)
{
    if (NULL == ctx) {
        return;
    }
    cudaStreamSynchronize(ctx->stream);
    ncclCommDestroy(ctx->comm);
    cudaStreamDestroy(ctx->stream);
    free(ctx);
}

/* Block r of sbuf to rank r, block r of rbuf from rank r, this rank's own included: the
 * point-to-point calls of one group run as one NCCL operation, all peers at once. */
static ncclResult_t alltoall(bench_nccl_t *ctx, const void *sbuf, void *rbuf, size_t count,
                             dev_dtype_t dtype, ncclDataType_t t)
{
    size_t block = count * dev_dtype_size(dtype);
    ncclResult_t nerr = ncclGroupStart(), end;
    int r;
    for (r = 0; r < ctx->nranks && ncclSuccess == nerr; ++r) {
        nerr = ncclSend((const char *) sbuf + (size_t) r * block, count, t, r, ctx->comm,
                        ctx->stream);
        if (ncclSuccess == nerr) {
            nerr = ncclRecv((char *) rbuf + (size_t) r * block, count, t, r, ctx->comm,
                            ctx->stream);
        }
    }
    end = ncclGroupEnd(); /* also after a failure: the group must be closed */
    return ncclSuccess != nerr ? nerr : end;
}

int bench_nccl_run(bench_nccl_t *ctx, bench_coll_t coll, const void *sbuf, void *rbuf,
                   size_t count, dev_dtype_t dtype, dev_op_t op, int root, char *why,
                   size_t len)
{
    ncclDataType_t t;
    ncclRedOp_t o = ncclSum;
    ncclResult_t nerr;
    cudaError_t cerr;

    /* bench_nccl_supports admitted the run's type and op, whatever the collective */
    if (0 != map_type(dtype, &t) || 0 != map_op(op, &o)) {
        snprintf(why, len, "type or op not supported by NCCL");
        return -1;
    }
    switch (coll) {
    case BENCH_ALLREDUCE:
        nerr = ncclAllReduce(sbuf, rbuf, count, t, o, ctx->comm, ctx->stream);
        break;
    case BENCH_BCAST:
        nerr = ncclBroadcast(rbuf, rbuf, count, t, root, ctx->comm, ctx->stream);
        break;
    case BENCH_ALLGATHER:
        nerr = ncclAllGather(sbuf, rbuf, count, t, ctx->comm, ctx->stream);
        break;
    case BENCH_ALLGATHERV: /* equal counts: NCCL's allgather is the v form's best */
        nerr = ncclAllGather(sbuf, rbuf, count, t, ctx->comm, ctx->stream);
        break;
    case BENCH_REDUCE_SCATTER_BLOCK:
    case BENCH_REDUCE_SCATTER:
        nerr = ncclReduceScatter(sbuf, rbuf, count, t, o, ctx->comm, ctx->stream);
        break;
    case BENCH_ALLTOALL:
    case BENCH_ALLTOALLV:
        nerr = alltoall(ctx, sbuf, rbuf, count, dtype, t);
        break;
    default:
        snprintf(why, len, "unknown collective");
        return -1;
    }
    if (ncclSuccess != nerr) {
        snprintf(why, len, "NCCL: %s", ncclGetErrorString(nerr));
        return -1;
    }
    cerr = cudaStreamSynchronize(ctx->stream);
    if (cudaSuccess != cerr) {
        snprintf(why, len, "cudaStreamSynchronize: %s", cudaGetErrorString(cerr));
        return -1;
    }
    return 0;
}
