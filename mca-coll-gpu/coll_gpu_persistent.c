/*
 * coll_gpu_persistent.c - MPI-4's persistent collectives on device buffers (Open MPI 5.0):
 * MPI_Allgather(v)_init, MPI_Allreduce_init, MPI_Alltoall(v,w)_init, MPI_Bcast_init,
 * MPI_Exscan_init, MPI_Gather(v)_init, MPI_Reduce_init, MPI_Reduce_scatter(_block)_init,
 * MPI_Scan_init, MPI_Scatter(v)_init, on intra- and intercommunicators, and
 * MPI_Neighbor_allgather(v)_init, MPI_Neighbor_alltoall(v,w)_init.
 *
 * The component below coll/gpu (libnbc in 5.0) builds a schedule at init time and runs it at
 * every MPI_Start; its schedule reads and writes the buffers it was given with host loads and
 * stores, so it must never see device memory.  A call with a device buffer is staged through
 * pinned host memory that belongs to the request for its whole life:
 *
 *   MPI_<coll>_init (here)        MPI_Start (pers_start)        completion (pers_complete)
 *   ----------------------        ----------------------        --------------------------
 *   pinned bounce memory from     copy device -> bounce (the    start the copies bounce ->
 *   the pool for each device        buffers the call reads)       device (the buffers the
 *   buffer, an event for the      the saved module's start        call writes); once they
 *   copy back; the saved _init    hook pers_complete on the       have ended (progress,
 *   on the bounce memory            request                       coll_gpu_stage_async.c)
 *   -> its persistent request                                     the request is marked
 *   hook pers_start, pers_free                                    complete: MPI_Wait and
 *   on that request                                               MPI_Test see the data
 *
 * The request handed to the application is the saved module's own (so MPI_Start(all),
 * MPI_Wait, MPI_Test, MPI_Request_free and the binding's datatype retention work on it as
 * usual); coll/gpu only puts its start and free functions in front of the module's, keeps the
 * module's, and puts them back before the module's free gives the request object back to its
 * free list.  Staging is local to each rank: ranks may mix host and device buffers in one call.
 * Intercommunicators follow the nonblocking calls' rules (MPI_ROOT, MPI_PROC_NULL, blocks per
 * rank of the remote group; no scans there).
 * A failed copy still starts the collective with what the bounce memory holds (the peers would
 * wait for this rank otherwise) and completes the request with the error.  Host buffers on
 * both sides go straight to the saved module, untouched.
 *
 * MPI_Allreduce_init and MPI_Bcast_init on device buffers take the node team's path of
 * MPI_Iallreduce and MPI_Ibcast instead when that path takes the call (the same decision, made
 * once at init from what is equal on every rank: coll_gpu_uniform_buffers, count, signature,
 * op, the team's plan; coll_gpu_nvl_async.c): the request is then that path's own, and each
 * MPI_Start queues one call on the team.  Everything else (no team, host or mixed buffers
 * without coll_gpu_uniform_buffers, types or ops the team cannot take, a plan without a
 * nonblocking form, forced staging) stays on the staged path here.
 */
#include "ompi_config.h"

#include <stdlib.h>

#include "ompi/errhandler/errcode-internal.h"
#include "ompi/mca/topo/base/base.h"
#include "ompi/request/request.h"

#include "coll_gpu.h"
#include "coll_gpu_persistent.h"

/* One persistent request of the saved module with staged buffers. */
typedef struct coll_gpu_pers_t {
    const char *tag;                 /* &pers_tag: tells this state from a request */
    struct coll_gpu_pers_t *next;    /* the list of live requests (pers_list) */
    ompi_request_t *req;             /* the saved module's request, handed to the user */
    ompi_request_start_fn_t inner_start;
    ompi_request_free_fn_t inner_free;
    ompi_request_complete_fn_t inner_cb; /* a callback that was set when we started */
    void *inner_cb_data;
    const char *what;
    struct ompi_communicator_t *comm;
    coll_gpu_staged_t s, r;          /* bounce memory owned by the request (slot -1) */
    coll_gpu_dir_t sdir, rdir;
    bool s_in, r_in;                 /* copied in at every start */
    int fail;                        /* this start's copy in failed */
    coll_gpu_copyback_t cb;          /* the copy back of each start (its event: the request's) */
} coll_gpu_pers_t;

static const char pers_tag = 0;
static coll_gpu_pers_t *pers_list = NULL;
static opal_mutex_t pers_lock = OPAL_MUTEX_STATIC_INIT;

static int pers_start(size_t count, ompi_request_t **requests);
static int pers_free(ompi_request_t **rptr);

static void pers_put(coll_gpu_pers_t *p)
{
    OPAL_THREAD_LOCK(&pers_lock);
    p->next = pers_list;
    pers_list = p;
    OPAL_THREAD_UNLOCK(&pers_lock);
}

/* The state of req; taken off the list when take. */
static coll_gpu_pers_t *pers_find(ompi_request_t *req, bool take)
{
    coll_gpu_pers_t **pp, *p = NULL;

    OPAL_THREAD_LOCK(&pers_lock);
    for (pp = &pers_list; NULL != *pp; pp = &(*pp)->next) {
        if ((*pp)->req == req) {
            p = *pp;
            if (take) {
                *pp = p->next;
                p->next = NULL;
            }
            break;
        }
    }
    OPAL_THREAD_UNLOCK(&pers_lock);
    return p;
}

/* Give the bounce memory and the event back and free the state. */
static void pers_release(coll_gpu_pers_t *p)
{
    (void) mca_coll_gpu_stage_out(NULL, &p->r, false, p->comm, p->what);
    (void) mca_coll_gpu_stage_out(NULL, &p->s, false, p->comm, p->what);
    mca_coll_gpu_copyback_unreserve(&p->cb);
    free(p);
}

/* p's buffers are staged: what the copy back at the end of each start needs is taken now, at
 * the init (coll_gpu_stage_async.c). */
static void pers_reserve(coll_gpu_pers_t *p)
{
    mca_coll_gpu_copyback_reserve(&p->cb, &p->s, p->sdir, &p->r, p->rdir, p->comm, p->what);
}

/* Does a WRITE-only buffer of this layout need its bytes copied in too, so that the holes
 * between its elements or blocks go back unchanged? */
static bool layout_has_holes(coll_gpu_layout_t layout)
{
    return 0 < layout.n
           || (0 < layout.count
               && !ompi_datatype_is_contiguous_memory_layout(layout.dtype,
                                                             (int32_t) layout.count));
}

/* Take pinned bounce memory for the device buffers of a call (none for host buffers,
 * MPI_IN_PLACE, or buffers insignificant on this rank); NULL *out on failure (reported). */
static int pers_stage(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                      const char *what, const void *sbuf, coll_gpu_layout_t slayout,
                      coll_gpu_dir_t sdir, void *rbuf, coll_gpu_layout_t rlayout,
                      coll_gpu_dir_t rdir, coll_gpu_pers_t **out)
{
    coll_gpu_pers_t *p = calloc(1, sizeof(*p));
    int rc;

    *out = NULL;
    if (NULL == p) {
        mca_coll_gpu_report_failure(what, comm, "out of host memory for a request's state");
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    p->tag = &pers_tag;
    p->what = what;
    p->comm = comm;
    p->sdir = sdir;
    p->rdir = rdir;
    /* the bounce memory outlives this call: owned by the request (-1 slots) */
    rc = mca_coll_gpu_stage_pair_owned(m, comm, what, sbuf, slayout, sdir, rbuf, rlayout, rdir,
                                       &p->s, &p->r);
    if (OMPI_SUCCESS != rc) {
        free(p);
        return rc;
    }
    p->s_in = p->s.staged && (0 != (sdir & COLL_GPU_READ) || layout_has_holes(slayout));
    p->r_in = p->r.staged && (0 != (rdir & COLL_GPU_READ) || layout_has_holes(rlayout));
    pers_reserve(p);
    *out = p;
    return OMPI_SUCCESS;
}

/* The same for alltoallw: the union of the blocks of each buffer, holes included, copied both
 * ways (the holes go back unchanged). */
static int pers_stage_spans(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                            const char *what, const void *sbuf, dev_mem_kind_t skind,
                            ptrdiff_t slo, size_t slen, void *rbuf, dev_mem_kind_t rkind,
                            ptrdiff_t rlo, size_t rlen, coll_gpu_pers_t **out)
{
    coll_gpu_pers_t *p = calloc(1, sizeof(*p));
    int rc;

    *out = NULL;
    if (NULL == p) {
        mca_coll_gpu_report_failure(what, comm, "out of host memory for a request's state");
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    p->tag = &pers_tag;
    p->what = what;
    p->comm = comm;
    p->sdir = COLL_GPU_READ;
    p->rdir = COLL_GPU_READWRITE;
    rc = mca_coll_gpu_stage_in(m, -1, sbuf, skind, slo, slen, false, comm, what, &p->s);
    if (OMPI_SUCCESS == rc) {
        rc = mca_coll_gpu_stage_in(m, -1, rbuf, rkind, rlo, rlen, false, comm, what, &p->r);
        if (OMPI_SUCCESS != rc) {
            (void) mca_coll_gpu_stage_out(m, &p->s, false, comm, what);
        }
    }
    if (OMPI_SUCCESS != rc) {
        free(p);
        return rc;
    }
    p->s_in = p->s.staged;
    p->r_in = p->r.staged;
    pers_reserve(p);
    *out = p;
    return OMPI_SUCCESS;
}

static void *pers_sview(const coll_gpu_pers_t *p)
{
    return mca_coll_gpu_view(&p->s);
}

static void *pers_rview(const coll_gpu_pers_t *p)
{
    return mca_coll_gpu_view(&p->r);
}

/* After the saved _init returned rc and *request: put our start and free in front of the
 * request's own, or give everything back when the init failed. */
static int pers_attach(coll_gpu_pers_t *p, int rc, ompi_request_t **request)
{
    ompi_request_t *req;

    if (OMPI_SUCCESS != rc) {
        pers_release(p);
        return rc;
    }
    req = *request;
    if (NULL == req || MPI_REQUEST_NULL == req || NULL == req->req_start
        || NULL == req->req_free) {
        /* not a request we can start through: it would run on the bounce memory without the
         * copies, so it must not be handed out */
        mca_coll_gpu_report_failure(p->what, p->comm, "the saved module returned a persistent "
                                    "request without start and free functions");
        if (NULL != req && MPI_REQUEST_NULL != req) {
            (void) ompi_request_free(request);
        }
        pers_release(p);
        return OMPI_ERR_NOT_SUPPORTED;
    }
    p->req = req;
    p->inner_start = req->req_start;
    p->inner_free = req->req_free;
    pers_put(p);
    req->req_start = pers_start;
    req->req_free = pers_free;
    return OMPI_SUCCESS;
}

/* Copy a staged buffer's range (or its pieces) from the user's memory into its bounce memory
 * (the copy back is coll_gpu_stage_async.c's). */
static int pers_copy_in(coll_gpu_pers_t *p, coll_gpu_staged_t *b)
{
    size_t failed_len = 0;

    if (DEV_OK != mca_coll_gpu_stage_copy(b, true, &failed_len)) {
        mca_coll_gpu_report_failure(p->what, p->comm, "copy of %zu B from the device failed: "
                                    "%s; taking part with stale data", failed_len,
                                    dev_error_string());
        return OMPI_ERROR;
    }
    return OMPI_SUCCESS;
}

/* req_complete_cb of a started request: the callback that was there first (if it says the
 * request is not complete yet, stay hooked on top of what it left), then the copy back.
 * Returns 0 when the request may complete now, 1 while the copies are in flight
 * (coll_gpu_stage_async.c completes it once they have ended); a failure goes into its status.
 * arg is the request, or our state where a binding's wrapper passes the callback data instead
 * (the tag tells them apart: a request starts with its object header). */
static int pers_complete(ompi_request_t *arg)
{
    coll_gpu_pers_t *p;
    ompi_request_t *req;
    int rc = OMPI_SUCCESS;

    if (&pers_tag == *(const char *const *) arg) {
        p = (coll_gpu_pers_t *) arg;
        req = p->req;
    } else {
        req = arg;
        p = (coll_gpu_pers_t *) req->req_complete_cb_data;
    }
    if (NULL != p->inner_cb) {
        ompi_request_complete_fn_t inner = p->inner_cb;
        int irc;

        req->req_complete_cb_data = p->inner_cb_data;
        p->inner_cb = NULL;
        irc = inner(req);
        if (0 != irc) {
            p->inner_cb = req->req_complete_cb;
            p->inner_cb_data = req->req_complete_cb_data;
            req->req_complete_cb_data = p;
            req->req_complete_cb = pers_complete;
            return irc;
        }
    }
    if (OMPI_SUCCESS != p->fail) {
        rc = p->fail; /* computed from stale data: nothing goes back */
    } else if (MPI_SUCCESS == req->req_status.MPI_ERROR) {
        /* a request marked complete already (pers_start hooked us on a request that had
         * completed) cannot wait for the copies: they are waited for here, at MPI_Start */
        if (!mca_coll_gpu_copyback_start(&p->cb, &p->s, p->sdir, &p->r, p->rdir, req,
                                         !REQUEST_COMPLETE(req), &rc)) {
            return 1;
        }
    }
    if (OMPI_SUCCESS != rc && MPI_SUCCESS == req->req_status.MPI_ERROR) {
        req->req_status.MPI_ERROR = ompi_errcode_get_mpi_code(rc);
    }
    return 0;
}

/* MPI_Start and MPI_Startall (which hands over runs of requests with the same start
 * function): copy in, start the saved module's request, hook the copy back on its end. */
static int pers_start(size_t count, ompi_request_t **requests)
{
    for (size_t i = 0; i < count; ++i) {
        ompi_request_t *req = requests[i];
        coll_gpu_pers_t *p = pers_find(req, false);
        int rc;

        if (NULL == p) {
            return OMPI_ERR_BAD_PARAM; /* cannot happen: pers_start is set with the state */
        }
        /* bounce memory that could not be had at init is scratch: every start fails */
        p->fail = mca_coll_gpu_first_error(p->s.fail, p->r.fail);
        if (p->s_in) {
            p->fail = mca_coll_gpu_first_error(p->fail, pers_copy_in(p, &p->s));
        }
        if (p->r_in) {
            p->fail = mca_coll_gpu_first_error(p->fail, pers_copy_in(p, &p->r));
        }
        rc = p->inner_start(1, &requests[i]);
        if (OMPI_SUCCESS != rc) {
            return rc;
        }
        p->inner_cb = req->req_complete_cb;
        p->inner_cb_data = req->req_complete_cb_data;
        /* runs pers_complete at once if the request has completed already (a one-process
         * communicator, an empty call) */
        (void) ompi_request_set_callback(req, pers_complete, p);
    }
    return OMPI_SUCCESS;
}

/* MPI_Request_free: the module's free first, with its own functions back in place (the module
 * recycles the request object); keep everything when it refuses (an active request). */
static int pers_free(ompi_request_t **rptr)
{
    ompi_request_t *req = *rptr;
    coll_gpu_pers_t *p = pers_find(req, true);
    bool own_start, own_free;
    int rc;

    if (NULL == p) {
        return OMPI_ERR_BAD_PARAM; /* cannot happen: pers_free is set with the state */
    }
    if (p->cb.pending) {
        /* its copy back is in flight: the request is not complete (libnbc refuses too), and
         * the copy reads the bounce memory */
        pers_put(p);
        return MPI_ERR_REQUEST;
    }
    /* a wrapper installed after ours (the binding's datatype retention) stays where it is */
    own_start = (pers_start == req->req_start);
    own_free = (pers_free == req->req_free);
    if (own_start) {
        req->req_start = p->inner_start;
    }
    if (own_free) {
        req->req_free = p->inner_free;
    }
    rc = p->inner_free(rptr);
    if (OMPI_SUCCESS != rc) {
        if (own_start) {
            req->req_start = pers_start;
        }
        if (own_free) {
            req->req_free = pers_free;
        }
        pers_put(p);
        return rc;
    }
    pers_release(p);
    return rc;
}

static void pers_log(const char *what, struct ompi_communicator_t *comm, size_t bytes,
                     ompi_datatype_t *dtype, struct ompi_op_t *op)
{
    mca_coll_gpu_log_call(what, comm, bytes, dtype, op, "staged (persistent)");
}

/* The direction of the buffer that the non-root ranks of a rooted call use (the send buffer
 * of a gather or reduce, the receive buffer of a scatter): none at an intercommunicator's root
 * (MPI_ROOT) or at the idle ranks of its group (MPI_PROC_NULL). */
static coll_gpu_dir_t pers_other_dir(struct ompi_communicator_t *comm, int root,
                                     coll_gpu_dir_t dir)
{
    return (mca_coll_gpu_is_idle(root) || (OMPI_COMM_IS_INTER(comm) && MPI_ROOT == root))
               ? COLL_GPU_NONE
               : dir;
}

/* ---- reductions -------------------------------------------------------------------------- */

/* MPI_Allreduce_init, MPI_Scan_init, MPI_Exscan_init: send buffer read, receive buffer
 * written (and read in place). */
static int pers_reduce_like(const char *what, mca_coll_base_module_allreduce_init_fn_t prev_fn,
                            mca_coll_base_module_t *prev_module, const void *sbuf, void *rbuf,
                            int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                            struct ompi_communicator_t *comm, struct ompi_info_t *info,
                            ompi_request_t **request, mca_coll_gpu_module_t *m)
{
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_pers_t *p;
    int rc;

    /* the kind of the elements' memory, not of the pointers (MPI_BOTTOM) */
    if (mca_coll_gpu_data_host(sbuf, dtype, count) && mca_coll_gpu_data_host(rbuf, dtype, count)) {
        return prev_fn(sbuf, rbuf, count, dtype, op, comm, info, request, prev_module);
    }
    pers_log(what, comm, mca_coll_gpu_call_bytes(dtype, (size_t) count), dtype, op);
    rc = pers_stage(m, comm, what, sbuf, COLL_GPU_LAYOUT(dtype, count), COLL_GPU_READ, rbuf,
                    COLL_GPU_LAYOUT(dtype, count), rdir, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = prev_fn(pers_sview(p), pers_rview(p), count, dtype, op, comm, info, request,
                 prev_module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_allreduce_init(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool taken = false;
    int rc;

    /* the nonblocking call's decision and algorithms (coll_gpu_nvl_async.c): each MPI_Start
     * runs one MPI_Iallreduce's worth on the team */
    rc = mca_coll_gpu_async_allreduce(m, sbuf, rbuf, count, dtype, op, comm, true, request,
                                      &taken);
    if (taken || OMPI_SUCCESS != rc) {
        return rc;
    }
    return pers_reduce_like("allreduce_init", m->prev_allreduce_init.fn,
                            m->prev_allreduce_init.module, sbuf, rbuf, count, dtype, op, comm,
                            info, request, m);
}

int mca_coll_gpu_scan_init(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                           struct ompi_communicator_t *comm, struct ompi_info_t *info,
                           ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    return pers_reduce_like("scan_init", m->prev_scan_init.fn, m->prev_scan_init.module, sbuf,
                            rbuf, count, dtype, op, comm, info, request, m);
}

int mca_coll_gpu_exscan_init(const void *sbuf, void *rbuf, int count,
                             struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                             struct ompi_communicator_t *comm, struct ompi_info_t *info,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    return pers_reduce_like("exscan_init", m->prev_exscan_init.fn, m->prev_exscan_init.module,
                            sbuf, rbuf, count, dtype, op, comm, info, request, m);
}

int mca_coll_gpu_reduce_init(const void *sbuf, void *rbuf, int count,
                             struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                             struct ompi_communicator_t *comm, struct ompi_info_t *info,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "reduce_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = (is_root && MPI_IN_PLACE == sbuf)
                              ? COLL_GPU_NONE
                              : pers_other_dir(comm, root, COLL_GPU_READ);
    coll_gpu_dir_t rdir = !is_root ? COLL_GPU_NONE
                          : (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_pers_t *p;
    int rc;

    /* the receive buffer means something at the root only */
    if ((!sdir || mca_coll_gpu_data_host(sbuf, dtype, count))
        && (!rdir || mca_coll_gpu_data_host(rbuf, dtype, count))) {
        return m->prev_reduce_init.fn(sbuf, rbuf, count, dtype, op, root, comm, info, request,
                                      m->prev_reduce_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(dtype, (size_t) count), dtype, op);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(dtype, count), sdir, rbuf,
                    COLL_GPU_LAYOUT(dtype, count), rdir, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_reduce_init.fn(sdir ? pers_sview(p) : sbuf, rdir ? pers_rview(p) : rbuf, count,
                                dtype, op, root, comm, info, request, m->prev_reduce_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_reduce_scatter_init(const void *sbuf, void *rbuf, const int *rcounts,
                                     struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                     struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                     ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "reduce_scatter_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool in_place = (MPI_IN_PLACE == sbuf);
    coll_gpu_dir_t rdir = in_place ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    coll_gpu_pers_t *p;
    size_t total = 0;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_reduce_scatter_init.fn(sbuf, rbuf, rcounts, dtype, op, comm, info,
                                              request, m->prev_reduce_scatter_init.module);
    }
    for (int i = 0; i < size; ++i) {
        total += (size_t) rcounts[i];
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(dtype, total), dtype, op);
    /* in place, the receive buffer holds the whole input and gets this rank's block */
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(dtype, total), COLL_GPU_READ, rbuf,
                    COLL_GPU_LAYOUT(dtype, in_place ? total : (size_t) rcounts[rank]), rdir, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_reduce_scatter_init.fn(pers_sview(p), pers_rview(p), rcounts, dtype, op, comm,
                                        info, request, m->prev_reduce_scatter_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_reduce_scatter_block_init(const void *sbuf, void *rbuf, int rcount,
                                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                           struct ompi_communicator_t *comm,
                                           struct ompi_info_t *info, ompi_request_t **request,
                                           mca_coll_base_module_t *module)
{
    static const char *const name = "reduce_scatter_block_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool in_place = (MPI_IN_PLACE == sbuf);
    coll_gpu_dir_t rdir = in_place ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t total = (size_t) rcount * (size_t) ompi_comm_size(comm);
    coll_gpu_pers_t *p;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_reduce_scatter_block_init.fn(sbuf, rbuf, rcount, dtype, op, comm, info,
                                                    request,
                                                    m->prev_reduce_scatter_block_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(dtype, total), dtype, op);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(dtype, total), COLL_GPU_READ, rbuf,
                    COLL_GPU_LAYOUT(dtype, in_place ? total : (size_t) rcount), rdir, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_reduce_scatter_block_init.fn(pers_sview(p), pers_rview(p), rcount, dtype, op,
                                              comm, info, request,
                                              m->prev_reduce_scatter_block_init.module);
    return pers_attach(p, rc, request);
}

/* ---- bcast, gathers, scatters ------------------------------------------------------------ */

int mca_coll_gpu_bcast_init(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                            struct ompi_communicator_t *comm, struct ompi_info_t *info,
                            ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "bcast_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t dir = mca_coll_gpu_is_root(comm, root) ? COLL_GPU_READ
                         : mca_coll_gpu_is_idle(root)       ? COLL_GPU_NONE
                                                            : COLL_GPU_WRITE;
    coll_gpu_pers_t *p;
    bool taken = false;
    /* the kind of the memory the elements occupy, not of buf (as MPI_Bcast, MPI_Ibcast) */
    bool host = COLL_GPU_NONE == dir || mca_coll_gpu_data_host(buf, dtype, count);
    int rc;

    /* the nonblocking call's decision and algorithms (MPI_Ibcast) */
    if (mca_coll_gpu_nb_team_path(m, !host)) {
        rc = mca_coll_gpu_async_bcast(m, buf, count, dtype, root, comm, true, request, &taken);
        if (taken || OMPI_SUCCESS != rc) {
            return rc;
        }
    }
    if (host) {
        return m->prev_bcast_init.fn(buf, count, dtype, root, comm, info, request,
                                     m->prev_bcast_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(dtype, (size_t) count), dtype, NULL);
    rc = pers_stage(m, comm, name, NULL, COLL_GPU_LAYOUT(dtype, 0), COLL_GPU_NONE, buf,
                    COLL_GPU_LAYOUT(dtype, count), dir, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_bcast_init.fn(pers_rview(p), count, dtype, root, comm, info, request,
                               m->prev_bcast_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_gather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                             struct ompi_communicator_t *comm, struct ompi_info_t *info,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "gather_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = pers_other_dir(comm, root, COLL_GPU_READ);
    coll_gpu_dir_t rdir = !is_root ? COLL_GPU_NONE
                          : (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t rtotal = (size_t) rcount * (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_pers_t *p;
    int rc;

    if (mca_coll_gpu_both_host(sdir ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_gather_init.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, root, comm,
                                      info, request, m->prev_gather_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), sdir, rbuf,
                    COLL_GPU_LAYOUT(rdtype, rtotal), rdir, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_gather_init.fn(pers_sview(p), scount, sdtype, pers_rview(p), rcount, rdtype,
                                root, comm, info, request, m->prev_gather_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_gatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, const int *rcounts, const int *disps,
                              struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "gatherv_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = pers_other_dir(comm, root, COLL_GPU_READ);
    coll_gpu_dir_t rdir = !is_root ? COLL_GPU_NONE
                          : (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_pers_t *p;
    int rc;

    if (mca_coll_gpu_both_host(sdir ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_gatherv_init.fn(sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype, root,
                                       comm, info, request, m->prev_gatherv_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), sdir, rbuf,
                    COLL_GPU_LAYOUT_V(rdtype, is_root ? mca_coll_gpu_peers(comm) : 0, rcounts,
                                      disps),
                    rdir, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_gatherv_init.fn(pers_sview(p), scount, sdtype, pers_rview(p), rcounts, disps,
                                 rdtype, root, comm, info, request, m->prev_gatherv_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_allgather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "allgather_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t rtotal = (size_t) rcount * (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_pers_t *p;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_allgather_init.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, info,
                                         request, m->prev_allgather_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(rdtype, rtotal), rdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), COLL_GPU_READ, rbuf,
                    COLL_GPU_LAYOUT(rdtype, rtotal), rdir, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_allgather_init.fn(pers_sview(p), scount, sdtype, pers_rview(p), rcount, rdtype,
                                   comm, info, request, m->prev_allgather_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_allgatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                 void *rbuf, const int *rcounts, const int *disps,
                                 struct ompi_datatype_t *rdtype,
                                 struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                 ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "allgatherv_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_pers_t *p;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_allgatherv_init.fn(sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype,
                                          comm, info, request, m->prev_allgatherv_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), COLL_GPU_READ, rbuf,
                    COLL_GPU_LAYOUT_V(rdtype, mca_coll_gpu_peers(comm), rcounts, disps), rdir,
                    &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_allgatherv_init.fn(pers_sview(p), scount, sdtype, pers_rview(p), rcounts, disps,
                                    rdtype, comm, info, request, m->prev_allgatherv_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_scatter_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "scatter_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = is_root ? COLL_GPU_READ : COLL_GPU_NONE;
    coll_gpu_dir_t rdir = (is_root && MPI_IN_PLACE == rbuf)
                              ? COLL_GPU_NONE
                              : pers_other_dir(comm, root, COLL_GPU_WRITE);
    size_t stotal = (size_t) scount * (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_pers_t *p;
    int rc;

    if (mca_coll_gpu_both_host(sdir ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_scatter_init.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, root, comm,
                                       info, request, m->prev_scatter_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount), rdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, stotal), sdir, rbuf,
                    COLL_GPU_LAYOUT(rdtype, rcount), rdir, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_scatter_init.fn(sdir ? pers_sview(p) : sbuf, scount, sdtype,
                                 rdir ? pers_rview(p) : rbuf, rcount, rdtype, root, comm, info,
                                 request, m->prev_scatter_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_scatterv_init(const void *sbuf, const int *scounts, const int *disps,
                               struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                               struct ompi_datatype_t *rdtype, int root,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "scatterv_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = is_root ? COLL_GPU_READ : COLL_GPU_NONE;
    coll_gpu_dir_t rdir = (is_root && MPI_IN_PLACE == rbuf)
                              ? COLL_GPU_NONE
                              : pers_other_dir(comm, root, COLL_GPU_WRITE);
    coll_gpu_pers_t *p;
    int rc;

    if (mca_coll_gpu_both_host(sdir ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_scatterv_init.fn(sbuf, scounts, disps, sdtype, rbuf, rcount, rdtype, root,
                                        comm, info, request, m->prev_scatterv_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount), rdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf,
                    COLL_GPU_LAYOUT_V(sdtype, is_root ? mca_coll_gpu_peers(comm) : 0, scounts,
                                      disps),
                    sdir, rbuf, COLL_GPU_LAYOUT(rdtype, rcount), rdir, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_scatterv_init.fn(sdir ? pers_sview(p) : sbuf, scounts, disps, sdtype,
                                  rdir ? pers_rview(p) : rbuf, rcount, rdtype, root, comm, info,
                                  request, m->prev_scatterv_init.module);
    return pers_attach(p, rc, request);
}

/* ---- all-to-all -------------------------------------------------------------------------- */

int mca_coll_gpu_alltoall_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "alltoall_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t size = (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_pers_t *p;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_alltoall_init.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, info,
                                        request, m->prev_alltoall_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount * size), rdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount * size), COLL_GPU_READ,
                    rbuf, COLL_GPU_LAYOUT(rdtype, rcount * size), rdir, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_alltoall_init.fn(pers_sview(p), scount, sdtype, pers_rview(p), rcount, rdtype,
                                  comm, info, request, m->prev_alltoall_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_alltoallv_init(const void *sbuf, const int *scounts, const int *sdisps,
                                struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                                const int *rdisps, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "alltoallv_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    int size = mca_coll_gpu_peers(comm);
    coll_gpu_pers_t *p;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_alltoallv_init.fn(sbuf, scounts, sdisps, sdtype, rbuf, rcounts, rdisps,
                                         rdtype, comm, info, request,
                                         m->prev_alltoallv_init.module);
    }
    pers_log(name, comm, 0, rdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT_V(sdtype, size, scounts, sdisps),
                    COLL_GPU_READ, rbuf, COLL_GPU_LAYOUT_V(rdtype, size, rcounts, rdisps), rdir,
                    &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_alltoallv_init.fn(pers_sview(p), scounts, sdisps, sdtype, pers_rview(p),
                                   rcounts, rdisps, rdtype, comm, info, request,
                                   m->prev_alltoallv_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_alltoallw_init(const void *sbuf, const int *scounts, const int *sdisps,
                                struct ompi_datatype_t *const *sdtypes, void *rbuf,
                                const int *rcounts, const int *rdisps,
                                struct ompi_datatype_t *const *rdtypes,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "alltoallw_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool in_place = (MPI_IN_PLACE == sbuf);
    int size = mca_coll_gpu_peers(comm);
    dev_mem_kind_t skind = mca_coll_gpu_classify(sbuf), rkind = mca_coll_gpu_classify(rbuf);
    coll_gpu_pers_t *p;
    ptrdiff_t slo = 0, rlo;
    size_t slen = 0, rlen;
    int rc;

    if (mca_coll_gpu_is_host(skind) && mca_coll_gpu_is_host(rkind)) {
        return m->prev_alltoallw_init.fn(sbuf, scounts, sdisps, sdtypes, rbuf, rcounts, rdisps,
                                         rdtypes, comm, info, request,
                                         m->prev_alltoallw_init.module);
    }
    pers_log(name, comm, 0, NULL, NULL);
    if (in_place) {
        skind = DEV_MEM_HOST;
    } else {
        mca_coll_gpu_span_w(size, scounts, sdisps, sdtypes, &slo, &slen);
    }
    mca_coll_gpu_span_w(size, rcounts, rdisps, rdtypes, &rlo, &rlen);
    rc = pers_stage_spans(m, comm, name, sbuf, skind, slo, slen, rbuf, rkind, rlo, rlen, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_alltoallw_init.fn(in_place ? MPI_IN_PLACE : pers_sview(p), scounts, sdisps,
                                   sdtypes, pers_rview(p), rcounts, rdisps, rdtypes, comm, info,
                                   request, m->prev_alltoallw_init.module);
    return pers_attach(p, rc, request);
}

/* ---- neighborhood collectives -------------------------------------------------------------- */

/* The number of blocks a rank receives (indegree) and sends (outdegree) on comm; false when
 * comm has no topology (then the saved module answers the erroneous call). */
static bool pers_degrees(struct ompi_communicator_t *comm, int *indegree, int *outdegree)
{
    *indegree = 0;
    *outdegree = 0;
    return OMPI_COMM_IS_TOPO(comm)
           && OMPI_SUCCESS == mca_topo_base_neighbor_count(comm, indegree, outdegree);
}

/* The receive buffers of the neighborhood calls are read and written: a block from an
 * MPI_PROC_NULL neighbor (the edges of a non-periodic cartesian topology) is not written and
 * must keep what it held. */
int mca_coll_gpu_neighbor_allgather_init(const void *sbuf, int scount,
                                         struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                         struct ompi_datatype_t *rdtype,
                                         struct ompi_communicator_t *comm,
                                         struct ompi_info_t *info, ompi_request_t **request,
                                         mca_coll_base_module_t *module)
{
    static const char *const name = "neighbor_allgather_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_pers_t *p;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !pers_degrees(comm, &indeg, &outdeg)) {
        return m->prev_neighbor_allgather_init.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                                  comm, info, request,
                                                  m->prev_neighbor_allgather_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount * (size_t) indeg),
             rdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), COLL_GPU_READ, rbuf,
                    COLL_GPU_LAYOUT(rdtype, (size_t) rcount * (size_t) indeg),
                    COLL_GPU_READWRITE, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_neighbor_allgather_init.fn(pers_sview(p), scount, sdtype, pers_rview(p), rcount,
                                            rdtype, comm, info, request,
                                            m->prev_neighbor_allgather_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_neighbor_allgatherv_init(const void *sbuf, int scount,
                                          struct ompi_datatype_t *sdtype, void *rbuf,
                                          const int *rcounts, const int *disps,
                                          struct ompi_datatype_t *rdtype,
                                          struct ompi_communicator_t *comm,
                                          struct ompi_info_t *info, ompi_request_t **request,
                                          mca_coll_base_module_t *module)
{
    static const char *const name = "neighbor_allgatherv_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_pers_t *p;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !pers_degrees(comm, &indeg, &outdeg)) {
        return m->prev_neighbor_allgatherv_init.fn(sbuf, scount, sdtype, rbuf, rcounts, disps,
                                                   rdtype, comm, info, request,
                                                   m->prev_neighbor_allgatherv_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), COLL_GPU_READ, rbuf,
                    COLL_GPU_LAYOUT_V(rdtype, indeg, rcounts, disps), COLL_GPU_READWRITE, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_neighbor_allgatherv_init.fn(pers_sview(p), scount, sdtype, pers_rview(p),
                                             rcounts, disps, rdtype, comm, info, request,
                                             m->prev_neighbor_allgatherv_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_neighbor_alltoall_init(const void *sbuf, int scount,
                                        struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                        struct ompi_datatype_t *rdtype,
                                        struct ompi_communicator_t *comm,
                                        struct ompi_info_t *info, ompi_request_t **request,
                                        mca_coll_base_module_t *module)
{
    static const char *const name = "neighbor_alltoall_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_pers_t *p;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !pers_degrees(comm, &indeg, &outdeg)) {
        return m->prev_neighbor_alltoall_init.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype,
                                                 comm, info, request,
                                                 m->prev_neighbor_alltoall_init.module);
    }
    pers_log(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount * (size_t) indeg),
             rdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf,
                    COLL_GPU_LAYOUT(sdtype, (size_t) scount * (size_t) outdeg), COLL_GPU_READ,
                    rbuf, COLL_GPU_LAYOUT(rdtype, (size_t) rcount * (size_t) indeg),
                    COLL_GPU_READWRITE, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_neighbor_alltoall_init.fn(pers_sview(p), scount, sdtype, pers_rview(p), rcount,
                                           rdtype, comm, info, request,
                                           m->prev_neighbor_alltoall_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_neighbor_alltoallv_init(const void *sbuf, const int *scounts,
                                         const int *sdisps, struct ompi_datatype_t *sdtype,
                                         void *rbuf, const int *rcounts, const int *rdisps,
                                         struct ompi_datatype_t *rdtype,
                                         struct ompi_communicator_t *comm,
                                         struct ompi_info_t *info, ompi_request_t **request,
                                         mca_coll_base_module_t *module)
{
    static const char *const name = "neighbor_alltoallv_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_pers_t *p;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !pers_degrees(comm, &indeg, &outdeg)) {
        return m->prev_neighbor_alltoallv_init.fn(sbuf, scounts, sdisps, sdtype, rbuf, rcounts,
                                                  rdisps, rdtype, comm, info, request,
                                                  m->prev_neighbor_alltoallv_init.module);
    }
    pers_log(name, comm, 0, rdtype, NULL);
    rc = pers_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT_V(sdtype, outdeg, scounts, sdisps),
                    COLL_GPU_READ, rbuf, COLL_GPU_LAYOUT_V(rdtype, indeg, rcounts, rdisps),
                    COLL_GPU_READWRITE, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_neighbor_alltoallv_init.fn(pers_sview(p), scounts, sdisps, sdtype,
                                            pers_rview(p), rcounts, rdisps, rdtype, comm, info,
                                            request, m->prev_neighbor_alltoallv_init.module);
    return pers_attach(p, rc, request);
}

int mca_coll_gpu_neighbor_alltoallw_init(const void *sbuf, const int *scounts,
                                         const MPI_Aint *sdisps,
                                         struct ompi_datatype_t *const *sdtypes, void *rbuf,
                                         const int *rcounts, const MPI_Aint *rdisps,
                                         struct ompi_datatype_t *const *rdtypes,
                                         struct ompi_communicator_t *comm,
                                         struct ompi_info_t *info, ompi_request_t **request,
                                         mca_coll_base_module_t *module)
{
    static const char *const name = "neighbor_alltoallw_init";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    dev_mem_kind_t skind = mca_coll_gpu_classify(sbuf), rkind = mca_coll_gpu_classify(rbuf);
    coll_gpu_pers_t *p;
    ptrdiff_t slo, rlo;
    size_t slen, rlen;
    int indeg, outdeg, rc;

    if ((mca_coll_gpu_is_host(skind) && mca_coll_gpu_is_host(rkind))
        || !pers_degrees(comm, &indeg, &outdeg)) {
        return m->prev_neighbor_alltoallw_init.fn(sbuf, scounts, sdisps, sdtypes, rbuf, rcounts,
                                                  rdisps, rdtypes, comm, info, request,
                                                  m->prev_neighbor_alltoallw_init.module);
    }
    pers_log(name, comm, 0, NULL, NULL);
    mca_coll_gpu_span_w_aint(outdeg, scounts, sdisps, sdtypes, &slo, &slen);
    mca_coll_gpu_span_w_aint(indeg, rcounts, rdisps, rdtypes, &rlo, &rlen);
    rc = pers_stage_spans(m, comm, name, sbuf, skind, slo, slen, rbuf, rkind, rlo, rlen, &p);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_neighbor_alltoallw_init.fn(pers_sview(p), scounts, sdisps, sdtypes,
                                            pers_rview(p), rcounts, rdisps, rdtypes, comm, info,
                                            request, m->prev_neighbor_alltoallw_init.module);
    return pers_attach(p, rc, request);
}
