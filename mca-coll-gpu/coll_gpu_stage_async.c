/*
 * coll_gpu_stage_async.c - the copy back of staged nonblocking and persistent requests
 * (coll_gpu_staged_colls.c) without waiting inside progress.
 *
 * The saved module (libnbc) completes a staged request from opal_progress, and our completion
 * callback (sreq_complete) must bring the results from the pinned bounce memory to
 * the user's device buffers before MPI_Wait or MPI_Test may see the request complete.  A
 * blocking copy there held every other request of the process, and the thread in MPI_Test,
 * for a whole copy and stream synchronisation.  So:
 *
 *   completion callback (in progress)       later progress (MPI_Wait, MPI_Test, any wait)
 *   ---------------------------------       ----------------------------------------------
 *   dev_memcpy_async of each written        dev_event_query: pending -> look again later;
 *     buffer on its device's copy stream      ended -> a failure goes into the request's
 *   dev_event_record, one query: ended?         status, cb->finish (the bounce memory back
 *     yes -> the request completes now          to the pool), ompi_request_complete:
 *     no  -> returns 1 (not complete), the      MPI_Wait and MPI_Test see it complete, with
 *            request joins the list below       the data in the user's buffers
 *
 * ompi_request_complete() marks a request complete only when its callback returns 0, and
 * clears the callback before calling it: a request whose callback returned 1 stays pending
 * with no callback, and ours completes it (as the saved module would have).  The request's
 * memory stays valid meanwhile: libnbc refuses MPI_Request_free and MPI_Cancel on a request
 * that is not complete, and coll_gpu_staged_colls.c refuses a free while its copy is in flight.
 *
 * Each device gets one copy stream of its own (non-blocking: the program's work on the
 * default stream does not hold the copies back) and a stock of events, made at a call (never
 * inside progress) and kept until the component closes.  The stream and event of a request are
 * those of the device current on the calling thread at the call; copies on a stream of
 * another device than a thread's current one are allowed (CUDA), so any thread's progress may
 * issue them.  Where no stream or event can be had, the copy back waits as it did before.
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

/* A device's copy stream and the events no request holds. */
typedef struct {
    dev_stream_t *stream;
    dev_event_t **spare;
    int nspare, cap;
} copyback_device_t;

static opal_mutex_t cb_lock = OPAL_MUTEX_STATIC_INIT; /* the devices and the list in flight */
static copyback_device_t cb_devices[COPYBACK_MAX_DEVICES];
static coll_gpu_copyback_t *cb_head, *cb_tail;       /* in flight, oldest first */
static _Atomic int cb_inflight;                      /* lets progress skip the lock */
static bool cb_registered;                           /* copyback_progress is registered */

/* Does the test-only fault injection (COLL_GPU_TEST_FAIL_COPYBACK) name this process? */
static bool copyback_fail_injected(void)
{
    static int target = -2;

    return mca_coll_gpu_test_env_names_me("COLL_GPU_TEST_FAIL_COPYBACK", &target);
}

/* The outcome of cb's copies, whose event answered q (DEV_OK: ended; < 0: failed). */
static int copyback_outcome(coll_gpu_copyback_t *cb, int q)
{
    if (DEV_OK != q) {
        mca_coll_gpu_report_failure(cb->what, cb->comm, "copy of the result to the device "
                                    "failed: %s", dev_error_string());
        return OMPI_ERROR;
    }
    if (copyback_fail_injected()) {
        mca_coll_gpu_report_failure(cb->what, cb->comm, "copy of the result to the device "
                                    "failed: injected by COLL_GPU_TEST_FAIL_COPYBACK (test "
                                    "only)");
        return OMPI_ERROR;
    }
    return OMPI_SUCCESS;
}

/* opal_progress callback: complete the requests whose copies have ended. */
static int copyback_progress(void)
{
    coll_gpu_copyback_t *ended = NULL, **ended_tail = &ended, **pp;
    int completed = 0;

    if (0 == atomic_load_explicit(&cb_inflight, memory_order_relaxed)
        || OPAL_THREAD_TRYLOCK(&cb_lock)) {
        return 0; /* nothing in flight, or another thread is at it */
    }
    cb_tail = NULL;
    for (pp = &cb_head; NULL != *pp;) {
        coll_gpu_copyback_t *cb = *pp;
        int q = dev_event_query(cb->event);

        if (1 == q) {
            cb_tail = cb;
            pp = &cb->next;
            continue;
        }
        *pp = cb->next;
        cb->next = NULL;
        cb->rc = mca_coll_gpu_first_error(cb->rc, copyback_outcome(cb, q));
        *ended_tail = cb;
        ended_tail = &cb->next;
        atomic_fetch_sub(&cb_inflight, 1);
    }
    OPAL_THREAD_UNLOCK(&cb_lock);

    /* outside the lock: a completion may start another request's copy back (MPI_Start from a
     * callback) or end a communicator whose last reference the request held */
    while (NULL != ended) {
        coll_gpu_copyback_t *cb = ended;
        ompi_request_t *req = cb->req;
        int rc = cb->rc;

        ended = cb->next;
        cb->pending = false;
        if (OMPI_SUCCESS != rc && MPI_SUCCESS == req->req_status.MPI_ERROR) {
            req->req_status.MPI_ERROR = ompi_errcode_get_mpi_code(rc);
        }
        mca_coll_gpu_pinned_completion_enter();
        if (NULL != cb->finish) {
            cb->finish(cb); /* may free cb */
        }
        mca_coll_gpu_pinned_completion_leave();
        ompi_request_complete(req, true);
        ++completed;
    }
    return completed;
}

/* The buffers of the pair s, r that go back to the user: the staged ones the call writes. */
static int copyback_written(const coll_gpu_staged_t *s, coll_gpu_dir_t sdir,
                            const coll_gpu_staged_t *r, coll_gpu_dir_t rdir,
                            const coll_gpu_staged_t *out[2])
{
    int n = 0;

    if (r->staged && 0 != (rdir & COLL_GPU_WRITE)) {
        out[n++] = r;
    }
    if (s->staged && 0 != (sdir & COLL_GPU_WRITE)) {
        out[n++] = s;
    }
    return n;
}

void mca_coll_gpu_copyback_reserve(coll_gpu_copyback_t *cb, const coll_gpu_staged_t *s,
                                   coll_gpu_dir_t sdir, const coll_gpu_staged_t *r,
                                   coll_gpu_dir_t rdir, struct ompi_communicator_t *comm,
                                   const char *what)
{
    copyback_device_t *d;
    dev_event_t *event = NULL;
    bool reg = false;
    int device = -1;
    const coll_gpu_staged_t *written[2];

    if (0 == copyback_written(s, sdir, r, rdir, written)) {
        return; /* nothing goes back */
    }

    cb->what = what;
    cb->comm = comm;
    cb->event = NULL;
    cb->device = -1;
    cb->pending = false;
    cb->rc = OMPI_SUCCESS;
    if (DEV_OK != dev_current_device(&device) || 0 > device || COPYBACK_MAX_DEVICES <= device) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:%s (cid %d): no copy stream for device "
                         "%d (%s): the copy back waits", what, coll_gpu_comm_cid(comm), device,
                         dev_error_string());
        return;
    }
    OPAL_THREAD_LOCK(&cb_lock);
    d = &cb_devices[device];
    /* made once per device, at a call */
    if (NULL == d->stream && DEV_OK != dev_stream_create(&d->stream)) {
        d->stream = NULL;
    }
    if (NULL != d->stream && 0 < d->nspare) {
        event = d->spare[--d->nspare];
    }
    if (NULL != d->stream && !cb_registered) {
        cb_registered = reg = true;
    }
    OPAL_THREAD_UNLOCK(&cb_lock);
    if (reg) {
        (void) opal_progress_register(copyback_progress);
    }
    if (NULL == d->stream || (NULL == event && DEV_OK != dev_event_create(&event))) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:%s (cid %d): no copy stream or event "
                         "on device %d (%s): the copy back waits", what,
                         coll_gpu_comm_cid(comm), device, dev_error_string());
        return;
    }
    cb->event = event;
    cb->device = device;
}

void mca_coll_gpu_copyback_unreserve(coll_gpu_copyback_t *cb)
{
    copyback_device_t *d;
    dev_event_t *lost = NULL;

    if (NULL == cb->event) {
        return;
    }
    d = &cb_devices[cb->device];
    OPAL_THREAD_LOCK(&cb_lock);
    if (d->nspare == d->cap) {
        int cap = (0 == d->cap) ? 16 : 2 * d->cap;
        dev_event_t **spare = realloc(d->spare, (size_t) cap * sizeof(*spare));
        if (NULL != spare) {
            d->spare = spare;
            d->cap = cap;
        }
    }
    if (d->nspare < d->cap) {
        d->spare[d->nspare++] = cb->event;
    } else {
        lost = cb->event;
    }
    OPAL_THREAD_UNLOCK(&cb_lock);
    if (NULL != lost) {
        (void) dev_event_destroy(lost); /* out of host memory: does not wait for the event */
    }
    cb->event = NULL;
}

bool mca_coll_gpu_copyback_start(coll_gpu_copyback_t *cb, const coll_gpu_staged_t *s,
                                 coll_gpu_dir_t sdir, const coll_gpu_staged_t *r,
                                 coll_gpu_dir_t rdir, ompi_request_t *req, bool may_defer,
                                 int *rc)
{
    const coll_gpu_staged_t *bufs[2];
    int n = copyback_written(s, sdir, r, rdir, bufs);
    size_t failed_len = 0;
    dev_stream_t *stream;
    int enqueued = 0, q;

    *rc = OMPI_SUCCESS;
    if (0 == n) {
        return true;
    }
    if (NULL == cb->event) {
        /* no stream or event: the copies of before, waiting for each */
        q = DEV_OK;
        for (int i = 0; i < n && DEV_OK == q; ++i) {
            q = mca_coll_gpu_stage_copy(bufs[i], false, &failed_len);
        }
        *rc = copyback_outcome(cb, q);
        return true;
    }
    stream = cb_devices[cb->device].stream; /* set before the event was handed out */
    /* a layout across allocations or memory kinds goes back piece by piece: host pieces at
     * once (host memory, no device involved), device pieces on the stream */
    for (int i = 0; i < n; ++i) {
        if (DEV_OK != mca_coll_gpu_stage_copy_back_on(bufs[i], stream, &enqueued, &failed_len)) {
            *rc = copyback_outcome(cb, DEV_ERR);
            break;
        }
    }
    if (0 == enqueued) {
        return true;
    }
    if (DEV_OK != dev_event_record(cb->event, stream)) {
        *rc = copyback_outcome(cb, DEV_ERR);
        /* the bounce memory goes back when this returns: the copies reading it must end first
         * (a failure path: waiting is the price) */
        (void) dev_stream_sync(stream);
        return true;
    }
    /* where the request may be seen complete before this returns (hooked on a request that had
     * completed already), or no callback can defer: wait here, at a call */
    q = may_defer ? dev_event_query(cb->event) : dev_event_sync(cb->event);
    if (1 != q) {
        *rc = mca_coll_gpu_first_error(*rc, copyback_outcome(cb, q));
        return true;
    }
    cb->req = req;
    cb->rc = *rc;
    cb->pending = true;
    cb->next = NULL;
    OPAL_THREAD_LOCK(&cb_lock);
    if (NULL == cb_tail) {
        cb_head = cb;
    } else {
        cb_tail->next = cb;
    }
    cb_tail = cb;
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
        copyback_device_t *d = &cb_devices[i];
        for (int k = 0; k < d->nspare; ++k) {
            (void) dev_event_destroy(d->spare[k]);
        }
        free(d->spare);
        if (NULL != d->stream) {
            (void) dev_stream_destroy(d->stream);
        }
        *d = (copyback_device_t){0};
    }
}
