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
 *   export sbuf handle                 export sbuf, rbuf handles
 *   arrive(seq)                        arrive(seq)
 *   wait arrive(all) >= seq; map       wait arrive(all) >= seq; map peers' sbuf, rbuf
 *   rbuf = reduce(sbuf[p]              my chunk c: v = reduce_p sbuf[p][c];
 *          for p = 0..n-1)                          rbuf[q][c] = v for every q
 *   done(seq); wait done(all) >= seq   done(seq); wait done(all) >= seq
 * One-shot never runs in place (peers would read a buffer its owner is overwriting): an
 * in-place call takes two-shot, where each element is read and written by one rank only
 * (mca_coll_gpu_plan_for_call).  Every rank reduces in rank order, so floating-point results
 * are identical on all ranks.
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
 * fused allreduce (small; one kernel, allreduce_fused.cu, protocol in dev.h): no host step
 * between ranks at all.  Each rank's kernel pushes its data into every peer's scratch slot
 * (parity seq & 1), raises a flag there (seq), waits for the peers' flags in its own slot and
 * folds rank 0..n-1 into rbuf; its last block stores seq into a word of mapped host memory,
 * which the host spins on (cheaper than a stream synchronisation).  Larger messages go in
 * pieces of a slot's share, one sequence number each.  While it spins the host watches the
 * peers' failure flags: a peer that failed before launching would leave our kernel waiting,
 * so the host releases it by writing seq | DEV_FUSED_ABANDON into its flags (the call fails).
 *   host:    [seq = ++t->seq] launch ---------------------------- spin on done == seq
 *   kernel:           push to peers | fence, flag(seq) | wait flags | reduce | done = seq
 *   (<= 16 KiB, 2-4 ranks:  push words carrying seq | wait words, unpack | reduce | done)
 *
 * copy-engine two-shot allreduce (large): the transfers are copy-engine copies, which leave the
 * SMs to the reduce.  Rank r owns shard r (chunk_of) and walks it in pieces through a local
 * staging buffer of NVL_CE_DEPTH x (n-1) pieces, three streams deep:
 *   pull stream:  [wait reduced(k-D)] pull peers' piece k of sbuf -> stage[k % D]; copied(k)
 *   team stream:  [wait copied(k)] rbuf[k] = sbuf_0[k] op stage... (rank order); reduced(k)
 *   push stream:  [wait reduced(k)] push rbuf[k] into every peer's rbuf
 * so the reduce-scatter and the all-gather overlap piece by piece, with no step between ranks:
 * a rank writes into a peer's buffer only the peer's copy of its own shard, which no other rank
 * reads or writes in the call (in place too: that region of the peer's buffer is read only by
 * this rank's pulls of the same piece, which precede its push).  Every shard is computed once
 * and copied, so all ranks end bitwise identical.  done for all once the pushes have ended.
 *   time ->        k=0      k=1      k=2
 *   pull        p0       p1       p2
 *   reduce               r0       r1       r2
 *   push                          s0       s1       s2
 *
 * pull bcast: the root lends its buffer (export, arrive); every other rank pulls it with one
 * copy-engine copy and gives its done; the root returns once all are done.
 *
 * reduce-scatter (zero-copy): every rank lends its whole input and reduces its own piece from
 * every rank's input with one kernel, straight into its destination; each element is read once
 * by its owner only, so the call moves what a reduce-scatter must, no more.
 *   export sbuf; arrive(seq); wait arrive(all) >= seq; map every peer's sbuf
 *   dst = reduce_p sbuf_p[off, off + count)  (rank order: the result is the same on all)
 *   sync; done(seq); wait done(all) >= seq
 *
 * exchange (allgather, alltoall and their v forms): every rank lends its send bytes and says
 * which of them each peer takes; then every rank pulls its piece from every peer, with
 * copy-engine copies, starting at the next rank so that no one rank is read by all at once.
 *   all:      export src; offers[q] = (off, len); wants[p] = len; arrive(seq)
 *             wait arrive(all) >= seq; every offer of every rank == its receiver's want?
 *             for p = me+1, me+2, ... me:  map p's src; dst[p] <- src_p + off (copy, async;
 *               from 4 MiB on, the copies round-robin over three streams: exchange_streams)
 *             sync; done(seq); wait done(all) >= seq
 * A rank reads only what its peer lent and offered it, and writes only its own buffer.  Every
 * rank compares the same offers and wants, so an erroneous call (counts that differ) returns
 * MPI_ERR_TRUNCATE on every rank before a byte moves.
 *
 * Ring, chain and tree end with every rank's done, as two-shot does: a rank's buffers are free when
 * it returns (no peer reads them any more), a failure anywhere fails the call on every rank,
 * and no rank can be more than one call ahead of another (one-shot's double buffer needs it).
 * A rank that fails jumps its step counter past the call (mca_coll_gpu_team_fail), so its
 * neighbours wake, see the flag and fail in turn: nobody waits forever.
 */
#include "ompi_config.h"

#include <ctype.h>
#include <inttypes.h>
#include <string.h>

#include "coll_gpu.h"

#define NVL_CHAIN_DEFAULT_CHUNK ((size_t) 2 << 20)
/* copy-engine two-shot: pieces in flight, largest piece (the plan's chunk, or
 * coll_gpu_chunk_bytes) and staging budget */
#define NVL_CE_DEPTH 2
/* copy streams: pulls of peers' pieces, pushes of finished ones */
#define NVL_CE_STREAMS 2
#define NVL_CE_PULL 0
#define NVL_CE_PUSH 1
/* Each piece costs ~15 us of gaps between the three streams (2xH200 NV18, 2026-12-01: 512 MiB
 * took 2383 us in 4 MiB pieces, 1517 us in 32 MiB ones), and the pipeline wants two pieces at
 * least: pieces are half a shard, at least NVL_CE_PIECE_MIN, at most the plan's chunk.  Busbw
 * there, 2 ranks, by piece size: 64 MiB message 314 GB/s (16 MiB pieces) against 302 (32);
 * 128 MiB 345 (32) against 337 (16) and 308 (64); 256 MiB 357 (64) against 350 (32); 512 MiB
 * 358 (64), 352 (32), 340 (16). */
#define NVL_CE_PIECE_MIN ((size_t) 16 << 20)
#define NVL_CE_PIECE_DEFAULT ((size_t) 64 << 20)
#define NVL_CE_PIECE_MAX ((size_t) 64 << 20)
#define NVL_CE_STAGE_MAX ((size_t) 128 << 20)
/* fused allreduce: host spins between looks at the peers' failure flags / the stream; the
 * emulated kernel's calls of its abandon callback between looks at the clock (hang watch) */
#define NVL_FUSED_WATCH_SPINS 256
#define NVL_FUSED_QUERY_SPINS 65536
#define NVL_FUSED_CLOCK_EVERY 64
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

/* The opening of both two-shot allreduces: publish our send and receive buffers for call seq,
 * arrive, and map every rank's pair (ours as it is) into s[] and r[].  *arrived tells the
 * caller's nvl_finish_all whether it must still arrive.  A failure fails the call through the
 * team's flags (NVL_CHECK) or comes from a peer's. */
static int nvl_map_pairs(coll_gpu_team_t *t, uint64_t seq, const void *sbuf, void *rbuf,
                         size_t bytes, void **s, void **r, bool *arrived,
                         struct ompi_communicator_t *comm)
{
    coll_gpu_ctl_rank_t *me = &t->ctl->rank[t->rank];
    int rc = OMPI_SUCCESS;

    NVL_CHECK(mca_coll_gpu_team_export(t, sbuf, bytes, &me->sbuf), "allreduce");
    NVL_CHECK(mca_coll_gpu_team_export(t, rbuf, bytes, &me->rbuf), "allreduce");
    mca_coll_gpu_team_arrive(t, seq);
    *arrived = true;
    for (int p = 0; p < t->size; ++p) {
        mca_coll_gpu_team_wait_arrive(t, p, seq);
        if (mca_coll_gpu_team_any_failed(t, seq)) {
            rc = OMPI_ERROR;
            goto out;
        }
        if (p == t->rank) {
            s[p] = (void *) sbuf;
            r[p] = rbuf;
        } else {
            NVL_CHECK(mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].sbuf, bytes, &s[p]),
                      "allreduce");
            NVL_CHECK(mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].rbuf, bytes, &r[p]),
                      "allreduce");
        }
    }
out:
    return rc;
}


/* ---- the fast path's own state of a team ------------------------------------------------- */

/* Made piece by piece on first use by the algorithm that needs it; each rank makes its own,
 * and a rank that cannot fails the call through the team's flags like any other failure. */
typedef struct coll_gpu_nvl_state_t {
    uint64_t *done_host;                   /* fused: mapped word its kernel sets to seq */
    void *done_dev;                        /* the same word as kernels address it */
    dev_stream_t *copy[NVL_CE_STREAMS];    /* copy-engine two-shot: the pulls' streams */
    dev_event_t *copied[NVL_CE_DEPTH], *reduced[NVL_CE_DEPTH];
    void *stage;                           /* copy-engine two-shot: peers' pieces land here */
    size_t stage_bytes;
} coll_gpu_nvl_state_t;

void mca_coll_gpu_nvl_release(coll_gpu_team_t *t)
{
    coll_gpu_nvl_state_t *st = t->nvl;

    mca_coll_gpu_async_release(t); /* nonblocking calls end before what they use goes */
    if (NULL == st) {
        return;
    }
    if (NULL != t->stream) {
        (void) dev_stream_sync(t->stream); /* nothing of ours may still use what goes now */
    }
    for (int i = 0; i < NVL_CE_STREAMS; ++i) {
        if (NULL != st->copy[i]) {
            (void) dev_stream_sync(st->copy[i]);
            (void) dev_stream_destroy(st->copy[i]);
        }
    }
    for (int i = 0; i < NVL_CE_DEPTH; ++i) {
        if (NULL != st->copied[i]) {
            (void) dev_event_destroy(st->copied[i]);
        }
        if (NULL != st->reduced[i]) {
            (void) dev_event_destroy(st->reduced[i]);
        }
    }
    if (NULL != st->stage) {
        (void) dev_mem_free(st->stage);
    }
    if (NULL != st->done_host) {
        (void) dev_host_free(st->done_host);
    }
    free(st);
    t->nvl = NULL;
}

static int nvl_state(coll_gpu_team_t *t, coll_gpu_nvl_state_t **out)
{
    if (NULL == t->nvl) {
        t->nvl = calloc(1, sizeof(*t->nvl));
        if (NULL == t->nvl) {
            return DEV_ERR_NOMEM;
        }
    }
    *out = t->nvl;
    return DEV_OK;
}

/* The fused allreduce's mapped completion word. */
static int nvl_fused_state(coll_gpu_team_t *t, coll_gpu_nvl_state_t **out)
{
    int rc = nvl_state(t, out);
    if (DEV_OK == rc && NULL == (*out)->done_host) {
        void *host, *dev;
        rc = dev_host_alloc_mapped(&host, &dev, sizeof(uint64_t));
        if (DEV_OK == rc) {
            (*out)->done_host = host;
            (*out)->done_dev = dev;
            __atomic_store_n((*out)->done_host, 0, __ATOMIC_RELEASE);
        }
    }
    return rc;
}

/* The copy-engine two-shot's stream, events and a staging buffer of at least bytes. */
static int nvl_ce_state(coll_gpu_team_t *t, size_t bytes, coll_gpu_nvl_state_t **out)
{
    coll_gpu_nvl_state_t *st = NULL;
    int rc = nvl_state(t, &st);

    if (DEV_OK != rc) {
        return rc;
    }
    for (int i = 0; DEV_OK == rc && i < NVL_CE_STREAMS; ++i) {
        if (NULL == st->copy[i]) {
            rc = dev_stream_create(&st->copy[i]);
        }
    }
    for (int i = 0; DEV_OK == rc && i < NVL_CE_DEPTH; ++i) {
        if (NULL == st->copied[i]) {
            rc = dev_event_create(&st->copied[i]);
        }
        if (DEV_OK == rc && NULL == st->reduced[i]) {
            rc = dev_event_create(&st->reduced[i]);
        }
    }
    if (DEV_OK == rc && st->stage_bytes < bytes) {
        if (NULL != st->stage) {
            (void) dev_stream_sync(t->stream);
            for (int i = 0; i < NVL_CE_STREAMS; ++i) {
                (void) dev_stream_sync(st->copy[i]);
            }
            (void) dev_mem_free(st->stage);
            st->stage = NULL;
            st->stage_bytes = 0;
        }
        rc = dev_mem_alloc(&st->stage, bytes);
        st->stage_bytes = (DEV_OK == rc) ? bytes : 0;
    }
    *out = st;
    return rc;
}

/* One rank's share of a slot in the fused allreduce: the slot after its head, cut in n
 * 256-byte aligned areas (dev.h).  0 when a slot has no room (coll_gpu_oneshot_slot_bytes). */
size_t mca_coll_gpu_nvl_fused_cap(const coll_gpu_team_t *t)
{
    size_t head = COLL_GPU_SLOT_RESERVED(t->size);

    if (0 != t->slot_bytes % 256 || t->slot_bytes <= head + 256 * (size_t) t->size) {
        return 0;
    }
    return (t->slot_bytes - head) / (size_t) t->size / 256 * 256;
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

    NVL_CHECK(mca_coll_gpu_team_export(t, sbuf, count * dev_dtype_size(dt),
                                       &t->ctl->rank[t->rank].sbuf),
              "allreduce");
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
            NVL_CHECK(mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].sbuf,
                                               count * dev_dtype_size(dt), &s),
                      "allreduce");
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

/* Copy-engine two-shot (schedule at the top of the file).  piece_max: the plan's chunk (bytes),
 * bounded by the staging budget.  sbuf == rbuf in place. */
static int allreduce_twoshot_ce(coll_gpu_team_t *t, const void *sbuf, void *rbuf, size_t count,
                                dev_dtype_t dt, dev_op_t op, size_t esize, size_t piece_max,
                                int nthreads, struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    int n = t->size;
    coll_gpu_nvl_state_t *st = NULL;
    void *ps[COLL_GPU_TEAM_MAX], *pr[COLL_GPU_TEAM_MAX];
    dev_launch_t launch = {0, nthreads}; /* the whole GPU for the local reduce */
    size_t lo, hi, piece, npieces, row_piece;
    int rc = OMPI_SUCCESS;
    bool arrived = false;

    chunk_of(count, n, t->rank, &lo, &hi);
    piece = (hi - lo) * esize / 2; /* each rank cuts its own shard: no cut is shared */
    piece = (piece > NVL_CE_PIECE_MIN) ? piece : NVL_CE_PIECE_MIN;
    piece_max = (0 == piece_max) ? NVL_CE_PIECE_DEFAULT : piece_max;
    piece = (piece < piece_max) ? piece : piece_max;
    piece = (piece < NVL_CE_PIECE_MAX) ? piece : NVL_CE_PIECE_MAX;
    if (piece * NVL_CE_DEPTH * (size_t) (n - 1) > NVL_CE_STAGE_MAX) {
        piece = NVL_CE_STAGE_MAX / NVL_CE_DEPTH / (size_t) (n - 1);
    }
    piece = piece / 4096 * 4096;
    piece = (piece < 4096) ? 4096 : piece; /* a multiple of every element size */
    {
        /* no more staging than this call needs, so small calls stay small */
        size_t shard = (hi - lo) * esize, want = (shard < piece) ? shard : piece;
        want = (want + 4095) / 4096 * 4096;
        want = (want < 4096) ? 4096 : want;
        NVL_CHECK(nvl_ce_state(t, want * NVL_CE_DEPTH * (size_t) (n - 1), &st), "allreduce");
    }
    piece /= esize; /* elements from here on */
    rc = nvl_map_pairs(t, seq, sbuf, rbuf, count * esize, ps, pr, &arrived, comm);
    if (OMPI_SUCCESS != rc) {
        goto out;
    }

    npieces = (hi - lo + piece - 1) / piece;
    COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL,
                     "coll:gpu:allreduce (cid %d): rank %d: twoshot_ce, shard of %zu B in %zu "
                     "piece(s) of %zu B",
                     coll_gpu_comm_cid(comm), t->rank, (hi - lo) * esize, npieces, piece * esize);
    /* the staging buffer holds NVL_CE_DEPTH rows of n-1 pieces; a row is reused once the
     * reduce that read it has run */
    row_piece = st->stage_bytes / NVL_CE_DEPTH / (size_t) (n - 1);
    for (size_t k = 0; k < npieces; ++k) {
        int d = (int) (k % NVL_CE_DEPTH), j = 0;
        size_t off = lo + k * piece, len = (hi - off < piece) ? hi - off : piece;
        const void *srcs[COLL_GPU_TEAM_MAX];
        void *dst = (char *) rbuf + off * esize;
        if (k >= NVL_CE_DEPTH) {
            NVL_CHECK(dev_stream_wait_event(st->copy[NVL_CE_PULL], st->reduced[d]), "allreduce");
        }
        for (int p = 0; p < n; ++p) {
            char *to;
            if (p == t->rank) {
                srcs[p] = (const char *) sbuf + off * esize;
                continue;
            }
            to = (char *) st->stage + ((size_t) d * (size_t) (n - 1) + (size_t) j++) * row_piece;
            NVL_CHECK(dev_memcpy_async(to, (const char *) ps[p] + off * esize, len * esize,
                                       st->copy[NVL_CE_PULL]),
                      "allreduce");
            srcs[p] = to;
        }
        NVL_CHECK(dev_event_record(st->copied[d], st->copy[NVL_CE_PULL]), "allreduce");
        NVL_CHECK(dev_stream_wait_event(t->stream, st->copied[d]), "allreduce");
        NVL_CHECK(dev_reduce_multi(&dst, 1, srcs, n, len, dt, op, &launch, t->stream),
                  "allreduce");
        NVL_CHECK(dev_event_record(st->reduced[d], t->stream), "allreduce");
        /* the finished piece to every peer (the peer's copy of our shard) */
        NVL_CHECK(dev_stream_wait_event(st->copy[NVL_CE_PUSH], st->reduced[d]), "allreduce");
        for (int p = 0; p < n; ++p) {
            if (p != t->rank) {
                NVL_CHECK(dev_memcpy_async((char *) pr[p] + off * esize, dst, len * esize,
                                           st->copy[NVL_CE_PUSH]),
                          "allreduce");
            }
        }
    }
    /* the pushes waited for the reduces, which waited for the pulls */
    NVL_CHECK(dev_stream_sync(st->copy[NVL_CE_PUSH]), "allreduce");
out:
    for (int i = 0; OMPI_SUCCESS != rc && NULL != st && i < NVL_CE_STREAMS; ++i) {
        if (NULL != st->copy[i]) {
            (void) dev_stream_sync(st->copy[i]); /* nvl_finish_all drains the team stream */
        }
    }
    return nvl_finish_all(t, seq, arrived, rc);
}

static int allreduce_twoshot(coll_gpu_team_t *t, const void *sbuf, void *rbuf, size_t count,
                             dev_dtype_t dt, dev_op_t op, size_t esize,
                             const dev_launch_t *launch, struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    void *ps[COLL_GPU_TEAM_MAX], *pr[COLL_GPU_TEAM_MAX];
    const void *srcs[COLL_GPU_TEAM_MAX];
    void *dsts[COLL_GPU_TEAM_MAX];
    size_t lo, hi;
    int rc = OMPI_SUCCESS;
    bool arrived = false;

    rc = nvl_map_pairs(t, seq, sbuf, rbuf, count * esize, ps, pr, &arrived, comm);
    if (OMPI_SUCCESS != rc) {
        goto out;
    }
    chunk_of(count, t->size, t->rank, &lo, &hi);
    for (int p = 0; p < t->size; ++p) {
        srcs[p] = (const char *) ps[p] + lo * esize;
        dsts[p] = (char *) pr[p] + lo * esize;
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

/* ---- fused allreduce ---------------------------------------------------------------------- */

typedef struct {
    coll_gpu_team_t *t;
    uint64_t seq;
    unsigned polls;
    double start; /* the hang watch's (mca_coll_gpu_team_watch) */
} nvl_watch_t;

/* Emulated backend: its kernel asks this while it waits for its peers (yielding the core), so
 * its wait is watched as the team's flag waits are: reported past coll_gpu_hang_warn_seconds,
 * given up past coll_gpu_hang_error_seconds (then this rank's failure flags stop the wait). */
static bool nvl_fused_abandon(void *ctx)
{
    nvl_watch_t *w = ctx;
    mca_coll_gpu_async_poll(); /* a peer may wait for a nonblocking call of ours elsewhere */
    if (0 == (++w->polls % NVL_FUSED_CLOCK_EVERY)) {
        (void) mca_coll_gpu_team_watch(w->t, w->seq, &w->start);
    }
    return mca_coll_gpu_team_any_failed(w->t, w->seq);
}

/* One piece of at most a slot's share (schedule at the top of the file).  A rank that fails
 * before its launch marks the call failed; its peers' hosts see that and release their kernels,
 * so that every rank returns an error. */
static int fused_piece(coll_gpu_team_t *t, const void *sbuf, void *rbuf, size_t count,
                       dev_dtype_t dt, dev_op_t op, size_t cap, const dev_launch_t *launch,
                       struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    coll_gpu_nvl_state_t *st = NULL;
    nvl_watch_t watch = {t, seq, 0, 0.0};
    unsigned spins = 0, polls = 0, yields = 1000; /* past spin_pause's threshold: it yields */
    bool released = false;
    int rc = OMPI_SUCCESS;

    mca_coll_gpu_team_arrive(t, seq);
    NVL_CHECK(mca_coll_gpu_nvl_fused_launch(t, seq, sbuf, rbuf, count, dt, op, cap, launch,
                                            nvl_fused_abandon, &watch),
              "allreduce");
    st = t->nvl;

    while (__atomic_load_n(st->done_host, __ATOMIC_ACQUIRE) != seq) {
        if (0 != (++spins % NVL_FUSED_WATCH_SPINS)) {
            continue;
        }
        if (!released && mca_coll_gpu_team_any_failed(t, seq)) {
            /* a peer gave up, maybe before its launch: release our kernel's waits */
            NVL_CHECK(mca_coll_gpu_nvl_fused_release(t, seq), "allreduce");
            released = true;
        }
        if (0 == (spins % NVL_FUSED_QUERY_SPINS)) {
            /* a kernel that faulted never sets the word: ask the stream now and then */
            int q = dev_stream_query(t->stream);
            NVL_CHECK(q < 0 ? q : DEV_OK, "allreduce");
            if (DEV_OK == q && __atomic_load_n(st->done_host, __ATOMIC_ACQUIRE) != seq
                && ++polls > 1) {
                mca_coll_gpu_report_failure("allreduce", comm,
                                            "the fused kernel ended without its done word "
                                            "(seq %" PRIu64 ")",
                                            seq);
                mca_coll_gpu_team_fail(t, seq);
                rc = OMPI_ERROR;
                goto out;
            }
        }
        if (spins > NVL_FUSED_QUERY_SPINS) {
            /* a long wait (a late peer): let other processes have the core; a short one is
             * the kernel's few microseconds, where a yield would only add to the latency.
             * Watched as the flag waits are; a rank that gives up fails the call, and the
             * check above releases our kernel at the next look */
            mca_coll_gpu_team_pause(&yields);
            (void) mca_coll_gpu_team_watch(t, seq, &watch.start);
        }
    }
out:
    if (OMPI_SUCCESS != rc) {
        mca_coll_gpu_team_arrive(t, seq);
    }
    mca_coll_gpu_team_done(t, seq);
    return (OMPI_SUCCESS == rc && mca_coll_gpu_team_any_failed(t, seq)) ? OMPI_ERROR : rc;
}

int mca_coll_gpu_nvl_fused_launch(coll_gpu_team_t *t, uint64_t seq, const void *sbuf, void *rbuf,
                                  size_t count, dev_dtype_t dt, dev_op_t op, size_t cap,
                                  const dev_launch_t *launch, bool (*abandon)(void *ctx),
                                  void *ctx)
{
    coll_gpu_nvl_state_t *st = NULL;
    dev_fused_allreduce_t a;
    int rc = nvl_fused_state(t, &st);

    if (DEV_OK != rc) {
        return rc;
    }
    memset(&a, 0, sizeof(a));
    a.sbuf = sbuf;
    a.rbuf = rbuf;
    a.count = count;
    a.dtype = dt;
    a.op = op;
    a.nranks = t->size;
    a.rank = t->rank;
    for (int p = 0; p < t->size; ++p) {
        a.slot[p] = (char *) t->peer_scratch[p] + (seq & 1) * t->slot_bytes;
    }
    a.cap = cap;
    a.seq = seq;
    a.done = st->done_dev;
    a.abandon = abandon;
    a.abandon_ctx = ctx;
    return dev_fused_allreduce(&a, launch, t->stream);
}

/* Valid once mca_coll_gpu_nvl_fused_launch succeeded on the team. */
uint64_t *mca_coll_gpu_nvl_fused_word(coll_gpu_team_t *t)
{
    return t->nvl->done_host;
}

/* Every fused flag of call seq's slot in one rank's scratch (mapped here) set to seq's abandon
 * value: a kernel of seq waiting there ends its waits. */
static int fused_abandon_slot(coll_gpu_team_t *t, void *scratch, uint64_t seq)
{
    uint64_t abandon[DEV_FUSED_MAX_BLOCKS * DEV_MULTI_MAX];

    for (size_t i = 0; i < sizeof(abandon) / sizeof(abandon[0]); ++i) {
        abandon[i] = seq | DEV_FUSED_ABANDON;
    }
    return dev_memcpy((char *) scratch + (seq & 1) * t->slot_bytes, abandon, sizeof(abandon));
}

int mca_coll_gpu_nvl_fused_release(coll_gpu_team_t *t, uint64_t seq)
{
    return fused_abandon_slot(t, t->scratch, seq);
}

int mca_coll_gpu_nvl_fused_release_peers(coll_gpu_team_t *t, uint64_t seq)
{
    int rc = DEV_OK;

    /* every flag of the slot, not only this rank's: the call fails on every rank anyway.  No
     * peer can be at seq + 2 (this parity's next call) before this rank ends seq, so nothing
     * newer is overwritten. */
    for (int p = 0; p < t->size; ++p) {
        if (p != t->rank && NULL != t->peer_scratch[p]) {
            int prc = fused_abandon_slot(t, t->peer_scratch[p], seq);
            rc = (DEV_OK == rc) ? prc : rc;
        }
    }
    return rc;
}

/* The fused allreduce, in pieces of a slot's share; every rank cuts the same pieces and
 * stops after the same failed one (a failure is seen by all ranks of that piece). */
static int allreduce_fused(coll_gpu_team_t *t, const void *sbuf, void *rbuf, size_t count,
                           dev_dtype_t dt, dev_op_t op, size_t esize, const dev_launch_t *launch,
                           struct ompi_communicator_t *comm)
{
    size_t cap = mca_coll_gpu_nvl_fused_cap(t), per = cap / esize, off = 0;
    int rc = OMPI_SUCCESS;

    COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL,
                     "coll:gpu:allreduce (cid %d): rank %d: fused, %zu piece(s) of up to %zu B",
                     coll_gpu_comm_cid(comm), t->rank, (count + per - 1) / per, per * esize);
    do {
        size_t n = (count - off < per) ? count - off : per;
        rc = fused_piece(t, (const char *) sbuf + off * esize, (char *) rbuf + off * esize, n,
                         dt, op, cap, launch, comm);
        off += n;
    } while (OMPI_SUCCESS == rc && off < count);
    return rc;
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
    NVL_CHECK(mca_coll_gpu_team_export(t, rbuf, count * esize, &t->ctl->rank[t->rank].rbuf),
              "allreduce");
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
            NVL_CHECK(mca_coll_gpu_team_import(t, left, &t->ctl->rank[left].rbuf,
                                               count * esize, &lbuf),
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
 * returns an error instead of waiting. */
static int nvl_sit_out(coll_gpu_team_t *t, bool fused, int rc)
{
    uint64_t seq = ++t->seq;

    mca_coll_gpu_team_fail(t, seq);
    if (fused) {
        (void) mca_coll_gpu_nvl_fused_release_peers(t, seq); /* their hosts release them too */
    }
    return nvl_finish_all(t, seq, false, rc);
}

/* ---- the allreduce's agreement ----------------------------------------------------------- */

void mca_coll_gpu_nvl_allreduce_publish(coll_gpu_team_t *t, uint64_t seq, size_t bytes,
                                        dev_dtype_t dt, dev_op_t op, bool in_place)
{
    coll_gpu_call_t *mine = &t->ctl->rank[t->rank].call[seq & 1];

    mine->bytes = bytes;
    mine->dtype = (int32_t) dt;
    mine->op = (int32_t) op;
    mine->in_place = in_place ? 1 : 0;
    atomic_store_explicit(&mine->seq, seq, memory_order_release);
}

/* A field of the records that mca_coll_gpu_nvl_allreduce_check compares. */
typedef enum { NVL_REC_BYTES, NVL_REC_OP, NVL_REC_DTYPE, NVL_REC_IN_PLACE } nvl_rec_field_t;

static uint64_t nvl_rec_value(const coll_gpu_call_t *c, nvl_rec_field_t f)
{
    switch (f) {
    case NVL_REC_BYTES:
        return c->bytes;
    case NVL_REC_OP:
        return (uint64_t) c->op;
    case NVL_REC_DTYPE:
        return (uint64_t) c->dtype;
    default:
        return (uint64_t) c->in_place;
    }
}

/* "64 B on rank(s) 0; 1048576 B on rank(s) 1 2": each value of field f and its ranks. */
static void nvl_rec_diff(coll_gpu_team_t *t, uint64_t seq, nvl_rec_field_t f, char *out,
                         size_t len)
{
    size_t n = 0;

    out[0] = '\0';
    for (int p = 0; p < t->size && n < len; ++p) {
        uint64_t v = nvl_rec_value(&t->ctl->rank[p].call[seq & 1], f);
        bool seen = false;
        for (int q = 0; q < p && !seen; ++q) {
            seen = (v == nvl_rec_value(&t->ctl->rank[q].call[seq & 1], f));
        }
        if (seen) {
            continue;
        }
        if (NVL_REC_BYTES == f) {
            n += (size_t) snprintf(out + n, len - n, "%s%" PRIu64 " B on rank(s)",
                                   0 == n ? "" : "; ", v);
        } else {
            n += (size_t) snprintf(out + n, len - n, "%s%s on rank(s)", 0 == n ? "" : "; ",
                                   NVL_REC_OP == f      ? dev_op_name((dev_op_t) v)
                                   : NVL_REC_DTYPE == f ? dev_dtype_name((dev_dtype_t) v)
                                   : 0 != v             ? "MPI_IN_PLACE"
                                                        : "a send buffer");
        }
        for (int q = p; q < t->size && n < len; ++q) {
            if (v == nvl_rec_value(&t->ctl->rank[q].call[seq & 1], f)) {
                n += (size_t) snprintf(out + n, len - n, " %d", q);
            }
        }
    }
}

/*
 * Every rank's record of allreduce seq, read once all are there (mca_coll_gpu_team_wait_records):
 * OMPI_SUCCESS when they agree; else what every rank returns, the same on all since all read
 * the same records: MPI_ERR_COUNT when the byte counts differ, else MPI_ERR_OP when the ops do,
 * else MPI_ERR_OTHER when the element types do, else MPI_ERR_BUFFER when some ranks passed
 * MPI_IN_PLACE and others not (an in-place rank exports no send buffer, and its plan may be
 * another algorithm); OMPI_ERROR when a rank's record is of a later call (it
 * gave up on this one: coll_gpu_hang_error_seconds).  Rank 0 of the team names the difference
 * in one line (what: the collective, "allreduce" or "iallreduce"...); the others log theirs at
 * COLL_GPU_LOG_CALL.
 */
int mca_coll_gpu_nvl_allreduce_check(coll_gpu_team_t *t, uint64_t seq, const char *what,
                                     struct ompi_communicator_t *comm)
{
    static const struct {
        nvl_rec_field_t field;
        const char *name;
        int rc;
        const char *rc_name;
    } checks[] = {{NVL_REC_BYTES, "byte count", MPI_ERR_COUNT, "MPI_ERR_COUNT"},
                  {NVL_REC_OP, "op", MPI_ERR_OP, "MPI_ERR_OP"},
                  {NVL_REC_DTYPE, "element type", MPI_ERR_OTHER, "MPI_ERR_OTHER"},
                  {NVL_REC_IN_PLACE, "use of MPI_IN_PLACE", MPI_ERR_BUFFER, "MPI_ERR_BUFFER"}};
    const coll_gpu_call_t *first = &t->ctl->rank[0].call[seq & 1];
    char diff[COLL_GPU_TEAM_MAX * 32], name[32];

    for (int p = 0; p < t->size; ++p) {
        if (seq != atomic_load_explicit(&t->ctl->rank[p].call[seq & 1].seq,
                                        memory_order_acquire)) {
            return OMPI_ERROR;
        }
    }
    for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); ++i) {
        bool differ = false;
        for (int p = 1; p < t->size && !differ; ++p) {
            differ = nvl_rec_value(&t->ctl->rank[p].call[seq & 1], checks[i].field)
                     != nvl_rec_value(first, checks[i].field);
        }
        if (!differ) {
            continue;
        }
        nvl_rec_diff(t, seq, checks[i].field, diff, sizeof(diff));
        if (0 == t->rank) {
            /* "Iallreduce" from "iallreduce": the MPI name */
            snprintf(name, sizeof(name), "%s", what);
            name[0] = (char) toupper((unsigned char) name[0]);
            opal_output(0, "coll/gpu: MPI_%s on communicator %d (call %" PRIu64
                           " through the node team) is erroneous: the %s differs across ranks "
                           "(%s); every rank returns %s, no data moved",
                        name, coll_gpu_comm_cid(comm), seq, checks[i].name, diff,
                        checks[i].rc_name);
        } else {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL,
                             "coll:gpu:%s (cid %d): rank %d: call %" PRIu64 ": the %s differs "
                             "across ranks (%s): %s, no data moved",
                             what, coll_gpu_comm_cid(comm), t->rank, seq, checks[i].name, diff,
                             checks[i].rc_name);
        }
        return checks[i].rc;
    }
    return OMPI_SUCCESS;
}

/*
 * An allreduce through the team.  Before anything moves, every rank publishes its byte count,
 * element type, op and use of MPI_IN_PLACE (coll_gpu_call_t) and reads every rank's: an
 * erroneous call (any of them differs) then ends on every rank alike, with the same error and
 * without data, whichever algorithm each rank's plan named (plans follow the byte count, which
 * may be what differs): every rank fails the call, arrives, gives its done and waits for
 * everybody's.  Without the agreement such a call could take a peer's exported buffer for one
 * it is not, run different algorithms on different ranks, or leave a fused kernel waiting for
 * pieces that never come.  A rank that failed before the call (local_rc) sits out as its
 * algorithm's peers expect (nvl_sit_out).
 *
 *   every rank:  publish {bytes, dtype, op, in place}(seq); wait for every rank's record of seq
 *                records agree: run the plan      records differ: fail(seq), take part empty
 */
int mca_coll_gpu_nvl_allreduce(coll_gpu_team_t *t, const topo_plan_t *plan, const void *sbuf,
                               void *rbuf, size_t count, dev_dtype_t dt, dev_op_t op,
                               struct ompi_communicator_t *comm, int local_rc)
{
    size_t esize = dev_dtype_size(dt);
    const void *src = (MPI_IN_PLACE == sbuf) ? rbuf : sbuf;
    dev_launch_t launch = {plan->nblocks, plan->nthreads};
    int rc;

    mca_coll_gpu_async_drain(t); /* nonblocking calls issued before this one end first */
    mca_coll_gpu_nvl_allreduce_publish(t, t->seq + 1, count * esize, dt, op,
                                       MPI_IN_PLACE == sbuf);
    rc = mca_coll_gpu_team_wait_records(t, t->seq + 1)
             ? mca_coll_gpu_nvl_allreduce_check(t, t->seq + 1, "allreduce", comm)
             : OMPI_ERROR; /* gave up on a rank that never came: the call fails */
    if (OMPI_SUCCESS != rc) {
        return nvl_sit_out(t, false, rc);
    }
    if (OMPI_SUCCESS != local_rc) {
        return nvl_sit_out(t, TOPO_AR_FUSED == plan->alg, local_rc);
    }

    if (TOPO_AR_ONESHOT == plan->alg) { /* never in place (mca_coll_gpu_plan_for_call) */
        return allreduce_oneshot_direct(t, src, rbuf, count, dt, op, &launch, comm);
    }
    if (TOPO_AR_RING == plan->alg) {
        return allreduce_ring(t, src, rbuf, count, dt, op, esize, &launch, comm);
    }
    if (TOPO_AR_FUSED == plan->alg) {
        return allreduce_fused(t, src, rbuf, count, dt, op, esize, &launch, comm);
    }
    if (TOPO_AR_TWOSHOT_CE == plan->alg) {
        return allreduce_twoshot_ce(t, src, rbuf, count, dt, op, esize, plan->chunk_bytes,
                                    plan->nthreads, comm);
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
static int bcast_peer(coll_gpu_team_t *t, void *buf, size_t bytes, int root,
                      struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    int rc = OMPI_SUCCESS;

    NVL_CHECK(mca_coll_gpu_team_export(t, buf, bytes, &t->ctl->rank[t->rank].rbuf), "bcast");
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
        NVL_CHECK(mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].rbuf, bytes, &dst), "bcast");
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
        NVL_CHECK(mca_coll_gpu_team_export(t, buf, bytes, &t->ctl->rank[t->rank].rbuf),
                  "bcast");
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
    NVL_CHECK(mca_coll_gpu_team_import(t, parent, &t->ctl->rank[parent].rbuf, bytes, &pbuf),
              "bcast");
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

/* Pull bcast (schedule at the top of the file): the root lends its buffer until every rank
 * has copied it. */
static int bcast_pull(coll_gpu_team_t *t, void *buf, size_t bytes, int root,
                      struct ompi_communicator_t *comm)
{
    uint64_t seq = ++t->seq;
    int rc = OMPI_SUCCESS;
    bool arrived = false;
    void *src;

    if (t->rank == root) {
        NVL_CHECK(mca_coll_gpu_team_export(t, buf, bytes, &t->ctl->rank[t->rank].rbuf),
                  "bcast");
        mca_coll_gpu_team_arrive(t, seq);
        arrived = true;
        goto out;
    }
    mca_coll_gpu_team_arrive(t, seq);
    arrived = true;
    mca_coll_gpu_team_wait_arrive(t, root, seq);
    if (mca_coll_gpu_team_failed(t, root, seq)) {
        mca_coll_gpu_team_fail(t, seq);
        rc = OMPI_ERROR;
        goto out;
    }
    NVL_CHECK(mca_coll_gpu_team_import(t, root, &t->ctl->rank[root].rbuf, bytes, &src),
              "bcast");
    NVL_CHECK(dev_memcpy_async(buf, src, bytes, t->stream), "bcast");
    NVL_CHECK(dev_stream_sync(t->stream), "bcast");
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
    uint64_t seq;
    coll_gpu_call_t *mine;
    topo_plan_t agreed = *plan;
    size_t root_bytes = bytes;
    int rc;

    mca_coll_gpu_async_drain(t); /* nonblocking calls issued before this one end first */
    seq = t->seq + 1;
    mine = &t->ctl->rank[t->rank].call[seq & 1];
    mine->bytes = bytes;
    mine->alg = (int32_t) plan->alg;
    mine->chunk = plan->chunk_bytes;
    atomic_store_explicit(&mine->seq, seq, memory_order_release);
    if (t->rank != root) {
        const coll_gpu_call_t *at_root = &t->ctl->rank[root].call[seq & 1];
        if (!mca_coll_gpu_team_wait_call(t, root, seq)) {
            /* gave up on a root that never came (coll_gpu_hang_error_seconds): its plan is
             * unknown, so take part as every plan's peers expect of a failed rank (failed,
             * arrived, done); the root, when it comes, sees the failure and touches nothing */
            seq = ++t->seq;
            mca_coll_gpu_team_arrive(t, seq);
            mca_coll_gpu_team_done(t, seq);
            return OMPI_ERROR;
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
        if (TOPO_BC_PUSH == agreed.alg) {
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
    if (TOPO_BC_PULL == agreed.alg) {
        rc = bcast_pull(t, buf, bytes, root, comm);
    } else if (TOPO_BC_CHAIN == agreed.alg || TOPO_BC_TREE == agreed.alg) {
        rc = bcast_pipelined(t, buf, bytes, root, agreed.chunk_bytes,
                             TOPO_BC_TREE == agreed.alg, comm);
    } else {
        rc = (t->rank == root) ? bcast_root(t, buf, bytes, comm)
                               : bcast_peer(t, buf, bytes, root, comm);
    }
    if (OMPI_SUCCESS != rc && t->rank == root && bcast_any_mismatch(t, seq, bytes)) {
        rc = MPI_ERR_TRUNCATE;
    }
    return rc;
}

/* ---- exchange and reduce-scatter (schedules at the top of the file) ------------------------ */

/* The exchange and the reduce-scatter are one kind of team step (coll_gpu_xstep_t), run by the
 * engine of coll_gpu_nvl_async.c for blocking, nonblocking and persistent calls alike: open it
 * (mca_coll_gpu_nvl_xstep_open), wait for every rank's arrival there, move its data
 * (mca_coll_gpu_nvl_xstep_move), wait for the streams, finish as every team call does. */

int mca_coll_gpu_nvl_xstep_open(coll_gpu_team_t *t, uint64_t seq, const coll_gpu_xstep_t *x,
                                const char *what, struct ompi_communicator_t *comm)
{
    coll_gpu_ctl_rank_t *me = &t->ctl->rank[t->rank];
    int rc = x->local_rc;

    for (int q = 0; q < t->size && !x->reduce; ++q) {
        me->offer_off[q] = x->offer_off[q];
        me->offer_len[q] = x->offer_len[q];
        me->want_len[q] = x->want_len[q];
    }
    me->sbuf.seq = 0; /* lends nothing unless the export below succeeds */
    if (OMPI_SUCCESS == rc && 0 < x->src_bytes
        && DEV_OK != mca_coll_gpu_team_export(t, x->src, x->src_bytes, &me->sbuf)) {
        mca_coll_gpu_report_failure(what, comm, "cannot lend %zu B to the team: %s",
                                    x->src_bytes, dev_error_string());
        rc = OMPI_ERROR;
    }
    if (OMPI_SUCCESS != rc) {
        mca_coll_gpu_team_fail(t, seq);
    }
    mca_coll_gpu_team_arrive(t, seq);
    return rc;
}

/* Does every rank's offer to every rank have the length its receiver wants?  Every rank reads
 * the same records (all arrived), so every rank answers the same; the lowest says what
 * differed. */
static bool exchange_matches(coll_gpu_team_t *t, const char *what,
                             struct ompi_communicator_t *comm, uint64_t seq)
{
    for (int p = 0; p < t->size; ++p) {
        for (int q = 0; q < t->size; ++q) {
            uint64_t sends = t->ctl->rank[p].offer_len[q], wants = t->ctl->rank[q].want_len[p];
            if (sends == wants) {
                continue;
            }
            if (0 == t->rank) {
                opal_output(0, "coll/gpu: erroneous MPI_%c%s on communicator %d (call %" PRIu64
                            "): rank %d sends %" PRIu64 " B to rank %d, which expects %" PRIu64
                            " B; the call returns MPI_ERR_TRUNCATE on every rank and moves no "
                            "data", toupper((unsigned char) what[0]), what + 1,
                            coll_gpu_comm_cid(comm), seq, p, sends, q, wants);
            }
            return false;
        }
    }
    return true;
}

/* The exchange's copies go on one stream, or, when this rank pulls NVL_XCHG_SPREAD_MIN bytes or
 * more, round-robin over the team's stream and the copy-engine streams: copies from different
 * peers (and the own block's local copy) then run at once instead of one after another, which
 * on NVLink lets each peer link carry its own piece.  A rank's own choice: it changes only which
 * of its streams carry its own copies, nothing its peers see. */
#define NVL_XCHG_SPREAD_MIN ((uint64_t) 4 << 20)
_Static_assert(1 + NVL_CE_STREAMS <= COLL_GPU_XSTEP_STREAMS, "the engine's stream slots");

static void exchange_streams(coll_gpu_team_t *t, const uint64_t *want_len,
                             dev_stream_t **streams, int *nstreams)
{
    coll_gpu_nvl_state_t *st = NULL;
    uint64_t total = 0;

    streams[0] = t->stream;
    *nstreams = 1;
    for (int p = 0; p < t->size; ++p) {
        total += want_len[p];
    }
    /* no copy streams (they could not be made): one stream is slower, not wrong */
    if (total < NVL_XCHG_SPREAD_MIN || DEV_OK != nvl_ce_state(t, 0, &st)) {
        return;
    }
    for (int i = 0; i < NVL_CE_STREAMS; ++i) {
        streams[(*nstreams)++] = st->copy[i];
    }
}

/* Peer p's lent bytes, need of them mapped (this rank's own: src). */
static int xstep_source(coll_gpu_team_t *t, const coll_gpu_xstep_t *x, int p, size_t need,
                        const char *what, struct ompi_communicator_t *comm, void **from)
{
    *from = (void *) x->src;
    if (p == t->rank
        || DEV_OK == mca_coll_gpu_team_import(t, p, &t->ctl->rank[p].sbuf, need, from)) {
        return OMPI_SUCCESS;
    }
    mca_coll_gpu_report_failure(what, comm, "cannot map rank %d's lent buffer: %s", p,
                                dev_error_string());
    return OMPI_ERROR;
}

int mca_coll_gpu_nvl_xstep_move(coll_gpu_team_t *t, uint64_t seq, const coll_gpu_xstep_t *x,
                                const char *what, struct ompi_communicator_t *comm,
                                dev_stream_t **streams, int *nstreams)
{
    int rc = OMPI_SUCCESS, copies = 0;

    streams[0] = t->stream;
    *nstreams = 1;
    if (x->reduce) {
        size_t need = x->off + x->count * dev_dtype_size(x->dt);
        const void *srcs[COLL_GPU_TEAM_MAX];
        dev_launch_t launch = {0, 0}; /* the whole GPU: one kernel reads every rank's piece */
        void *dst = x->dst[0];

        for (int p = 0; p < t->size && OMPI_SUCCESS == rc && 0 < x->count; ++p) {
            void *from;
            rc = xstep_source(t, x, p, need, what, comm, &from);
            srcs[p] = (const char *) from + x->off;
        }
        if (OMPI_SUCCESS == rc && 0 < x->count
            && DEV_OK != dev_reduce_multi(&dst, 1, srcs, t->size, x->count, x->dt, x->op,
                                          &launch, t->stream)) {
            mca_coll_gpu_report_failure(what, comm, "reduction of %zu elements: %s", x->count,
                                        dev_error_string());
            rc = OMPI_ERROR;
        }
    } else if (!exchange_matches(t, what, comm, seq)) {
        return MPI_ERR_TRUNCATE; /* on every rank, nothing moved */
    } else {
        exchange_streams(t, x->want_len, streams, nstreams);
        for (int k = 1; k <= t->size && OMPI_SUCCESS == rc; ++k) {
            int p = (t->rank + k) % t->size;
            uint64_t off = (p == t->rank) ? x->offer_off[p] : t->ctl->rank[p].offer_off[t->rank];
            void *from;

            if (0 == x->want_len[p]) {
                continue;
            }
            rc = xstep_source(t, x, p, off + x->want_len[p], what, comm, &from);
            if (OMPI_SUCCESS == rc
                && DEV_OK != dev_memcpy_async(x->dst[p], (char *) from + off, x->want_len[p],
                                              streams[copies++ % *nstreams])) {
                mca_coll_gpu_report_failure(what, comm, "copy of %" PRIu64 " B from rank %d: %s",
                                            x->want_len[p], p, dev_error_string());
                rc = OMPI_ERROR;
            }
        }
    }
    if (OMPI_SUCCESS != rc) {
        /* nothing of ours may read a peer's memory once this rank is done */
        for (int i = 0; i < *nstreams; ++i) {
            (void) dev_stream_sync(streams[i]);
        }
        mca_coll_gpu_team_fail(t, seq);
    }
    return rc;
}
