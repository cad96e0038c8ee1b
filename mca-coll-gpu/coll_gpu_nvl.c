/*
 * coll_gpu_nvl.c - the intra-node fast path: MPI_Allreduce and MPI_Bcast on device buffers by
 * direct peer access over NVLink (or PCIe P2P), through the node team (coll_gpu_team.c).
 *
 * Every algorithm is written once against the device layer; the cuda backend runs its kernels
 * on the GPU, the emulated backend the plain-C references.  Synchronisation is through the
 * team's control block in host shared memory: each rank publishes `arrive = seq` once its
 * inputs (and exported buffer handles) are ready, and `done = seq` once it no longer touches
 * peers' memory for that call.  seq counts the calls that took the team, the same on every
 * rank.  Data is final in the receive buffer when a call returns.
 *
 one-shot allreduce (small):        two-shot allreduce (large, zero-copy):
 *   export sbuf handle                 export sbuf, rbuf handles
 *   arrive(seq)                        arrive(seq)
 *   wait arrive(all) >= seq; map       wait arrive(all) >= seq; map peers' sbuf, rbuf
 *   rbuf = reduce(sbuf[p]              my chunk c: v = reduce_p sbuf[p][c];
 *          for p = 0..n-1)                          rbuf[q][c] = v for every q
 *   done(seq); wait done(all) >= seq   done(seq); wait done(all) >= seq
 * One-shot in place cannot read peers' buffers (they are being overwritten with the result):
 * it first copies its input into its scratch[seq&1] and peers read that; it ends at its own
 * done without waiting for the others.  The scratch is double-buffered: a peer can be at most
 * one call ahead (it cannot finish call seq+1 before we arrive at it), so slot seq&1 is free
 * again at seq+2.  Every rank reduces in rank order, so floating-point results are identical
 * on all ranks.
 *
 * push bcast: every non-root exports its buffer and arrives; the root copies its data into each
 * peer's buffer (copy engines), then done(seq); non-roots wait for the root's done.
 *
 * ring allreduce (large, peer access between ring neighbours only, zero-copy): the team's ring
 * (coll_gpu_team.c: the node model's, the same on every rank) at positions 0..n-1; the count
 * is cut into n chunks (uneven ok); position p only ever reads its left neighbour's rbuf.
 *   step 0         rbuf = sbuf (unless in place); export rbuf; step(seq, 0)
 *   step k=1..n-1  (reduce-scatter) c = (p-k) mod n:  rbuf[c] = rbuf[c] op left.rbuf[c]
 *   step k=n..2n-2 (all-gather)     c = (p-k) mod n:  rbuf[c] = left.rbuf[c]
 *   done(seq); wait done(all) >= seq
 * Before step k both neighbours have completed step k-1 (lockstep), and neither can pass step
 * k before we complete it.  So at step k position p reads left's chunk p-k, which left
 * finalised at its step k-1, while left (at step k) writes its chunk p-1-k; and p writes its
 * chunk p-k while right (at step k) reads p's chunk p+1-k, finalised at k-1.  Within each
 * buffer the chunk read and the chunk written differ by one mod n, for any n >= 2 and across
 * the reduce-scatter -> all-gather turn too (n = 2: left == right, chunks 0 and 1 alternate).
 * After step n-1 position p holds the full result of chunk p+1; each chunk's result is computed
 * once and then only copied, so every rank ends bitwise identical.
 *
 *              p=0        p=1        p=2          (n = 3, chunk owned after reduce-scatter:
 *   k=1 RS     c2 += L    c0 += L    c1 += L       p=0: c1, p=1: c2, p=2: c0)
 *   k=2 RS     c1 += L    c2 += L    c0 += L
 *   k=3 AG     c0 = L     c1 = L     c2 = L
 *   k=4 AG     c2 = L     c0 = L     c1 = L
 *
 chain and tree bcast (large, pipelined from the root): the message is cut into chunks (the
 * plan's chunk_bytes, else 2 MiB); position i = ring position - root's, mod n; i's parent is
 * i-1 in the chain, (i-1)/2 in the (binary) tree.
 *   root:     export buf; arrive(seq); step(seq, nchunks)
 *   i > 0:    export buf (if it has a child); arrive(seq); wait arrive(parent); map its buf
 *             for chunk j: once parent's step > j, copy chunk j parent -> mine, record an event;
 *             as the events complete, step(seq, chunks complete); up to COLL_GPU_CHAIN_DEPTH
 *             copies in flight
 *   all:      done(seq); wait done(all) >= seq
 *
 *   time ->    t0     t1     t2     t3
 *   pos 1      c0     c1     c2     .        (pos i copies chunk j at about t(i-1+j))
 *   pos 2      .      c0     c1     c2
 *
 * Ring, chain and tree end with every rank's done, as two-shot does: a rank's buffers are free when
 * it returns (no peer reads them any more), a failure anywhere fails the call on every rank,
 * and no rank can be more than one call ahead of another (one-shot's double buffer needs it).
 * A rank that fails jumps its step counter past the call (mca_coll_gpu_team_fail), so its
 * neighbours wake, see the flag and fail in turn: nobody waits forever.
 */
#include "ompi_config.h"

#include <inttypes.h>

#include "coll_gpu.h"

#define NVL_CHAIN_DEFAULT_CHUNK ((size_t) 2 << 20)
/* chunks a chain bcast may have: the step counter holds them below COLL_GPU_STEP_FAILED */
#define NVL_CHAIN_MAX_CHUNKS (COLL_GPU_STEP_FAILED - 1)

/* Checked device call: on failure report it, mark this rank failed for the call (its peers
 * see it and fail too, so that every rank returns an error rather than a wrong answer) and
 * leave through the cleanup, which still gives the signals peers wait for. */
#define NVL_CHECK(call, what)                                                   \
    do {                                                                        \
        int nvl_rc_ = (call);                                                   \
        if (DEV_OK != nvl_rc_) {                                                \
            mca_coll_gpu_report_failure((what), comm, "%s: %s", #call,          \
                                        dev_error_string());                    \
            mca_coll_gpu_team_fail(t, seq);                                     \
            rc = OMPI_ERROR;                                                    \
            goto out;                                                           \
        }                                                                       \
    } while (0)

/* The end of a call whose buffers peers may still be using: arrive if a failure came first
 * (peers wait for it), let our own copies and kernels drain after a failure (nothing of ours
 * may touch peer memory once we are done), give our done, wait for everybody's, and fail the
 * call on every rank when any rank failed. */
static int nvl_finish_all(coll_gpu_team_t *t, uint64_t seq, bool arrived, int rc)
{
    if (!arrived) {
        mca_coll_gpu_team_arrive(t, seq);
    }
    if (OMPI_SUCCESS != rc) {
        (void) dev_stream_sync(t->stream);
    }
    mca_coll_gpu_team_done(t, seq);
    for (int p = 0; p < t->size; ++p) {
        mca_coll_gpu_team_wait_done(t, p, seq);
    }
    if (OMPI_SUCCESS != rc) {
        return rc; /* this rank's own failure says more than "a peer failed" */
    }
    return mca_coll_gpu_team_any_failed(t, seq) ? OMPI_ERROR : rc;
}

/* One-shot through the scratch: for MPI_IN_PLACE, where a peer's input is also its output and
 * may be overwritten while we still read it. */
static int allreduce_oneshot_scratch(coll_gpu_team_t *t, const void *sbuf, void *rbuf,
                                     size_t count, dev_dtype_t dt, dev_op_t op, size_t bytes,
                                     const dev_launch_t *launch, struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    size_t slot_off = (seq & 1) * t->slot_bytes;
    const void *srcs[COLL_GPU_TEAM_MAX];
    void *dst = rbuf;
    int rc = OMPI_SUCCESS;

    NVL_CHECK(dev_memcpy_async((char *) t->scratch + slot_off, sbuf, bytes, t->stream),
              "allreduce");
    NVL_CHECK(dev_stream_sync(t->stream), "allreduce");
out:
    mca_coll_gpu_team_arrive(t, seq);
    for (int p = 0; p < t->size; ++p) {
        mca_coll_gpu_team_wait_arrive(t, p, seq);
        srcs[p] = (const char *) t->peer_scratch[p] + slot_off;
    }
    if (mca_coll_gpu_team_any_failed(t, seq)) {
        return OMPI_ERROR;
    }
    if (DEV_OK != dev_reduce_multi(&dst, 1, srcs, t->size, count, dt, op, launch, t->stream)
        || DEV_OK != dev_stream_sync(t->stream)) {
        mca_coll_gpu_report_failure("allreduce", comm, "one-shot reduction: %s",
                                    dev_error_string());
        rc = OMPI_ERROR;
    }
    mca_coll_gpu_team_done(t, seq);
    return rc;
}

/* One-shot zero-copy: every rank reduces straight from its peers' send buffers (mapped once
 * through the registration cache), so the call costs one kernel and one synchronisation, not
 * a copy into the scratch plus a kernel.  Peers read our send buffer until they are done, so
 * the call ends with every rank's done. */
static int allreduce_oneshot_direct(coll_gpu_team_t *t, const void *sbuf, void *rbuf,
                                    size_t count, dev_dtype_t dt, dev_op_t op,
                                    const dev_launch_t *launch, struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    const void *srcs[COLL_GPU_TEAM_MAX];
    void *dst = rbuf;
    int rc = OMPI_SUCCESS;
    bool arrived = false;

    NVL_CHECK(mca_coll_gpu_team_export(t, sbuf, &t->ctl->rank[t->rank].sbuf), "allreduce");
    mca_coll_gpu_team_arrive(t, seq);
    arrived = true;
    for (int p = 0; p < t->size; ++p) {
        void *s = (void *) sbuf;
        mca_coll_gpu_team_wait_arrive(t, p, seq);
        if (mca_coll_gpu_team_any_failed(t, seq)) {
            rc = OMPI_ERROR;
            goto out;
        }
        if (p != t->rank) {
            NVL_CHECK(mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].sbuf, &s), "allreduce");
        }
        srcs[p] = s;
    }
    NVL_CHECK(dev_reduce_multi(&dst, 1, srcs, t->size, count, dt, op, launch, t->stream),
              "allreduce");
    NVL_CHECK(dev_stream_sync(t->stream), "allreduce");
out:
    return nvl_finish_all(t, seq, arrived, rc);
}

/* The elements [*lo, *hi) rank r owns in a two-shot of count elements over n ranks. */
static void chunk_of(size_t count, int n, int r, size_t *lo, size_t *hi)
{
    size_t base = count / (size_t) n, extra = count % (size_t) n;
    *lo = (size_t) r * base + ((size_t) r < extra ? (size_t) r : extra);
    *hi = *lo + base + ((size_t) r < extra ? 1 : 0);
}

static int allreduce_twoshot(coll_gpu_team_t *t, const void *sbuf, void *rbuf, size_t count,
                             dev_dtype_t dt, dev_op_t op, size_t esize,
                             const dev_launch_t *launch, struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    coll_gpu_ctl_rank_t *me = &t->ctl->rank[t->rank];
    const void *srcs[COLL_GPU_TEAM_MAX];
    void *dsts[COLL_GPU_TEAM_MAX];
    size_t lo, hi;
    int rc = OMPI_SUCCESS;
    bool arrived = false;

    NVL_CHECK(mca_coll_gpu_team_export(t, sbuf, &me->sbuf), "allreduce");
    NVL_CHECK(mca_coll_gpu_team_export(t, rbuf, &me->rbuf), "allreduce");
    mca_coll_gpu_team_arrive(t, seq);
    arrived = true;
    chunk_of(count, t->size, t->rank, &lo, &hi);
    for (int p = 0; p < t->size; ++p) {
        void *s, *r;
        mca_coll_gpu_team_wait_arrive(t, p, seq);
        if (mca_coll_gpu_team_any_failed(t, seq)) {
            rc = OMPI_ERROR;
            goto out;
        }
        if (p == t->rank) {
            s = (void *) sbuf;
            r = rbuf;
        } else {
            NVL_CHECK(mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].sbuf, &s), "allreduce");
            NVL_CHECK(mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].rbuf, &r), "allreduce");
        }
        srcs[p] = (const char *) s + lo * esize;
        dsts[p] = (char *) r + lo * esize;
    }
    if (hi > lo) {
        NVL_CHECK(dev_reduce_multi(dsts, t->size, srcs, t->size, hi - lo, dt, op, launch,
                                   t->stream),
                  "allreduce");
        NVL_CHECK(dev_stream_sync(t->stream), "allreduce");
    }
out:
    return nvl_finish_all(t, seq, arrived, rc);
}

/* Ring allreduce (schedule at the top of the file).  sbuf == rbuf in place. */
static int allreduce_ring(coll_gpu_team_t *t, const void *sbuf, void *rbuf, size_t count,
                          dev_dtype_t dt, dev_op_t op, size_t esize, const dev_launch_t *launch,
                          struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    int n = t->size, pos = t->ring_pos[t->rank];
    int left = t->ring_rank[(pos + n - 1) % n], right = t->ring_rank[(pos + 1) % n];
    void *lbuf = NULL;
    int rc = OMPI_SUCCESS;
    bool arrived = false;

    if (sbuf != rbuf) {
        NVL_CHECK(dev_memcpy_async(rbuf, sbuf, count * esize, t->stream), "allreduce");
        NVL_CHECK(dev_stream_sync(t->stream), "allreduce");
    }
    NVL_CHECK(mca_coll_gpu_team_export(t, rbuf, &t->ctl->rank[t->rank].rbuf), "allreduce");
    mca_coll_gpu_team_arrive(t, seq);
    mca_coll_gpu_team_step(t, seq, 0);
    arrived = true;

    for (uint64_t k = 1; k <= (uint64_t) (2 * n - 2); ++k) {
        size_t lo, hi;
        int c = (int) (((uint64_t) pos + (uint64_t) n * 2 - k) % (uint64_t) n);
        char *mine_c, *left_c;

        mca_coll_gpu_team_wait_step(t, left, seq, k - 1);
        mca_coll_gpu_team_wait_step(t, right, seq, k - 1);
        if (mca_coll_gpu_team_failed(t, left, seq) || mca_coll_gpu_team_failed(t, right, seq)) {
            mca_coll_gpu_team_fail(t, seq);
            rc = OMPI_ERROR;
            goto out;
        }
        if (NULL == lbuf) {
            NVL_CHECK(mca_coll_gpu_team_import(t, left, &t->ctl->rank[left].rbuf, &lbuf),
                      "allreduce");
        }
        chunk_of(count, n, c, &lo, &hi);
        mine_c = (char *) rbuf + lo * esize;
        left_c = (char *) lbuf + lo * esize;
        if (hi > lo && k < (uint64_t) n) {
            void *dst = mine_c;
            const void *srcs[2] = {mine_c, left_c};
            NVL_CHECK(dev_reduce_multi(&dst, 1, srcs, 2, hi - lo, dt, op, launch, t->stream),
                      "allreduce");
        } else if (hi > lo) {
            NVL_CHECK(dev_memcpy_async(mine_c, left_c, (hi - lo) * esize, t->stream),
                      "allreduce");
        }
        if (hi > lo) {
            NVL_CHECK(dev_stream_sync(t->stream), "allreduce");
        }
        mca_coll_gpu_team_step(t, seq, k);
    }
out:
    return nvl_finish_all(t, seq, arrived, rc);
}

/* A rank that failed before a call (it could not prepare its buffers) still takes part, without
 * data: it marks itself failed, arrives (its step counter jumps past the call, releasing ring
 * neighbours), and ends as the algorithm's ranks end, so that every peer sees the failure and
 * returns an error instead of waiting.  One-shot in place ends at its own done; the others wait
 * for everybody's. */
static int nvl_sit_out(coll_gpu_team_t *t, bool own_done_only, int rc)
{
    uint64_t seq = ++t->seq;

    mca_coll_gpu_team_fail(t, seq);
    if (own_done_only) {
        mca_coll_gpu_team_arrive(t, seq);
        mca_coll_gpu_team_done(t, seq);
        return rc;
    }
    return nvl_finish_all(t, seq, false, rc);
}

int mca_coll_gpu_nvl_allreduce(coll_gpu_team_t *t, const topo_plan_t *plan, const void *sbuf,
                               void *rbuf, size_t count, dev_dtype_t dt, dev_op_t op,
                               struct ompi_communicator_t *comm, int local_rc)
{
    size_t esize = dev_dtype_size(dt);
    const void *src = (MPI_IN_PLACE == sbuf) ? rbuf : sbuf;
    dev_launch_t launch = {plan->nblocks, plan->nthreads};

    if (OMPI_SUCCESS != local_rc) {
        return nvl_sit_out(t, TOPO_AR_ONESHOT == plan->alg && MPI_IN_PLACE == sbuf, local_rc);
    }

    if (TOPO_AR_ONESHOT == plan->alg && MPI_IN_PLACE == sbuf) {
        return allreduce_oneshot_scratch(t, src, rbuf, count, dt, op, count * esize, &launch,
                                         comm);
    }
    if (TOPO_AR_ONESHOT == plan->alg) {
        return allreduce_oneshot_direct(t, src, rbuf, count, dt, op, &launch, comm);
    }
    if (TOPO_AR_RING == plan->alg) {
        return allreduce_ring(t, src, rbuf, count, dt, op, esize, &launch, comm);
    }
    return allreduce_twoshot(t, src, rbuf, count, dt, op, esize, &launch, comm);
}

/* The end of a push bcast that failed on this rank: the root waits until every peer has
 * entered the call (so that none is still in the call before, whose double-buffered scratch
 * and records the root's next call may reuse), a peer waits for the root's done. */
static void bcast_wait_push(coll_gpu_team_t *t, uint64_t seq, int root)
{
    if (t->rank != root) {
        mca_coll_gpu_team_wait_done(t, root, seq);
        return;
    }
    for (int p = 0; p < t->size; ++p) {
        mca_coll_gpu_team_wait_arrive(t, p, seq);
    }
}

/* A non-root rank of a push bcast: publish where the data must go, wait for the root. */
static int bcast_peer(coll_gpu_team_t *t, void *buf, int root, struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    int rc = OMPI_SUCCESS;

    NVL_CHECK(mca_coll_gpu_team_export(t, buf, &t->ctl->rank[t->rank].rbuf), "bcast");
out:
    mca_coll_gpu_team_arrive(t, seq);
    mca_coll_gpu_team_wait_done(t, root, seq);
    mca_coll_gpu_team_done(t, seq);
    return mca_coll_gpu_team_failed(t, root, seq) ? OMPI_ERROR : rc;
}

/* The root of a push bcast: copy the data into every peer's buffer with the copy engines.
 * A peer that could not publish its buffer fails the call on every rank (the peers read the
 * root's failure flag after its done). */
static int bcast_root(coll_gpu_team_t *t, void *buf, size_t bytes,
                      struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    int rc = OMPI_SUCCESS;

    mca_coll_gpu_team_arrive(t, seq);
    for (int p = 0; p < t->size; ++p) {
        void *dst;
        if (p == t->rank) {
            continue;
        }
        mca_coll_gpu_team_wait_arrive(t, p, seq);
        if (mca_coll_gpu_team_failed(t, p, seq)) {
            mca_coll_gpu_team_fail(t, seq);
            rc = OMPI_ERROR;
            goto out;
        }
        NVL_CHECK(mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].rbuf, &dst), "bcast");
        NVL_CHECK(dev_memcpy_async(dst, buf, bytes, t->stream), "bcast");
    }
    NVL_CHECK(dev_stream_sync(t->stream), "bcast");
out:
    if (OMPI_SUCCESS != rc) {
        (void) dev_stream_sync(t->stream); /* copies already issued to peers end before done */
        bcast_wait_push(t, seq, t->rank);
    }
    mca_coll_gpu_team_done(t, seq);
    return rc;
}

/* Pipelined bcast down a chain or a binary tree (schedule at the top of the file).  Positions
 * count along the ring from the root (root 0): in the chain position i's parent is i-1, in the
 * tree (i-1)/2, so every rank derives the same shape from the team's ring.  Every rank with a
 * child lends its buffer; every rank but the root copies chunks from its parent as the parent
 * publishes them, several in flight, and publishes its own as their copies complete. */
static int bcast_pipelined(coll_gpu_team_t *t, void *buf, size_t bytes, int root, size_t chunk,
                           bool tree, struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    int n = t->size, root_pos = t->ring_pos[root];
    int at = (t->ring_pos[t->rank] - root_pos + n) % n; /* position from the root: root 0 */
    int parent_at = tree ? (at - 1) / 2 : at - 1;
    bool has_child = tree ? (2 * at + 1 < n) : (at < n - 1);
    int parent = (0 == at) ? -1 : t->ring_rank[(parent_at + root_pos) % n];
    uint64_t nchunks, issued = 0, complete = 0;
    unsigned spins = 0;
    void *pbuf = NULL;
    int rc = OMPI_SUCCESS;
    bool arrived = false;

    if (0 == chunk) {
        chunk = NVL_CHAIN_DEFAULT_CHUNK;
    }
    if ((bytes + chunk - 1) / chunk > NVL_CHAIN_MAX_CHUNKS) {
        chunk = (bytes + NVL_CHAIN_MAX_CHUNKS - 1) / NVL_CHAIN_MAX_CHUNKS;
    }
    nchunks = (bytes + chunk - 1) / chunk;
    COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL,
                     "coll:gpu:bcast (cid %d): rank %d: %s position %d from root %d, parent %d, "
                     "%" PRIu64 " chunk(s) of %zu B",
                     coll_gpu_comm_cid(comm), t->rank, tree ? "tree" : "chain", at, root, parent,
                     nchunks, chunk);
    if (has_child) {
        NVL_CHECK(mca_coll_gpu_team_export(t, buf, &t->ctl->rank[t->rank].rbuf), "bcast");
    }
    mca_coll_gpu_team_arrive(t, seq);
    arrived = true;
    if (0 == at) {
        mca_coll_gpu_team_step(t, seq, nchunks); /* the root's data is all there */
        goto out;
    }
    mca_coll_gpu_team_step(t, seq, 0);
    mca_coll_gpu_team_wait_arrive(t, parent, seq);
    if (mca_coll_gpu_team_failed(t, parent, seq)) {
        mca_coll_gpu_team_fail(t, seq);
        rc = OMPI_ERROR;
        goto out;
    }
    NVL_CHECK(mca_coll_gpu_team_import(t, parent, &t->ctl->rank[parent].rbuf, &pbuf), "bcast");
    while (complete < nchunks) {
        bool moved = false;
        /* enqueue every chunk the parent has finished, up to the depth */
        while (issued < nchunks && issued - complete < COLL_GPU_CHAIN_DEPTH
               && mca_coll_gpu_team_step_reached(t, parent, seq, issued + 1)) {
            size_t off = (size_t) issued * chunk;
            size_t len = (bytes - off < chunk) ? bytes - off : chunk;
            if (mca_coll_gpu_team_failed(t, parent, seq)) {
                mca_coll_gpu_team_fail(t, seq);
                rc = OMPI_ERROR;
                goto out;
            }
            NVL_CHECK(dev_memcpy_async((char *) buf + off, (const char *) pbuf + off, len,
                                       t->stream),
                      "bcast");
            NVL_CHECK(dev_event_record(t->events[issued % COLL_GPU_CHAIN_DEPTH], t->stream),
                      "bcast");
            ++issued;
            moved = true;
        }
        /* publish the copies that completed, in order */
        while (complete < issued) {
            int q = dev_event_query(t->events[complete % COLL_GPU_CHAIN_DEPTH]);
            if (1 == q) {
                break;
            }
            NVL_CHECK(q, "bcast");
            ++complete;
            mca_coll_gpu_team_step(t, seq, complete);
            moved = true;
        }
        if (moved) {
            spins = 0;
        } else {
            mca_coll_gpu_team_pause(&spins);
        }
    }
out:
    return nvl_finish_all(t, seq, arrived, rc);
}

/* Did a peer bring another byte count than the root's to bcast seq?  (After the call: a peer
 * cannot publish for seq + 2 before the root arrives at seq + 1.) */
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

/*
 * A bcast through the team.  Before anything moves, every rank publishes its byte count and
 * plan (coll_gpu_call_t) and every non-root waits for the root's: the root's plan is the call's
 * (the byte count picked it, and the counts of an erroneous call differ), and a rank whose
 * count differs from the root's sits the call out with MPI_ERR_TRUNCATE, so that the root never
 * writes past its buffer, it never waits for chunks that will not come, and the root and the
 * others fail the call too (the root with MPI_ERR_TRUNCATE as well).
 *
 *   root:      publish {bytes, alg, chunk}(seq)     run alg
 *   non-root:  publish {bytes}(seq); wait root's    bytes equal: run the root's alg and chunk
 *                                                   bytes differ: fail(seq), take part empty
 * An empty call (the root's count and ours 0) ends at once, its seq consumed.
 */
int mca_coll_gpu_nvl_bcast(coll_gpu_team_t *t, const topo_plan_t *plan, void *buf, size_t bytes,
                           int root, struct ompi_communicator_t *comm, int local_rc)
{
    uint64_t seq = t->seq + 1;
    coll_gpu_call_t *mine = &t->ctl->rank[t->rank].call[seq & 1];
    topo_plan_t agreed = *plan;
    size_t root_bytes = bytes;
    int rc;

    mine->bytes = bytes;
    mine->alg = (int32_t) plan->alg;
    mine->chunk = plan->chunk_bytes;
    atomic_store_explicit(&mine->seq, seq, memory_order_release);
    if (t->rank != root) {
        const coll_gpu_call_t *at_root = &t->ctl->rank[root].call[seq & 1];
        unsigned spins = 0;
        while (seq != atomic_load_explicit(&at_root->seq, memory_order_acquire)) {
            mca_coll_gpu_team_pause(&spins);
        }
        root_bytes = at_root->bytes;
        agreed.alg = at_root->alg;
        agreed.chunk_bytes = at_root->chunk;
        if (root_bytes != bytes) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL,
                             "coll:gpu:bcast (cid %d): rank %d: %zu B here, %zu B at root %d: "
                             "truncation, no data moved",
                             coll_gpu_comm_cid(comm), t->rank, bytes, root_bytes, root);
            if (OMPI_SUCCESS == local_rc) {
                local_rc = MPI_ERR_TRUNCATE;
            }
        }
    }
    if (OMPI_SUCCESS != local_rc) {
        /* push: the others wait for the root's done; the root, for everybody's arrival */
        if (TOPO_BC_CHAIN != agreed.alg && TOPO_BC_TREE != agreed.alg) {
            seq = ++t->seq;
            mca_coll_gpu_team_fail(t, seq);
            mca_coll_gpu_team_arrive(t, seq);
            bcast_wait_push(t, seq, root);
            mca_coll_gpu_team_done(t, seq);
            return local_rc;
        }
        return nvl_sit_out(t, false, local_rc);
    }
    if (0 == bytes) {
        /* nothing to move; still no rank may finish a call before every rank entered it (the
         * one-shot scratch and these records are double-buffered on that) */
        seq = ++t->seq;
        mca_coll_gpu_team_arrive(t, seq);
        for (int p = 0; p < t->size; ++p) {
            mca_coll_gpu_team_wait_arrive(t, p, seq);
        }
        mca_coll_gpu_team_done(t, seq);
        return OMPI_SUCCESS;
    }
    if (TOPO_BC_CHAIN == agreed.alg || TOPO_BC_TREE == agreed.alg) {
        rc = bcast_pipelined(t, buf, bytes, root, agreed.chunk_bytes,
                             TOPO_BC_TREE == agreed.alg, comm);
    } else {
        rc = (t->rank == root) ? bcast_root(t, buf, bytes, comm)
                               : bcast_peer(t, buf, root, comm);
    }
    if (OMPI_SUCCESS != rc && t->rank == root && bcast_any_mismatch(t, seq, bytes)) {
        rc = MPI_ERR_TRUNCATE;
    }
    return rc;
}
