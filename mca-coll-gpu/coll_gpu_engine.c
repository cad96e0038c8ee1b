/*
 * coll_gpu_engine.c - the engine: every algorithm of the node team written once, as a schedule
 * of steps, and run the same way for every call mode.  A call is a request (coll_gpu_async_t)
 * queued on its team; a step never blocks on a peer, it polls the control block's words
 * (arrive, done, step, the calls' records), a stream or the fused kernel's done word:
 *
 *   blocking call      post the request, step it on this thread until it ends
 *                      (mca_coll_gpu_team_allreduce, _bcast, _xcall: async_run)
 *   MPI_Ixxx           post the request; the head starts at once (export, arrive, the fused
 *                      kernel's launch on cuda); progress carries it on (opal_progress, hence
 *                      MPI_Wait, MPI_Test and every blocking wait)
 *   MPI_Xxx_init       the same decision at init gives an inactive persistent request; each
 *                      MPI_Start begins one call on it (async_pers_start)
 *   any wait of ours   (the blocking calls' waits, the emulated fused kernel's wait, the waits
 *                      of the hierarchical path: mca_coll_gpu_async_pause) steps the other
 *                      teams' heads too, so that a rank in a call on one communicator still
 *                      moves its requests on another, which its peers may be waiting for
 *
 * Requests of one team run one at a time, in issue order: the team's seq (the calls that took
 * the team, the same on every rank), its double-buffered scratch and call records assume it.
 * The waits are watched in one place (mca_coll_gpu_team_watch): reported past
 * coll_gpu_hang_warn_seconds, given up past coll_gpu_hang_error_seconds (the call fails).
 *
 * Synchronisation is through the team's control block in host shared memory: each rank
 * publishes `arrive = seq` once its inputs (and exported buffer handles) are ready, and
 * `done = seq` once it no longer touches peers' memory for that call.  Data is final in the
 * receive buffer when the request completes.  Schedules (a line is one step, which ends when
 * what it waits for is there):
 *
 *   allreduce agreement   publish {bytes, dtype, op, in place}(seq) | wait every rank's record:
 *                         they agree: the plan's algorithm; they differ (an erroneous call):
 *                         every rank takes the finish without data, with the same error
 *   bcast agreement       publish {bytes, plan}(seq) | non-root: wait for the root's record;
 *                         the root's plan is the call's, a byte count other than the root's
 *                         sits the call out with MPI_ERR_TRUNCATE (the root returns it too)
 *   finish                (after a failure: arrive if not yet, drain our stream) done(seq) |
 *                         wait done(all); the call fails on every rank when any rank failed
 *
 * one-shot allreduce (small, zero-copy):    two-shot allreduce (large, zero-copy):
 *   export sbuf, arrive                       export sbuf, rbuf, arrive
 *   wait arrive(all), map peers' sbuf,        wait arrive(all), map peers' sbuf and rbuf,
 *     rbuf = reduce(sbuf[p], p = 0..n-1)        my chunk c: rbuf[q][c] = reduce_p sbuf[p][c]
 *   poll stream | finish                      poll stream | finish
 * One-shot never runs in place (peers would read a buffer its owner is overwriting): an
 * in-place call takes two-shot, where each element is read and written by one rank only
 * (mca_coll_gpu_plan_for_call).  Every rank reduces in rank order, so floating-point results
 * are identical on all ranks.
 *
 * fused allreduce (small; one kernel, allreduce_fused.cu, protocol in dev.h): no host step
 * between ranks at all.  Each rank's kernel pushes its data into every peer's scratch slot
 * (parity seq & 1), raises a flag there (seq), waits for the peers' flags in its own slot and
 * folds rank 0..n-1 into rbuf; its last block stores seq into a word of mapped host memory,
 * which the host polls (cheaper than a stream synchronisation).  Larger messages go in pieces
 * of a slot's share, one seq each.  While it polls, the host watches the peers' failure flags:
 * a peer that failed before launching would leave our kernel waiting, so the host releases it
 * by writing seq | DEV_FUSED_ABANDON into its flags (the call fails).
 *   host:    [seq = ++t->seq] arrive, launch ------------------- poll done == seq | done(seq)
 *   kernel:           push to peers | fence, flag(seq) | wait flags | reduce | done = seq
 * The emulated fused kernel runs on the calling thread and waits for its peers there: launched
 * before they arrived it would block the caller, so there it is launched once all arrived.
 *
 * copy-engine two-shot allreduce (large): the transfers are copy-engine copies, which leave the
 * SMs to the reduce.  Rank r owns shard r (chunk_of) and walks it in pieces through a local
 * staging buffer of COLL_GPU_CE_DEPTH x (n-1) pieces, three streams deep:
 *   pull stream:  [wait reduced(k-D)] pull peers' piece k of sbuf -> stage[k % D]; copied(k)
 *   team stream:  [wait copied(k)] rbuf[k] = sbuf_0[k] op stage... (rank order); reduced(k)
 *   push stream:  [wait reduced(k)] push rbuf[k] into every peer's rbuf
 * so the reduce-scatter and the all-gather overlap piece by piece, with no step between ranks:
 * a rank writes into a peer's buffer only the peer's copy of its own shard, which no other rank
 * reads or writes in the call (in place too: that region of the peer's buffer is read only by
 * this rank's pulls of the same piece, which precede its push).  Every shard is computed once
 * and copied, so all ranks end bitwise identical.
 *   export sbuf, rbuf, arrive | wait arrive(all), map, queue every piece | poll the push
 *   stream | finish
 *   time ->        k=0      k=1      k=2
 *   pull        p0       p1       p2
 *   reduce               r0       r1       r2
 *   push                          s0       s1       s2
 *
 * ring allreduce (large, peer access between ring neighbours only, zero-copy): the team's ring
 * (coll_gpu_team.c: the node model's, the same on every rank) at positions 0..n-1; the count
 * is cut into n chunks (uneven ok); position p only ever reads its left neighbour's rbuf.
 *   step 0         rbuf = sbuf (unless in place); export rbuf; arrive; step(seq, 0)
 *   step k=1..n-1  (reduce-scatter) c = (p-k) mod n:  rbuf[c] = rbuf[c] op left.rbuf[c]
 *   step k=n..2n-2 (all-gather)     c = (p-k) mod n:  rbuf[c] = left.rbuf[c]
 *   finish
 * Before step k both neighbours have completed step k-1 (lockstep), and neither can pass step
 * k before we complete it.  So at step k position p reads left's chunk p-k, which left
 * finalised at its step k-1, while left (at step k) writes its chunk p-1-k; and p writes its
 * chunk p-k while right (at step k) reads p's chunk p+1-k, finalised at k-1.  Within each
 * buffer the chunk read and the chunk written differ by one mod n, for any n >= 2 and across
 * the reduce-scatter -> all-gather turn too (n = 2: left == right, chunks 0 and 1 alternate).
 * After step n-1 position p holds the full result of chunk p+1; each chunk's result is computed
 * once and then only copied, so every rank ends bitwise identical.
 *              p=0        p=1        p=2          (n = 3, chunk owned after reduce-scatter:
 *   k=1 RS     c2 += L    c0 += L    c1 += L       p=0: c1, p=1: c2, p=2: c0)
 *   k=2 RS     c1 += L    c2 += L    c0 += L
 *   k=3 AG     c0 = L     c1 = L     c2 = L
 *   k=4 AG     c2 = L     c0 = L     c1 = L
 *
 * push bcast:  root: arrive | as each peer arrives: map its buffer, copy | poll stream, done
 *              peer: export, arrive | wait the root's done, done
 * pull bcast:  root: export, arrive | finish (it lends its buffer until every rank copied it)
 *              peer: arrive | wait the root's arrive, map, copy | poll stream | finish
 * chain and tree bcast (large, pipelined from the root): the message is cut into chunks (the
 * plan's chunk_bytes, else 2 MiB); position i = ring position - root's, mod n; i's parent is
 * i-1 in the chain, (i-1)/2 in the (binary) tree.
 *   export buf (with a child), arrive | wait the parent's arrive, map its buf | copy chunk j
 *   from the parent once its step > j, up to COLL_GPU_CHAIN_DEPTH in flight; step(seq, chunks
 *   complete) as their events complete | finish
 *   time ->    t0     t1     t2     t3
 *   pos 1      c0     c1     c2     .        (pos i copies chunk j at about t(i-1+j))
 *   pos 2      .      c0     c1     c2
 *
 * exchange and reduce-scatter (coll_gpu_xstep_t: allgather(v), alltoall(v), the
 * reduce-scatters, the reduce; coll_gpu_nvl.c has the halves and their schedules):
 *   open: offers, lend, arrive | wait arrive(all), move: map, copies or the one reduction |
 *   poll streams | finish
 * The four exchanges differ only in which bytes each rank offers to which peer and where each
 * piece lands (xcall_layout, the same for blocking, nonblocking and persistent calls):
 *   collective   sends to every rank q                  receives from rank p into
 *   allgather    its block (scount)                     rbuf block p (rcount at p x rcount)
 *   allgatherv   its block (scount)                     rcounts[p] at rdispls[p]
 *   alltoall     sbuf block q (scount at q x scount)    rbuf block p
 *   alltoallv    scounts[q] at sdispls[q]               rcounts[p] at rdispls[p]
 * In place, allgather(v) lends its own block of rbuf and alltoall(v) a copy of rbuf (its peers
 * read it while this rank overwrites it), and no rank copies its own block.  A side whose
 * element type is dense and whose blocks are device memory is lent and written where it is;
 * any other goes through a temporary as its view (a v layout: an indexed type), packed.
 *
 * Every algorithm but the fused one and the push bcast ends with every rank's done: a rank's
 * buffers are free when its call ends (no peer reads them any more), a failure anywhere fails
 * the call on every rank, and no rank can be more than one call ahead of another (one-shot's
 * double buffer needs it).  A rank that fails jumps its step counter past the call
 * (mca_coll_gpu_team_fail), so its neighbours wake, see the flag and fail in turn; a rank that
 * fails locally before the call takes part without data: nobody waits forever.
 *
 * Which nonblocking and persistent calls come here (the blocking ones come when their entry
 * decided for the team): those of a communicator where a call had device memory on every rank
 * (a blocking allreduce, bcast or reduce, or a nonblocking one decided from every rank's note:
 * coll_gpu_defer.c), whatever this rank's own kind (coll_gpu.h, mca_coll_gpu_nb_team_path;
 * persistent requests: a blocking call), and a plan from
 * mca_coll_gpu_select that names the team.  Every input of that choice is the same on all
 * ranks: the plan of an allreduce is a function of the byte count, and a bcast takes the team
 * whatever its byte count, then runs the root's plan.  Everything else stays on the staged
 * path (coll_gpu_staged_colls.c), on every rank.  A call made while its team's setup is in
 * flight waits on the queue (ALG_DEFER) and is decided once the setup has ended, as it would
 * have been on the ready team; on a team a nonblocking call set up, a call without a GPU path
 * (the setup failed, the plan is staged) stays on the queue too and runs through the host with
 * coll/gpu's own messages (coll_gpu_fallback.c): when the setup's outcome becomes known differs
 * between ranks, so such calls must not go anywhere whose order that moment would change.  Not
 * for good: the next blocking call that needs the team waits for the setup's end on every rank
 * (mca_coll_gpu_team_get), and from that call on, the same on every rank, the team is settled
 * and such calls are staged as on any team.
 *
 * A persistent request's peer mappings are not held from one start to the next: the team's
 * export cache and the process's peer-mapping table (coll_gpu_ipcmap.c) already serve an
 * unchanged buffer without a new export or import (while it stays among the most recently
 * used), and a hold that outlived the call would pin a slot of that table for the request's
 * life.  A request holds a reference on its communicator until it is freed: MPI_Comm_free with
 * calls still running is legal (the free is deferred until they complete), so the
 * communicator, and with it the module and the team the request steps, outlive it.  The last
 * reference can thus go inside our own progress (MPI_Request_free came first: freed at
 * completion); there the release waits until the team's loop and async_lock are left
 * (async_reap).  A rank whose buffer the team cannot use in place (gaps, managed or host
 * memory, memory the legacy IPC cannot export) goes through a device temporary
 * (coll_gpu_adapt.c): a nonblocking call's own, a blocking call's from the module (kept between
 * calls, so that peers map it once).
 */
#include "ompi_config.h"

#include <inttypes.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ompi/errhandler/errcode-internal.h"
#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/request/request.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/runtime/opal_progress.h"

#include "coll_gpu.h"

#define ASYNC_DEFAULT_CHUNK ((size_t) 2 << 20)  /* chain and tree */
#define ASYNC_CLOCK_EVERY 64                   /* polls between looks at the clock (hangs) */
#define ASYNC_QUERY_EVERY 4096                 /* fused: polls between looks at the stream */
#define ASYNC_SPINS_BEFORE_YIELD 1000          /* a waiting thread spins, then yields */
#define ASYNC_OPAL_EVERY 64                    /* its turns between opal_progress calls */
/* copy-engine two-shot: pieces in flight (COLL_GPU_CE_DEPTH), largest piece (the plan's chunk,
 * or coll_gpu_chunk_bytes) and staging budget.  Each piece costs ~15 us of gaps between the
 * three streams (2xH200 NV18, 2026-12-01: 512 MiB took 2383 us in 4 MiB pieces, 1517 us in 32
 * MiB ones), and the pipeline wants two pieces at least: pieces are half a shard, at least
 * CE_PIECE_MIN, at most the plan's chunk.  Busbw there, 2 ranks, by piece size: 64 MiB message
 * 314 GB/s (16 MiB pieces) against 302 (32); 128 MiB 345 (32) against 337 (16) and 308 (64);
 * 256 MiB 357 (64) against 350 (32); 512 MiB 358 (64), 352 (32), 340 (16). */
#define CE_PIECE_MIN ((size_t) 16 << 20)
#define CE_PIECE_DEFAULT ((size_t) 64 << 20)
#define CE_PIECE_MAX ((size_t) 64 << 20)
#define CE_STAGE_MAX ((size_t) 128 << 20)

/* A request's end_state (async_req_free).  A persistent request is ASYNC_ENDED while inactive
 * (after its init and after each completed start: nothing of ours holds it, so a free destroys
 * it at once) and ASYNC_RUNNING from each MPI_Start to that call's end (a free then waits for
 * the end). */
#define ASYNC_RUNNING 0
#define ASYNC_USER_FREED 1 /* freed by the user before it ended */
#define ASYNC_ENDED 2      /* ended (completed), or a persistent request not started */

/* What a step returns. */
#define ASYNC_PENDING 0 /* waiting on a peer or the device: call again later */
#define ASYNC_AGAIN 1   /* moved on: step again now */
#define ASYNC_END 2     /* the call is over, r->rc holds its result */
#define ASYNC_READY 3   /* stream_poll: the stream's work ended */

typedef enum {
    ALG_FUSED, ALG_ONESHOT, ALG_TWOSHOT, ALG_TWOSHOT_CE, ALG_RING,
    ALG_BC_PUSH, ALG_BC_PULL, ALG_BC_CHAIN, ALG_BC_TREE,
    ALG_BC_AGREE,  /* bcast before the root's plan is known */
    ALG_AR_AGREE,  /* allreduce before every rank's record is read (then first_alg) */
    ALG_BC_EMPTY,  /* bcast of 0 bytes: arrive, wait for all */
    ALG_DEFER,     /* queued while the team's setup was in flight: decided when it ends */
    ALG_FALLBACK,  /* on a team a nonblocking call set up, without a GPU path for the call:
                    * through the host (coll_gpu_fallback.c) */
    ALG_XSTEP,     /* an exchange or a reduce-scatter (coll_gpu_xstep_t) */
    ALG_FINISH,    /* only the end is left: after a failure (or one before the call: then
                   * the rank takes part without data), or after the ring's last step */
} async_alg_t;

/* Phases shared by the algorithms (each uses those it needs, in this order). */
typedef enum {
    PH_START = 0,
    PH_COPY,       /* waiting for a copy of ours to end (the ring's rbuf = sbuf) */
    PH_ARRIVE,     /* waiting for the peers' arrive (or the root's record, or the parent's) */
    PH_MOVE,       /* issuing and polling the data movement */
    PH_STREAM,     /* waiting for our stream */
    PH_XSTREAMS,   /* waiting for the streams in r->xstreams */
    PH_FINISH,     /* the end: done(seq) given, waiting for the others' */
    PH_OWN_DONE,   /* push bcast: the end without the others' done */
} async_phase_t;

/* The request is a coll/base nonblocking request: Open MPI's MPI_I... bindings keep derived
 * datatypes alive in its fields (ompi_coll_base_retain_datatypes), whatever the component.
 * async_init zeroes the fields from next up to xsoff. */
typedef struct coll_gpu_async_t {
    ompi_coll_base_nbc_request_t super;
    struct coll_gpu_async_t *next;      /* in the team's queue */
    coll_gpu_team_t *team;
    struct ompi_communicator_t *comm;
    const char *what;
    async_alg_t alg;
    bool bcast;
    bool blocking;                      /* a blocking call's (async_run) */
    /* a bcast whose ranks' byte counts and root the memory-kinds agreement compared for this
     * call (a blocking call agreed on the board): no rank waits for the root's record */
    bool agreed;
    async_phase_t phase;
    uint64_t seq;
    int rc;
    bool arrived;
    _Atomic int end_state;              /* ASYNC_RUNNING, ASYNC_USER_FREED or ASYNC_ENDED */
    /* the call */
    coll_gpu_adapt_t s, r;              /* allreduce: send (unused in place), receive; bcast: r;
                                         * temporaries of the request's own */
    bool in_place;
    size_t count, esize;
    dev_dtype_t dt;
    dev_op_t op;
    dev_launch_t launch;
    size_t bytes;                       /* bcast: this rank's byte count */
    int root;
    topo_plan_t plan;                   /* bcast: ours, then the root's */
    int local_rc;                       /* a failure before the call: sit out with it */
    /* progress */
    int next_peer;                      /* push root: the next peer to copy to */
    void *peer_buf;                     /* pull, chain, tree: the buffer read */
    size_t off, per, cap;               /* fused: the piece at off, pieces of per elements */
    bool released;                      /* fused: our kernel's waits released (a peer failed) */
    uint64_t nchunks, issued, complete; /* chain, tree; ring: complete is the step */
    size_t chunk;
    int parent;
    unsigned polls;
    coll_gpu_wait_t wait;               /* the hang watch's view of the current wait */
    /* the call as given (again at every MPI_Start of a persistent request) */
    const void *user_sbuf;
    void *user_rbuf;
    int user_count;
    struct ompi_datatype_t *user_dtype; /* retained by a persistent request */
    bool persistent;                    /* MPI_Allreduce_init, MPI_Bcast_init */
    async_alg_t first_alg;              /* the algorithm decided at the call (or the init) */
    topo_plan_t first_plan;             /* bcast: this rank's plan, before the agreement */
    /* a call decided on the queue (ALG_DEFER), and its host fallback */
    mca_coll_gpu_module_t *module;
    struct ompi_op_t *mpi_op;
    bool setup_reported;                /* a long wait for the setup was reported */
    coll_gpu_fallback_t fb;
    int final_rc;                       /* the call's result, as async_complete gave it */
    /* an exchange or a reduce-scatter on the team (xcall_layout), laid out once (the same at
     * every start): each side of this rank's buffers as a view of count x type (a v layout as
     * an indexed type made for it) with each peer's block in its packed bytes (off, len) and
     * in the user's buffer (at, where the element type is dense: xcall_direct); for a
     * reduce-scatter this rank's piece (its byte offset in the input, its kernel elements); in
     * place its piece is reduced into xresult (peers read rbuf until the end) and copied to
     * rbuf at the end */
    bool xreduce, xlend_recv;           /* xlend_recv: allgather(v) in place, its own block lent */
    bool xcopy_send;                    /* alltoall(v) in place: a copy of it is lent */
    bool xsingle;                       /* the send side is one block, offered to every rank */
    bool xsdense, xrdense;              /* the side's element type is dense */
    struct ompi_datatype_t *xsdtype, *xrdtype; /* retained, or made here; released at the end */
    int xscount, xrcount;
    size_t xsbytes;                     /* alltoall(v) in place: the copy's bytes */
    size_t xpiece_off, xpiece_count;
    int xrc;                            /* the layout could not be made: no data at any start */
    void *xresult;
    size_t xpiece;
    uint64_t xsoff[COLL_GPU_TEAM_MAX], xslen[COLL_GPU_TEAM_MAX];
    uint64_t xroff[COLL_GPU_TEAM_MAX], xrlen[COLL_GPU_TEAM_MAX];
    int64_t xsat[COLL_GPU_TEAM_MAX], xrat[COLL_GPU_TEAM_MAX];
    /* the step; the streams its move (or the copy-engine two-shot) queued on, which the call
     * waits for */
    coll_gpu_xstep_t x;
    dev_stream_t *xstreams[COLL_GPU_XSTEP_STREAMS];
    int nxstreams;
} coll_gpu_async_t;

static void async_destruct(coll_gpu_async_t *r)
{
    if (r->persistent && NULL != r->user_dtype) {
        OBJ_RELEASE(r->user_dtype);
    }
    if (NULL != r->xsdtype) {
        OBJ_RELEASE(r->xsdtype);
    }
    if (NULL != r->xrdtype) {
        OBJ_RELEASE(r->xrdtype);
    }
}

static OBJ_CLASS_INSTANCE(coll_gpu_async_t, ompi_coll_base_nbc_request_t, NULL, async_destruct);

/* Teams with queued requests (linked through async_next) and how many requests are queued in
 * all: the polls from the waits cost one load while it is 0. */
static coll_gpu_team_t *async_teams;
static _Atomic int async_queued;
static int async_team_users;            /* teams that ever queued: the progress callback */
static opal_mutex_t async_lock = OPAL_MUTEX_STATIC_INIT;
static _Thread_local int async_depth;   /* this thread is in async_progress (nested polls) */
/* Requests that ended after MPI_Request_free, linked through next (under async_lock): their
 * communicator reference goes once nothing of ours steps a team (async_leave). */
static struct coll_gpu_async_t *async_reap;

/* Test only: COLL_GPU_TEST_FAIL_ASYNC=<rank in MPI_COMM_WORLD> makes every nonblocking team
 * call of that process fail locally before it moves data (it still takes part, as a rank whose
 * device temporary cannot be had). */
static bool async_fail_injected(void)
{
    static int target = -2;

    return mca_coll_gpu_test_env_names_me("COLL_GPU_TEST_FAIL_ASYNC", &target);
}

/* ---- polled waits -------------------------------------------------------------------------- */

/* A poll that found what it waits for missing (kind, peer -1 for every rank's, step): every
 * ASYNC_CLOCK_EVERY such polls the team's watch looks at the clock, reports a long wait once
 * and gives up past the error time.  The wait's clock starts at its first look. */
static void async_waiting(coll_gpu_async_t *r, coll_gpu_wait_kind_t kind, int peer, uint64_t step)
{
    if (0 != (++r->polls % ASYNC_CLOCK_EVERY)) {
        return;
    }
    r->wait.kind = kind;
    r->wait.peer = peer;
    r->wait.seq = r->seq;
    r->wait.step = step;
    mca_coll_gpu_team_watch(r->team, &r->wait, r->what);
}

/* What was waited for came: the next wait's clock starts afresh. */
static void async_waited(coll_gpu_async_t *r)
{
    r->wait.start = 0.0;
}

static bool all_reached(coll_gpu_async_t *r, bool done)
{
    coll_gpu_team_t *t = r->team;
    for (int p = 0; p < t->size; ++p) {
        coll_gpu_ctl_rank_t *c = &t->ctl->rank[p];
        if (!mca_coll_gpu_team_reached(t, done ? &c->done : &c->arrive, p, r->seq)) {
            async_waiting(r, done ? COLL_GPU_WAIT_DONE : COLL_GPU_WAIT_ARRIVE, -1, 0);
            return false;
        }
    }
    async_waited(r);
    return true;
}

/* Only the end is left (ALG_FINISH): after a failure rc (the call's result unless it had one),
 * or after the ring's last step (rc OMPI_SUCCESS). */
static int async_to_finish(coll_gpu_async_t *r, int rc)
{
    if (OMPI_SUCCESS == r->rc) {
        r->rc = rc;
    }
    r->alg = ALG_FINISH;
    r->phase = PH_START;
    return ASYNC_AGAIN;
}

/* Enter the finish after a failure of this rank (or a peer's, seen in the flags). */
static int async_fail(coll_gpu_async_t *r)
{
    mca_coll_gpu_team_fail(r->team, r->seq);
    if (ALG_FUSED == r->alg && 0 != r->seq) {
        /* our kernel may never push: release the peers' kernels (coll_gpu.h) */
        (void) mca_coll_gpu_nvl_fused_release_peers(r->team, r->seq);
    }
    return async_to_finish(r, OMPI_ERROR);
}

/* Checked device call inside a step: on failure report it, fail the call through the team's
 * flags and go to the finish (which still gives what peers wait for). */
#define ASYNC_CHECK(r, call)                                                               \
    do {                                                                                   \
        int as_rc_ = (call);                                                               \
        if (DEV_OK != as_rc_) {                                                            \
            mca_coll_gpu_report_failure((r)->what, (r)->comm, "%s: %s", #call,             \
                                        dev_error_string());                               \
            return async_fail(r);                                                          \
        }                                                                                  \
    } while (0)

/* Our stream's work: ASYNC_READY when it ended, ASYNC_PENDING while it runs; a failure is
 * reported and fails the call (ASYNC_AGAIN: the request now runs the finish). */
static int stream_poll(coll_gpu_async_t *r)
{
    int q = dev_stream_query(r->team->stream);
    if (1 == q) {
        return ASYNC_PENDING;
    }
    if (DEV_OK != q) {
        mca_coll_gpu_report_failure(r->what, r->comm, "the team's stream: %s",
                                    dev_error_string());
        return async_fail(r);
    }
    return ASYNC_READY;
}

/* The same for every stream the call queued its last work on (r->xstreams); a failure drains
 * the others. */
static int xstreams_poll(coll_gpu_async_t *r)
{
    for (int i = 0; i < r->nxstreams; ++i) {
        int q = dev_stream_query(r->xstreams[i]);
        if (1 == q) {
            return ASYNC_PENDING;
        }
        if (DEV_OK != q) {
            mca_coll_gpu_report_failure(r->what, r->comm, "the copies on the team's streams: %s",
                                        dev_error_string());
            for (int j = 0; j < r->nxstreams; ++j) {
                (void) dev_stream_sync(r->xstreams[j]);
            }
            return async_fail(r);
        }
    }
    return ASYNC_READY;
}

/* Every rank arrived (ASYNC_READY), or not yet (ASYNC_PENDING); a failure anywhere (or a rank we
 * gave up on) sends the call to its finish (async_fail's ASYNC_AGAIN). */
static int arrived_ok(coll_gpu_async_t *r)
{
    if (!all_reached(r, false)) {
        return ASYNC_PENDING;
    }
    return mca_coll_gpu_team_any_failed(r->team, r->seq) ? async_fail(r) : ASYNC_READY;
}

/* Peer p arrived (ASYNC_READY), or not yet; a failure of p fails the call. */
static int peer_arrived(coll_gpu_async_t *r, int p)
{
    coll_gpu_team_t *t = r->team;

    if (!mca_coll_gpu_team_reached(t, &t->ctl->rank[p].arrive, p, r->seq)) {
        async_waiting(r, COLL_GPU_WAIT_ARRIVE, p, 0);
        return ASYNC_PENDING;
    }
    async_waited(r); /* a later wait (the finish's) must not count from this one's start */
    return mca_coll_gpu_team_failed(t, p, r->seq) ? async_fail(r) : ASYNC_READY;
}

static void async_arrive(coll_gpu_async_t *r)
{
    mca_coll_gpu_team_arrive(r->team, r->seq);
    r->arrived = true;
}

/* A call this rank sits out: it takes the next seq and fails it. */
static void async_seq_failed(coll_gpu_async_t *r)
{
    r->seq = ++r->team->seq;
    mca_coll_gpu_team_fail(r->team, r->seq);
}

/* The finish (schedule at the top of the file), once the streams the call's work went on have
 * ended (PH_STREAM, PH_XSTREAMS); after a failure our own copies and kernels drain first:
 * nothing of ours may touch peer memory once we are done. */
static int async_finish(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;
    int s = (PH_STREAM == r->phase)     ? stream_poll(r)
            : (PH_XSTREAMS == r->phase) ? xstreams_poll(r)
                                        : ASYNC_READY;

    if (ASYNC_READY != s) {
        return s;
    }
    if (PH_FINISH != r->phase) {
        if (!r->arrived) {
            async_arrive(r);
        }
        if (OMPI_SUCCESS != r->rc) {
            mca_coll_gpu_nvl_drain(t);
        }
        mca_coll_gpu_team_done(t, r->seq);
        r->phase = PH_FINISH;
    }
    if (!all_reached(r, true)) {
        return ASYNC_PENDING;
    }
    if (OMPI_SUCCESS == r->rc && mca_coll_gpu_team_any_failed(t, r->seq)) {
        r->rc = OMPI_ERROR;
    }
    return ASYNC_END;
}

/* ---- allreduce ----------------------------------------------------------------------------- */

/* The emulated fused kernel waits on this thread: meanwhile the other teams' requests move
 * (a peer may wait for one of them before it launches), the wait is watched as every wait of
 * ours is (async_waiting: a rank that gives up fails the call), and a failure anywhere
 * releases it. */
static int async_progress(void);
static bool fused_abandon(void *ctx)
{
    coll_gpu_async_t *r = ctx;
    (void) async_progress();
    async_waiting(r, COLL_GPU_WAIT_FUSED, -1, 0);
    return mca_coll_gpu_team_any_failed(r->team, r->seq);
}

static int step_fused(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;
    uint64_t *word;

    switch (r->phase) {
    case PH_START:
        r->seq = ++t->seq;
        r->released = false;
        r->polls = 0;
        async_arrive(r);
        r->phase = PH_ARRIVE;
        /* fall through */
    case PH_ARRIVE: {
        size_t n = (r->count - r->off < r->per) ? r->count - r->off : r->per;
        if (DEV_BACKEND_EMULATED == dev_backend()) {
            int s = arrived_ok(r); /* a peer failed (or we gave up): no launch */
            if (ASYNC_READY != s) {
                return s;
            }
        }
        ASYNC_CHECK(r, mca_coll_gpu_nvl_fused_launch(t, r->seq,
                                                     (const char *) r->s.dev + r->off * r->esize,
                                                     (char *) r->r.dev + r->off * r->esize, n,
                                                     r->dt, r->op, r->cap, &r->launch,
                                                     fused_abandon, r));
        r->off += n;
        r->phase = PH_MOVE;
    }
        /* fall through */
    case PH_MOVE:
        word = mca_coll_gpu_nvl_fused_word(t);
        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != r->seq) {
            if (!r->released && mca_coll_gpu_team_any_failed(t, r->seq)) {
                /* a peer gave up, maybe before its launch: release our kernel's waits */
                ASYNC_CHECK(r, mca_coll_gpu_nvl_fused_release(t, r->seq));
                r->released = true;
            }
            if (0 == (++r->polls % ASYNC_QUERY_EVERY)) {
                /* a kernel that faulted never sets the word: ask the stream now and then */
                int q = dev_stream_query(t->stream);
                ASYNC_CHECK(r, q < 0 ? q : DEV_OK);
                if (DEV_OK == q && __atomic_load_n(word, __ATOMIC_ACQUIRE) != r->seq) {
                    mca_coll_gpu_report_failure(r->what, r->comm,
                                                "the fused kernel ended without its done word "
                                                "(seq %" PRIu64 ")",
                                                r->seq);
                    return async_fail(r);
                }
            }
            async_waiting(r, COLL_GPU_WAIT_FUSED, -1, 0);
            return ASYNC_PENDING;
        }
        mca_coll_gpu_team_done(t, r->seq);
        async_waited(r);
        if (mca_coll_gpu_team_any_failed(t, r->seq)) {
            r->rc = OMPI_ERROR;
        } else if (r->off < r->count) {
            r->phase = PH_START; /* the next piece, its own seq */
            return ASYNC_AGAIN;
        }
        return ASYNC_END;
    default:
        return ASYNC_END;
    }
}

/* The elements [*lo, *hi) rank r owns in a two-shot (and the ring's chunk r). */
static void chunk_of(size_t count, int n, int r, size_t *lo, size_t *hi)
{
    size_t base = count / (size_t) n, extra = count % (size_t) n;
    *lo = (size_t) r * base + ((size_t) r < extra ? (size_t) r : extra);
    *hi = *lo + base + ((size_t) r < extra ? 1 : 0);
}

/* Lend the send buffer (pair: and the receive buffer) for call seq, arrive. */
static int lend_bufs(coll_gpu_async_t *r, bool pair)
{
    coll_gpu_team_t *t = r->team;
    coll_gpu_ctl_rank_t *me = &t->ctl->rank[t->rank];
    int rc = mca_coll_gpu_team_export(t, r->s.dev, r->count * r->esize, &me->sbuf);

    if (DEV_OK == rc && pair) {
        rc = mca_coll_gpu_team_export(t, r->r.dev, r->count * r->esize, &me->rbuf);
    }
    if (DEV_OK == rc) {
        async_arrive(r);
    }
    return rc;
}

/* Every rank's lent buffers mapped (ours as they are) into ps[] and pr[] (unless NULL). */
static int map_bufs(coll_gpu_async_t *r, void **ps, void **pr)
{
    coll_gpu_team_t *t = r->team;
    size_t len = r->count * r->esize;
    int rc = DEV_OK;

    for (int p = 0; p < t->size && DEV_OK == rc; ++p) {
        ps[p] = r->s.dev;
        if (NULL != pr) {
            pr[p] = r->r.dev;
        }
        if (p != t->rank) {
            rc = mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].sbuf, len, &ps[p]);
            if (DEV_OK == rc && NULL != pr) {
                rc = mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].rbuf, len, &pr[p]);
            }
        }
    }
    return rc;
}

/* One-shot reduces every rank's send buffer into its own receive buffer, two-shot its chunk
 * of every rank's into every rank's (schedules at the top of the file). */
static int step_shot(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;
    bool two = (ALG_TWOSHOT == r->alg);
    void *ps[COLL_GPU_TEAM_MAX], *pr[COLL_GPU_TEAM_MAX], *dsts[COLL_GPU_TEAM_MAX];
    const void *srcs[COLL_GPU_TEAM_MAX];
    size_t lo = 0, hi = r->count;
    int s;

    switch (r->phase) {
    case PH_START:
        r->seq = ++t->seq;
        ASYNC_CHECK(r, lend_bufs(r, two));
        r->phase = PH_ARRIVE;
        /* fall through */
    case PH_ARRIVE:
        if (ASYNC_READY != (s = arrived_ok(r))) {
            return s;
        }
        ASYNC_CHECK(r, map_bufs(r, ps, two ? pr : NULL));
        if (two) {
            chunk_of(r->count, t->size, t->rank, &lo, &hi);
        }
        for (int p = 0; p < t->size; ++p) {
            srcs[p] = (const char *) ps[p] + lo * r->esize;
            dsts[p] = two ? (char *) pr[p] + lo * r->esize : r->r.dev;
        }
        if (hi > lo) {
            ASYNC_CHECK(r, dev_reduce_multi(dsts, two ? t->size : 1, srcs, t->size, hi - lo,
                                            r->dt, r->op, &r->launch, t->stream));
        }
        r->phase = PH_STREAM;
        /* fall through */
    default:
        return async_finish(r);
    }
}

/* Copy-engine two-shot (schedule at the top of the file): the pieces of this rank's shard,
 * r->per elements each (each rank cuts its own shard: no cut is shared), all queued at once
 * on the three streams once every rank arrived; the push stream ends last. */
static int step_twoshot_ce(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;
    int n = t->size, s;
    coll_gpu_ce_t *ce = NULL;
    size_t lo, hi;

    chunk_of(r->count, n, t->rank, &lo, &hi);
    switch (r->phase) {
    case PH_START: {
        size_t shard = (hi - lo) * r->esize, piece = shard / 2, want;
        size_t piece_max = (0 == r->plan.chunk_bytes) ? CE_PIECE_DEFAULT : r->plan.chunk_bytes;
        r->seq = ++t->seq;
        piece = (piece > CE_PIECE_MIN) ? piece : CE_PIECE_MIN;
        piece = (piece < piece_max) ? piece : piece_max;
        piece = (piece < CE_PIECE_MAX) ? piece : CE_PIECE_MAX;
        if (piece * COLL_GPU_CE_DEPTH * (size_t) (n - 1) > CE_STAGE_MAX) {
            piece = CE_STAGE_MAX / COLL_GPU_CE_DEPTH / (size_t) (n - 1);
        }
        piece = piece / 4096 * 4096;
        piece = (piece < 4096) ? 4096 : piece; /* a multiple of every element size */
        /* no more staging than this call needs, so small calls stay small */
        want = (shard < piece) ? shard : piece;
        want = (want + 4095) / 4096 * 4096;
        want = (want < 4096) ? 4096 : want;
        ASYNC_CHECK(r, mca_coll_gpu_nvl_ce(t, want * COLL_GPU_CE_DEPTH * (size_t) (n - 1), &ce));
        r->per = piece / r->esize;
        ASYNC_CHECK(r, lend_bufs(r, true));
        r->phase = PH_ARRIVE;
    }
        /* fall through */
    case PH_ARRIVE: {
        void *ps[COLL_GPU_TEAM_MAX], *pr[COLL_GPU_TEAM_MAX];
        size_t npieces = (hi - lo + r->per - 1) / r->per, row_piece;
        if (ASYNC_READY != (s = arrived_ok(r))) {
            return s;
        }
        ASYNC_CHECK(r, mca_coll_gpu_nvl_ce(t, 0, &ce));
        ASYNC_CHECK(r, map_bufs(r, ps, pr));
        COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL,
                         "coll:gpu:%s (cid %d): rank %d: twoshot_ce, shard of %zu B in %zu "
                         "piece(s) of %zu B",
                         r->what, t->cid, t->rank, (hi - lo) * r->esize, npieces,
                         r->per * r->esize);
        /* the staging buffer holds COLL_GPU_CE_DEPTH rows of n-1 pieces; a row is reused once
         * the reduce that read it has run */
        row_piece = ce->stage_bytes / COLL_GPU_CE_DEPTH / (size_t) (n - 1);
        for (size_t k = 0; k < npieces; ++k) {
            int d = (int) (k % COLL_GPU_CE_DEPTH), j = 0;
            size_t off = lo + k * r->per, len = (hi - off < r->per) ? hi - off : r->per;
            const void *srcs[COLL_GPU_TEAM_MAX];
            void *dst = (char *) r->r.dev + off * r->esize;
            if (k >= COLL_GPU_CE_DEPTH) {
                ASYNC_CHECK(r, dev_stream_wait_event(ce->pull, ce->reduced[d]));
            }
            for (int p = 0; p < n; ++p) {
                char *to;
                if (p == t->rank) {
                    srcs[p] = (const char *) r->s.dev + off * r->esize;
                    continue;
                }
                to = (char *) ce->stage
                     + ((size_t) d * (size_t) (n - 1) + (size_t) j++) * row_piece;
                ASYNC_CHECK(r, dev_memcpy_async(to, (const char *) ps[p] + off * r->esize,
                                                len * r->esize, ce->pull));
                srcs[p] = to;
            }
            ASYNC_CHECK(r, dev_event_record(ce->copied[d], ce->pull));
            ASYNC_CHECK(r, dev_stream_wait_event(t->stream, ce->copied[d]));
            ASYNC_CHECK(r, dev_reduce_multi(&dst, 1, srcs, n, len, r->dt, r->op, &r->launch,
                                            t->stream));
            ASYNC_CHECK(r, dev_event_record(ce->reduced[d], t->stream));
            /* the finished piece to every peer (the peer's copy of our shard) */
            ASYNC_CHECK(r, dev_stream_wait_event(ce->push, ce->reduced[d]));
            for (int p = 0; p < n; ++p) {
                if (p != t->rank) {
                    ASYNC_CHECK(r, dev_memcpy_async((char *) pr[p] + off * r->esize, dst,
                                                    len * r->esize, ce->push));
                }
            }
        }
        /* the pushes waited for the reduces, which waited for the pulls */
        r->xstreams[0] = ce->push;
        r->nxstreams = 1;
        r->phase = PH_XSTREAMS;
    }
        /* fall through */
    default:
        return async_finish(r);
    }
}

/* Ring allreduce (schedule at the top of the file): step k = 1 .. 2n-2 once both neighbours
 * completed step k-1; r->complete counts the steps done, r->peer_buf is the left's rbuf. */
static int step_ring(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;
    int n = t->size, pos = t->ring_pos[t->rank];
    int left = t->ring_rank[(pos + n - 1) % n], right = t->ring_rank[(pos + 1) % n];
    uint64_t k;
    size_t lo, hi;
    int c;

    switch (r->phase) {
    case PH_START:
        r->seq = ++t->seq;
        r->peer_buf = NULL;
        if (r->s.dev != r->r.dev) {
            ASYNC_CHECK(r, dev_memcpy_async(r->r.dev, r->s.dev, r->count * r->esize,
                                            t->stream));
        }
        r->phase = PH_COPY;
        /* fall through */
    case PH_COPY:
    case PH_STREAM: { /* the copy rbuf = sbuf, or step k's work */
        int q = stream_poll(r);
        if (ASYNC_READY != q) {
            return q;
        }
        if (PH_COPY == r->phase) {
            ASYNC_CHECK(r, mca_coll_gpu_team_export(t, r->r.dev, r->count * r->esize,
                                                    &t->ctl->rank[t->rank].rbuf));
            async_arrive(r);
            mca_coll_gpu_team_step(t, r->seq, 0);
            r->complete = 0;
        } else {
            mca_coll_gpu_team_step(t, r->seq, ++r->complete);
            if (r->complete >= (uint64_t) (2 * n - 2)) {
                return async_to_finish(r, OMPI_SUCCESS);
            }
        }
        r->phase = PH_MOVE;
    }
        /* fall through */
    case PH_MOVE:
        k = r->complete + 1;
        if (!mca_coll_gpu_team_step_reached(t, left, r->seq, k - 1)
            || !mca_coll_gpu_team_step_reached(t, right, r->seq, k - 1)) {
            if (0 != t->abandoned) {
                return async_fail(r); /* we gave up on a neighbour */
            }
            async_waiting(r, COLL_GPU_WAIT_STEP,
                          mca_coll_gpu_team_step_reached(t, left, r->seq, k - 1) ? right : left,
                          k - 1);
            return ASYNC_PENDING;
        }
        async_waited(r);
        if (mca_coll_gpu_team_failed(t, left, r->seq)
            || mca_coll_gpu_team_failed(t, right, r->seq)) {
            return async_fail(r);
        }
        if (NULL == r->peer_buf) {
            ASYNC_CHECK(r, mca_coll_gpu_team_import(t, left, &t->ctl->rank[left].rbuf,
                                                    r->count * r->esize, &r->peer_buf));
        }
        c = (int) (((uint64_t) pos + (uint64_t) n * 2 - k) % (uint64_t) n);
        chunk_of(r->count, n, c, &lo, &hi);
        if (hi > lo) {
            char *mine_c = (char *) r->r.dev + lo * r->esize;
            char *left_c = (char *) r->peer_buf + lo * r->esize;
            if (k < (uint64_t) n) {
                void *dst = mine_c;
                const void *srcs[2] = {mine_c, left_c};
                ASYNC_CHECK(r, dev_reduce_multi(&dst, 1, srcs, 2, hi - lo, r->dt, r->op,
                                                &r->launch, t->stream));
            } else {
                ASYNC_CHECK(r, dev_memcpy_async(mine_c, left_c, (hi - lo) * r->esize,
                                                t->stream));
            }
        }
        r->phase = PH_STREAM;
        return ASYNC_AGAIN;
    default:
        return async_finish(r);
    }
}

/* The allreduce agreement (schedule at the top of the file): records that differ (or a rank
 * that gave up on the call) send every rank to the finish with the same error, whichever
 * algorithm its plan named (plans follow the byte count, which may be what differs).  Without
 * it such a call could take a peer's exported buffer for one it is not, run different
 * algorithms on different ranks, or leave a fused kernel waiting for pieces that never come. */
static int step_ar_agree(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;
    uint64_t seq = t->seq + 1;
    bool gave_up = false;
    int rc;

    if (PH_START == r->phase) {
        mca_coll_gpu_nvl_allreduce_publish(t, seq, r->count * r->esize, r->dt, r->op,
                                           r->in_place);
        r->phase = PH_ARRIVE;
    }
    for (int p = 0; p < t->size && !gave_up; ++p) {
        const coll_gpu_call_t *c = &t->ctl->rank[p].call[seq & 1];
        if (atomic_load_explicit(&c->seq, memory_order_acquire) >= seq) {
            continue;
        }
        /* a rank we gave up on (coll_gpu_hang_error_seconds) that never came fails the call,
         * and so does a rank that gave up on it; the record is read again after the flags
         * (mca_coll_gpu_team_wait_records: a rank that failed the call over a difference of
         * the records had read them all) */
        if (mca_coll_gpu_team_gave_up_on(t, p, seq)
            || mca_coll_gpu_team_any_failed(t, seq)) {
            gave_up = (atomic_load_explicit(&c->seq, memory_order_acquire) < seq);
            continue;
        }
        r->seq = seq; /* for the hang reports (and their give-up) */
        async_waiting(r, COLL_GPU_WAIT_RECORDS, -1, 0);
        r->seq = 0;
        return ASYNC_PENDING;
    }
    async_waited(r);
    rc = gave_up ? OMPI_ERROR : mca_coll_gpu_nvl_allreduce_check(t, seq, r->what, r->comm);
    if (OMPI_SUCCESS != rc || OMPI_SUCCESS != r->local_rc) {
        /* takes seq, fails it, arrives, waits for everybody's done */
        return async_to_finish(r, (OMPI_SUCCESS != rc) ? rc : r->local_rc);
    }
    r->phase = PH_START;
    r->alg = r->first_alg;
    if (ALG_FUSED == r->alg) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL,
                         "coll:gpu:%s (cid %d): rank %d: fused, %zu piece(s) of up to %zu B",
                         r->what, t->cid, t->rank, (r->count + r->per - 1) / r->per,
                         r->per * r->esize);
    }
    return ASYNC_AGAIN;
}

/* ---- bcast --------------------------------------------------------------------------------- */

/* The root's end of a push bcast that failed, and every push peer's end: the root waits until
 * every peer has entered the call, a peer until the root is done (bcast_wait_push). */
static int push_end(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;

    if (t->rank == r->root) {
        if (!all_reached(r, false)) {
            return ASYNC_PENDING;
        }
    } else if (!mca_coll_gpu_team_reached(t, &t->ctl->rank[r->root].done, r->root, r->seq)) {
        async_waiting(r, COLL_GPU_WAIT_DONE, r->root, 0);
        return ASYNC_PENDING;
    }
    mca_coll_gpu_team_done(t, r->seq);
    if (t->rank != r->root && OMPI_SUCCESS == r->rc
        && mca_coll_gpu_team_failed(t, r->root, r->seq)) {
        r->rc = OMPI_ERROR;
    }
    return ASYNC_END;
}

/* A push root's failure: its copies issued end (sync) before its done. */
static int push_failed(coll_gpu_async_t *r, bool sync)
{
    mca_coll_gpu_team_fail(r->team, r->seq);
    r->rc = OMPI_ERROR;
    if (sync) {
        (void) dev_stream_sync(r->team->stream);
    }
    r->phase = PH_OWN_DONE;
    return ASYNC_AGAIN;
}

static int step_push(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;

    if (PH_OWN_DONE == r->phase) {
        return push_end(r);
    }
    if (t->rank != r->root) {
        /* where the data must go; a failed export still arrives (the root fails the call) */
        r->seq = ++t->seq;
        if (DEV_OK
            != mca_coll_gpu_team_export(t, r->r.dev, r->bytes, &t->ctl->rank[t->rank].rbuf)) {
            mca_coll_gpu_report_failure(r->what, r->comm, "export of the buffer: %s",
                                        dev_error_string());
            mca_coll_gpu_team_fail(t, r->seq);
            r->rc = OMPI_ERROR;
        }
        async_arrive(r);
        r->phase = PH_OWN_DONE;
        return push_end(r);
    }
    switch (r->phase) {
    case PH_START:
        r->seq = ++t->seq;
        async_arrive(r);
        r->next_peer = 0;
        r->phase = PH_MOVE;
        /* fall through */
    case PH_MOVE:
        /* copy to each peer as it arrives, in rank order */
        for (; r->next_peer < t->size; ++r->next_peer) {
            int p = r->next_peer;
            void *dst;
            if (p == t->rank) {
                continue;
            }
            if (!mca_coll_gpu_team_reached(t, &t->ctl->rank[p].arrive, p, r->seq)) {
                async_waiting(r, COLL_GPU_WAIT_ARRIVE, p, 0);
                return ASYNC_PENDING;
            }
            if (mca_coll_gpu_team_failed(t, p, r->seq)
                || DEV_OK != mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].rbuf, r->bytes,
                                                      &dst)
                || DEV_OK != dev_memcpy_async(dst, r->r.dev, r->bytes, t->stream)) {
                if (!mca_coll_gpu_team_failed(t, p, r->seq)) {
                    mca_coll_gpu_report_failure(r->what, r->comm, "copy to rank %d: %s", p,
                                                dev_error_string());
                }
                return push_failed(r, true);
            }
        }
        async_waited(r);
        r->phase = PH_STREAM;
        /* fall through */
    case PH_STREAM: {
        int q = dev_stream_query(t->stream);
        if (1 == q) {
            return ASYNC_PENDING;
        }
        if (DEV_OK != q) {
            mca_coll_gpu_report_failure(r->what, r->comm, "copies to the peers: %s",
                                        dev_error_string());
            return push_failed(r, false);
        }
        mca_coll_gpu_team_done(t, r->seq);
        return ASYNC_END;
    }
    default:
        return ASYNC_END;
    }
}

static int step_pull(coll_gpu_async_t *r)
{
    int s;
    coll_gpu_team_t *t = r->team;

    switch (r->phase) {
    case PH_START:
        r->seq = ++t->seq;
        if (t->rank == r->root) {
            ASYNC_CHECK(r, mca_coll_gpu_team_export(t, r->r.dev, r->bytes,
                                                    &t->ctl->rank[t->rank].rbuf));
            async_arrive(r);
            return async_finish(r);
        }
        async_arrive(r);
        r->phase = PH_ARRIVE;
        /* fall through */
    case PH_ARRIVE:
        if (ASYNC_READY != (s = peer_arrived(r, r->root))) {
            return s;
        }
        ASYNC_CHECK(r, mca_coll_gpu_team_import(t, r->root, &t->ctl->rank[r->root].rbuf,
                                                r->bytes, &r->peer_buf));
        ASYNC_CHECK(r, dev_memcpy_async(r->r.dev, r->peer_buf, r->bytes, t->stream));
        r->phase = PH_STREAM;
        /* fall through */
    default:
        return async_finish(r);
    }
}

/* Chain and tree (schedule at the top of the file): positions along the ring from the root. */
static int step_pipelined(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;
    bool tree = (ALG_BC_TREE == r->alg), moved = false;
    int n = t->size, root_pos = t->ring_pos[r->root], at, parent_at, s;

    switch (r->phase) {
    case PH_START:
        r->seq = ++t->seq;
        at = (t->ring_pos[t->rank] - root_pos + n) % n;
        parent_at = tree ? (at - 1) / 2 : at - 1;
        r->parent = (0 == at) ? -1 : t->ring_rank[(parent_at + root_pos) % n];
        r->chunk = (0 == r->plan.chunk_bytes) ? ASYNC_DEFAULT_CHUNK : r->plan.chunk_bytes;
        if ((r->bytes + r->chunk - 1) / r->chunk > COLL_GPU_STEP_FAILED - 1) {
            r->chunk = (r->bytes + COLL_GPU_STEP_FAILED - 2) / (COLL_GPU_STEP_FAILED - 1);
        }
        r->nchunks = (r->bytes + r->chunk - 1) / r->chunk;
        r->issued = r->complete = 0;
        COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL,
                         "coll:gpu:%s (cid %d): rank %d: %s position %d from root %d, parent "
                         "%d, %" PRIu64 " chunk(s) of %zu B%s",
                         r->what, t->cid, t->rank, tree ? "tree" : "chain", at, r->root,
                         r->parent, r->nchunks, r->chunk, r->blocking ? "" : " (nonblocking)");
        if (tree ? (2 * at + 1 < n) : (at < n - 1)) { /* a child maps our buffer */
            ASYNC_CHECK(r, mca_coll_gpu_team_export(t, r->r.dev, r->bytes,
                                                    &t->ctl->rank[t->rank].rbuf));
        }
        async_arrive(r);
        if (r->parent < 0) {
            mca_coll_gpu_team_step(t, r->seq, r->nchunks); /* the root's data is all there */
            return async_finish(r);
        }
        mca_coll_gpu_team_step(t, r->seq, 0);
        r->phase = PH_ARRIVE;
        /* fall through */
    case PH_ARRIVE:
        if (ASYNC_READY != (s = peer_arrived(r, r->parent))) {
            return s;
        }
        ASYNC_CHECK(r, mca_coll_gpu_team_import(t, r->parent, &t->ctl->rank[r->parent].rbuf,
                                                r->bytes, &r->peer_buf));
        r->phase = PH_MOVE;
        /* fall through */
    case PH_MOVE:
        /* enqueue every chunk the parent has finished, up to the depth */
        while (r->issued < r->nchunks && r->issued - r->complete < COLL_GPU_CHAIN_DEPTH
               && mca_coll_gpu_team_step_reached(t, r->parent, r->seq, r->issued + 1)) {
            size_t off = (size_t) r->issued * r->chunk;
            size_t len = (r->bytes - off < r->chunk) ? r->bytes - off : r->chunk;
            if (mca_coll_gpu_team_failed(t, r->parent, r->seq)) {
                return async_fail(r);
            }
            ASYNC_CHECK(r, dev_memcpy_async((char *) r->r.dev + off,
                                            (const char *) r->peer_buf + off, len, t->stream));
            ASYNC_CHECK(r, dev_event_record(t->events[r->issued % COLL_GPU_CHAIN_DEPTH],
                                            t->stream));
            ++r->issued;
            moved = true;
        }
        /* publish the copies that completed, in order */
        while (r->complete < r->issued) {
            int q = dev_event_query(t->events[r->complete % COLL_GPU_CHAIN_DEPTH]);
            if (1 == q) {
                break;
            }
            if (DEV_OK != q) {
                mca_coll_gpu_report_failure(r->what, r->comm, "a chain copy to this rank: %s",
                                            dev_error_string());
                return async_fail(r);
            }
            ++r->complete;
            mca_coll_gpu_team_step(t, r->seq, r->complete);
            moved = true;
        }
        if (r->complete < r->nchunks) {
            if (moved) {
                async_waited(r);
                return ASYNC_AGAIN;
            }
            /* a parent that failed jumps its step past the call (seen above); one that hangs
             * is given up on here */
            if (0 != t->abandoned) {
                return async_fail(r);
            }
            async_waiting(r, COLL_GPU_WAIT_STEP, r->parent, r->issued + 1);
            return ASYNC_PENDING;
        }
        /* fall through */
    default:
        return async_finish(r);
    }
}

/* The bcast agreement (schedule at the top of the file): the root's plan is the call's (the
 * byte count picked it, and the counts of an erroneous call differ); MPI_ERR_TRUNCATE keeps the
 * root from writing past a buffer and every rank from waiting for chunks that will not come
 * (the root returns it too: async_complete). */
static int step_agree(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;
    uint64_t seq = t->seq + 1;
    const coll_gpu_call_t *at_root = &t->ctl->rank[r->root].call[seq & 1];
    size_t root_bytes;

    if (PH_START == r->phase) {
        coll_gpu_call_t *mine = &t->ctl->rank[t->rank].call[seq & 1];
        mine->bytes = r->bytes;
        mine->alg = (int32_t) r->plan.alg;
        mine->chunk = r->plan.chunk_bytes;
        atomic_store_explicit(&mine->seq, seq, memory_order_release);
        r->phase = PH_ARRIVE;
    }
    /* after the agreement on the board every rank's byte count is the root's, and so is its
     * plan (picked from the byte count and parameters that hold one value on every process,
     * MCA_BASE_VAR_SCOPE_ALL_EQ): a second wait for the root would only add its latency */
    if (t->rank != r->root && !r->agreed) {
        if (seq != atomic_load_explicit(&at_root->seq, memory_order_acquire)) {
            /* the root has not entered the call yet */
            r->seq = seq; /* for the hang reports (and their give-up) */
            async_waiting(r, COLL_GPU_WAIT_CALL, r->root, 0);
            r->seq = 0;
            if (!mca_coll_gpu_team_gave_up_on(t, r->root, seq)) {
                return ASYNC_PENDING;
            }
            /* gave up on a root that never came (coll_gpu_hang_error_seconds): its plan is
             * unknown, so take part as every plan's peers expect of a failed rank (failed,
             * arrived, done); the root, when it comes, sees the failure and touches nothing */
            async_seq_failed(r);
            async_arrive(r);
            mca_coll_gpu_team_done(t, r->seq);
            r->rc = OMPI_ERROR;
            return ASYNC_END;
        }
        async_waited(r);
        root_bytes = at_root->bytes;
        r->plan.alg = at_root->alg;
        r->plan.chunk_bytes = at_root->chunk;
        if (root_bytes != r->bytes) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL,
                             "coll:gpu:%s (cid %d): rank %d: %zu B here, %zu B at root %d: "
                             "truncation, no data moved",
                             r->what, t->cid, t->rank, r->bytes, root_bytes, r->root);
            if (OMPI_SUCCESS == r->local_rc) {
                r->local_rc = MPI_ERR_TRUNCATE;
            }
        }
    }
    r->phase = PH_START;
    if (OMPI_SUCCESS != r->local_rc) {
        r->rc = r->local_rc;
        async_seq_failed(r);
        r->alg = ALG_FINISH;
        if (TOPO_BC_PUSH == r->plan.alg) {
            async_arrive(r);
            r->alg = ALG_BC_PUSH;
            r->phase = PH_OWN_DONE;
        }
        return ASYNC_AGAIN;
    }
    r->alg = (0 == r->bytes)                  ? ALG_BC_EMPTY
             : (TOPO_BC_PULL == r->plan.alg)  ? ALG_BC_PULL
             : (TOPO_BC_CHAIN == r->plan.alg) ? ALG_BC_CHAIN
             : (TOPO_BC_TREE == r->plan.alg)  ? ALG_BC_TREE
                                              : ALG_BC_PUSH;
    return ASYNC_AGAIN;
}

/* A bcast of nothing: its seq is consumed, and no rank may end it before every rank entered
 * it (the double-buffered scratch and records rely on that). */
static int step_empty(coll_gpu_async_t *r)
{
    if (PH_START == r->phase) {
        r->seq = ++r->team->seq;
        async_arrive(r);
        r->phase = PH_ARRIVE;
    }
    if (!all_reached(r, false)) {
        return ASYNC_PENDING;
    }
    mca_coll_gpu_team_done(r->team, r->seq);
    return ASYNC_END;
}

/* Did a peer bring another byte count than the root's to bcast seq? */
static bool bcast_any_mismatch(coll_gpu_team_t *t, uint64_t seq, size_t bytes)
{
    for (int p = 0; p < t->size; ++p) {
        const coll_gpu_call_t *c = &t->ctl->rank[p].call[seq & 1];
        if (seq == atomic_load_explicit(&c->seq, memory_order_acquire) && c->bytes != bytes) {
            return true;
        }
    }
    return false;
}

/* ---- exchange and reduce-scatter ------------------------------------------------------------ */

/*   open: offers, lend, arrive | wait arrive(all), move: map, copies or the reduction |
 *   poll streams | finish   (coll_gpu_nvl.c has the halves) */
static int step_xstep(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;
    int rc, s;

    switch (r->phase) {
    case PH_START:
        r->seq = ++t->seq;
        rc = mca_coll_gpu_nvl_xstep_open(t, r->seq, &r->x, r->what, r->comm);
        r->arrived = true;
        if (OMPI_SUCCESS != rc) {
            return async_to_finish(r, rc); /* taking part without data */
        }
        r->phase = PH_ARRIVE;
        /* fall through */
    case PH_ARRIVE:
        if (ASYNC_READY != (s = arrived_ok(r))) {
            return s;
        }
        rc = mca_coll_gpu_nvl_xstep_move(t, r->seq, &r->x, r->what, r->comm, r->xstreams,
                                         &r->nxstreams);
        if (OMPI_SUCCESS != rc) {
            return async_to_finish(r, rc);
        }
        r->phase = PH_XSTREAMS;
        /* fall through */
    default:
        return async_finish(r);
    }
}

/* ---- calls decided on the queue ------------------------------------------------------------ */

static void async_begin(coll_gpu_async_t *r);

/* The algorithm of a call with a plan (a bcast: its agreement, then the root's plan); false
 * when the plan has no form here (staged). */
static bool call_alg(bool bcast, topo_plan_t *plan, bool in_place, dev_dtype_t dt,
                     async_alg_t *alg)
{
    if (bcast) {
        *alg = ALG_BC_AGREE;
        return true;
    }
    mca_coll_gpu_plan_for_call(plan, in_place, dt);
    if (TOPO_AR_FUSED == plan->alg) {
        *alg = ALG_FUSED;
    } else if (TOPO_AR_ONESHOT == plan->alg) {
        *alg = ALG_ONESHOT;
    } else if (TOPO_AR_TWOSHOT == plan->alg) {
        *alg = ALG_TWOSHOT;
    } else if (TOPO_AR_TWOSHOT_CE == plan->alg) {
        plan->nblocks = 0; /* the whole GPU for the local reduce */
        *alg = ALG_TWOSHOT_CE;
    } else if (TOPO_AR_RING == plan->alg) {
        *alg = ALG_RING;
    } else {
        return false;
    }
    return true;
}

static void async_set_plan(coll_gpu_async_t *r, async_alg_t alg, const topo_plan_t *plan)
{
    r->first_alg = r->bcast ? ALG_BC_AGREE : alg;
    r->first_plan = *plan;
    if (!r->bcast) {
        r->launch.nblocks = plan->nblocks;
        r->launch.nthreads = plan->nthreads;
    }
}

/* async_set_plan for a call decided now: at the call, or on the queue once the team's setup
 * has ended (step_defer); the log line says so.  ALG_DEFER: decided on the queue. */
static void async_take_plan(coll_gpu_async_t *r, async_alg_t alg, const topo_plan_t *plan,
                            size_t bytes, struct ompi_datatype_t *dtype)
{
    if (ALG_DEFER == alg) {
        r->first_alg = ALG_DEFER;
        return;
    }
    mca_coll_gpu_log_plan(r->what, r->comm, bytes, dtype, r->mpi_op,
                          r->bcast ? TOPO_COLL_BCAST : TOPO_COLL_ALLREDUCE, r->team, plan);
    async_set_plan(r, alg, plan);
}

/* count elements of the kernels' type dt reduced with op */
static void allreduce_call(coll_gpu_async_t *r, bool in_place, size_t count, dev_dtype_t dt,
                           dev_op_t op)
{
    r->in_place = in_place;
    r->count = count;
    r->dt = dt;
    r->op = op;
    r->esize = dev_dtype_size(dt);
}

static void bcast_call(coll_gpu_async_t *r, size_t bytes, int root)
{
    r->bcast = true;
    r->bytes = bytes;
    r->root = root;
}

/* A rank kept waiting for the setup says so once (coll_gpu_hang_warn_seconds); it never gives
 * up there: the setup's exchange has no way to tell the peers. */
static void defer_waiting(coll_gpu_async_t *r)
{
    int warn = mca_coll_gpu_component.hang_warn_seconds;
    double now;

    if (0 != (++r->polls % ASYNC_CLOCK_EVERY) || 0 >= warn) {
        return;
    }
    now = mca_coll_gpu_now();
    if (0.0 == r->wait.start) {
        r->wait.start = now;
    } else if (now - r->wait.start >= (double) warn && !r->setup_reported) {
        r->setup_reported = true;
        opal_output(0, "coll:gpu: rank %d has waited %d s in a nonblocking %s on communicator "
                       "%d for its peers to set up the node team",
                    ompi_comm_rank(r->comm), (int) (now - r->wait.start), r->what,
                    r->team->cid);
    }
}

/* A call queued while its team's setup was in flight, or on a team a nonblocking call set up
 * that has no GPU path for it: once the setup has ended, decide as the call would on a ready
 * team (the setup's outcome and the plan are the same on every rank), then begin it; no team,
 * a staged plan or one without a nonblocking form: the host fallback. */
static int step_defer(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;
    topo_coll_t coll = r->bcast ? TOPO_COLL_BCAST : TOPO_COLL_ALLREDUCE;
    size_t bytes = r->bcast ? r->bytes : mca_coll_gpu_call_bytes(r->user_dtype,
                                                                 (size_t) r->user_count);
    coll_gpu_team_state_t state = mca_coll_gpu_team_setup_step(t);
    topo_plan_t plan;
    async_alg_t alg = ALG_FINISH;
    int rc;

    if (COLL_GPU_TEAM_PENDING == state) {
        defer_waiting(r);
        return ASYNC_PENDING;
    }
    async_waited(r);
    memset(&plan, 0, sizeof(plan));
    if (COLL_GPU_TEAM_READY == state && mca_coll_gpu_select_plan(t, coll, bytes, &plan)
        && call_alg(r->bcast, &plan, r->in_place, r->dt, &alg)) {
        async_take_plan(r, alg, &plan, bytes, r->user_dtype);
        async_begin(r);
        return ASYNC_AGAIN;
    }
    plan.alg = TOPO_AR_STAGED; /* == TOPO_BC_STAGED */
    snprintf(plan.reason, sizeof(plan.reason), "%s; through the host with coll/gpu's own "
             "messages, as the setup ended at different times on different ranks",
             COLL_GPU_TEAM_READY == state ? "no GPU path for it on this team"
                                          : "no node team (its setup failed)");
    mca_coll_gpu_log_plan(r->what, r->comm, bytes, r->user_dtype, r->mpi_op, coll, NULL,
                          &plan);
    rc = mca_coll_gpu_fallback_start(&r->fb, r->module, r->comm, r->what, r->bcast,
                                     r->user_sbuf, r->user_rbuf, r->user_count, r->user_dtype,
                                     r->mpi_op, r->root);
    if (OMPI_SUCCESS != rc) {
        /* this rank cannot take part: as fatal as a request that cannot be allocated */
        mca_coll_gpu_report_failure(r->what, r->comm, "cannot start the host fallback (%d)",
                                    rc);
        r->rc = rc;
        return ASYNC_END;
    }
    r->alg = ALG_FALLBACK;
    return ASYNC_AGAIN;
}

static int step_fallback(coll_gpu_async_t *r)
{
    if (!mca_coll_gpu_fallback_test(&r->fb)) {
        return ASYNC_PENDING;
    }
    r->rc = r->fb.rc;
    return ASYNC_END;
}

static int step_finish(coll_gpu_async_t *r)
{
    if (PH_START == r->phase && 0 == r->seq) {
        /* failed before the call took a seq: take one and fail it; a fused call's peers'
         * kernels are released from here too (their hosts may not poll) */
        async_seq_failed(r);
        if (ALG_FUSED == r->first_alg) {
            (void) mca_coll_gpu_nvl_fused_release_peers(r->team, r->seq);
        }
    }
    return async_finish(r);
}

/* One step of a request, by its algorithm; ASYNC_END when it is over. */
static int (*const async_steps[])(coll_gpu_async_t *) = {
    [ALG_FUSED] = step_fused,       [ALG_ONESHOT] = step_shot,
    [ALG_TWOSHOT] = step_shot,      [ALG_TWOSHOT_CE] = step_twoshot_ce,
    [ALG_RING] = step_ring,         [ALG_BC_PUSH] = step_push,
    [ALG_BC_PULL] = step_pull,      [ALG_BC_CHAIN] = step_pipelined,
    [ALG_BC_TREE] = step_pipelined, [ALG_BC_AGREE] = step_agree,
    [ALG_AR_AGREE] = step_ar_agree, [ALG_BC_EMPTY] = step_empty,
    [ALG_DEFER] = step_defer,       [ALG_FALLBACK] = step_fallback,
    [ALG_XSTEP] = step_xstep,       [ALG_FINISH] = step_finish,
};

/* ---- buffers ------------------------------------------------------------------------------- */

/* The team path's view of count x dtype at user: in place, or a device temporary (slot: the
 * module's, or COLL_GPU_ADAPT_OWN: the request's own; coll_gpu_adapt.c); a failure is
 * reported, b->dev is then NULL. */
static int buf_in(coll_gpu_async_t *r, coll_gpu_adapt_t *b, int slot, const void *user,
                  int count, struct ompi_datatype_t *dtype, bool copy_in, bool exported)
{
    return mca_coll_gpu_adapt_in(r->module, r->comm, r->what, slot, user, count, dtype, copy_in,
                                 exported, b);
}

/* The module's temporary slot of a role for a blocking call (kept between calls, so that peers
 * map it once: 0 send, 1 receive, 2 a whole result or a lent copy; the blocking calls of a
 * communicator come one at a time), else one of the request's own (nonblocking calls
 * overlap). */
static int buf_slot(const coll_gpu_async_t *r, int role)
{
    return r->blocking ? role : COLL_GPU_ADAPT_OWN;
}

/* After the call: the temporary back into the user's layout (copy_out), and freed. */
static int buf_out(coll_gpu_async_t *r, coll_gpu_adapt_t *b, bool copy_out)
{
    return mca_coll_gpu_adapt_out(r->module, r->comm, r->what, b, copy_out);
}

/* ---- requests and queues ------------------------------------------------------------------- */

/* The end of a request object, and of its reference on the communicator: when that was the last
 * one (MPI_Comm_free came while the call ran) the communicator goes now, and with it the module
 * and the team.  Never called inside a team's step or with async_lock held. */
static void async_req_destroy(coll_gpu_async_t *r)
{
    struct ompi_communicator_t *comm = r->comm;

    OMPI_REQUEST_FINI(&r->super.super);
    OBJ_RELEASE(r);
    OBJ_RELEASE(comm);
}

/* Who frees a request: MPI_Request_free (or the free of MPI_Wait/MPI_Test) and the end of the
 * call each swap their mark into end_state; the second of the two frees it.  A plain flag read
 * before the completion lost a MPI_Request_free that another thread made in between (the
 * request and its communicator were never freed), and MPI_Wait can return between
 * ompi_request_complete and the end's own look at the flag. */
static int async_req_free(ompi_request_t **req)
{
    coll_gpu_async_t *r = (coll_gpu_async_t *) *req;

    /* MPI_Request_free on a call still running: it ends (peers need us), then goes */
    if (ASYNC_ENDED == atomic_exchange(&r->end_state, ASYNC_USER_FREED)) {
        async_req_destroy(r);
    }
    *req = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

/* The end of a request: results out of the temporaries, the status, completion. */
static void async_complete(coll_gpu_async_t *r)
{
    int rc = r->rc;

    if (r->bcast && OMPI_SUCCESS != rc && r->team->rank == r->root && 0 != r->seq
        && bcast_any_mismatch(r->team, r->seq, r->bytes)) {
        rc = MPI_ERR_TRUNCATE;
    }
    if (NULL != r->xresult) {
        /* a reduce-scatter in place: every rank is done reading rbuf, its piece goes there */
        if (OMPI_SUCCESS == rc && NULL != r->s.dev
            && DEV_OK != dev_memcpy(r->s.dev, r->xresult, r->xpiece)) {
            mca_coll_gpu_report_failure(r->what, r->comm, "copy of %zu B from a device "
                                        "temporary: %s", r->xpiece, dev_error_string());
            rc = OMPI_ERROR;
        }
        rc = mca_coll_gpu_first_error(rc, buf_out(r, &r->s, OMPI_SUCCESS == rc));
        if (!r->blocking) { /* else the module's */
            (void) dev_mem_free(r->xresult);
        }
        r->xresult = NULL;
    }
    /* the result goes out where it was written: every allreduce rank, the bcast non-roots */
    rc = mca_coll_gpu_first_error(rc, buf_out(r, &r->r, OMPI_SUCCESS == rc
                                                          && !(r->bcast
                                                               && r->team->rank == r->root)));
    (void) buf_out(r, &r->s, false);
    COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL, "coll:gpu:%s (cid %d): rank %d: call %" PRIu64
                     " complete (%d)", r->what, r->team->cid, r->team->rank, r->seq, rc);
    r->final_rc = rc;
    r->super.super.req_status.MPI_ERROR = (OMPI_SUCCESS == rc) ? MPI_SUCCESS
                                                         : ompi_errcode_get_mpi_code(rc);
    ompi_request_complete(&r->super.super, true);
    if (ASYNC_USER_FREED == atomic_exchange(&r->end_state, ASYNC_ENDED)) {
        /* the team is still being stepped: the request goes at async_leave */
        r->next = async_reap;
        async_reap = r;
    }
}

/* Step the head of t's queue until it waits; start the next when it ends.  Returns how many
 * requests completed.  Called with async_lock held (or nested in a poll of this thread). */
static int team_progress(coll_gpu_team_t *t)
{
    dev_device_scope_t scope;
    int completed = 0;

    if (t->async_busy || NULL == t->async_head) {
        return 0; /* a poll nested in this team's own step (the emulated fused kernel's wait) */
    }
    /* Any thread may get here (MPI_Test or MPI_Wait on a communication thread that never
     * touched CUDA, or one working on another GPU): the steps run on the team's device, and the
     * thread gets its own back.  A failed move leaves the steps to fail and say why. */
    (void) dev_device_enter(t->device, &scope);
    t->async_busy = true;
    while (NULL != t->async_head) {
        coll_gpu_async_t *r = t->async_head;
        int s = async_steps[r->alg](r);
        if (ASYNC_PENDING == s) {
            break;
        }
        if (ASYNC_AGAIN == s) {
            continue;
        }
        t->async_head = r->next;
        if (NULL == t->async_head) {
            t->async_tail = NULL;
        }
        atomic_fetch_sub(&async_queued, 1);
        async_complete(r);
        ++completed;
    }
    t->async_busy = false;
    dev_device_leave(&scope);
    return completed;
}

static void teams_prune(void)
{
    coll_gpu_team_t **pp = &async_teams;
    while (NULL != *pp) {
        if (NULL == (*pp)->async_head) {
            coll_gpu_team_t *t = *pp;
            *pp = t->async_next;
            t->async_next = NULL;
            t->async_listed = false;
        } else {
            pp = &(*pp)->async_next;
        }
    }
}

static bool async_enter(void)
{
    if (0 < async_depth) {
        ++async_depth; /* nested in our own progress on this thread: the lock is ours */
        return true;
    }
    if (OPAL_THREAD_TRYLOCK(&async_lock)) {
        return false; /* another thread is at it */
    }
    async_depth = 1;
    return true;
}

/* async_enter that waits for another thread to be done.  Open MPI's own nonblocking calls move
 * on in opal_progress, inside our steps too (a communicator's id agreed by MPI_Iallreduce on
 * its parent while a node team's setup tests its requests): a call of ours that they make
 * there is nested in this thread's hold, and must not wait for the lock it already has. */
static void async_hold(void)
{
    if (0 < async_depth) {
        ++async_depth;
        return;
    }
    OPAL_THREAD_LOCK(&async_lock);
    async_depth = 1;
}

static void async_leave(void)
{
    coll_gpu_async_t *reap;

    if (0 != --async_depth) {
        return;
    }
    reap = async_reap;
    async_reap = NULL;
    OPAL_THREAD_UNLOCK(&async_lock);
    /* out of every team's step and the lock: a communicator freed under these requests may go
     * now (its team's release takes async_lock) */
    while (NULL != reap) {
        coll_gpu_async_t *r = reap;
        reap = r->next;
        async_req_destroy(r);
    }
}

/* opal_progress callback: every team's head. */
static __attribute__((noinline)) int async_progress_run(void)
{
    int completed = 0;

    if (!async_enter()) {
        return 0;
    }
    for (coll_gpu_team_t *t = async_teams; NULL != t; t = t->async_next) {
        completed += team_progress(t);
    }
    if (1 == async_depth) {
        teams_prune();
    }
    async_leave();
    return completed;
}

/* The progress callback, registered while a team has served a request, and every wait of ours:
 * nothing queued (the steady state) costs a load and a return, without the body's frame. */
static int async_progress(void)
{
    if (0 == atomic_load_explicit(&async_queued, memory_order_relaxed)) {
        return 0;
    }
    return async_progress_run();
}

void mca_coll_gpu_async_pause(unsigned *spins)
{
    (void) async_progress();
    if (0 == (++*spins % ASYNC_OPAL_EVERY)) {
        opal_progress(); /* the rest of Open MPI: a host fallback's messages, a setup's */
    }
    if (*spins > ASYNC_SPINS_BEFORE_YIELD) {
        sched_yield();
    }
}

/* Before a team goes: its calls complete; the progress callback goes with the last team. */
static void async_release(coll_gpu_team_t *t)
{
    if (!t->async_used) {
        return;
    }
    while (NULL != t->async_head) {
        opal_progress(); /* its calls end before what they use goes */
    }
    async_hold();
    teams_prune();
    if (0 == --async_team_users) {
        (void) opal_progress_unregister(async_progress);
    }
    t->async_used = false;
    async_leave();
}

/* A blocking call waits here for the setup (its own, or one a nonblocking call began), under
 * the engine's lock while it steps it, moving everything else on meanwhile; a rank kept waiting
 * says so. */
coll_gpu_team_t *mca_coll_gpu_team_get(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                       const char *what)
{
    coll_gpu_team_t *t = mca_coll_gpu_team_begin(m, comm, what, false);
    coll_gpu_host_watch_t watch;
    int round = 0;

    if (NULL == t) {
        return NULL;
    }
    while (COLL_GPU_TEAM_PENDING == t->state) {
        int now = mca_coll_gpu_team_setup_round(t);
        if (0 != now && now != round) {
            if (0 != round) {
                mca_coll_gpu_host_watch_end(&watch);
            }
            round = now;
            mca_coll_gpu_host_watch_begin(&watch, comm, what,
                                          1 == round ? "node team setup (round 1 of 2)"
                                                     : "node team setup (round 2 of 2)");
        }
        /* another thread in the engine steps the setup too */
        if (async_enter()) {
            (void) mca_coll_gpu_team_setup_step(t);
            async_leave();
        }
        if (COLL_GPU_TEAM_PENDING == t->state) {
            opal_progress();
        }
    }
    if (0 != round) {
        mca_coll_gpu_host_watch_end(&watch);
    }
    /* (not on the shared stand-in of a team that could not be had: it stays as it is) */
    if (COLL_GPU_TEAM_READY == t->state || t->async_setup) {
        t->settled = true;
    }
    if (COLL_GPU_TEAM_READY == t->state) {
        return t;
    }
    /* failed: a team that no queued call uses is given back now; one that a nonblocking call
     * began stays for the calls queued on it */
    if (!t->async_setup) {
        async_release(t);
        mca_coll_gpu_team_give_up(m);
    }
    return NULL;
}

coll_gpu_team_t *mca_coll_gpu_select(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                     topo_coll_t coll, size_t bytes, const char *not_capable,
                                     topo_plan_t *plan)
{
    coll_gpu_team_t *t;

    if (!mca_coll_gpu_select_needs_team(m, comm, coll, bytes, not_capable, plan)) {
        return NULL;
    }
    t = mca_coll_gpu_team_get(m, comm, topo_coll_name(coll));
    if (NULL == t) {
        mca_coll_gpu_select_no_team(plan);
        return NULL;
    }
    return mca_coll_gpu_select_plan(t, coll, bytes, plan) ? t : NULL;
}

/* The same for a nonblocking call, which never waits for the team's setup: NULL when the call
 * is staged now (rc: an error that fails the call); else the team, with the plan and the
 * call's algorithm (call_alg), or ALG_DEFER: the call waits on the team's queue until the
 * setup has ended and decides then (step_defer).  Every rank makes the same choice for the
 * same call. */
static coll_gpu_team_t *select_nb(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                  topo_coll_t coll, size_t bytes, const char *not_capable,
                                  bool in_place, dev_dtype_t dt, topo_plan_t *plan,
                                  async_alg_t *alg, int *rc)
{
    coll_gpu_team_t *t;

    *rc = OMPI_SUCCESS;
    if (!mca_coll_gpu_select_needs_team(m, comm, coll, bytes, not_capable, plan)) {
        return NULL;
    }
    t = mca_coll_gpu_team_begin(m, comm, topo_coll_name(coll), true);
    if (NULL == t) {
        *rc = OMPI_ERR_OUT_OF_RESOURCE;
        return NULL;
    }
    if (COLL_GPU_TEAM_READY == t->state && mca_coll_gpu_select_plan(t, coll, bytes, plan)) {
        /* the plan is the same on every rank: so is what follows (a plan without a
         * nonblocking form is staged; on a team a nonblocking call set up, through its
         * queue, until a blocking call settled the setup on every rank) */
        if (call_alg(TOPO_COLL_BCAST == coll, plan, in_place, dt, alg)) {
            return t;
        }
        if (!t->async_setup || t->settled) {
            return NULL;
        }
        *alg = ALG_DEFER;
        return t;
    }
    /* a setup in flight, or one a nonblocking call began whose outcome (or plan) is no team
     * and that no blocking call has settled: the call waits on the team's queue (a staged plan
     * there runs through the host); settled, it is staged as on any team */
    if (COLL_GPU_TEAM_PENDING == t->state || (t->async_setup && !t->settled)) {
        *alg = ALG_DEFER; /* decided on the team's queue, once the setup has ended */
        snprintf(plan->reason, sizeof(plan->reason), "the node team's setup decides");
        return t;
    }
    if (COLL_GPU_TEAM_READY != t->state) {
        mca_coll_gpu_select_no_team(plan); /* a ready team's staged plan says why itself */
    }
    return NULL;
}

void mca_coll_gpu_async_destroy_team(mca_coll_gpu_module_t *m)
{
    if (NULL != m->team && NULL == m->team->setup) {
        async_release(m->team); /* its calls end before what they use goes */
    }
    mca_coll_gpu_team_destroy(m);
}

void mca_coll_gpu_async_finalize(void)
{
    /* every team is released by now (communicators go before the coll framework closes);
     * this only guards against one that was not */
    if (0 < async_team_users) {
        (void) opal_progress_unregister(async_progress);
        async_team_users = 0;
    }
}

/* Queue r on its team and start it when it is the head. */
static void async_start(coll_gpu_async_t *r, ompi_request_t **request)
{
    coll_gpu_team_t *t = r->team;

    *request = &r->super.super;
    async_hold();
    if (!t->async_used) {
        t->async_used = true;
        if (0 == async_team_users++) {
            (void) opal_progress_register(async_progress);
        }
    }
    r->next = NULL;
    if (NULL == t->async_tail) {
        t->async_head = r;
    } else {
        t->async_tail->next = r;
    }
    t->async_tail = r;
    atomic_fetch_add(&async_queued, 1);
    if (!t->async_listed) {
        t->async_listed = true;
        t->async_next = async_teams;
        async_teams = t;
    }
    async_leave();
    if (t->async_head == r && async_enter()) {
        (void) team_progress(t); /* the head starts at the call */
        async_leave();
    }
}

static int async_pers_start(size_t count, ompi_request_t **requests);

/* A request of the team's path: an active one for a nonblocking call, an inactive persistent
 * one (complete, as Open MPI's persistent requests are until started) for an _init. */
static void async_init(coll_gpu_async_t *r, coll_gpu_team_t *t, mca_coll_gpu_module_t *m,
                       struct ompi_communicator_t *comm, const char *what, bool persistent)
{
    ompi_request_t *req = &r->super.super;

    mca_coll_gpu_request_init(req, comm, persistent, async_req_free);
    if (persistent) {
        req->req_start = async_pers_start;
    }
    memset(&r->next, 0, offsetof(coll_gpu_async_t, xsoff) - offsetof(coll_gpu_async_t, next));
    r->team = t;
    r->module = m;
    r->comm = comm;
    OBJ_RETAIN(comm); /* until the request is freed (async_req_destroy) */
    r->what = what;
    r->persistent = persistent;
    /* an inactive persistent request is freed at once: were it RUNNING, its free would wait
     * for an end that never comes and keep the communicator, its team, scratch and mappings */
    atomic_init(&r->end_state, persistent ? ASYNC_ENDED : ASYNC_RUNNING);
    r->s = r->r = (coll_gpu_adapt_t){.slot = -1}; /* no temporary */
}

/* A nonblocking or persistent call's request, taken; NULL: nowhere to keep the call.  No rank
 * can take part without a request, so the others would wait: this is as fatal as the request
 * allocation of any component. */
static coll_gpu_async_t *async_new(coll_gpu_team_t *t, mca_coll_gpu_module_t *m,
                                   struct ompi_communicator_t *comm, const char *what,
                                   bool persistent, bool *taken)
{
    coll_gpu_async_t *r = OBJ_NEW(coll_gpu_async_t);

    if (NULL == r) {
        mca_coll_gpu_report_failure(what, comm, "out of host memory for a request");
        return NULL;
    }
    async_init(r, t, m, comm, what, persistent);
    *taken = true;
    return r;
}

/* A blocking call's request, on the caller's stack (async_run). */
static void async_blocking(coll_gpu_async_t *r, coll_gpu_team_t *t, mca_coll_gpu_module_t *m,
                           struct ompi_communicator_t *comm, const char *what)
{
    OBJ_CONSTRUCT(r, coll_gpu_async_t);
    async_init(r, t, m, comm, what, false);
    r->blocking = true; /* the module's temporaries (buf_slot) */
}

/* ---- entries ------------------------------------------------------------------------------- */

/* A call's progress state back to its start: a new nonblocking call, or the next MPI_Start of
 * a persistent request (whose algorithm and plan were decided at its init). */
static void async_reset(coll_gpu_async_t *r)
{
    r->alg = r->first_alg;
    r->plan = r->first_plan;
    r->phase = PH_START;
    r->seq = 0;
    r->rc = OMPI_SUCCESS;
    r->local_rc = OMPI_SUCCESS;
    r->arrived = r->released = false;
    r->polls = 0;
    async_waited(r);
    r->next_peer = 0;
    r->peer_buf = NULL;
    r->off = 0;
    r->issued = r->complete = 0;
    r->nxstreams = 0;
    r->s = r->r = (coll_gpu_adapt_t){.slot = -1}; /* no temporary */
}

/* The start of a call's begin (async_reset): a failure before the call (prior_rc), or else the
 * program's copies into or out of its buffers on the default stream must have ended before the
 * team touches them (dev.h); a rank that cannot wait for them takes part without data. */
static int begin_settled(coll_gpu_async_t *r, int prior_rc)
{
    async_reset(r);
    if (OMPI_SUCCESS != prior_rc) {
        return prior_rc;
    }
    return (DEV_OK == dev_default_stream_settle()) ? OMPI_SUCCESS : OMPI_ERROR;
}

/* The end of a nonblocking or persistent call's begin: COLL_GPU_TEST_FAIL_ASYNC (test only)
 * makes it take part without data; a blocking call, posted the same way, is no such call. */
static int begin_injected(coll_gpu_async_t *r, int rc)
{
    if (OMPI_SUCCESS == rc && !r->blocking && async_fail_injected()) {
        mca_coll_gpu_report_failure(r->what, r->comm, "COLL_GPU_TEST_FAIL_ASYNC (test only): "
                                    "taking part without data");
        return OMPI_ERROR;
    }
    return rc;
}

/* An allreduce call's buffers (buf_in); a rank that cannot take part with data sits the call
 * out after the agreement. */
static void allreduce_begin(coll_gpu_async_t *r, int prior_rc)
{
    async_alg_t alg = r->first_alg;
    int rc = begin_settled(r, prior_rc);

    /* the receive buffer is mapped by peers in the two-shots and ring, the send buffer in
     * one-shot (not in place) and the two-shots; the fused kernel only reads and writes our
     * own */
    if (OMPI_SUCCESS == rc) {
        rc = buf_in(r, &r->r, buf_slot(r, 1), r->user_rbuf, r->user_count, r->user_dtype,
                    r->in_place, ALG_TWOSHOT == alg || ALG_TWOSHOT_CE == alg || ALG_RING == alg);
    }
    if (OMPI_SUCCESS == rc && !r->in_place) {
        rc = buf_in(r, &r->s, buf_slot(r, 0), r->user_sbuf, r->user_count, r->user_dtype, true,
                    ALG_FUSED != alg && ALG_RING != alg);
    } else if (OMPI_SUCCESS == rc) {
        r->s = r->r;
        r->s.slot = -1; /* one temporary, owned by r->r */
    }
    r->local_rc = begin_injected(r, rc); /* sat out after the agreement (step_ar_agree) */
    if (ALG_FUSED == alg) { /* pieces of a slot's share, one seq each */
        r->cap = mca_coll_gpu_nvl_fused_cap(r->team);
        r->per = r->cap / r->esize;
    }
    r->alg = ALG_AR_AGREE;
}

/* A bcast call's buffer; a local failure is kept for the agreement step (step_agree), which
 * sits the call out with it once the root's plan is known. */
static void bcast_begin(coll_gpu_async_t *r, int prior_rc)
{
    bool is_root = (ompi_comm_rank(r->comm) == r->root);
    int rc = begin_settled(r, prior_rc);

    /* a push root's buffer is only read, never mapped (its IPC capability is not asked) */
    if (OMPI_SUCCESS == rc) {
        rc = buf_in(r, &r->r, buf_slot(r, 0), r->user_rbuf, r->user_count, r->user_dtype,
                    is_root, !(is_root && TOPO_BC_PUSH == r->first_plan.alg));
    }
    r->local_rc = begin_injected(r, rc);
}

/* A side of an exchange used where it is: its element type is dense and each of its nblocks
 * blocks with bytes is device memory (lent: that the legacy IPC can export, which pool, VMM
 * and managed memory are not), so peers read from or write into the user's buffer directly;
 * else it goes through its view, packed.  Exportability is local to a rank: it never decides
 * the path of a call, only whether this rank's side needs a temporary. */
static bool xcall_direct(const char *buf, bool dense, const int64_t *at, const uint64_t *len,
                         int nblocks, bool lent)
{
    for (int p = 0; p < nblocks && dense; ++p) {
        const char *b = buf + at[p];
        if (0 < len[p] && (DEV_MEM_DEVICE != mca_coll_gpu_classify(b)
                           || (lent && !dev_mem_ipc_capable(b)))) {
            return false;
        }
    }
    return dense;
}

/* What an exchanging rank lends (xcall_begin): its own received block (allgather(v) in
 * place), a copy of its receive blocks (alltoall(v) in place: they are overwritten while peers
 * read them), its send blocks where they are (one span of its buffer), or packed. */
typedef enum { XLEND_RECV, XLEND_COPY, XLEND_DIRECT, XLEND_PACKED } xlend_t;

/* An exchange or reduce-scatter call's buffers and its step (coll_gpu_xstep_t), from the
 * layout xcall_layout made: a side is used where it is (xcall_direct) or through its view in a
 * temporary.  A local failure makes the rank take part without data. */
static void xcall_begin(coll_gpu_async_t *r)
{
    coll_gpu_team_t *t = r->team;
    coll_gpu_xstep_t *x = &r->x;
    bool in_place = (MPI_IN_PLACE == r->user_sbuf);
    int n = t->size, me = t->rank, nsend = r->xsingle ? 1 : n, rc;
    char *rbuf = r->user_rbuf, *sbuf = (char *) r->user_sbuf, *lo = NULL, *hi = NULL;
    xlend_t lend;

    memset(x, 0, sizeof(*x));
    rc = begin_settled(r, r->xrc);
    if (r->xreduce) {
        x->reduce = true;
        x->dt = r->dt;
        x->op = r->op;
        x->off = r->xpiece_off;
        x->count = r->xpiece_count;
        if (OMPI_SUCCESS == rc) { /* the input: sbuf, or rbuf in place */
            rc = buf_in(r, &r->s, buf_slot(r, 0), in_place ? rbuf : sbuf, r->xscount,
                        r->xsdtype, true, true);
        }
        if (OMPI_SUCCESS == rc && in_place && 0 < r->xpiece) {
            rc = mca_coll_gpu_adapt_tmp(r->module, r->comm, r->what, buf_slot(r, 2),
                                        r->xpiece, &r->xresult);
        }
        if (OMPI_SUCCESS == rc && !in_place) {
            rc = buf_in(r, &r->r, buf_slot(r, 1), rbuf, r->xrcount, r->xrdtype, false,
                        false);
        }
        x->src = r->s.dev;
        x->src_bytes = r->s.bytes;
        x->dst[0] = in_place ? r->xresult : r->r.dev;
        goto out;
    }
    /* where the pieces land: the receive blocks themselves, or the view's temporary (in place
     * it starts with the buffer's contents: the own block stays, and allgather(v) lends it) */
    if (!xcall_direct(rbuf, r->xrdense, r->xrat, r->xrlen, n, r->xlend_recv)
        && OMPI_SUCCESS == rc) {
        rc = buf_in(r, &r->r, buf_slot(r, 1), rbuf, r->xrcount, r->xrdtype, in_place,
                    r->xlend_recv);
    }
    for (int p = 0; p < n; ++p) {
        x->want_len[p] = r->xrlen[p];
        x->dst[p] = (-1 == r->r.slot) ? rbuf + r->xrat[p]
                  : (NULL == r->r.dev) ? NULL : (char *) r->r.dev + r->xroff[p];
    }
    lend = r->xlend_recv ? XLEND_RECV
         : r->xcopy_send ? XLEND_COPY
         : xcall_direct(sbuf, r->xsdense, r->xsat, r->xslen, nsend, true) ? XLEND_DIRECT
                                                                           : XLEND_PACKED;
    if (XLEND_COPY == lend) {
        r->s = (coll_gpu_adapt_t){.bytes = r->xsbytes, .slot = buf_slot(r, 2)};
        if (OMPI_SUCCESS == rc && 0 < r->s.bytes) {
            rc = mca_coll_gpu_adapt_tmp(r->module, r->comm, r->what, r->s.slot, r->s.bytes,
                                        &r->s.dev);
        }
        for (int p = 0; p < n && OMPI_SUCCESS == rc; ++p) {
            if (0 < r->xslen[p] && DEV_OK != dev_memcpy((char *) r->s.dev + r->xsoff[p],
                                                        x->dst[p], r->xslen[p])) {
                mca_coll_gpu_report_failure(r->what, r->comm, "copy of %" PRIu64 " B into a "
                                            "device temporary: %s", r->xslen[p],
                                            dev_error_string());
                rc = OMPI_ERROR;
            }
        }
    } else if (XLEND_PACKED == lend && OMPI_SUCCESS == rc) {
        rc = buf_in(r, &r->s, buf_slot(r, 0), sbuf, r->xscount, r->xsdtype, true, true);
    }
    for (int q = 0; q < nsend && XLEND_DIRECT == lend; ++q) {
        char *b = sbuf + r->xsat[q];
        if (0 < r->xslen[q]) {
            lo = (NULL == lo || b < lo) ? b : lo;
            hi = (NULL == hi || b + r->xslen[q] > hi) ? b + r->xslen[q] : hi;
        }
    }
    x->src = (XLEND_RECV == lend) ? x->dst[me] : (XLEND_DIRECT == lend) ? lo : r->s.dev;
    x->src_bytes = (XLEND_RECV == lend)     ? r->xrlen[me]
                 : (XLEND_DIRECT == lend) ? (size_t) (hi - lo)
                                          : r->s.bytes;
    for (int q = 0; q < n; ++q) {
        int b = r->xsingle ? 0 : q;
        x->offer_len[q] = r->xslen[b];
        x->offer_off[q] = (XLEND_RECV == lend || 0 == r->xslen[b]) ? 0
                        : (XLEND_DIRECT == lend) ? (uint64_t) (sbuf + r->xsat[b] - lo)
                                                 : r->xsoff[b];
    }
    if (in_place) { /* this rank's own block is where it belongs */
        x->offer_len[me] = x->want_len[me] = 0;
    }
out:
    x->local_rc = begin_injected(r, rc);
}

/* A call's begin, by its kind; a deferred one is begun once decided (step_defer). */
static void async_begin(coll_gpu_async_t *r)
{
    if (ALG_DEFER == r->first_alg) {
        async_reset(r);
    } else if (ALG_XSTEP == r->first_alg) {
        xcall_begin(r);
    } else if (r->bcast) {
        bcast_begin(r, OMPI_SUCCESS);
    } else {
        allreduce_begin(r, OMPI_SUCCESS);
    }
}

/* MPI_Start and MPI_Startall (runs of requests with this start function): each start is one
 * call on the request's team, begun and queued as a nonblocking call is (the buffers are
 * looked at again: a rank whose buffer needs a device temporary gets a fresh one, filled with
 * what the buffer holds now); completion by progress, as for the nonblocking calls.  No
 * nonblocking call is ever deferred before it on its communicator (coll_gpu_defer.c): a
 * request takes the team only after a blocking call had device memory on every rank, and
 * from that call on nothing is deferred there. */
static int async_pers_start(size_t count, ompi_request_t **requests)
{
    for (size_t i = 0; i < count; ++i) {
        coll_gpu_async_t *r = (coll_gpu_async_t *) requests[i];
        ompi_request_t *req = &r->super.super;

        /* the end of the last start left ENDED: a MPI_Request_free during this start must
         * wait for its end (freed under the running call otherwise) */
        atomic_store(&r->end_state, ASYNC_RUNNING);
        req->req_state = OMPI_REQUEST_ACTIVE;
        req->req_complete = REQUEST_PENDING;
        req->req_status.MPI_ERROR = MPI_SUCCESS;
        req->req_status._cancelled = 0;
        async_begin(r);
        async_start(r, &requests[i]);
    }
    return OMPI_SUCCESS;
}

bool mca_coll_gpu_async_busy(void)
{
    return 0 < async_depth;
}

/* The last of an entry: begin and start the call, unless it waits for MPI_Start. */
static void async_post(coll_gpu_async_t *r, ompi_request_t **request)
{
    if (r->persistent) {
        *request = &r->super.super; /* inactive until async_pers_start */
        return;
    }
    async_begin(r);
    async_start(r, request);
}

/* The call as given (allreduce_begin and bcast_begin read it at every begin). */
static void async_keep(coll_gpu_async_t *r, const void *sbuf, void *rbuf, int count,
                       struct ompi_datatype_t *dtype)
{
    r->user_sbuf = sbuf;
    r->user_rbuf = rbuf;
    r->user_count = count;
    r->user_dtype = dtype;
}

/* async_post for an allreduce or a bcast; a persistent request holds its datatype, which the
 * application may free before it frees the request. */
static void async_issue(coll_gpu_async_t *r, const void *sbuf, void *rbuf, int count,
                        struct ompi_datatype_t *dtype, ompi_request_t **request)
{
    async_keep(r, sbuf, rbuf, count, dtype);
    if (r->persistent) {
        OBJ_RETAIN(dtype);
    }
    async_post(r, request);
}

int mca_coll_gpu_async_allreduce(mca_coll_gpu_module_t *m, const void *sbuf, void *rbuf,
                                 int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, bool persistent,
                                 ompi_request_t **request, bool *taken)
{
    const char *name = persistent ? "allreduce_init" : "iallreduce";
    size_t bytes = mca_coll_gpu_call_bytes(dtype, (size_t) count);
    bool in_place = (MPI_IN_PLACE == sbuf);
    const char *not_capable;
    coll_gpu_async_t *r;
    coll_gpu_team_t *t;
    topo_plan_t plan;
    dev_dtype_t dt = DEV_T_UINT8;
    dev_op_t dop = DEV_OP_SUM;
    size_t nelems = 0;
    async_alg_t alg = ALG_FINISH;
    int rc;

    *taken = false;
    /* the team's path once a blocking allreduce, bcast or reduce had device memory on
     * every rank (mca_coll_gpu_nb_team_path): then this rank takes it whatever its own kind */
    if (m->inter
        || !mca_coll_gpu_nb_team_path(m, !mca_coll_gpu_data_host(sbuf, dtype, count)
                                             || !mca_coll_gpu_data_host(rbuf, dtype, count),
                                      persistent)) {
        return OMPI_SUCCESS;
    }
    not_capable = mca_coll_gpu_map_reduction(dtype, (size_t) count, op, &dt, &dop, &nelems);
    /* an _init may not wait for the other ranks either (MPI-4: local and nonblocking, in the
     * order of the nonblocking calls) */
    t = select_nb(m, comm, TOPO_COLL_ALLREDUCE, bytes, not_capable, in_place, dt, &plan, &alg,
                  &rc);
    if (NULL == t) {
        return rc;
    }
    if (NULL == (r = async_new(t, m, comm, name, persistent, taken))) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    r->mpi_op = op;
    allreduce_call(r, in_place, nelems, dt, dop);
    async_take_plan(r, alg, &plan, bytes, dtype);
    async_issue(r, sbuf, rbuf, count, dtype, request);
    return OMPI_SUCCESS;
}

/* ---- blocking calls -------------------------------------------------------------------- */

/* A blocking call: its request lives on the caller's stack (no allocation), queues behind the
 * team's calls in issue order, and is stepped from here until it has ended; meanwhile the other
 * teams' requests move too (mca_coll_gpu_async_pause).  Ended means async_complete is done with
 * it (end_state), not only that it completed: another thread's progress may end it. */
static int async_run(coll_gpu_async_t *r)
{
    ompi_request_t *req;
    unsigned spins = 0;
    int rc;

    async_start(r, &req);
    while (ASYNC_ENDED != atomic_load_explicit(&r->end_state, memory_order_acquire)) {
        mca_coll_gpu_async_pause(&spins);
    }
    rc = r->final_rc;
    OMPI_REQUEST_FINI(&r->super.super);
    OBJ_RELEASE(r->comm); /* async_init's reference */
    OBJ_DESTRUCT(r);
    return rc;
}

int mca_coll_gpu_team_allreduce(coll_gpu_team_t *t, mca_coll_gpu_module_t *m,
                                struct ompi_communicator_t *comm, const topo_plan_t *plan,
                                const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, size_t nelems, dev_dtype_t dt,
                                dev_op_t op, int local_rc)
{
    coll_gpu_async_t r;
    topo_plan_t p = *plan;
    async_alg_t alg = ALG_FINISH;

    async_blocking(&r, t, m, comm, "allreduce");
    allreduce_call(&r, MPI_IN_PLACE == sbuf, nelems, dt, op);
    if (!call_alg(false, &p, r.in_place, dt, &alg)) {
        /* no plan of the team's: the call fails on every rank */
        local_rc = (OMPI_SUCCESS == local_rc) ? OMPI_ERR_NOT_SUPPORTED : local_rc;
    }
    async_set_plan(&r, alg, &p);
    async_keep(&r, sbuf, rbuf, count, dtype);
    allreduce_begin(&r, local_rc);
    return async_run(&r);
}

int mca_coll_gpu_team_bcast(coll_gpu_team_t *t, mca_coll_gpu_module_t *m,
                            struct ompi_communicator_t *comm, const topo_plan_t *plan, void *buf,
                            int count, struct ompi_datatype_t *dtype, int root, int local_rc,
                            bool agreed)
{
    coll_gpu_async_t r;

    async_blocking(&r, t, m, comm, "bcast");
    r.agreed = agreed;
    bcast_call(&r, mca_coll_gpu_call_bytes(dtype, (size_t) count), root);
    async_set_plan(&r, ALG_BC_AGREE, plan);
    async_keep(&r, NULL, buf, count, dtype);
    bcast_begin(&r, local_rc); /* sat out once the root's plan is known (step_agree) */
    return async_run(&r);
}

/* One side of an exchange as a view (*dtype retained or made, *count) and each peer's block:
 * its offset and length in the view's packed bytes (off, len) and its first byte's offset in the
 * user's buffer (at; meaningful when the element type is dense: *dense).  n blocks of count x
 * dtype (uniform; one block for every peer: single), or the v layout counts/displs as an
 * indexed type of dtype.  OMPI_SUCCESS, or the type could not be made. */
static int xcall_view(struct ompi_datatype_t *dtype, int count, const int *counts,
                      const int *displs, int n, bool single, struct ompi_datatype_t **view,
                      int *vcount, uint64_t *off, uint64_t *len, int64_t *at, bool *dense)
{
    ptrdiff_t lb, extent, true_lb, true_extent;
    size_t dsize;
    uint64_t packed = 0;

    ompi_datatype_type_size(dtype, &dsize);
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
    *dense = ompi_datatype_is_contiguous_memory_layout(dtype, 2);
    for (int p = 0; p < n; ++p) {
        int k = (NULL != counts) ? counts[p] : count;
        int64_t disp = single ? 0 : (NULL != counts) ? displs[p] : (int64_t) p * count;
        len[p] = (0 < k) ? (uint64_t) dsize * (uint64_t) k : 0;
        off[p] = single ? 0 : packed;
        at[p] = disp * extent + true_lb;
        packed += single ? 0 : len[p];
    }
    if (NULL == counts) {
        OBJ_RETAIN(dtype);
        *view = dtype;
        *vcount = single ? count : n * count;
        return OMPI_SUCCESS;
    }
    *vcount = 1;
    if (OMPI_SUCCESS != ompi_datatype_create_indexed(n, counts, displs, dtype, view)
        || OMPI_SUCCESS != ompi_datatype_commit(view)) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    return OMPI_SUCCESS;
}

/* The counts of an exchange or reduce-scatter c (elements of its receive side): before this
 * rank's piece, in it, and in all; a reduce is the reduce-scatter whose whole input is the
 * root's piece, the others' piece empty. */
static void xcall_counts(const coll_gpu_staged_call_t *c, int n, int me, size_t *before,
                         size_t *mine, size_t *total)
{
    *before = *mine = *total = 0;
    if (COLL_GPU_SC_REDUCE == c->coll) {
        *total = (size_t) c->rcount;
        *mine = (me == c->root) ? *total : 0;
        return;
    }
    for (int p = 0; p < n; ++p) {
        size_t k = (size_t) (NULL != c->rcounts ? c->rcounts[p] : c->rcount);
        *before += (p < me) ? k : 0;
        *mine = (p == me) ? k : *mine;
        *total += k;
    }
}

static bool xcall_is_rs(const coll_gpu_staged_call_t *c)
{
    return COLL_GPU_SC_REDUCE == c->coll || COLL_GPU_SC_REDUCE_SCATTER_BLOCK == c->coll
           || COLL_GPU_SC_REDUCE_SCATTER == c->coll;
}

/* r's layout of c, made once (the same at every start of a persistent request): the views of
 * its sides, what it offers each peer and expects from it, and for a reduce-scatter (rs:
 * nelems kernel elements of dt in all) this rank's piece.  A layout that cannot be made is
 * reported and kept in r->xrc: the rank then takes part without data. */
static void xcall_layout(coll_gpu_async_t *r, const coll_gpu_staged_call_t *c, dev_dtype_t dt,
                         dev_op_t dop, size_t nelems)
{
    int n = r->team->size, me = r->team->rank, rc = OMPI_SUCCESS;
    bool gather = (COLL_GPU_SC_ALLGATHER == c->coll || COLL_GPU_SC_ALLGATHERV == c->coll);
    bool in_place = (MPI_IN_PLACE == c->sbuf);
    size_t before, mine, total, dsize;

    xcall_counts(c, n, me, &before, &mine, &total);
    ompi_datatype_type_size(c->rdtype, &dsize);
    r->first_alg = ALG_XSTEP;
    r->mpi_op = c->op;
    r->user_sbuf = c->sbuf;
    r->user_rbuf = c->rbuf;
    r->xreduce = xcall_is_rs(c);
    if (r->xreduce) {
        /* the input: total elements (lent), the piece: this rank's count after before */
        size_t per = nelems / total;
        OBJ_RETAIN(c->rdtype); /* one reference for each of the two fields */
        OBJ_RETAIN(c->rdtype);
        r->dt = dt;
        r->op = dop;
        r->xsdtype = r->xrdtype = c->rdtype;
        r->xscount = (int) total;
        r->xrcount = (int) mine;
        r->xpiece_off = before * per * dev_dtype_size(dt);
        r->xpiece_count = mine * per;
        r->xpiece = mine * dsize;
        return;
    }
    rc = xcall_view(c->rdtype, c->rcount, c->rcounts, c->rdispls, n, false, &r->xrdtype,
                    &r->xrcount, r->xroff, r->xrlen, r->xrat, &r->xrdense);
    if (OMPI_SUCCESS == rc && in_place && gather) {
        /* its own block of the receive side, to every rank */
        r->xlend_recv = r->xsingle = true;
        r->xslen[0] = r->xrlen[me];
    } else if (OMPI_SUCCESS == rc && in_place) {
        /* block q of a copy of the receive side (its packed layout) to rank q */
        r->xcopy_send = true;
        r->xsbytes = 0;
        for (int q = 0; q < n; ++q) {
            r->xsoff[q] = r->xroff[q];
            r->xslen[q] = r->xrlen[q];
            r->xsbytes += r->xrlen[q];
        }
    } else if (OMPI_SUCCESS == rc) {
        r->xsingle = gather;
        rc = xcall_view(c->sdtype, c->scount, gather ? NULL : c->scounts, c->sdispls, n, gather,
                        &r->xsdtype, &r->xscount, r->xsoff, r->xslen, r->xsat, &r->xsdense);
    }
    r->xrc = rc;
    if (OMPI_SUCCESS != rc) {
        /* no layout: this rank takes part without data at every start (its peers wait) */
        mca_coll_gpu_report_failure(c->what, c->comm, "cannot describe the v layout (%d)", rc);
    }
}

bool mca_coll_gpu_xcall_host(const coll_gpu_staged_call_t *c)
{
    int n = ompi_comm_size(c->comm);
    bool rs = xcall_is_rs(c);
    bool gather = (COLL_GPU_SC_ALLGATHER == c->coll || COLL_GPU_SC_ALLGATHERV == c->coll);
    size_t before, mine, total;
    coll_gpu_layout_t recv, send;

    xcall_counts(c, n, ompi_comm_rank(c->comm), &before, &mine, &total);
    recv = (NULL != c->rcounts && !rs) ? COLL_GPU_LAYOUT_V(c->rdtype, n, c->rcounts, c->rdispls)
                                       : COLL_GPU_LAYOUT(c->rdtype, rs ? mine : total);
    if (!mca_coll_gpu_is_host(mca_coll_gpu_layout_kind(c->rbuf, recv))) {
        return false;
    }
    if (MPI_IN_PLACE == c->sbuf) {
        return true;
    }
    send = (NULL != c->scounts && !gather && !rs)
               ? COLL_GPU_LAYOUT_V(c->sdtype, n, c->scounts, c->sdispls)
               : COLL_GPU_LAYOUT(c->sdtype, rs ? total : (size_t) c->scount * (gather ? 1 : n));
    return mca_coll_gpu_is_host(mca_coll_gpu_layout_kind(c->sbuf, send));
}

int mca_coll_gpu_async_xcall(const coll_gpu_staged_call_t *c, bool *taken)
{
    mca_coll_gpu_module_t *m = c->gpu;
    struct ompi_communicator_t *comm = c->comm;
    bool reduce = (COLL_GPU_SC_REDUCE == c->coll), rs = xcall_is_rs(c);
    bool vrecv = (COLL_GPU_SC_ALLGATHERV == c->coll || COLL_GPU_SC_ALLTOALLV == c->coll);
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    coll_gpu_team_t *t = m->team;
    dev_dtype_t dt = DEV_T_UINT8;
    dev_op_t dop = DEV_OP_SUM;
    size_t before, mine, rtotal, nelems = 0, dsize;
    coll_gpu_async_t *r;

    *taken = false;
    /* What decides is the same on every rank: the kind history (mca_coll_gpu_nb_team_path), a
     * team that a blocking call found ready (then it is on every rank; a setup a nonblocking
     * call began may have ended on one rank and not on another), the communicator, the
     * parameters, and the call's signature, op and counts. */
    if (m->inter || 2 > n || NULL == t || !t->settled || COLL_GPU_TEAM_READY != t->state
        || t->size != n
        || mca_coll_gpu_spans_nodes(m, comm)) {
        return OMPI_SUCCESS;
    }
    xcall_counts(c, n, me, &before, &mine, &rtotal);
    if (reduce && (0 > c->root || n <= c->root)) {
        return OMPI_SUCCESS; /* the component below says what is wrong */
    }
    if (rs) {
        if ((size_t) INT_MAX < rtotal
            || TOPO_AR_AUTO != mca_coll_gpu_component.allreduce_algorithm
            || NULL != mca_coll_gpu_map_reduction(c->rdtype, rtotal, c->op, &dt, &dop, &nelems)
            || 0 == nelems || 0 != nelems % rtotal) {
            return OMPI_SUCCESS;
        }
    } else if (0 != mca_coll_gpu_component.exchange_algorithm
               || (!vrecv && (size_t) INT_MAX < rtotal)) {
        return OMPI_SUCCESS; /* forced staging */
    }
    if (!mca_coll_gpu_nb_team_path(m, !mca_coll_gpu_xcall_host(c),
                                   COLL_GPU_PERSISTENT == c->mode)) {
        return OMPI_SUCCESS;
    }
    if (NULL == (r = async_new(t, m, comm, c->what, COLL_GPU_PERSISTENT == c->mode, taken))) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    ompi_datatype_type_size(c->rdtype, &dsize);
    mca_coll_gpu_log_call(c->what, comm, dsize * rtotal, c->rdtype, c->op,
                          reduce ? "a reduce on the node team, the root reading every rank's "
                                   "input"
                          : rs     ? "a reduce-scatter on the node team, each rank reducing its own"
                                   : "exchange on the node team");
    xcall_layout(r, c, dt, dop, nelems);
    async_post(r, c->request);
    return OMPI_SUCCESS;
}

int mca_coll_gpu_team_xcall(coll_gpu_team_t *t, const coll_gpu_staged_call_t *c)
{
    dev_dtype_t dt = DEV_T_UINT8;
    dev_op_t dop = DEV_OP_SUM;
    size_t before, mine, total, nelems = 0;
    coll_gpu_async_t r;

    if (xcall_is_rs(c)) { /* the caller chose the step: the kernels take the type and op */
        xcall_counts(c, t->size, t->rank, &before, &mine, &total);
        (void) mca_coll_gpu_map_reduction(c->rdtype, total, c->op, &dt, &dop, &nelems);
    }
    async_blocking(&r, t, c->gpu, c->comm, c->what);
    xcall_layout(&r, c, dt, dop, nelems);
    xcall_begin(&r);
    return async_run(&r);
}

int mca_coll_gpu_async_bcast(mca_coll_gpu_module_t *m, void *buf, int count,
                             struct ompi_datatype_t *dtype, int root,
                             struct ompi_communicator_t *comm, bool persistent,
                             ompi_request_t **request, bool *taken)
{
    const char *name = persistent ? "bcast_init" : "ibcast";
    size_t bytes = mca_coll_gpu_call_bytes(dtype, (size_t) count);
    coll_gpu_async_t *r;
    coll_gpu_team_t *t;
    topo_plan_t plan;
    async_alg_t alg = ALG_BC_AGREE;
    int rc;

    *taken = false;
    /* the caller asked mca_coll_gpu_nb_team_path; intercommunicators (whose idle ranks pass
     * MPI_PROC_NULL) are staged */
    if (m->inter) {
        return OMPI_SUCCESS;
    }
    t = select_nb(m, comm, TOPO_COLL_BCAST, bytes, NULL, false, DEV_T_UINT8, &plan, &alg, &rc);
    if (NULL == t) {
        return rc;
    }
    if (NULL == (r = async_new(t, m, comm, name, persistent, taken))) {
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    bcast_call(r, bytes, root);
    async_take_plan(r, alg, &plan, bytes, dtype);
    async_issue(r, NULL, buf, count, dtype, request);
    return OMPI_SUCCESS;
}
