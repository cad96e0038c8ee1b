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
 * one-shot allreduce (small):        two-shot allreduce (large, zero-copy):
 *   copy sbuf -> my scratch[seq&1]     export sbuf, rbuf handles
 *   arrive(seq)                        arrive(seq)
 *   wait arrive(all) >= seq            wait arrive(all) >= seq; map peers' sbuf, rbuf
 *   rbuf = reduce(scratch[p][seq&1]    my chunk c: v = reduce_p sbuf[p][c];
 *          for p = 0..n-1)                          rbuf[q][c] = v for every q
 *                                      done(seq); wait done(all) >= seq
 * The one-shot scratch is double-buffered: a peer can be at most one call ahead (it cannot
 * finish call seq+1 before we arrive at it), so slot seq&1 is free again at seq+2.  Every rank
 * reduces in rank order, so floating-point results are identical on all ranks.
 *
 * push bcast: every non-root exports its buffer and arrives; the root copies its data into each
 * peer's buffer (copy engines), then done(seq); non-roots wait for the root's done.
 */
#include "ompi_config.h"

#include "coll_gpu.h"

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

static int allreduce_oneshot(coll_gpu_team_t *t, const void *sbuf, void *rbuf, size_t count,
                             dev_dtype_t dt, dev_op_t op, size_t bytes,
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
    if (!arrived) {
        mca_coll_gpu_team_arrive(t, seq);
    }
    /* peers wait for our done even when we failed: never leave them hanging */
    mca_coll_gpu_team_done(t, seq);
    for (int p = 0; p < t->size; ++p) {
        mca_coll_gpu_team_wait_done(t, p, seq);
    }
    return mca_coll_gpu_team_any_failed(t, seq) ? OMPI_ERROR : rc;
}

int mca_coll_gpu_nvl_allreduce(coll_gpu_team_t *t, const topo_plan_t *plan, const void *sbuf,
                               void *rbuf, size_t count, dev_dtype_t dt, dev_op_t op,
                               struct ompi_communicator_t *comm)
{
    size_t esize = dev_dtype_size(dt);
    const void *src = (MPI_IN_PLACE == sbuf) ? rbuf : sbuf;
    dev_launch_t launch = {plan->nblocks, plan->nthreads};

    if (TOPO_AR_ONESHOT == plan->alg) {
        return allreduce_oneshot(t, src, rbuf, count, dt, op, count * esize, &launch, comm);
    }
    return allreduce_twoshot(t, src, rbuf, count, dt, op, esize, &launch, comm);
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
    mca_coll_gpu_team_done(t, seq);
    return rc;
}

int mca_coll_gpu_nvl_bcast(coll_gpu_team_t *t, void *buf, size_t bytes, int root,
                           struct ompi_communicator_t *comm)
{
    return (t->rank == root) ? bcast_root(t, buf, bytes, comm) : bcast_peer(t, buf, root, comm);
}
