/*
 * coll_gpu_staged_colls.c - the one staged path: every collective that the GPU does not run, in
 * every mode (blocking, nonblocking, persistent), the neighborhood collectives included.
 *
 * Each entry point fills a coll_gpu_staged_call_t (which collective, which mode, the saved
 * function below coll/gpu, the arguments) and hands it to mca_coll_gpu_staged().  A row of the
 * table below says, per collective, which buffers it reads and writes on which rank, how they
 * are laid out, and how the saved function is called; the path does the rest once for all:
 *
 *   1. the buffers that matter on this rank (roots, MPI_IN_PLACE, intercommunicators' MPI_ROOT
 *      and MPI_PROC_NULL) are all host memory: the saved function, untouched (most entries
 *      test that inline before they describe their call, COLL_GPU_ENTRIES_STAGED and
 *      COLL_GPU_ENTRIES_AGREED_QUICK, so a host call comes here only where they cannot tell)
 *   2. else each device buffer gets bounce memory (coll_gpu_stage.c: copies, pieces of spans
 *      across allocations, scratch when a copy fails), the saved function runs on it, and:
 *
 *   mode          bounce memory                copy in                copy back
 *   -----------   --------------------------   --------------------   -----------------------
 *   blocking      the module's cached slots    at the call            at the call
 *   nonblocking   the pool, until completion   at the call            at the request's
 *   persistent    the pool, until freed        at every MPI_Start     completion (the requests:
 *                                                                     coll_gpu_stage_async.c)
 */
#include "ompi_config.h"

#include "ompi/mca/topo/base/base.h"

#include "coll_gpu.h"

/* ---- the table ------------------------------------------------------------------------------ */

/* Which ranks use which buffer. */
typedef enum {
    ON_ALL,     /* send read, receive written (read too in place) everywhere */
    ON_GATHER,  /* send read but at an intercommunicator's root (MPI_ROOT) and its idle group
                 * (MPI_PROC_NULL); receive written at the root only (gather, reduce) */
    ON_SCATTER, /* send read at the root only; receive written but where ON_GATHER reads */
    ON_BCAST    /* one buffer (rbuf): read at the root, written elsewhere, idle: untouched */
} roles_t;

/* The layout of one buffer, in blocks of the side's type. */
typedef enum {
    L_NONE,  /* no such buffer */
    L_COUNT, /* count elements per block, n blocks one after the other */
    L_V,     /* n blocks counts[i] at displs[i] (in extents) */
    L_W,     /* n blocks of types[i] at byte displs[i] (int or MPI_Aint): their spans' union */
    L_SUM,   /* the sum of counts[i] over n (a reduce-scatter's input) */
    L_MINE   /* this rank's block of a reduce-scatter (rcounts[rank] or rcount); in place, the
              * whole input, as the send side's */
} form_t;

/* The n of a layout. */
typedef enum {
    N_ONE,
    N_PEERS, /* the remote group on an intercommunicator, else the size */
    N_SIZE,  /* the local group (the reduce-scatters) */
    N_OUT,   /* the topology's destinations */
    N_IN     /* the topology's sources */
} blocks_t;

/* How the hot path tells host buffers. */
typedef enum {
    HOST_PTRS, /* the pointers' kinds (both_host: MPI_BOTTOM is not host) */
    HOST_DATA, /* the kind of every element's memory (mca_coll_gpu_data_host) */
    HOST_KIND  /* the pointers' kinds alone (per-block types: no one layout to follow) */
} host_t;

typedef struct {
    roles_t roles;
    host_t host;
    form_t sform, rform;
    blocks_t sblocks, rblocks;
    bool rkeep; /* the receive buffer is read too: blocks the call does not write (a
                 * neighbour that is MPI_PROC_NULL, the holes of a w layout) keep their bytes */
    bool own;   /* bounce memory of the call's own even when blocking (threads may call it on
                 * one communicator at once) */
} staged_row_t;

/* The table: staged_row_t's members in order (the last two: rkeep, own), one row per
 * collective; how the saved function of each is called is invoke's. */
#define ROW(sc) [COLL_GPU_SC_##sc] =
/* clang-format off */
static const staged_row_t rows[COLL_GPU_SC_COUNT] = {
    /*                           ranks       host       send     recv     send n   recv n  */
    ROW(ALLGATHER)               {ON_ALL,     HOST_PTRS, L_COUNT, L_COUNT, N_ONE,   N_PEERS, 0, 0},
    ROW(ALLGATHERV)              {ON_ALL,     HOST_PTRS, L_COUNT, L_V,     N_ONE,   N_PEERS, 0, 0},
    ROW(ALLREDUCE)               {ON_ALL,     HOST_DATA, L_COUNT, L_COUNT, N_ONE,   N_ONE,   0, 0},
    ROW(ALLTOALL)                {ON_ALL,     HOST_PTRS, L_COUNT, L_COUNT, N_PEERS, N_PEERS, 0, 0},
    ROW(ALLTOALLV)               {ON_ALL,     HOST_PTRS, L_V,     L_V,     N_PEERS, N_PEERS, 0, 0},
    ROW(ALLTOALLW)               {ON_ALL,     HOST_KIND, L_W,     L_W,     N_PEERS, N_PEERS, 1, 0},
    ROW(BCAST)                   {ON_BCAST,   HOST_DATA, L_NONE,  L_COUNT, N_ONE,   N_ONE,   0, 0},
    ROW(GATHER)                  {ON_GATHER,  HOST_PTRS, L_COUNT, L_COUNT, N_ONE,   N_PEERS, 0, 0},
    ROW(GATHERV)                 {ON_GATHER,  HOST_PTRS, L_COUNT, L_V,     N_ONE,   N_PEERS, 0, 0},
    ROW(REDUCE)                  {ON_GATHER,  HOST_DATA, L_COUNT, L_COUNT, N_ONE,   N_ONE,   0, 0},
    ROW(REDUCE_SCATTER)          {ON_ALL,     HOST_PTRS, L_SUM,   L_MINE,  N_SIZE,  N_ONE,   0, 0},
    ROW(REDUCE_SCATTER_BLOCK)    {ON_ALL,     HOST_PTRS, L_COUNT, L_MINE,  N_SIZE,  N_ONE,   0, 0},
    ROW(SCATTER)                 {ON_SCATTER, HOST_PTRS, L_COUNT, L_COUNT, N_PEERS, N_ONE,   0, 0},
    ROW(SCATTERV)                {ON_SCATTER, HOST_PTRS, L_V,     L_COUNT, N_PEERS, N_ONE,   0, 0},
    ROW(NEIGHBOR_ALLGATHER)      {ON_ALL,     HOST_PTRS, L_COUNT, L_COUNT, N_ONE,   N_IN,    1, 0},
    ROW(NEIGHBOR_ALLGATHERV)     {ON_ALL,     HOST_PTRS, L_COUNT, L_V,     N_ONE,   N_IN,    1, 0},
    ROW(NEIGHBOR_ALLTOALL)       {ON_ALL,     HOST_PTRS, L_COUNT, L_COUNT, N_OUT,   N_IN,    1, 0},
    ROW(NEIGHBOR_ALLTOALLV)      {ON_ALL,     HOST_PTRS, L_V,     L_V,     N_OUT,   N_IN,    1, 0},
    ROW(NEIGHBOR_ALLTOALLW)      {ON_ALL,     HOST_KIND, L_W,     L_W,     N_OUT,   N_IN,    1, 0},
    ROW(REDUCE_LOCAL)            {ON_ALL,     HOST_DATA, L_COUNT, L_COUNT, N_ONE,   N_ONE,   1, 1},
};
/* clang-format on */
#undef ROW

/* Call the saved function of c's collective in c's mode, with the buffers s and r. */
#define SAVED(c, name, ...)                                                                        \
    (COLL_GPU_BLOCKING == (c)->mode                                                                \
         ? ((mca_coll_base_module_##name##_fn_t)(c)->fn)(__VA_ARGS__, (c)->comm, (c)->module)      \
     : COLL_GPU_NONBLOCKING == (c)->mode                                                           \
         ? ((mca_coll_base_module_i##name##_fn_t)(c)->fn)(__VA_ARGS__, (c)->comm, (c)->request,    \
                                                          (c)->module)                             \
         : ((mca_coll_base_module_##name##_init_fn_t)(c)->fn)(__VA_ARGS__, (c)->comm, (c)->info,   \
                                                              (c)->request, (c)->module))

/* The collectives that share a signature share a case: the slot types of one signature are the
 * same function type (MPI_Scan and MPI_Exscan come as COLL_GPU_SC_ALLREDUCE). */
static int invoke(const coll_gpu_staged_call_t *c, const void *s, void *r)
{
    switch (c->coll) {
    case COLL_GPU_SC_ALLGATHER:
    case COLL_GPU_SC_ALLTOALL:
    case COLL_GPU_SC_NEIGHBOR_ALLGATHER:
    case COLL_GPU_SC_NEIGHBOR_ALLTOALL:
        return SAVED(c, allgather, s, c->scount, c->sdtype, r, c->rcount, c->rdtype);
    case COLL_GPU_SC_ALLGATHERV:
    case COLL_GPU_SC_NEIGHBOR_ALLGATHERV:
        return SAVED(c, allgatherv, s, c->scount, c->sdtype, r, c->rcounts, c->rdispls, c->rdtype);
    case COLL_GPU_SC_ALLREDUCE:
        return SAVED(c, allreduce, s, r, c->scount, c->sdtype, c->op);
    case COLL_GPU_SC_ALLTOALLV:
    case COLL_GPU_SC_NEIGHBOR_ALLTOALLV:
        return SAVED(c, alltoallv, s, c->scounts, c->sdispls, c->sdtype, r, c->rcounts, c->rdispls,
                     c->rdtype);
    case COLL_GPU_SC_ALLTOALLW:
        return SAVED(c, alltoallw, s, c->scounts, c->sdispls, c->sdtypes, r, c->rcounts, c->rdispls,
                     c->rdtypes);
    case COLL_GPU_SC_NEIGHBOR_ALLTOALLW:
        return SAVED(c, neighbor_alltoallw, s, c->scounts, c->sadispls, c->sdtypes, r, c->rcounts,
                     c->radispls, c->rdtypes);
    case COLL_GPU_SC_BCAST:
        return SAVED(c, bcast, r, c->rcount, c->rdtype, c->root);
    case COLL_GPU_SC_GATHER:
    case COLL_GPU_SC_SCATTER:
        return SAVED(c, gather, s, c->scount, c->sdtype, r, c->rcount, c->rdtype, c->root);
    case COLL_GPU_SC_GATHERV:
        return SAVED(c, gatherv, s, c->scount, c->sdtype, r, c->rcounts, c->rdispls, c->rdtype,
                     c->root);
    case COLL_GPU_SC_SCATTERV:
        return SAVED(c, scatterv, s, c->scounts, c->sdispls, c->sdtype, r, c->rcount, c->rdtype,
                     c->root);
    case COLL_GPU_SC_REDUCE:
        return SAVED(c, reduce, s, r, c->scount, c->sdtype, c->op, c->root);
    case COLL_GPU_SC_REDUCE_SCATTER:
        return SAVED(c, reduce_scatter, s, r, c->rcounts, c->rdtype, c->op);
    case COLL_GPU_SC_REDUCE_SCATTER_BLOCK:
        return SAVED(c, reduce_scatter_block, s, r, c->rcount, c->rdtype, c->op);
    case COLL_GPU_SC_REDUCE_LOCAL: /* blocking only, and without a communicator */
        return ((mca_coll_base_module_reduce_local_fn_t) c->fn)(s, r, c->scount, c->sdtype, c->op,
                                                                c->module);
    default:
        return OMPI_ERR_NOT_SUPPORTED;
    }
}

/* ---- what a call touches on this rank ------------------------------------------------------- */

/* The direction of the buffer that the non-root side of a rooted call uses (the send buffer of
 * a gather or reduce, the receive buffer of a scatter): none at an intercommunicator's root
 * (MPI_ROOT) or at the idle ranks of its group (MPI_PROC_NULL). */
static coll_gpu_dir_t other_dir(const coll_gpu_staged_call_t *c, coll_gpu_dir_t dir)
{
    return (mca_coll_gpu_is_idle(c->root) || (OMPI_COMM_IS_INTER(c->comm) && MPI_ROOT == c->root))
               ? COLL_GPU_NONE
               : dir;
}

static void call_dirs(const coll_gpu_staged_call_t *c, const staged_row_t *row,
                      coll_gpu_dir_t *sdir, coll_gpu_dir_t *rdir)
{
    bool root = ON_ALL != row->roles && mca_coll_gpu_is_root(c->comm, c->root);
    coll_gpu_dir_t written =
        (row->rkeep || MPI_IN_PLACE == c->sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;

    switch (row->roles) {
    case ON_ALL:
        *sdir = COLL_GPU_READ;
        *rdir = written;
        break;
    case ON_GATHER:
        *sdir = other_dir(c, COLL_GPU_READ);
        *rdir = root ? written : COLL_GPU_NONE;
        break;
    case ON_SCATTER:
        *sdir = root ? COLL_GPU_READ : COLL_GPU_NONE;
        *rdir = other_dir(c, COLL_GPU_WRITE);
        break;
    case ON_BCAST:
        *sdir = COLL_GPU_NONE;
        *rdir = root                            ? COLL_GPU_READ
                : mca_coll_gpu_is_idle(c->root) ? COLL_GPU_NONE
                                                : COLL_GPU_WRITE;
        break;
    }
}

/* Are the buffers that matter on this rank host memory?  Then the call needs no staging.
 * HOST_PTRS: MPI_IN_PLACE counts as host (callers pass it for a buffer the call does not use on
 * this rank too); MPI_BOTTOM does not (its type's absolute addresses may lie in device memory
 * anywhere): staging classifies the blocks themselves (mca_coll_gpu_layout_kind) and copies
 * nothing when every block is host memory. */
static bool call_host(const coll_gpu_staged_call_t *c, const staged_row_t *row, coll_gpu_dir_t sdir,
                      coll_gpu_dir_t rdir)
{
    const void *sbuf = sdir ? c->sbuf : MPI_IN_PLACE, *rbuf = rdir ? c->rbuf : MPI_IN_PLACE;

    switch (row->host) {
    case HOST_DATA: /* the kind of the elements' memory, not of the pointers (MPI_BOTTOM) */
        return (!sdir || mca_coll_gpu_data_host(c->sbuf, c->sdtype, c->scount))
               && (!rdir || mca_coll_gpu_data_host(c->rbuf, c->rdtype, c->rcount));
    case HOST_KIND: /* MPI_BOTTOM: the blocks' kinds decide, in staging (one by one) */
        return MPI_BOTTOM != sbuf && MPI_BOTTOM != rbuf
               && mca_coll_gpu_is_host(mca_coll_gpu_classify(c->sbuf))
               && mca_coll_gpu_is_host(mca_coll_gpu_classify(c->rbuf));
    case HOST_PTRS:
        break;
    }
    return MPI_BOTTOM != sbuf && MPI_BOTTOM != rbuf
           && mca_coll_gpu_is_host(mca_coll_gpu_classify(sbuf))
           && mca_coll_gpu_is_host(mca_coll_gpu_classify(rbuf));
}

static void side_layout(coll_gpu_side_t *side, form_t form, int n, int count, const int *counts,
                        const int *displs, const MPI_Aint *adispls, struct ompi_datatype_t *dtype,
                        struct ompi_datatype_t *const *dtypes)
{
    size_t total = 0;

    switch (form) {
    case L_NONE:
        side->dir = COLL_GPU_NONE;
        side->layout = COLL_GPU_LAYOUT(dtype, 0);
        break;
    case L_COUNT:
        side->layout = COLL_GPU_LAYOUT(dtype, (size_t) count * (size_t) n);
        break;
    case L_V:
        side->layout = COLL_GPU_LAYOUT_V(dtype, n, counts, displs);
        break;
    case L_W:
        side->span = true;
        /* MPI_IN_PLACE (alltoallw): the send counts and types are not significant */
        if (MPI_IN_PLACE == side->buf) {
            side->lo = 0;
            side->len = 0;
        } else {
            mca_coll_gpu_span_blocks(n, counts, NULL, dtypes, displs, adispls, &side->lo,
                                     &side->len);
            side->layout = COLL_GPU_LAYOUT_V(NULL, n, counts, NULL);
            side->dtypes = dtypes;
            side->idispls = displs;
            side->adispls = adispls;
        }
        break;
    case L_MINE: /* call_sides: it depends on the send side */
        break;
    case L_SUM:
        for (int i = 0; i < n; ++i) {
            total += (size_t) counts[i];
        }
        side->layout = COLL_GPU_LAYOUT(dtype, total);
        break;
    }
}

/* The n of a layout; false when a neighborhood call's communicator has no topology (then the
 * saved function answers the erroneous call). */
static bool call_blocks(const coll_gpu_staged_call_t *c, blocks_t blocks, int *n)
{
    int in = 0, out = 0;

    if ((N_IN == blocks || N_OUT == blocks)
        && (!OMPI_COMM_IS_TOPO(c->comm)
            || OMPI_SUCCESS != mca_topo_base_neighbor_count(c->comm, &in, &out))) {
        return false;
    }
    *n = (N_ONE == blocks)                                    ? 1
         : (N_PEERS == blocks && OMPI_COMM_IS_INTER(c->comm)) ? ompi_comm_remote_size(c->comm)
         : (N_PEERS == blocks || N_SIZE == blocks)            ? ompi_comm_size(c->comm)
         : (N_IN == blocks)                                   ? in
                                                              : out;
    return true;
}

/* The layouts of both buffers; false as call_blocks. */
static bool call_sides(const coll_gpu_staged_call_t *c, const staged_row_t *row, coll_gpu_side_t *s,
                       coll_gpu_side_t *r)
{
    int sn, rn;

    if (!call_blocks(c, row->sblocks, &sn) || !call_blocks(c, row->rblocks, &rn)) {
        return false;
    }
    side_layout(s, row->sform, sn, c->scount, c->scounts, c->sdispls, c->sadispls, c->sdtype,
                c->sdtypes);
    if (L_MINE != row->rform) {
        side_layout(r, row->rform, rn, c->rcount, c->rcounts, c->rdispls, c->radispls, c->rdtype,
                    c->rdtypes);
    } else if (MPI_IN_PLACE == c->sbuf) {
        r->layout = s->layout; /* in place, the receive buffer holds the whole input */
    } else {
        r->layout = COLL_GPU_LAYOUT(
            c->rdtype, (NULL != c->rcounts) ? c->rcounts[ompi_comm_rank(c->comm)] : c->rcount);
    }
    return true;
}

/* ---- the one path -------------------------------------------------------------------------- */

static const char *const mode_path[] = {
    [COLL_GPU_BLOCKING] = "staged",
    [COLL_GPU_NONBLOCKING] = "staged (nonblocking)",
    [COLL_GPU_PERSISTENT] = "staged (persistent)",
};

/* Log the call with its data size: the receive buffer's elements where it has one count, else
 * the send buffer's, else 0 (per-block counts or types). */
static void call_log(const coll_gpu_staged_call_t *c, const coll_gpu_side_t *s,
                     const coll_gpu_side_t *r)
{
    const coll_gpu_side_t *by = (0 != r->dir && !r->span && 0 == r->layout.n)   ? r
                                : (0 != s->dir && !s->span && 0 == s->layout.n) ? s
                                                                                : NULL;

    mca_coll_gpu_log_call(c->what, c->comm,
                          (NULL != by) ? mca_coll_gpu_call_bytes(by->layout.dtype, by->layout.count)
                                       : 0,
                          (NULL != by) ? by->layout.dtype : NULL, c->op, mode_path[c->mode]);
}

int mca_coll_gpu_staged(const coll_gpu_staged_call_t *c)
{
    const staged_row_t *row = &rows[c->coll];
    coll_gpu_side_t s = {.buf = c->sbuf}, r = {.buf = c->rbuf};
    coll_gpu_staged_t sst, rst;
    int rc;

    call_dirs(c, row, &s.dir, &r.dir);
    if (c->host || (!c->decided && call_host(c, row, s.dir, r.dir))
        || !call_sides(c, row, &s, &r)) {
        return invoke(c, c->sbuf, c->rbuf);
    }
    if (!c->decided) {
        call_log(c, &s, &r);
    }
    if (COLL_GPU_BLOCKING != c->mode) {
        return mca_coll_gpu_staged_request(c, &s, &r, invoke);
    }
    rc = mca_coll_gpu_stage_sides(c->gpu, row->own, &s, &r, c->comm, c->what, &sst, &rst);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = invoke(c, mca_coll_gpu_view(&sst), mca_coll_gpu_view(&rst));
    return mca_coll_gpu_unstage_pair(c->gpu, c->comm, c->what, rc, &sst, s.dir, &rst, r.dir);
}
