/*
 * coll_gpu_defer.c - the per-call path of nonblocking calls: an MPI_Iallreduce or MPI_Ibcast
 * with device memory takes the node team when every rank of that call passes device memory,
 * found out after the call has returned, without any rank waiting at the call.
 *
 * A blocking call agrees on its path through the kinds board (coll_gpu_kinds.c), where a device
 * rank waits for every peer's note of the call.  A nonblocking call may not wait: MPI lets a
 * program start such calls on two communicators in different orders on different ranks.  So on
 * a communicator that agrees through its board, before any call there had device memory on
 * every rank (mca_coll_gpu_nb_team_path), the calls go as follows:
 *
 *   every MPI_Iallreduce and MPI_Ibcast   takes the next call number on the board and notes its
 *                                         kind there (a device rank its details too), as a
 *                                         blocking call does
 *   host memory, nothing deferred here    the component below at once (its request)
 *   device memory, or calls deferred      deferred: the program gets a request of ours, and
 *   here already                          the call waits in the module's queue, in call order
 *   progress, the queue's head            every peer's note there: all device -> the node
 *                                         team (and from this call on, every nonblocking call
 *                                         takes the team, as after a blocking one); some host
 *                                         -> staged through the component below; details
 *                                         that differ -> the same MPI error on every rank
 *
 * Every rank reads the same notes, so every rank decides alike, whenever it gets there.  Two
 * orders must survive the deferral:
 *   - the node team's: calls run on the team in call order on every rank.  So while a call is
 *     queued here, every later call that may go to the team waits behind it (the nonblocking
 *     team exchanges, reduce-scatters and reduce too), and a blocking device call first
 *     dispatches what is queued (mca_coll_gpu_defer_settle; it may wait: its peers entered
 *     those calls before it).  A persistent request takes the team only after a blocking call
 *     had device memory on every rank (mca_coll_gpu_nb_team_path), which left nothing queued
 *     and after which nothing is deferred: its starts never wait behind a deferred call.
 *   - the component below's: libnbc matches its calls by a tag each takes from the
 *     communicator's counter (c_nbc_tag) in the order they start.  A deferred call takes its
 *     tag at the call, and is started below with that tag later; the calls started meanwhile
 *     took the next ones, as on ranks that did not defer.  For that, every nonblocking call
 *     that may be deferred takes exactly one tag wherever it goes (the team's path takes one it
 *     does not use), and the saved functions must be libnbc's (one tag per call), which
 *     mca_coll_gpu_defer_on checks.  Resetting the counter for that start is safe only while no other
 *     thread starts calls on the communicator: no deferral under MPI_THREAD_MULTIPLE.
 *
 * The notes' ring (COLL_GPU_KINDS_RING slots a rank): a note overwritten before a slow peer read
 * it reads as "not device" (coll_gpu_kinds.c), which is the truth of the call except where this
 * rank still has the call queued, or put it on the team and it has not ended.  So no note is
 * written RING calls or more past such a call: a blocking call waits (settle), a deferred one
 * writes its note from progress once it may.
 *
 * A communicator whose first call that agrees on kinds is a nonblocking one sets its board up
 * without a wait (mca_coll_gpu_kinds_setup_begin): its calls queue here until it has ended.
 *
 * Outside that (intercommunicators, communicators across hosts or under a promise, other
 * components below, MPI_THREAD_MULTIPLE) nonblocking calls follow the kinds history alone:
 * correct, and staged until a blocking call had device memory on every rank.
 */
#include "ompi_config.h"

#include <dlfcn.h>
#include <sched.h>
#include <string.h>

#include "ompi/errhandler/errcode-internal.h"
#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/request/request.h"
#include "ompi/runtime/mpiruntime.h"
#include "opal/runtime/opal_progress.h"

#include "coll_gpu.h"

typedef enum { DEFER_QUEUED, DEFER_FLYING } defer_state_t;

/* A deferred call: the request the program holds (a coll/base nonblocking request, whose
 * fields the bindings use to keep the op and datatypes alive), and the request of the path it
 * took once decided (inner), whose end ends it. */
typedef struct coll_gpu_defer_t {
    ompi_coll_base_nbc_request_t super;
    struct coll_gpu_defer_t *next;      /* the module's list, in call order */
    mca_coll_gpu_module_t *m;
    defer_state_t state;
    coll_gpu_staged_call_t call;        /* as given; call.request is &inner */
    coll_gpu_defer_run_t run;           /* the entry's own path, run once decided */
    uint64_t u;                         /* its call number on the board; 0: none */
    coll_gpu_kinds_call_t kinds;        /* a device rank's details for its note */
    bool device, noted, team;           /* team: flying on the node team (holds its note) */
    int32_t tag;                        /* the tag of the component below it took */
    int rc;                             /* decided to fail (details that differ, a hang) */
    coll_gpu_kinds_watch_t watch;
    ompi_request_t *inner;
    bool user_freed, ended;
} coll_gpu_defer_t;

static OBJ_CLASS_INSTANCE(coll_gpu_defer_t, ompi_coll_base_nbc_request_t, NULL, NULL);

/* Modules with deferred calls (linked through defer_mnext), and whether the progress callback
 * is registered.  Touched only by the thread in MPI (no deferral under MPI_THREAD_MULTIPLE). */
static mca_coll_gpu_module_t *defer_modules;
static bool defer_registered;
static bool defer_inside; /* in defer_progress: its dispatches may call opal_progress */
/* Requests to destroy once defer_progress is done with the modules (the last reference on a
 * communicator may go with them, and its module with it). */
static struct coll_gpu_defer_t *defer_reap;

static int defer_progress(void);

/* Is every saved function a deferred call may end in libnbc's (one tag per call)?  Asked once
 * per module; the same on every rank (one installation, one selection). */
static bool saved_are_libnbc(const mca_coll_gpu_module_t *m)
{
    const void *fns[] = {
        (const void *) m->prev_iallreduce.fn,      (const void *) m->prev_ibcast.fn,
        (const void *) m->prev_iallgather.fn,      (const void *) m->prev_iallgatherv.fn,
        (const void *) m->prev_ialltoall.fn,       (const void *) m->prev_ialltoallv.fn,
        (const void *) m->prev_ireduce.fn,         (const void *) m->prev_ireduce_scatter.fn,
        (const void *) m->prev_ireduce_scatter_block.fn,
    };

    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); ++i) {
        Dl_info info;
        if (NULL == fns[i] || 0 == dladdr(fns[i], &info) || NULL == info.dli_sname
            || info.dli_saddr != fns[i]
            || 0 != strncmp(info.dli_sname, "ompi_coll_libnbc_", 17)) {
            return false;
        }
    }
    return true;
}

bool mca_coll_gpu_defer_on(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm)
{
    if (mca_coll_gpu_defer_off(m)) {
        return false;
    }
    if (0 == m->defer_ok) {
        m->defer_ok = saved_are_libnbc(m) ? 1 : -1;
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu: nonblocking allreduces and bcasts %s",
                         0 < m->defer_ok ? "decide their path per call"
                                         : "follow the kinds history (the component below is "
                                           "not libnbc)");
    }
    if (0 > m->defer_ok) {
        return false;
    }
    if (COLL_GPU_KMODE_UNSET == m->kmode) {
        /* the communicator's first call that agrees on kinds, on every rank: the board's setup
         * without a wait (one process alone, or ranks across hosts: as before, the first
         * blocking call sets it up) */
        if (2 > ompi_comm_size(comm) || !mca_coll_gpu_all_on_host(comm)) {
            return false;
        }
        mca_coll_gpu_kinds_setup_begin(m, comm);
    }
    return true;
}

/* ---- the module's list ----------------------------------------------------------------- */

static void defer_append(mca_coll_gpu_module_t *m, coll_gpu_defer_t *x)
{
    x->next = NULL;
    if (NULL == m->defer) {
        m->defer = x;
    } else {
        m->defer_tail->next = x;
    }
    m->defer_tail = x;
    if (!m->defer_listed) {
        m->defer_listed = true;
        m->defer_mnext = defer_modules;
        defer_modules = m;
    }
    if (!defer_registered) {
        defer_registered = true;
        (void) opal_progress_register(defer_progress);
    }
}

static void defer_unlink(mca_coll_gpu_module_t *m, coll_gpu_defer_t *x)
{
    coll_gpu_defer_t *prev = NULL;

    for (coll_gpu_defer_t *y = m->defer; NULL != y; prev = y, y = y->next) {
        if (y != x) {
            continue;
        }
        if (NULL == prev) {
            m->defer = x->next;
        } else {
            prev->next = x->next;
        }
        if (m->defer_tail == x) {
            m->defer_tail = prev;
        }
        return;
    }
}

/* Would a note of call v overwrite the slot of a call this rank still has queued, or flying on
 * the team, ahead of `before` (NULL: any)? */
static bool defer_lapping(const mca_coll_gpu_module_t *m, uint64_t v,
                          const coll_gpu_defer_t *before)
{
    for (const coll_gpu_defer_t *y = m->defer; NULL != y && y != before; y = y->next) {
        if (0 != y->u && (DEFER_QUEUED == y->state || y->team)
            && v >= y->u + COLL_GPU_KINDS_RING) {
            return true;
        }
    }
    return false;
}

/* ---- the request the program holds -------------------------------------------------------- */

static void defer_destroy(coll_gpu_defer_t *x)
{
    struct ompi_communicator_t *comm = x->call.comm;

    OMPI_REQUEST_FINI(&x->super.super);
    OBJ_RELEASE(x);
    OBJ_RELEASE(comm);
}

static int defer_req_free(ompi_request_t **req)
{
    coll_gpu_defer_t *x = (coll_gpu_defer_t *) *req;

    /* MPI_Request_free on a call still running: it runs to its end (peers need us), then goes */
    if (x->ended) {
        defer_destroy(x);
    } else {
        x->user_freed = true;
    }
    *req = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

static void defer_reap_later(coll_gpu_defer_t *x)
{
    x->next = defer_reap;
    defer_reap = x;
}

/* The end: the status of the path taken (or the decided error), completion. */
static void defer_end(coll_gpu_defer_t *x, int rc)
{
    mca_coll_gpu_module_t *m = x->m;

    defer_unlink(m, x);
    x->super.super.req_status.MPI_ERROR = (OMPI_SUCCESS == rc) ? MPI_SUCCESS
                                                               : ompi_errcode_get_mpi_code(rc);
    x->ended = true;
    ompi_request_complete(&x->super.super, true);
    if (x->user_freed) {
        defer_reap_later(x);
    }
}

/* ---- deciding and dispatching --------------------------------------------------------------- */

/* The head's path, once every peer's note is there: false while one is missing. */
static bool defer_decide(coll_gpu_defer_t *x)
{
    mca_coll_gpu_module_t *m = x->m;
    bool all_device = false, given_up;
    int rc;

    if (0 == x->u || !x->device || m->nb_device || COLL_GPU_KMODE_BOARD != m->kmode) {
        return true; /* no note to read: the kinds history decides (the run's own choice) */
    }
    rc = mca_coll_gpu_kinds_poll(m, x->call.comm, x->call.what, x->u, &x->watch);
    if (0 == rc) {
        return false;
    }
    given_up = (1 != rc);
    if (!given_up) {
        rc = mca_coll_gpu_kinds_read(m, x->call.comm, x->u, &all_device);
    }
    if (OMPI_SUCCESS != rc) {
        x->rc = rc; /* details that differ (every rank has the same), or a hang given up */
    } else if (all_device) {
        m->nb_device = true; /* from this call on, the same on every rank */
    }
    COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL, "coll:gpu:%s (cid %d): call %lu decided: %s",
                     x->call.what, coll_gpu_comm_cid(x->call.comm), (unsigned long) x->u,
                     given_up                ? "failed (the wait for the peers was given up)"
                     : OMPI_SUCCESS != rc    ? "erroneous"
                     : all_device            ? "device memory on every rank"
                                             : "host memory on some rank");
    return true;
}

/* Start the decided head on its path, with the tag it took at the call. */
static void defer_dispatch(coll_gpu_defer_t *x)
{
    struct ompi_communicator_t *comm = x->call.comm;
    int32_t now = comm->c_nbc_tag;
    int rc = x->rc;

    x->state = DEFER_FLYING;
    if (OMPI_SUCCESS == rc) {
        comm->c_nbc_tag = x->tag;
        rc = x->run(&x->call);
        /* the tag unused: the call went to the node team (it holds its note until it ends) */
        x->team = (comm->c_nbc_tag == x->tag);
        comm->c_nbc_tag = now;
    }
    if (OMPI_SUCCESS != rc || NULL == x->inner) {
        defer_end(x, rc);
    }
}

/* One module's deferred calls: notes written in call order once they may be, heads decided and
 * dispatched, flying calls ended.  Returns how many ended. */
static int defer_module_progress(mca_coll_gpu_module_t *m)
{
    coll_gpu_defer_t *x, *next;
    int ended = 0;

    if (COLL_GPU_KMODE_PENDING == m->kmode && !mca_coll_gpu_kinds_setup_step(m)) {
        return 0; /* no board yet to note on */
    }
    for (x = m->defer; NULL != x; x = x->next) {
        if (DEFER_QUEUED == x->state && 0 != x->u && !x->noted) {
            if (defer_lapping(m, x->u, x)) {
                break;
            }
            if (COLL_GPU_KMODE_BOARD == m->kmode) {
                mca_coll_gpu_kinds_note(m, x->u, x->device ? &x->kinds : NULL);
            }
            x->noted = true; /* (no board: the setup failed, every rank goes by the history) */
        }
    }
    for (x = m->defer; NULL != x; x = next) {
        next = x->next;
        if (DEFER_FLYING == x->state) {
            if (REQUEST_COMPLETE(x->inner)) {
                int rc = x->inner->req_status.MPI_ERROR;
                (void) ompi_request_free(&x->inner);
                defer_end(x, rc);
                ++ended;
            }
            continue;
        }
        if ((0 != x->u && !x->noted) || !defer_decide(x)) {
            break; /* later calls wait behind it */
        }
        defer_dispatch(x); /* (x may have ended: next was read before) */
    }
    return ended;
}

static __attribute__((noinline)) int defer_progress_run(void)
{
    mca_coll_gpu_module_t **pm;
    int ended = 0;

    if (defer_inside || mca_coll_gpu_async_busy()) {
        return 0;
    }
    defer_inside = true;
    for (mca_coll_gpu_module_t *m = defer_modules; NULL != m; m = m->defer_mnext) {
        ended += defer_module_progress(m);
    }
    for (pm = &defer_modules; NULL != *pm;) {
        if (NULL == (*pm)->defer) {
            (*pm)->defer_listed = false;
            *pm = (*pm)->defer_mnext;
        } else {
            pm = &(*pm)->defer_mnext;
        }
    }
    defer_inside = false;
    while (NULL != defer_reap) {
        coll_gpu_defer_t *x = defer_reap;
        defer_reap = x->next;
        defer_destroy(x);
    }
    return ended;
}

/* The progress callback, registered from the first deferred call to MPI_Finalize and run on
 * every poll of opal_progress: nothing deferred (the steady state) costs a load and a return,
 * without the body's stack frame. */
static int defer_progress(void)
{
    if (NULL == defer_modules) {
        return 0;
    }
    return defer_progress_run();
}

void mca_coll_gpu_defer_forget(mca_coll_gpu_module_t *m)
{
    for (mca_coll_gpu_module_t **pm = &defer_modules; m->defer_listed && NULL != *pm;
         pm = &(*pm)->defer_mnext) {
        if (*pm == m) {
            *pm = m->defer_mnext;
            m->defer_listed = false;
        }
    }
}

/* ---- entries -------------------------------------------------------------------------------- */

static bool defer_queued(const mca_coll_gpu_module_t *m)
{
    for (const coll_gpu_defer_t *y = m->defer; NULL != y; y = y->next) {
        if (DEFER_QUEUED == y->state) {
            return true;
        }
    }
    return false;
}

static coll_gpu_defer_t *defer_new(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm)
{
    coll_gpu_defer_t *x = OBJ_NEW(coll_gpu_defer_t);

    if (NULL == x) {
        return NULL;
    }
    mca_coll_gpu_request_init(&x->super.super, comm, false, defer_req_free);
    memset(&x->next, 0, sizeof(*x) - offsetof(coll_gpu_defer_t, next));
    x->m = m;
    x->state = DEFER_QUEUED;
    OBJ_RETAIN(comm); /* until the request is freed */
    return x;
}

int mca_coll_gpu_defer_call(coll_gpu_staged_call_t *c, coll_gpu_defer_run_t run,
                            const coll_gpu_kinds_call_t *kinds)
{
    mca_coll_gpu_module_t *m = c->gpu;
    struct ompi_communicator_t *comm = c->comm;
    bool device = NULL != kinds && kinds->device;
    uint64_t u = 0;
    coll_gpu_defer_t *x;
    int32_t tag;
    int rc;

    if (NULL != kinds) {
        u = ++m->kinds_seq;
    }
    if (COLL_GPU_KMODE_BOARD == m->kmode && !defer_queued(m)
        && (NULL == kinds || m->nb_device || !device)
        && (0 == u || !defer_lapping(m, u, NULL))) {
        /* decided at the call: the kinds history and this rank's kind say it all */
        if (0 != u) {
            mca_coll_gpu_kinds_note(m, u, device ? kinds : NULL);
        }
        tag = comm->c_nbc_tag;
        rc = run(c);
        if (comm->c_nbc_tag == tag) {
            /* the team's path (or none below): the tag a deferring rank took for this call */
            (void) ompi_coll_base_nbc_reserve_tags(comm, 1);
        }
        return rc;
    }
    if (NULL == (x = defer_new(m, comm))) {
        mca_coll_gpu_report_failure(c->what, comm, "out of host memory for a request");
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    x->call = *c;
    x->call.request = &x->inner;
    x->run = run;
    x->u = u;
    x->device = device;
    if (device) {
        x->kinds = *kinds;
    }
    x->tag = ompi_coll_base_nbc_reserve_tags(comm, 1);
    if (0 != u && COLL_GPU_KMODE_BOARD == m->kmode && !defer_lapping(m, u, NULL)) {
        mca_coll_gpu_kinds_note(m, u, device ? kinds : NULL);
        x->noted = true;
    }
    COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL, "coll:gpu:%s (cid %d): call %lu deferred (%s memory "
                     "here): its path is decided once every rank's note is read",
                     c->what, coll_gpu_comm_cid(comm), (unsigned long) u,
                     device ? "device" : "host");
    defer_append(m, x);
    *c->request = &x->super.super;
    (void) defer_progress(); /* the peers may all be there already */
    return OMPI_SUCCESS;
}

int mca_coll_gpu_defer_settle(mca_coll_gpu_module_t *m, bool device)
{
    unsigned spins = 0;

    if (defer_inside || mca_coll_gpu_async_busy()) {
        return OMPI_SUCCESS; /* a call of our own progress (none makes one today) */
    }
    /* the board's setup ends first; a device call may take the team: what is queued goes
     * first; any call's note must not lap a call still queued or on the team */
    for (;;) {
        if (COLL_GPU_KMODE_PENDING == m->kmode) {
            (void) mca_coll_gpu_kinds_setup_step(m); /* (also where no call is queued here) */
        }
        if (COLL_GPU_KMODE_PENDING != m->kmode
            && (NULL == m->defer
                || (!(device && defer_queued(m)) && !defer_lapping(m, m->kinds_seq + 1, NULL)))) {
            break;
        }
        (void) defer_progress();
        if (++spins < 64) {
            continue;
        }
        opal_progress();
        if (spins > 4096) {
            sched_yield();
        }
    }
    return OMPI_SUCCESS;
}

void mca_coll_gpu_defer_finalize(void)
{
    if (defer_registered) {
        (void) opal_progress_unregister(defer_progress);
        defer_registered = false;
    }
}
