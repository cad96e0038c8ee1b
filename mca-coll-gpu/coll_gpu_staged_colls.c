/*
 * coll_gpu_staged_colls.c - the one staged path: every collective that the GPU does not run, in
 * every mode (blocking, nonblocking, persistent), and the neighborhood collectives.
 *
 * Each entry point fills a coll_gpu_staged_call_t (which collective, which mode, the saved function
 * below coll/gpu, the arguments) and hands it to mca_coll_gpu_staged().  A row of the table
 * below says, per collective, which buffers it reads and writes on which rank and how they are
 * laid out; the path does the rest once for all:
 *
 *   1. the buffers that matter on this rank (roots, MPI_IN_PLACE, intercommunicators' MPI_ROOT
 *      and MPI_PROC_NULL) are all host memory: the saved function, untouched (the hot path
 *      pays the classification only)
 *   2. else each device buffer gets pinned bounce memory (coll_gpu_stage.c: the copies, the
 *      pieces of spans across allocations, scratch when a copy fails), and the saved function
 *      runs on the bounce memory; then, by mode:
 *
 *   mode          bounce memory            copy in                 copy back
 *   -----------   ----------------------   ---------------------   ---------------------------
 *   blocking      the module's two cached  at the call             at the call, after the
 *                 slots (larger: the pool)                         saved function returned
 *   nonblocking   the pool (slot -1),      at the call             at the request's completion
 *                 until the request ends                           (sreq_complete, then
 *                                                                  coll_gpu_stage_async.c)
 *   persistent    the pool (slot -1),      at every MPI_Start      at each start's completion
 *                 until MPI_Request_free   (sreq_start)            (as nonblocking)
 *
 * The nonblocking and persistent requests are the saved module's own (libnbc's): MPI_Wait,
 * MPI_Test, MPI_Start(all), MPI_Request_free and the bindings' datatype retention work on them
 * as usual.  coll/gpu hooks its completion callback on them (and, persistent, its start and
 * free functions in front of the module's):
 *
 *   MPI_I<coll> / MPI_<coll>_init    MPI_Start (persistent)        completion (in progress)
 *   -----------------------------    ----------------------        ------------------------
 *   bounce memory, copy in (not      copy in                       the module's callback
 *   persistent), an event for the    the module's start            first; then the copies
 *   copy back; the saved function    hook sreq_complete            bounce -> device start:
 *   on the bounce memory                                           return 1 until they end
 *   nonblocking: hook sreq_complete                                (coll_gpu_stage_async.c
 *   persistent: hook sreq_start,                                   completes the request),
 *   sreq_free                                                      so MPI_Wait sees the data
 *
 * ompi_request_complete() calls req_complete_cb before it marks the request complete, and
 * marks it complete only when the callback returns 0.  A request that is complete already when
 * the saved module returns it (one-process communicators, empty calls: possibly the shared
 * ompi_request_empty) is finished at the call and left untouched; one that completes while the
 * callback is hooked on it is complete already when the callback runs, so its copies are waited
 * for there, at the call.  MPI_Request_free on an active request does not take it away before
 * it completes (libnbc refuses it; a module that frees on completion frees after
 * ompi_request_complete), so the callback still runs, and its state is ours alone.
 *
 * A rank whose copy fails does not leave the collective (its peers are in it already): it
 * takes part with scratch, copies nothing back, and returns the error afterwards (blocking) or
 * completes the request with it.  A call with a device buffer on one rank and host buffers on
 * another is fine: staging is local to each rank.
 */
#include "ompi_config.h"

#include <stddef.h>
#include <stdlib.h>

#include "ompi/errhandler/errcode-internal.h"
#include "ompi/mca/topo/base/base.h"
#include "ompi/request/request.h"

#include "coll_gpu.h"

/* ---- the table ------------------------------------------------------------------------------ */

/* How the saved function is called (one signature may serve several collectives). */
typedef enum {
    SIG_ALLGATHER, /* also alltoall, neighbor allgather, neighbor alltoall */
    SIG_ALLGATHERV,
    SIG_ALLREDUCE, /* also scan, exscan */
    SIG_ALLTOALLV,
    SIG_ALLTOALLW,
    SIG_NEIGHBOR_ALLTOALLW,
    SIG_BCAST,
    SIG_GATHER, /* also scatter */
    SIG_GATHERV,
    SIG_SCATTERV,
    SIG_REDUCE,
    SIG_REDUCE_SCATTER,
    SIG_REDUCE_SCATTER_BLOCK,
    SIG_REDUCE_LOCAL
} call_sig_t;

/* Which ranks use which buffer. */
typedef enum {
    ON_ALL,     /* send read, receive written (read too in place) everywhere */
    ON_GATHER,  /* send read but at an intercommunicator's root (MPI_ROOT) and its idle group
                 * (MPI_PROC_NULL); receive written at the root only (gather, reduce) */
    ON_SCATTER, /* send read at the root only; receive written but at an intercommunicator's
                 * root and its idle group */
    ON_BCAST    /* one buffer (rbuf): read at the root, written elsewhere, idle: untouched */
} roles_t;

/* The layout of one buffer, in blocks of the side's type. */
typedef enum {
    L_NONE,  /* no such buffer */
    L_COUNT, /* count elements per block, n blocks one after the other */
    L_V,     /* n blocks counts[i] at displs[i] (in extents) */
    L_W,     /* n blocks of types[i] at byte displs[i]: the union of their spans */
    L_WA,    /* the same with MPI_Aint displacements */
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
    call_sig_t sig;
    roles_t roles;
    host_t host;
    form_t sform, rform;
    blocks_t sblocks, rblocks;
    bool rkeep; /* the receive buffer is read too: blocks the call does not write (a
                 * neighbour that is MPI_PROC_NULL, the holes of a w layout) keep their bytes */
    bool own;   /* bounce memory of the call's own even when blocking (threads may call it on
                 * one communicator at once) */
} staged_row_t;

/* The table: staged_row_t's members in order, one row per collective (the last two: rkeep, own). */
/* clang-format off */
static const staged_row_t rows[COLL_GPU_SC_COUNT] = {
    /*   call                      ranks       host       send     recv     send n   recv n */
    [COLL_GPU_SC_ALLGATHER] =
        {SIG_ALLGATHER,            ON_ALL,     HOST_PTRS, L_COUNT, L_COUNT, N_ONE,   N_PEERS, 0, 0},
    [COLL_GPU_SC_ALLGATHERV] =
        {SIG_ALLGATHERV,           ON_ALL,     HOST_PTRS, L_COUNT, L_V,     N_ONE,   N_PEERS, 0, 0},
    [COLL_GPU_SC_ALLREDUCE] =
        {SIG_ALLREDUCE,            ON_ALL,     HOST_DATA, L_COUNT, L_COUNT, N_ONE,   N_ONE,   0, 0},
    [COLL_GPU_SC_ALLTOALL] =
        {SIG_ALLGATHER,            ON_ALL,     HOST_PTRS, L_COUNT, L_COUNT, N_PEERS, N_PEERS, 0, 0},
    [COLL_GPU_SC_ALLTOALLV] =
        {SIG_ALLTOALLV,            ON_ALL,     HOST_PTRS, L_V,     L_V,     N_PEERS, N_PEERS, 0, 0},
    [COLL_GPU_SC_ALLTOALLW] =
        {SIG_ALLTOALLW,            ON_ALL,     HOST_KIND, L_W,     L_W,     N_PEERS, N_PEERS, 1, 0},
    [COLL_GPU_SC_BCAST] =
        {SIG_BCAST,                ON_BCAST,   HOST_DATA, L_NONE,  L_COUNT, N_ONE,   N_ONE,   0, 0},
    [COLL_GPU_SC_GATHER] =
        {SIG_GATHER,               ON_GATHER,  HOST_PTRS, L_COUNT, L_COUNT, N_ONE,   N_PEERS, 0, 0},
    [COLL_GPU_SC_GATHERV] =
        {SIG_GATHERV,              ON_GATHER,  HOST_PTRS, L_COUNT, L_V,     N_ONE,   N_PEERS, 0, 0},
    [COLL_GPU_SC_REDUCE] =
        {SIG_REDUCE,               ON_GATHER,  HOST_DATA, L_COUNT, L_COUNT, N_ONE,   N_ONE,   0, 0},
    [COLL_GPU_SC_REDUCE_SCATTER] =
        {SIG_REDUCE_SCATTER,       ON_ALL,     HOST_PTRS, L_SUM,   L_MINE,  N_SIZE,  N_ONE,   0, 0},
    [COLL_GPU_SC_REDUCE_SCATTER_BLOCK] =
        {SIG_REDUCE_SCATTER_BLOCK, ON_ALL,     HOST_PTRS, L_COUNT, L_MINE,  N_SIZE,  N_ONE,   0, 0},
    [COLL_GPU_SC_SCATTER] =
        {SIG_GATHER,               ON_SCATTER, HOST_PTRS, L_COUNT, L_COUNT, N_PEERS, N_ONE,   0, 0},
    [COLL_GPU_SC_SCATTERV] =
        {SIG_SCATTERV,             ON_SCATTER, HOST_PTRS, L_V,     L_COUNT, N_PEERS, N_ONE,   0, 0},
    [COLL_GPU_SC_NEIGHBOR_ALLGATHER] =
        {SIG_ALLGATHER,            ON_ALL,     HOST_PTRS, L_COUNT, L_COUNT, N_ONE,   N_IN,    1, 0},
    [COLL_GPU_SC_NEIGHBOR_ALLGATHERV] =
        {SIG_ALLGATHERV,           ON_ALL,     HOST_PTRS, L_COUNT, L_V,     N_ONE,   N_IN,    1, 0},
    [COLL_GPU_SC_NEIGHBOR_ALLTOALL] =
        {SIG_ALLGATHER,            ON_ALL,     HOST_PTRS, L_COUNT, L_COUNT, N_OUT,   N_IN,    1, 0},
    [COLL_GPU_SC_NEIGHBOR_ALLTOALLV] =
        {SIG_ALLTOALLV,            ON_ALL,     HOST_PTRS, L_V,     L_V,     N_OUT,   N_IN,    1, 0},
    [COLL_GPU_SC_NEIGHBOR_ALLTOALLW] =
        {SIG_NEIGHBOR_ALLTOALLW,   ON_ALL,     HOST_KIND, L_WA,    L_WA,    N_OUT,   N_IN,    1, 0},
    [COLL_GPU_SC_REDUCE_LOCAL] =
        {SIG_REDUCE_LOCAL,         ON_ALL,     HOST_DATA, L_COUNT, L_COUNT, N_ONE,   N_ONE,   1, 1},
};
/* clang-format on */

/* Call the saved function of c's collective in c's mode, with the buffers s and r. */
#define SAVED(c, name, ...)                                                                        \
    (COLL_GPU_BLOCKING == (c)->mode                                                                \
         ? ((mca_coll_base_module_##name##_fn_t)(c)->fn)(__VA_ARGS__, (c)->comm, (c)->module)      \
     : COLL_GPU_NONBLOCKING == (c)->mode                                                           \
         ? ((mca_coll_base_module_i##name##_fn_t)(c)->fn)(__VA_ARGS__, (c)->comm, (c)->request,    \
                                                          (c)->module)                             \
         : ((mca_coll_base_module_##name##_init_fn_t)(c)->fn)(__VA_ARGS__, (c)->comm, (c)->info,   \
                                                              (c)->request, (c)->module))

static int invoke(const coll_gpu_staged_call_t *c, const void *s, void *r)
{
    switch (rows[c->coll].sig) {
    case SIG_ALLGATHER:
        return SAVED(c, allgather, s, c->scount, c->sdtype, r, c->rcount, c->rdtype);
    case SIG_ALLGATHERV:
        return SAVED(c, allgatherv, s, c->scount, c->sdtype, r, c->rcounts, c->rdispls, c->rdtype);
    case SIG_ALLREDUCE:
        return SAVED(c, allreduce, s, r, c->scount, c->sdtype, c->op);
    case SIG_ALLTOALLV:
        return SAVED(c, alltoallv, s, c->scounts, c->sdispls, c->sdtype, r, c->rcounts, c->rdispls,
                     c->rdtype);
    case SIG_ALLTOALLW:
        return SAVED(c, alltoallw, s, c->scounts, c->sdispls, c->sdtypes, r, c->rcounts, c->rdispls,
                     c->rdtypes);
    case SIG_NEIGHBOR_ALLTOALLW:
        return SAVED(c, neighbor_alltoallw, s, c->scounts, c->sadispls, c->sdtypes, r, c->rcounts,
                     c->radispls, c->rdtypes);
    case SIG_BCAST:
        return SAVED(c, bcast, r, c->rcount, c->rdtype, c->root);
    case SIG_GATHER:
        return SAVED(c, gather, s, c->scount, c->sdtype, r, c->rcount, c->rdtype, c->root);
    case SIG_GATHERV:
        return SAVED(c, gatherv, s, c->scount, c->sdtype, r, c->rcounts, c->rdispls, c->rdtype,
                     c->root);
    case SIG_SCATTERV:
        return SAVED(c, scatterv, s, c->scounts, c->sdispls, c->sdtype, r, c->rcount, c->rdtype,
                     c->root);
    case SIG_REDUCE:
        return SAVED(c, reduce, s, r, c->scount, c->sdtype, c->op, c->root);
    case SIG_REDUCE_SCATTER:
        return SAVED(c, reduce_scatter, s, r, c->rcounts, c->rdtype, c->op);
    case SIG_REDUCE_SCATTER_BLOCK:
        return SAVED(c, reduce_scatter_block, s, r, c->rcount, c->rdtype, c->op);
    case SIG_REDUCE_LOCAL:
        /* blocking only, and without a communicator */
        return ((mca_coll_base_module_reduce_local_fn_t) c->fn)(s, r, c->scount, c->sdtype, c->op,
                                                                c->module);
    }
    return OMPI_ERR_NOT_SUPPORTED;
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

/* Can a call go straight to the saved module: are both buffers host memory, by their pointers?
 * MPI_IN_PLACE counts as host (callers pass it for a buffer the call does not use on this rank
 * too).  MPI_BOTTOM does not: its type's absolute addresses may lie in device memory anywhere,
 * so such a call goes through staging, which classifies the blocks themselves
 * (mca_coll_gpu_layout_kind) and copies nothing when every block is host memory. */
static bool both_host(const void *sbuf, const void *rbuf)
{
    return MPI_BOTTOM != sbuf && MPI_BOTTOM != rbuf
           && mca_coll_gpu_is_host(mca_coll_gpu_classify(sbuf))
           && mca_coll_gpu_is_host(mca_coll_gpu_classify(rbuf));
}

/* Are the buffers that matter on this rank host memory?  Then the call needs no staging. */
static bool call_host(const coll_gpu_staged_call_t *c, const staged_row_t *row, coll_gpu_dir_t sdir,
                      coll_gpu_dir_t rdir)
{
    switch (row->host) {
    case HOST_DATA:
        /* the kind of the elements' memory, not of the pointers (MPI_BOTTOM) */
        return (!sdir || mca_coll_gpu_data_host(c->sbuf, c->sdtype, c->scount))
               && (!rdir || mca_coll_gpu_data_host(c->rbuf, c->rdtype, c->rcount));
    case HOST_KIND:
        return mca_coll_gpu_is_host(mca_coll_gpu_classify(c->sbuf))
               && mca_coll_gpu_is_host(mca_coll_gpu_classify(c->rbuf));
    case HOST_PTRS:
        break;
    }
    return both_host(sdir ? c->sbuf : MPI_IN_PLACE, rdir ? c->rbuf : MPI_IN_PLACE);
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
    case L_WA:
        side->span = true;
        /* MPI_IN_PLACE (alltoallw): the send counts and types are not significant */
        if (MPI_IN_PLACE == side->buf) {
            side->lo = 0;
            side->len = 0;
        } else if (L_W == form) {
            mca_coll_gpu_span_w(n, counts, displs, dtypes, &side->lo, &side->len);
        } else {
            mca_coll_gpu_span_w_aint(n, counts, adispls, dtypes, &side->lo, &side->len);
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
    int indegree = 0, outdegree = 0;

    switch (blocks) {
    case N_ONE:
        *n = 1;
        return true;
    case N_PEERS:
        *n = mca_coll_gpu_peers(c->comm);
        return true;
    case N_SIZE:
        *n = ompi_comm_size(c->comm);
        return true;
    case N_OUT:
    case N_IN:
        break;
    }
    if (!OMPI_COMM_IS_TOPO(c->comm)
        || OMPI_SUCCESS != mca_topo_base_neighbor_count(c->comm, &indegree, &outdegree)) {
        return false;
    }
    *n = (N_IN == blocks) ? indegree : outdegree;
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

/* ---- nonblocking and persistent requests ---------------------------------------------------- */

/* What a staged request keeps: until it completes (nonblocking), until it is freed
 * (persistent). */
typedef struct coll_gpu_sreq_t {
    const char *tag;              /* &sreq_tag: tells this state from a request */
    struct coll_gpu_sreq_t *next; /* persistent: the list of live requests (sreq_list) */
    bool persistent;
    ompi_request_t *req;                 /* the saved module's request, handed to the user */
    ompi_request_complete_fn_t inner_cb; /* a callback the module had set: it runs first */
    void *inner_cb_data;
    ompi_request_start_fn_t inner_start; /* persistent: the module's start and free */
    ompi_request_free_fn_t inner_free;
    const char *what;
    struct ompi_communicator_t *comm;
    coll_gpu_staged_t s, r; /* bounce memory owned by the request (slot -1) */
    coll_gpu_dir_t sdir, rdir;
    int fail;               /* a staging failure: the result goes nowhere */
    coll_gpu_copyback_t cb; /* the copy back of the written buffers */
} coll_gpu_sreq_t;

static const char sreq_tag = 0;
static coll_gpu_sreq_t *sreq_list = NULL;
static opal_mutex_t sreq_lock = OPAL_MUTEX_STATIC_INIT;

static int sreq_start(size_t count, ompi_request_t **requests);
static int sreq_free(ompi_request_t **rptr);

/* Give the bounce memory and the event back and free x.  A nonblocking call's x holds a
 * reference on its communicator (sreq_new): MPI_Comm_free with calls still running is legal and
 * defers the free until they complete, but the saved module (libnbc) holds no reference of its
 * own between the rounds of its schedule; when ours is the last one the communicator goes here,
 * at the call's completion (as the point-to-point layer's requests release theirs). */
static void sreq_release(coll_gpu_sreq_t *x)
{
    struct ompi_communicator_t *comm = x->comm;
    bool persistent = x->persistent;

    mca_coll_gpu_stage_release(&x->r);
    mca_coll_gpu_stage_release(&x->s);
    mca_coll_gpu_copyback_unreserve(&x->cb);
    free(x);
    if (!persistent) {
        OBJ_RELEASE(comm);
    }
}

/* The copies back of a nonblocking call have ended (from progress: coll_gpu_stage_async.c), or
 * there were none (sreq_complete). */
static void sreq_copied(coll_gpu_copyback_t *cb)
{
    sreq_release((coll_gpu_sreq_t *) ((char *) cb - offsetof(coll_gpu_sreq_t, cb)));
}

static coll_gpu_sreq_t *sreq_new(const coll_gpu_staged_call_t *c, coll_gpu_dir_t sdir,
                                 coll_gpu_dir_t rdir)
{
    coll_gpu_sreq_t *x = calloc(1, sizeof(*x));

    if (NULL == x) {
        mca_coll_gpu_report_failure(c->what, c->comm, "out of host memory for a request's state");
        return NULL;
    }
    x->tag = &sreq_tag;
    x->persistent = COLL_GPU_PERSISTENT == c->mode;
    x->what = c->what;
    x->comm = c->comm;
    x->sdir = sdir;
    x->rdir = rdir;
    if (!x->persistent) {
        x->cb.finish = sreq_copied;
        OBJ_RETAIN(c->comm); /* until the call completes (sreq_release) */
    }
    return x;
}

/* req_complete_cb of a staged request: the saved module's own callback first (if it had one and
 * says the request is not complete yet, stay hooked on top of what it left), then the copy
 * back.  Returns 0 when the request may complete now, 1 while the copies are in flight
 * (coll_gpu_stage_async.c completes it once they have ended); a failure goes into its status.
 *
 * Open MPI 4.1's bindings put a callback of their own on top of ours when a datatype is derived
 * (ompi_coll_base_retain_datatypes*, to keep the types alive), and that one calls the callback
 * it wrapped with the wrapped callback's data instead of the request.  So arg is either the
 * request (the documented convention) or our state: the tag tells them apart (a request starts
 * with its object header). */
static int sreq_complete(ompi_request_t *arg)
{
    coll_gpu_sreq_t *x;
    ompi_request_t *req;
    int rc;

    if (&sreq_tag == *(const char *const *) arg) {
        x = (coll_gpu_sreq_t *) arg;
        req = x->req;
    } else {
        req = arg;
        x = (coll_gpu_sreq_t *) req->req_complete_cb_data;
    }
    if (NULL != x->inner_cb) {
        ompi_request_complete_fn_t inner = x->inner_cb;

        req->req_complete_cb_data = x->inner_cb_data;
        x->inner_cb = NULL;
        rc = inner(req);
        if (0 != rc) {
            x->inner_cb = req->req_complete_cb;
            x->inner_cb_data = req->req_complete_cb_data;
            req->req_complete_cb_data = x;
            req->req_complete_cb = sreq_complete;
            return rc;
        }
    }
    /* a result computed from scratch goes nowhere; a request marked complete already (the
     * callback was set on a request that had completed) cannot wait for the copies: they are
     * waited for here, at the call or MPI_Start */
    rc = mca_coll_gpu_first_error(x->fail, req->req_status.MPI_ERROR);
    if (OMPI_SUCCESS == rc
        && !mca_coll_gpu_copyback_start(&x->cb, &x->s, x->sdir, &x->r, x->rdir, req,
                                        !REQUEST_COMPLETE(req), &rc)) {
        return 1;
    }
    if (OMPI_SUCCESS != rc && MPI_SUCCESS == req->req_status.MPI_ERROR) {
        req->req_status.MPI_ERROR = ompi_errcode_get_mpi_code(rc);
    }
    if (!x->persistent) {
        /* inside progress (but for an early completion): the bounce memory goes back, and the
         * communicator may go with x's reference, without a blocking call */
        mca_coll_gpu_pinned_completion_enter();
        sreq_copied(&x->cb);
        mca_coll_gpu_pinned_completion_leave();
    }
    return 0;
}

/* Hook the completion callback on req (which runs it at once if req has completed since). */
static void sreq_hook(coll_gpu_sreq_t *x, ompi_request_t *req)
{
    x->req = req;
    x->inner_cb = req->req_complete_cb;
    x->inner_cb_data = req->req_complete_cb_data;
    (void) ompi_request_set_callback(req, sreq_complete, x);
}

/* After the saved MPI_I<coll> returned rc and *request: finish now when it failed or already
 * completed, else copy back at completion. */
static int sreq_attach_nonblocking(coll_gpu_sreq_t *x, int rc, ompi_request_t **request)
{
    ompi_request_t *req = *request;

    if (OMPI_SUCCESS == rc && (NULL == req || MPI_REQUEST_NULL == req || REQUEST_COMPLETE(req))) {
        rc = (NULL == req || MPI_REQUEST_NULL == req) ? OMPI_SUCCESS : req->req_status.MPI_ERROR;
    } else if (OMPI_SUCCESS == rc) {
        sreq_hook(x, req);
        return OMPI_SUCCESS;
    }
    rc = mca_coll_gpu_unstage_pair(NULL, x->comm, x->what, rc, &x->s, x->sdir, &x->r, x->rdir);
    sreq_release(x);
    return rc;
}

/* The state of req; taken off the list when take. */
static coll_gpu_sreq_t *sreq_find(ompi_request_t *req, bool take)
{
    coll_gpu_sreq_t **pp, *x = NULL;

    OPAL_THREAD_LOCK(&sreq_lock);
    for (pp = &sreq_list; NULL != *pp; pp = &(*pp)->next) {
        if ((*pp)->req == req) {
            x = *pp;
            if (take) {
                *pp = x->next;
                x->next = NULL;
            }
            break;
        }
    }
    OPAL_THREAD_UNLOCK(&sreq_lock);
    return x;
}

static void sreq_put(coll_gpu_sreq_t *x)
{
    OPAL_THREAD_LOCK(&sreq_lock);
    x->next = sreq_list;
    sreq_list = x;
    OPAL_THREAD_UNLOCK(&sreq_lock);
}

/* After the saved _init returned rc and *request: put our start and free in front of the
 * request's own, or give everything back when the init failed. */
static int sreq_attach_persistent(coll_gpu_sreq_t *x, int rc, ompi_request_t **request)
{
    ompi_request_t *req = *request;

    if (OMPI_SUCCESS != rc) {
        sreq_release(x);
        return rc;
    }
    if (NULL != req && MPI_REQUEST_NULL != req && OMPI_REQUEST_NOOP == req->req_type) {
        /* A call with nothing to do on this rank (Open MPI 4.1's libnbc answers an alltoallv
         * whose counts here are all zero so): a persistent no-op, which has no start function
         * because MPI_Start and MPI_Wait complete it themselves.  It never touches a buffer, so
         * it goes out as it is, without copies; refusing it failed a legal call (MPI_ERR_INTERN
         * on that rank only). */
        sreq_release(x);
        return OMPI_SUCCESS;
    }
    if (NULL == req || MPI_REQUEST_NULL == req || NULL == req->req_start || NULL == req->req_free) {
        /* not a request we can start through: it would run on the bounce memory without the
         * copies, so it must not be handed out */
        mca_coll_gpu_report_failure(x->what, x->comm,
                                    "the saved module returned a persistent "
                                    "request without start and free functions");
        if (NULL != req && MPI_REQUEST_NULL != req) {
            (void) ompi_request_free(request);
        }
        sreq_release(x);
        return OMPI_ERR_NOT_SUPPORTED;
    }
    x->req = req;
    x->inner_start = req->req_start;
    x->inner_free = req->req_free;
    sreq_put(x);
    req->req_start = sreq_start;
    req->req_free = sreq_free;
    return OMPI_SUCCESS;
}

/* Copy a staged buffer of a persistent request in from the user's memory (at each start). */
static int sreq_fill(coll_gpu_sreq_t *x, coll_gpu_staged_t *b)
{
    size_t failed_len = 0;

    if (!b->staged || !b->fill || DEV_OK == mca_coll_gpu_stage_copy(b, true, &failed_len)) {
        return OMPI_SUCCESS;
    }
    mca_coll_gpu_report_failure(x->what, x->comm,
                                "copy of %zu B from the device failed: %s; "
                                "taking part with stale data",
                                failed_len, dev_error_string());
    return OMPI_ERROR;
}

/* MPI_Start and MPI_Startall (which hands over runs of requests with the same start
 * function): copy in, start the saved module's request, hook the copy back on its end. */
static int sreq_start(size_t count, ompi_request_t **requests)
{
    for (size_t i = 0; i < count; ++i) {
        coll_gpu_sreq_t *x = sreq_find(requests[i], false);
        int rc;

        if (NULL == x) {
            return OMPI_ERR_BAD_PARAM; /* cannot happen: sreq_start is set with the state */
        }
        /* bounce memory that could not be had at init is scratch: every start fails */
        x->fail = mca_coll_gpu_first_error(x->s.fail, x->r.fail);
        if (OMPI_SUCCESS == x->fail) {
            x->fail = mca_coll_gpu_first_error(sreq_fill(x, &x->s), sreq_fill(x, &x->r));
        }
        rc = x->inner_start(1, &requests[i]);
        if (OMPI_SUCCESS != rc) {
            return rc;
        }
        /* runs sreq_complete at once if the request has completed already (a one-process
         * communicator, an empty call) */
        sreq_hook(x, requests[i]);
    }
    return OMPI_SUCCESS;
}

/* MPI_Request_free: the module's free first, with its own functions back in place (the module
 * recycles the request object); keep everything when it refuses (an active request). */
static int sreq_free(ompi_request_t **rptr)
{
    ompi_request_t *req = *rptr;
    coll_gpu_sreq_t *x = sreq_find(req, true);
    bool own_start, own_free;
    int rc;

    if (NULL == x) {
        return OMPI_ERR_BAD_PARAM; /* cannot happen: sreq_free is set with the state */
    }
    if (x->cb.pending) {
        /* its copy back is in flight: the request is not complete (libnbc refuses too), and
         * the copy reads the bounce memory */
        sreq_put(x);
        return MPI_ERR_REQUEST;
    }
    /* a wrapper installed after ours (the binding's datatype retention) stays where it is */
    own_start = (sreq_start == req->req_start);
    own_free = (sreq_free == req->req_free);
    if (own_start) {
        req->req_start = x->inner_start;
    }
    if (own_free) {
        req->req_free = x->inner_free;
    }
    rc = x->inner_free(rptr);
    if (OMPI_SUCCESS != rc) {
        if (own_start) {
            req->req_start = sreq_start;
        }
        if (own_free) {
            req->req_free = sreq_free;
        }
        sreq_put(x);
        return rc;
    }
    sreq_release(x);
    return rc;
}

/* ---- the one path -------------------------------------------------------------------------- */

static const char *const mode_path[] = {
    [COLL_GPU_BLOCKING] = "staged",
    [COLL_GPU_NONBLOCKING] = "staged (nonblocking)",
    [COLL_GPU_PERSISTENT] = "staged (persistent)",
};

/* The call's data size for the log line: the receive buffer's elements where it has one count,
 * else the send buffer's, else 0 (per-block counts or types). */
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
    coll_gpu_sreq_t *x = NULL;
    int rc;

    call_dirs(c, row, &s.dir, &r.dir);
    if (c->host || (!c->decided && call_host(c, row, s.dir, r.dir))
        || !call_sides(c, row, &s, &r)) {
        return invoke(c, c->sbuf, c->rbuf);
    }
    if (!c->decided) {
        call_log(c, &s, &r);
    }
    if (COLL_GPU_BLOCKING == c->mode) {
        rc = mca_coll_gpu_stage_sides(c->gpu, row->own, &s, &r, c->comm, c->what, &sst, &rst);
        if (OMPI_SUCCESS != rc) {
            return rc;
        }
        rc = invoke(c, mca_coll_gpu_view(&sst), mca_coll_gpu_view(&rst));
        return mca_coll_gpu_unstage_pair(c->gpu, c->comm, c->what, rc, &sst, s.dir, &rst, r.dir);
    }
    /* the bounce memory outlives the call: owned by the request (slot -1) */
    x = sreq_new(c, s.dir, r.dir);
    if (NULL == x) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    rc = mca_coll_gpu_stage_sides(c->gpu, true, &s, &r, c->comm, c->what, &x->s, &x->r);
    if (OMPI_SUCCESS != rc) {
        sreq_release(x);
        return rc;
    }
    x->fail = mca_coll_gpu_first_error(x->s.fail, x->r.fail);
    /* what the copy back needs is taken now, at the call (coll_gpu_stage_async.c) */
    mca_coll_gpu_copyback_reserve(&x->cb, &x->s, x->sdir, &x->r, x->rdir, x->comm, x->what);
    rc = invoke(c, mca_coll_gpu_view(&x->s), mca_coll_gpu_view(&x->r));
    return x->persistent ? sreq_attach_persistent(x, rc, c->request)
                         : sreq_attach_nonblocking(x, rc, c->request);
}
