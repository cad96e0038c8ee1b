/*
 * coll_gpu_nonblocking.c - the nonblocking collectives on device buffers: MPI_Iallgather(v),
 * MPI_Iallreduce, MPI_Ialltoall(v,w), MPI_Ibcast, MPI_Iexscan, MPI_Igather(v), MPI_Ireduce,
 * MPI_Ireduce_scatter(_block), MPI_Iscan, MPI_Iscatter(v).
 *
 * Host buffers go straight to the saved module (libnbc, ...), at the cost of the pointer
 * classification, as for the blocking calls.  Device and managed buffers are staged, with the
 * blocking calls' rules for which buffer matters on which rank (root, MPI_IN_PLACE, v and w
 * layouts), but the bounce memory belongs to the request: the module's two cached slots would
 * be reused by the next call while this one is still in flight.  The schedule of a call:
 *
 *   MPI_I<coll> (here)           progress (MPI_Wait, MPI_Test, ...)     MPI_Wait returns
 *   ------------------           ----------------------------------     ----------------
 *   pinned bounce from the       saved module's schedule runs on the
 *   pool, an event (copyback)    bounce copies
 *   copy device -> bounce        ompi_request_complete():
 *   saved MPI_I<coll> on the       req_complete_cb (nb_complete):
 *   bounce copies -> request         start the copies bounce -> device
 *   hook nb_complete on it           (written buffers), return 1
 *                                later progress (coll_gpu_stage_async.c):
 *                                  the copies' event has ended: bounce
 *                                  back to the pool, request complete      data in device
 *
 * ompi_request_complete() calls req_complete_cb before it marks the request complete, and marks
 * it complete only when the callback returns 0: nb_complete returns 1 while its copies are in
 * flight, and coll_gpu_stage_async.c completes the request once they have ended, so MPI_Wait or
 * MPI_Test never report completion before the data is in the user's buffers, and nothing waits
 * for a copy inside progress.  A failed copy is reported and recorded in the request's status.
 * A request that is already complete when the saved module returns it (one-process
 * communicators, empty calls: possibly the shared ompi_request_empty) is finished here and
 * left untouched; one that completes while nb_attach hooks nb_complete on it is complete
 * already when the callback runs, so its copies are waited for there, at the call.
 * MPI_Request_free on an active request does not take the request away before it completes
 * (libnbc 4.1 refuses it with MPI_ERR_REQUEST; a module that frees on completion frees after
 * ompi_request_complete), so the callback still runs, and its state is ours alone.
 * MPI_Iallreduce and MPI_Ibcast on device buffers of a communicator with a node team take the
 * team's algorithms instead, started here and completed by progress (coll_gpu_nvl_async.c),
 * when their plan has a nonblocking form.  Intercommunicators follow the blocking
 * calls' rules (MPI_ROOT, MPI_PROC_NULL, blocks per rank of the remote group).  A failed copy
 * still starts the call with scratch (stage_in) and completes the request with the error.
 */
#include "ompi_config.h"

#include <stddef.h>
#include <stdlib.h>

#include "ompi/errhandler/errcode-internal.h"
#include "ompi/request/request.h"

#include "coll_gpu.h"

/* The first word of every coll_gpu_nb_t (see nb_complete). */
static const char nb_tag = 0;

/* Free x and drop its reference on the communicator (nb_new).  MPI_Comm_free with calls still
 * running is legal and defers the free until they complete; the saved module (libnbc) holds no
 * reference of its own between the rounds of its schedule, so without ours a communicator freed
 * under a staged call would go while the call still sends on it.  When ours is the last one the
 * communicator goes here, at the call's completion (as the point-to-point layer's requests
 * release theirs). */
static void nb_free(coll_gpu_nb_t *x)
{
    struct ompi_communicator_t *comm = x->comm;

    mca_coll_gpu_copyback_unreserve(&x->cb);
    free(x);
    OBJ_RELEASE(comm);
}

/* Copy the written buffers back (when rc is success) and free the bounce memory and x.  The
 * staging functions need no module once the bounce memory is owned (slot -1). */
static int nb_finish(coll_gpu_nb_t *x, int rc)
{
    rc = mca_coll_gpu_unstage_pair(NULL, x->comm, x->what, rc, &x->s, x->sdir, &x->r, x->rdir);
    nb_free(x);
    return rc;
}

/* The copies back have ended (from progress: coll_gpu_stage_async.c), or there were none
 * (nb_complete): the bounce memory goes back to the pool and x goes. */
static void nb_copied(coll_gpu_copyback_t *cb)
{
    coll_gpu_nb_t *x = (coll_gpu_nb_t *) ((char *) cb - offsetof(coll_gpu_nb_t, cb));

    mca_coll_gpu_stage_release(&x->r);
    mca_coll_gpu_stage_release(&x->s);
    nb_free(x);
}

/* req_complete_cb of a staged request: the saved module's own callback first (if it had one
 * and says the request is not complete yet, stay hooked on top of what it left), then the copy
 * back.  Returns 0 when the request may complete now, 1 while the copies are in flight (they
 * complete it: nb_copied).
 *
 * Open MPI 4.1's MPI_I... bindings put a callback of their own on top of ours when a datatype
 * is derived (ompi_coll_base_retain_datatypes*, to keep the types alive), and that one calls
 * the callback it wrapped with the wrapped callback's data instead of the request.  So arg is
 * either the request (the documented convention) or our state: the tag tells them apart (a
 * request starts with its object header). */
static int nb_complete(ompi_request_t *arg)
{
    coll_gpu_nb_t *x;
    ompi_request_t *req;
    int rc;

    if (&nb_tag == *(const char *const *) arg) {
        x = (coll_gpu_nb_t *) arg;
        req = x->req;
    } else {
        req = arg;
        x = (coll_gpu_nb_t *) req->req_complete_cb_data;
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
            req->req_complete_cb = nb_complete;
            return rc;
        }
    }
    /* a result computed from scratch goes nowhere */
    rc = mca_coll_gpu_first_error(mca_coll_gpu_first_error(x->s.fail, x->r.fail),
                                  req->req_status.MPI_ERROR);
    /* a request marked complete already (ompi_request_set_callback in nb_attach, when it
     * completed meanwhile) cannot wait for the copies: they are waited for here, at the call;
     * one that ompi_request_complete() is completing stays pending until they end */
    if (OMPI_SUCCESS == rc
        && !mca_coll_gpu_copyback_start(&x->cb, &x->s, x->sdir, &x->r, x->rdir, req,
                                        !REQUEST_COMPLETE(req), &rc)) {
        return 1;
    }
    if (OMPI_SUCCESS != rc && MPI_SUCCESS == req->req_status.MPI_ERROR) {
        req->req_status.MPI_ERROR = ompi_errcode_get_mpi_code(rc);
    }
    /* inside progress (but for an early completion): the bounce memory goes back, and the
     * communicator may go with x's reference, without a blocking call */
    mca_coll_gpu_pinned_completion_enter();
    nb_copied(&x->cb);
    mca_coll_gpu_pinned_completion_leave();
    return 0;
}

/* A request's state, with the bounce memory still to take; NULL on failure (reported). */
static coll_gpu_nb_t *nb_new(struct ompi_communicator_t *comm, const char *what,
                             coll_gpu_dir_t sdir, coll_gpu_dir_t rdir)
{
    coll_gpu_nb_t *x = calloc(1, sizeof(*x));

    if (NULL == x) {
        mca_coll_gpu_report_failure(what, comm, "out of host memory for a request's state");
        return NULL;
    }
    x->tag = &nb_tag;
    x->cb.finish = nb_copied;
    x->what = what;
    x->comm = comm;
    OBJ_RETAIN(comm); /* until the call completes (nb_free) */
    x->sdir = sdir;
    x->rdir = rdir;
    return x;
}

/* x's buffers are staged: what their copy back needs is taken now, at the call
 * (coll_gpu_stage_async.c). */
static void nb_reserve(coll_gpu_nb_t *x)
{
    mca_coll_gpu_copyback_reserve(&x->cb, &x->s, x->sdir, &x->r, x->rdir, x->comm, x->what);
}

/* nb_stage, nb_stage_spans and nb_attach are shared with coll_gpu_neighbor.c: coll_gpu.h says
 * what they do. */
int nb_stage(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm, const char *what,
             const void *sbuf, coll_gpu_layout_t slayout, coll_gpu_dir_t sdir, void *rbuf,
             coll_gpu_layout_t rlayout, coll_gpu_dir_t rdir, coll_gpu_nb_t **out)
{
    coll_gpu_nb_t *x = nb_new(comm, what, sdir, rdir);
    int rc;

    *out = NULL;
    if (NULL == x) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    rc = mca_coll_gpu_stage_pair_owned(m, comm, what, sbuf, slayout, sdir, rbuf, rlayout, rdir,
                                       &x->s, &x->r);
    if (OMPI_SUCCESS != rc) {
        nb_free(x);
        return rc;
    }
    nb_reserve(x);
    *out = x;
    return OMPI_SUCCESS;
}

int nb_stage_spans(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm, const char *what,
                   const void *sbuf, dev_mem_kind_t skind, ptrdiff_t slo, size_t slen, void *rbuf,
                   dev_mem_kind_t rkind, ptrdiff_t rlo, size_t rlen, coll_gpu_nb_t **out)
{
    coll_gpu_nb_t *x = nb_new(comm, what, COLL_GPU_READ, COLL_GPU_READWRITE);
    int rc;

    *out = NULL;
    if (NULL == x) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    rc = mca_coll_gpu_stage_in(m, -1, sbuf, skind, slo, slen, true, comm, what, &x->s);
    if (OMPI_SUCCESS != rc) {
        nb_free(x);
        return rc;
    }
    rc = mca_coll_gpu_stage_in(m, -1, rbuf, rkind, rlo, rlen, true, comm, what, &x->r);
    if (OMPI_SUCCESS != rc) {
        (void) mca_coll_gpu_stage_out(m, &x->s, false, comm, what);
        nb_free(x);
        return rc;
    }
    nb_reserve(x);
    *out = x;
    return OMPI_SUCCESS;
}

int nb_attach(coll_gpu_nb_t *x, int rc, ompi_request_t **request)
{
    ompi_request_t *req;

    if (OMPI_SUCCESS != rc) {
        return nb_finish(x, rc);
    }
    req = *request;
    if (NULL == req || MPI_REQUEST_NULL == req || REQUEST_COMPLETE(req)) {
        int status = (NULL == req || MPI_REQUEST_NULL == req) ? OMPI_SUCCESS
                                                              : req->req_status.MPI_ERROR;
        return nb_finish(x, status);
    }
    x->req = req;
    x->inner_cb = req->req_complete_cb;
    x->inner_cb_data = req->req_complete_cb_data;
    /* runs nb_complete at once if the request completed since the check above (which then
     * waits for its copies: nb_complete) */
    (void) ompi_request_set_callback(req, nb_complete, x);
    return OMPI_SUCCESS;
}

/* The direction of the buffer that the non-root side of a rooted call uses (the send buffer of
 * a gather or reduce, the receive buffer of a scatter): none at an intercommunicator's root
 * (MPI_ROOT) or at the idle ranks of its group (MPI_PROC_NULL). */
static coll_gpu_dir_t nb_rooted_other_dir(struct ompi_communicator_t *comm, int root,
                                          coll_gpu_dir_t dir)
{
    return (mca_coll_gpu_is_idle(root) || (OMPI_COMM_IS_INTER(comm) && MPI_ROOT == root))
               ? COLL_GPU_NONE
               : dir;
}

/* ---- reductions -------------------------------------------------------------------------- */

/* MPI_Iallreduce, MPI_Iscan, MPI_Iexscan: send buffer read, receive buffer written (and read in
 * place). */
static int nb_reduce_like(const char *what, mca_coll_base_module_iallreduce_fn_t prev_fn,
                          mca_coll_base_module_t *prev_module, const void *sbuf, void *rbuf,
                          int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_gpu_module_t *m)
{
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_nb_t *x;
    int rc;

    /* the kind of the elements' memory, not of the pointers (MPI_BOTTOM) */
    if (mca_coll_gpu_data_host(sbuf, dtype, count) && mca_coll_gpu_data_host(rbuf, dtype, count)) {
        return prev_fn(sbuf, rbuf, count, dtype, op, comm, request, prev_module);
    }
    nb_log(what, comm, mca_coll_gpu_call_bytes(dtype, (size_t) count), dtype, op);
    rc = nb_stage(m, comm, what, sbuf, COLL_GPU_LAYOUT(dtype, count), COLL_GPU_READ, rbuf,
                  COLL_GPU_LAYOUT(dtype, count), rdir, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = prev_fn(nb_sview(x), nb_rview(x), count, dtype, op, comm, request, prev_module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_iallreduce(const void *sbuf, void *rbuf, int count,
                            struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool taken = false;
    int rc;

    /* device buffers on every rank (coll_gpu_uniform_buffers, unless the communicator's first
     * blocking allreduce or bcast found kinds mixed): the node team's algorithms, when the plan
     * has a nonblocking form (coll_gpu_nvl_async.c decides) */
    rc = mca_coll_gpu_async_allreduce(m, sbuf, rbuf, count, dtype, op, comm, false, request,
                                      &taken);
    if (taken || OMPI_SUCCESS != rc) {
        return rc;
    }
    return nb_reduce_like("iallreduce", m->prev_iallreduce.fn, m->prev_iallreduce.module, sbuf,
                          rbuf, count, dtype, op, comm, request, m);
}

int mca_coll_gpu_iscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                       struct ompi_op_t *op, struct ompi_communicator_t *comm,
                       ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    return nb_reduce_like("iscan", m->prev_iscan.fn, m->prev_iscan.module, sbuf, rbuf, count,
                          dtype, op, comm, request, m);
}

int mca_coll_gpu_iexscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    return nb_reduce_like("iexscan", m->prev_iexscan.fn, m->prev_iexscan.module, sbuf, rbuf,
                          count, dtype, op, comm, request, m);
}

int mca_coll_gpu_ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "ireduce";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = nb_rooted_other_dir(comm, root, COLL_GPU_READ);
    coll_gpu_dir_t rdir = !is_root ? COLL_GPU_NONE
                          : (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_nb_t *x;
    int rc;

    /* the receive buffer means something at the root only */
    if ((!sdir || mca_coll_gpu_data_host(sbuf, dtype, count))
        && (!rdir || mca_coll_gpu_data_host(rbuf, dtype, count))) {
        return m->prev_ireduce.fn(sbuf, rbuf, count, dtype, op, root, comm, request,
                                  m->prev_ireduce.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(dtype, (size_t) count), dtype, op);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(dtype, count), sdir, rbuf,
                  COLL_GPU_LAYOUT(dtype, count), rdir, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ireduce.fn(nb_sview(x), nb_rview(x), count, dtype, op, root, comm, request,
                            m->prev_ireduce.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, ompi_request_t **request,
                                 mca_coll_base_module_t *module)
{
    static const char *const name = "ireduce_scatter";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool in_place = (MPI_IN_PLACE == sbuf);
    coll_gpu_dir_t rdir = in_place ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    coll_gpu_nb_t *x;
    size_t total = 0;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_ireduce_scatter.fn(sbuf, rbuf, rcounts, dtype, op, comm, request,
                                          m->prev_ireduce_scatter.module);
    }
    for (int i = 0; i < size; ++i) {
        total += (size_t) rcounts[i];
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(dtype, total), dtype, op);
    /* in place, the receive buffer holds the whole input and gets this rank's block */
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(dtype, total), COLL_GPU_READ, rbuf,
                  COLL_GPU_LAYOUT(dtype, in_place ? total : (size_t) rcounts[rank]), rdir, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ireduce_scatter.fn(nb_sview(x), nb_rview(x), rcounts, dtype, op, comm, request,
                                    m->prev_ireduce_scatter.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "ireduce_scatter_block";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool in_place = (MPI_IN_PLACE == sbuf);
    coll_gpu_dir_t rdir = in_place ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t total = (size_t) rcount * (size_t) ompi_comm_size(comm);
    coll_gpu_nb_t *x;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_ireduce_scatter_block.fn(sbuf, rbuf, rcount, dtype, op, comm, request,
                                                m->prev_ireduce_scatter_block.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(dtype, total), dtype, op);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(dtype, total), COLL_GPU_READ, rbuf,
                  COLL_GPU_LAYOUT(dtype, in_place ? total : (size_t) rcount), rdir, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ireduce_scatter_block.fn(nb_sview(x), nb_rview(x), rcount, dtype, op, comm,
                                          request, m->prev_ireduce_scatter_block.module);
    return nb_attach(x, rc, request);
}

/* ---- bcast, gathers, scatters ------------------------------------------------------------ */

int mca_coll_gpu_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, ompi_request_t **request,
                        mca_coll_base_module_t *module)
{
    static const char *const name = "ibcast";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t dir = mca_coll_gpu_is_root(comm, root) ? COLL_GPU_READ
                         : mca_coll_gpu_is_idle(root)       ? COLL_GPU_NONE
                                                            : COLL_GPU_WRITE;
    coll_gpu_nb_t *x;
    bool taken = false;
    /* the kind of the memory the elements occupy, not of buf (as MPI_Bcast) */
    bool host = COLL_GPU_NONE == dir || mca_coll_gpu_data_host(buf, dtype, count);
    int rc;

    /* the node team's algorithms once a blocking allreduce, bcast or reduce had
     * device memory on every rank, whatever this rank's kind (mca_coll_gpu_nb_team_path;
     * coll_gpu_nvl_async.c decides the plan); else host memory to the saved module at once */
    if (mca_coll_gpu_nb_team_path(m, !host)) {
        rc = mca_coll_gpu_async_bcast(m, buf, count, dtype, root, comm, false, request, &taken);
        if (taken || OMPI_SUCCESS != rc) {
            return rc;
        }
    }
    if (host) {
        return m->prev_ibcast.fn(buf, count, dtype, root, comm, request, m->prev_ibcast.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(dtype, (size_t) count), dtype, NULL);
    rc = nb_stage(m, comm, name, NULL, COLL_GPU_LAYOUT(dtype, 0), COLL_GPU_NONE, buf,
                  COLL_GPU_LAYOUT(dtype, count), dir, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ibcast.fn(nb_rview(x), count, dtype, root, comm, request, m->prev_ibcast.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_igather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                         void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    static const char *const name = "igather";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = nb_rooted_other_dir(comm, root, COLL_GPU_READ);
    coll_gpu_dir_t rdir = !is_root ? COLL_GPU_NONE
                          : (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t rtotal = (size_t) rcount * (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_nb_t *x;
    int rc;

    if (mca_coll_gpu_both_host(sdir ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_igather.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, root, comm,
                                  request, m->prev_igather.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype, NULL);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), sdir, rbuf,
                  COLL_GPU_LAYOUT(rdtype, rtotal), rdir, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_igather.fn(nb_sview(x), scount, sdtype, nb_rview(x), rcount, rdtype, root, comm,
                            request, m->prev_igather.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_igatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                          void *rbuf, const int *rcounts, const int *disps,
                          struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    static const char *const name = "igatherv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = nb_rooted_other_dir(comm, root, COLL_GPU_READ);
    coll_gpu_dir_t rdir = !is_root ? COLL_GPU_NONE
                          : (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_nb_t *x;
    int rc;

    if (mca_coll_gpu_both_host(sdir ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_igatherv.fn(sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype, root,
                                   comm, request, m->prev_igatherv.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype, NULL);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), sdir, rbuf,
                  COLL_GPU_LAYOUT_V(rdtype, is_root ? mca_coll_gpu_peers(comm) : 0, rcounts,
                                    disps),
                  rdir, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_igatherv.fn(nb_sview(x), scount, sdtype, nb_rview(x), rcounts, disps, rdtype,
                             root, comm, request, m->prev_igatherv.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    static const char *const name = "iallgather";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t rtotal = (size_t) rcount * (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_nb_t *x;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_iallgather.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, request,
                                     m->prev_iallgather.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(rdtype, rtotal), rdtype, NULL);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), COLL_GPU_READ, rbuf,
                  COLL_GPU_LAYOUT(rdtype, rtotal), rdir, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_iallgather.fn(nb_sview(x), scount, sdtype, nb_rview(x), rcount, rdtype, comm,
                               request, m->prev_iallgather.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, const int *rcounts, const int *disps,
                             struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    static const char *const name = "iallgatherv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_nb_t *x;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_iallgatherv.fn(sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype, comm,
                                      request, m->prev_iallgatherv.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype, NULL);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), COLL_GPU_READ, rbuf,
                  COLL_GPU_LAYOUT_V(rdtype, mca_coll_gpu_peers(comm), rcounts, disps), rdir,
                  &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_iallgatherv.fn(nb_sview(x), scount, sdtype, nb_rview(x), rcounts, disps, rdtype,
                                comm, request, m->prev_iallgatherv.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_iscatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                          void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    static const char *const name = "iscatter";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = is_root ? COLL_GPU_READ : COLL_GPU_NONE;
    coll_gpu_dir_t rdir = nb_rooted_other_dir(comm, root, COLL_GPU_WRITE);
    size_t stotal = (size_t) scount * (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_nb_t *x;
    int rc;

    if (mca_coll_gpu_both_host(is_root ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_iscatter.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, root, comm,
                                   request, m->prev_iscatter.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount), rdtype, NULL);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, stotal), sdir, rbuf,
                  COLL_GPU_LAYOUT(rdtype, rcount), rdir, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_iscatter.fn(nb_sview(x), scount, sdtype, nb_rview(x), rcount, rdtype, root,
                             comm, request, m->prev_iscatter.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_iscatterv(const void *sbuf, const int *scounts, const int *disps,
                           struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                           struct ompi_datatype_t *rdtype, int root,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    static const char *const name = "iscatterv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = is_root ? COLL_GPU_READ : COLL_GPU_NONE;
    coll_gpu_dir_t rdir = nb_rooted_other_dir(comm, root, COLL_GPU_WRITE);
    coll_gpu_nb_t *x;
    int rc;

    if (mca_coll_gpu_both_host(is_root ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_iscatterv.fn(sbuf, scounts, disps, sdtype, rbuf, rcount, rdtype, root,
                                    comm, request, m->prev_iscatterv.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount), rdtype, NULL);
    rc = nb_stage(m, comm, name, sbuf,
                  COLL_GPU_LAYOUT_V(sdtype, is_root ? mca_coll_gpu_peers(comm) : 0, scounts,
                                    disps),
                  sdir, rbuf, COLL_GPU_LAYOUT(rdtype, rcount), rdir, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_iscatterv.fn(nb_sview(x), scounts, disps, sdtype, nb_rview(x), rcount, rdtype,
                              root, comm, request, m->prev_iscatterv.module);
    return nb_attach(x, rc, request);
}

/* ---- all-to-all -------------------------------------------------------------------------- */

int mca_coll_gpu_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                           void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    static const char *const name = "ialltoall";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t size = (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_nb_t *x;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_ialltoall.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, request,
                                    m->prev_ialltoall.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount * size), rdtype, NULL);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount * size), COLL_GPU_READ,
                  rbuf, COLL_GPU_LAYOUT(rdtype, rcount * size), rdir, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ialltoall.fn(nb_sview(x), scount, sdtype, nb_rview(x), rcount, rdtype, comm,
                              request, m->prev_ialltoall.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_ialltoallv(const void *sbuf, const int *scounts, const int *sdisps,
                            struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                            const int *rdisps, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    static const char *const name = "ialltoallv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    int size = mca_coll_gpu_peers(comm);
    coll_gpu_nb_t *x;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_ialltoallv.fn(sbuf, scounts, sdisps, sdtype, rbuf, rcounts, rdisps, rdtype,
                                     comm, request, m->prev_ialltoallv.module);
    }
    nb_log(name, comm, 0, rdtype, NULL);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT_V(sdtype, size, scounts, sdisps),
                  COLL_GPU_READ, rbuf, COLL_GPU_LAYOUT_V(rdtype, size, rcounts, rdisps), rdir,
                  &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ialltoallv.fn(nb_sview(x), scounts, sdisps, sdtype, nb_rview(x), rcounts, rdisps,
                               rdtype, comm, request, m->prev_ialltoallv.module);
    return nb_attach(x, rc, request);
}

/* Per-peer types rule out a single layout: the union of the blocks is staged, holes included,
 * and copied in both ways (the holes go back unchanged). */
int mca_coll_gpu_ialltoallw(const void *sbuf, const int *scounts, const int *sdisps,
                            struct ompi_datatype_t *const *sdtypes, void *rbuf,
                            const int *rcounts, const int *rdisps,
                            struct ompi_datatype_t *const *rdtypes,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    static const char *const name = "ialltoallw";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool in_place = (MPI_IN_PLACE == sbuf);
    int size = mca_coll_gpu_peers(comm);
    dev_mem_kind_t skind = mca_coll_gpu_classify(sbuf), rkind = mca_coll_gpu_classify(rbuf);
    coll_gpu_nb_t *x;
    ptrdiff_t slo, rlo;
    size_t slen, rlen;
    int rc;

    if (mca_coll_gpu_is_host(skind) && mca_coll_gpu_is_host(rkind)) {
        return m->prev_ialltoallw.fn(sbuf, scounts, sdisps, sdtypes, rbuf, rcounts, rdisps,
                                     rdtypes, comm, request, m->prev_ialltoallw.module);
    }
    nb_log(name, comm, 0, NULL, NULL);
    if (in_place) {
        skind = DEV_MEM_HOST;
    }
    mca_coll_gpu_span_w(size, scounts, sdisps, sdtypes, &slo, &slen);
    mca_coll_gpu_span_w(size, rcounts, rdisps, rdtypes, &rlo, &rlen);
    rc = nb_stage_spans(m, comm, name, sbuf, skind, slo, slen, rbuf, rkind, rlo, rlen, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ialltoallw.fn(in_place ? MPI_IN_PLACE : nb_sview(x), scounts, sdisps, sdtypes,
                               nb_rview(x), rcounts, rdisps, rdtypes, comm, request,
                               m->prev_ialltoallw.module);
    return nb_attach(x, rc, request);
}
