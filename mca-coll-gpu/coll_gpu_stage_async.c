/*
 * coll_gpu_stage_async.c - the requests of the staged path (coll_gpu_staged_colls.c) in its
 * nonblocking and persistent modes, and their copy back without waiting inside progress.
 *
 * The requests are the saved module's own (libnbc's): MPI_Wait, MPI_Test, MPI_Start(all),
 * MPI_Request_free and the bindings' datatype retention work on them as usual.  coll/gpu hooks
 * its completion callback on them, and, persistent, its start and free in front of theirs:
 *
 *   MPI_I<coll> / MPI_<coll>_init    MPI_Start (persistent)   completion (in progress)
 *   ------------------------------   ----------------------   ----------------------------------
 *   bounce memory of the request's   copy in                  the module's callback first, then
 *   own, copy in (not persistent),   the module's start       dev_memcpy_async of the written
 *   an event for the copy back, the  hook sreq_complete       buffers on the device's copy
 *   saved function on the bounce                              stream and an event: return 1 (not
 *   memory; hook sreq_complete                                complete) until copyback_progress
 *   (or sreq_start and sreq_free)                             sees the event end and completes it
 *
 * ompi_request_complete() calls the callback, which it clears first, and marks the request
 * complete only when it returns 0.  A request complete already when hooked (one-process
 * communicators, empty calls) has its copies waited for at the call.  libnbc refuses
 * MPI_Request_free on a request that is not complete (sreq_free refuses while a copy is in
 * flight), so the state stays ours until then.  Each device gets one copy stream and a stock of
 * events, made at a call (never inside progress); where none can be had, the copy back waits.
 *
 * Test only: COLL_GPU_TEST_FAIL_COPYBACK=<rank in MPI_COMM_WORLD> makes every copy back of that
 * process fail once it has ended (tests/mpi/pinned_pool.sh); unset in production.
 */
#include "ompi_config.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "ompi/errhandler/errcode-internal.h"
#include "ompi/request/request.h"
#include "opal/runtime/opal_progress.h"

#include "coll_gpu.h"

#define COPYBACK_MAX_DEVICES 64
#define COPYBACK_SPARE 64 /* events kept per device */

/* What a staged request keeps: until it completes (nonblocking), until it is freed
 * (persistent). */
typedef struct sreq_t {
    const char *tag;     /* &sreq_tag: tells this state from a request */
    struct sreq_t *next; /* persistent: the list of live requests (sreq_list) */
    bool persistent;
    ompi_request_t *req; /* the saved module's request, handed to the user */
    ompi_request_complete_fn_t inner_cb; /* a callback the module had set: it runs first */
    void *inner_cb_data;
    ompi_request_start_fn_t inner_start; /* persistent: the module's start and free */
    ompi_request_free_fn_t inner_free;
    const char *what;
    struct ompi_communicator_t *comm;
    coll_gpu_staged_t s, r; /* bounce memory owned by the request (slot -1) */
    coll_gpu_dir_t sdir, rdir;
    int fail;               /* a staging failure: the result goes nowhere */
    /* the copy back: its event on the copy stream of device (NULL: it waits) */
    dev_event_t *event;
    int device;
    bool pending;             /* in flight: the request completes from progress */
    int cb_rc;                /* a failure of the copy back seen so far */
    struct sreq_t *cb_next;   /* the list of copies in flight */
} sreq_t;

/* A device's copy stream and a stock of the events no request holds. */
typedef struct {
    dev_stream_t *stream;
    dev_event_t *spare[COPYBACK_SPARE];
    int nspare;
} copy_device_t;

static const char sreq_tag = 0;
static sreq_t *sreq_list = NULL;
static opal_mutex_t sreq_lock = OPAL_MUTEX_STATIC_INIT;

static opal_mutex_t cb_lock = OPAL_MUTEX_STATIC_INIT; /* the devices and the list in flight */
static copy_device_t cb_devices[COPYBACK_MAX_DEVICES];
static sreq_t *cb_head, *cb_tail; /* in flight, oldest first */
static _Atomic int cb_inflight;   /* lets progress skip the lock */
static bool cb_registered;        /* copyback_progress is registered */

/* ---- the copy back ------------------------------------------------------------------------- */

/* The outcome of x's copies back, whose event answered q (DEV_OK: ended; < 0: failed). */
static int copyback_outcome(sreq_t *x, int q)
{
    static int target = -2;

    if (DEV_OK != q) {
        mca_coll_gpu_report_failure(x->what, x->comm, "copy of the result to the device "
                                    "failed: %s", dev_error_string());
        return OMPI_ERROR;
    }
    if (mca_coll_gpu_test_env_names_me("COLL_GPU_TEST_FAIL_COPYBACK", &target)) {
        mca_coll_gpu_report_failure(x->what, x->comm, "copy of the result to the device failed: "
                                    "injected by COLL_GPU_TEST_FAIL_COPYBACK (test only)");
        return OMPI_ERROR;
    }
    return OMPI_SUCCESS;
}

/* Give the bounce memory and the event back and free x.  A nonblocking call's x holds a
 * reference on its communicator, taken at the call: MPI_Comm_free with calls still running
 * defers the free until they complete, but libnbc holds no reference of its own between the
 * rounds of its schedule, so the communicator may go here, at the call's completion. */
static void sreq_release(sreq_t *x)
{
    struct ompi_communicator_t *comm = x->comm;
    bool persistent = x->persistent;

    mca_coll_gpu_stage_release(&x->r);
    mca_coll_gpu_stage_release(&x->s);
    if (NULL != x->event) {
        copy_device_t *d = &cb_devices[x->device];
        OPAL_THREAD_LOCK(&cb_lock);
        if (d->nspare < COPYBACK_SPARE) {
            d->spare[d->nspare++] = x->event;
            x->event = NULL;
        }
        OPAL_THREAD_UNLOCK(&cb_lock);
        if (NULL != x->event) {
            (void) dev_event_destroy(x->event); /* the stock is full; does not wait */
        }
    }
    free(x);
    if (!persistent) {
        OBJ_RELEASE(comm);
    }
}

/* Finish a nonblocking request inside progress: the bounce memory goes back, and the
 * communicator may go with x's reference, without a blocking call. */
static void sreq_finish(sreq_t *x)
{
    if (!x->persistent) {
        mca_coll_gpu_pinned_completion_enter();
        sreq_release(x);
        mca_coll_gpu_pinned_completion_leave();
    }
}

/* opal_progress callback: complete the requests whose copies have ended. */
static __attribute__((noinline)) int copyback_progress_run(void)
{
    sreq_t *ended = NULL, **ended_tail = &ended, **pp;
    int completed = 0;

    if (OPAL_THREAD_TRYLOCK(&cb_lock)) {
        return 0; /* another thread is at it */
    }
    cb_tail = NULL;
    for (pp = &cb_head; NULL != *pp;) {
        sreq_t *x = *pp;
        int q = dev_event_query(x->event);

        if (1 == q) {
            cb_tail = x;
            pp = &x->cb_next;
            continue;
        }
        *pp = x->cb_next;
        x->cb_next = NULL;
        x->cb_rc = mca_coll_gpu_first_error(x->cb_rc, copyback_outcome(x, q));
        *ended_tail = x;
        ended_tail = &x->cb_next;
        atomic_fetch_sub(&cb_inflight, 1);
    }
    OPAL_THREAD_UNLOCK(&cb_lock);

    /* outside the lock: a completion may start another request's copy back (MPI_Start from a
     * callback) or end a communicator whose last reference the request held */
    while (NULL != ended) {
        sreq_t *x = ended;
        ompi_request_t *req = x->req;

        ended = x->cb_next;
        x->pending = false;
        if (OMPI_SUCCESS != x->cb_rc && MPI_SUCCESS == req->req_status.MPI_ERROR) {
            req->req_status.MPI_ERROR = ompi_errcode_get_mpi_code(x->cb_rc);
        }
        sreq_finish(x);
        ompi_request_complete(req, true);
        ++completed;
    }
    return completed;
}

/* The progress callback: on every poll of opal_progress, so nothing in flight (the steady state)
 * costs a load and a return, without the body's stack frame. */
static int copyback_progress(void)
{
    if (0 == atomic_load_explicit(&cb_inflight, memory_order_relaxed)) {
        return 0;
    }
    return copyback_progress_run();
}

/* The staged buffers of x that go back to the user: those the call writes. */
static int sreq_written(sreq_t *x, const coll_gpu_staged_t *out[2])
{
    int n = 0;

    if (x->r.staged && 0 != (x->rdir & COLL_GPU_WRITE)) {
        out[n++] = &x->r;
    }
    if (x->s.staged && 0 != (x->sdir & COLL_GPU_WRITE)) {
        out[n++] = &x->s;
    }
    return n;
}

/* When the call writes a staged buffer back, take an event and the copy stream of the calling
 * thread's device for x (at the call, never inside progress); without them the copy back
 * waits (logged).  Registers the progress function on first use. */
static void copyback_reserve(sreq_t *x)
{
    const coll_gpu_staged_t *written[2];
    dev_event_t *event = NULL;
    copy_device_t *d = NULL;
    int device = -1;
    bool reg = false;

    if (0 == sreq_written(x, written)) {
        return;
    }
    if (DEV_OK == dev_current_device(&device) && 0 <= device && COPYBACK_MAX_DEVICES > device) {
        d = &cb_devices[device];
        OPAL_THREAD_LOCK(&cb_lock);
        if (NULL == d->stream && DEV_OK != dev_stream_create(&d->stream)) {
            d->stream = NULL;
        }
        if (NULL != d->stream && 0 < d->nspare) {
            event = d->spare[--d->nspare];
        }
        reg = NULL != d->stream && !cb_registered;
        cb_registered = cb_registered || reg;
        OPAL_THREAD_UNLOCK(&cb_lock);
        if (reg) {
            (void) opal_progress_register(copyback_progress);
        }
        if (NULL != d->stream && NULL == event && DEV_OK != dev_event_create(&event)) {
            event = NULL;
        }
    }
    if (NULL == event) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:%s (cid %d): no copy stream or event on "
                         "device %d (%s): the copy back waits", x->what,
                         coll_gpu_comm_cid(x->comm), device, dev_error_string());
        return;
    }
    x->event = event;
    x->device = device;
}

/* Copy the written buffers back.  With may_defer (the request is not marked complete yet):
 * false while the copies are in flight (copyback_progress completes the request); else true
 * once they have ended, a failure in *rc (reported). */
static bool copyback_start(sreq_t *x, bool may_defer, int *rc)
{
    const coll_gpu_staged_t *bufs[2];
    int n = sreq_written(x, bufs), enqueued = 0, q = DEV_OK;
    size_t failed_len = 0;
    dev_stream_t *stream = (NULL != x->event) ? cb_devices[x->device].stream : NULL;

    /* host pieces of a layout across kinds are copied at once, device pieces on the stream (or
     * at once, without one) */
    for (int i = 0; i < n && DEV_OK == q; ++i) {
        q = mca_coll_gpu_stage_copy(bufs[i], false, stream, &enqueued, &failed_len);
    }
    *rc = (0 < n && (DEV_OK != q || NULL == stream)) ? copyback_outcome(x, q) : OMPI_SUCCESS;
    if (0 == enqueued) {
        return true;
    }
    if (DEV_OK != dev_event_record(x->event, stream)) {
        *rc = copyback_outcome(x, DEV_ERR);
        (void) dev_stream_sync(stream); /* the copies read the bounce memory, which goes back */
        return true;
    }
    q = may_defer ? dev_event_query(x->event) : dev_event_sync(x->event);
    if (1 != q) {
        *rc = mca_coll_gpu_first_error(*rc, copyback_outcome(x, q));
        return true;
    }
    x->cb_rc = *rc;
    x->pending = true;
    x->cb_next = NULL;
    OPAL_THREAD_LOCK(&cb_lock);
    if (NULL == cb_tail) {
        cb_head = x;
    } else {
        cb_tail->cb_next = x;
    }
    cb_tail = x;
    atomic_fetch_add(&cb_inflight, 1);
    OPAL_THREAD_UNLOCK(&cb_lock);
    return false;
}

void mca_coll_gpu_copyback_finalize(void)
{
    if (cb_registered) {
        (void) opal_progress_unregister(copyback_progress);
        cb_registered = false;
    }
    /* a program that finalizes with requests unfinished: their copies end here (a device that
     * fails them ends them too, with an error; a few rounds are plenty) */
    for (int round = 0; round < 100 && 0 < atomic_load(&cb_inflight); ++round) {
        for (int i = 0; i < COPYBACK_MAX_DEVICES; ++i) {
            if (NULL != cb_devices[i].stream) {
                (void) dev_stream_sync(cb_devices[i].stream);
            }
        }
        (void) copyback_progress();
    }
    for (int i = 0; i < COPYBACK_MAX_DEVICES; ++i) {
        copy_device_t *d = &cb_devices[i];
        for (int k = 0; k < d->nspare; ++k) {
            (void) dev_event_destroy(d->spare[k]);
        }
        if (NULL != d->stream) {
            (void) dev_stream_destroy(d->stream);
        }
        *d = (copy_device_t){0};
    }
}

/* ---- the requests -------------------------------------------------------------------------- */

/* req_complete_cb of a staged request: the saved module's own callback first (if it says the
 * request is not complete yet, stay hooked on top of what it left), then the copy back.
 * Returns 0 when the request may complete now, 1 while the copies are in flight.
 *
 * Open MPI 4.1's bindings put a callback of their own on top of ours when a datatype is derived
 * (ompi_coll_base_retain_datatypes*), and that one calls the callback it wrapped with the
 * wrapped callback's data instead of the request: so arg is the request or our state, and the
 * tag tells them apart (a request starts with its object header). */
static int sreq_complete(ompi_request_t *arg)
{
    sreq_t *x = (&sreq_tag == *(const char *const *) arg)
                    ? (sreq_t *) arg
                    : (sreq_t *) arg->req_complete_cb_data;
    ompi_request_t *req = x->req;
    int rc;

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
    /* a result computed from scratch goes nowhere; a request marked complete already cannot
     * wait for the copies: they are waited for here, at the call or MPI_Start */
    rc = mca_coll_gpu_first_error(x->fail, req->req_status.MPI_ERROR);
    if (OMPI_SUCCESS == rc && !copyback_start(x, !REQUEST_COMPLETE(req), &rc)) {
        return 1;
    }
    if (OMPI_SUCCESS != rc && MPI_SUCCESS == req->req_status.MPI_ERROR) {
        req->req_status.MPI_ERROR = ompi_errcode_get_mpi_code(rc);
    }
    sreq_finish(x);
    return 0;
}

/* Hook the completion callback on req (which runs it at once if req has completed since). */
static void sreq_hook(sreq_t *x, ompi_request_t *req)
{
    x->req = req;
    x->inner_cb = req->req_complete_cb;
    x->inner_cb_data = req->req_complete_cb_data;
    (void) ompi_request_set_callback(req, sreq_complete, x);
}

/* The state of req, taken off the list when take; or put x on it (req NULL). */
static sreq_t *sreq_list_op(ompi_request_t *req, bool take, sreq_t *x)
{
    sreq_t **pp;

    OPAL_THREAD_LOCK(&sreq_lock);
    if (NULL == req) {
        x->next = sreq_list;
        sreq_list = x;
    }
    for (pp = &sreq_list; NULL != req && NULL != *pp; pp = &(*pp)->next) {
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

/* After the saved MPI_I<coll> returned rc and *request: finish now when it failed or already
 * completed, else copy back at completion. */
static int sreq_attach_nonblocking(sreq_t *x, int rc, ompi_request_t *req)
{
    if (OMPI_SUCCESS == rc && NULL != req && MPI_REQUEST_NULL != req) {
        if (!REQUEST_COMPLETE(req)) {
            sreq_hook(x, req);
            return OMPI_SUCCESS;
        }
        rc = req->req_status.MPI_ERROR;
    }
    rc = mca_coll_gpu_unstage_pair(NULL, x->comm, x->what, rc, &x->s, x->sdir, &x->r, x->rdir);
    sreq_release(x);
    return rc;
}

/* Copy a staged buffer of a persistent request in from the user's memory (at each start). */
static int sreq_fill(sreq_t *x, coll_gpu_staged_t *b)
{
    size_t failed_len = 0;

    if (!b->staged || !b->fill
        || DEV_OK == mca_coll_gpu_stage_copy(b, true, NULL, NULL, &failed_len)) {
        return OMPI_SUCCESS;
    }
    mca_coll_gpu_report_failure(x->what, x->comm, "copy of %zu B from the device failed: %s; "
                                "taking part with stale data", failed_len, dev_error_string());
    return OMPI_ERROR;
}

/* MPI_Start and MPI_Startall (which hands over runs of requests with the same start
 * function): copy in, start the saved module's request, hook the copy back on its end. */
static int sreq_start(size_t count, ompi_request_t **requests)
{
    for (size_t i = 0; i < count; ++i) {
        sreq_t *x = sreq_list_op(requests[i], false, NULL);
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
        sreq_hook(x, requests[i]); /* completes at once if the request has completed already */
    }
    return OMPI_SUCCESS;
}

/* MPI_Request_free: the module's free first, with its own functions back in place (the module
 * recycles the request object); keep everything when it refuses (an active request). */
static int sreq_free(ompi_request_t **rptr)
{
    ompi_request_t *req = *rptr;
    sreq_t *x = sreq_list_op(req, true, NULL);
    /* a wrapper installed after ours (the binding's datatype retention) stays where it is */
    bool own_start = (sreq_start == req->req_start), own_free = (sreq_free == req->req_free);
    int rc = MPI_ERR_REQUEST;

    if (NULL == x) {
        return OMPI_ERR_BAD_PARAM; /* cannot happen: sreq_free is set with the state */
    }
    if (!x->pending) { /* else its copy back, in flight, reads the bounce memory */
        req->req_start = own_start ? x->inner_start : req->req_start;
        req->req_free = own_free ? x->inner_free : req->req_free;
        rc = x->inner_free(rptr);
        if (OMPI_SUCCESS == rc) {
            sreq_release(x);
            return rc;
        }
        req->req_start = own_start ? sreq_start : req->req_start;
        req->req_free = own_free ? sreq_free : req->req_free;
    }
    (void) sreq_list_op(NULL, false, x);
    return rc;
}

/* After the saved _init returned rc and *request: put our start and free in front of the
 * request's own, or give everything back when the init failed. */
static int sreq_attach_persistent(sreq_t *x, int rc, ompi_request_t **request)
{
    ompi_request_t *req = *request;

    if (OMPI_SUCCESS != rc
        || (NULL != req && MPI_REQUEST_NULL != req && OMPI_REQUEST_NOOP == req->req_type)) {
        /* A call with nothing to do on this rank (4.1's libnbc answers an alltoallv whose
         * counts here are all zero so) is a persistent no-op without a start function, which
         * never touches a buffer: it goes out as it is */
        sreq_release(x);
        return rc;
    }
    if (NULL == req || MPI_REQUEST_NULL == req || NULL == req->req_start || NULL == req->req_free) {
        /* it would run on the bounce memory without the copies: it must not be handed out */
        mca_coll_gpu_report_failure(x->what, x->comm, "the saved module returned a persistent "
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
    (void) sreq_list_op(NULL, false, x);
    req->req_start = sreq_start;
    req->req_free = sreq_free;
    return OMPI_SUCCESS;
}

int mca_coll_gpu_staged_request(const coll_gpu_staged_call_t *c, const coll_gpu_side_t *s,
                                const coll_gpu_side_t *r, coll_gpu_invoke_fn_t invoke)
{
    sreq_t *x = calloc(1, sizeof(*x));
    int rc;

    if (NULL == x) {
        mca_coll_gpu_report_failure(c->what, c->comm, "out of host memory for a request's state");
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    x->tag = &sreq_tag;
    x->persistent = COLL_GPU_PERSISTENT == c->mode;
    x->what = c->what;
    x->comm = c->comm;
    x->sdir = s->dir;
    x->rdir = r->dir;
    if (!x->persistent) {
        OBJ_RETAIN(c->comm); /* until the call completes (sreq_release) */
    }
    /* the bounce memory outlives the call: owned by the request (slot -1) */
    rc = mca_coll_gpu_stage_sides(c->gpu, true, s, r, c->comm, c->what, &x->s, &x->r);
    if (OMPI_SUCCESS != rc) {
        sreq_release(x);
        return rc;
    }
    x->fail = mca_coll_gpu_first_error(x->s.fail, x->r.fail);
    copyback_reserve(x); /* what the copy back needs is taken now, at the call */
    rc = invoke(c, mca_coll_gpu_view(&x->s), mca_coll_gpu_view(&x->r));
    return x->persistent ? sreq_attach_persistent(x, rc, c->request)
                         : sreq_attach_nonblocking(x, rc, *c->request);
}
