/*
 * coll_gpu_nvl.c - the node team's device side: what the engine's schedules (coll_gpu_engine.c)
 * need from the GPU and the team's control block beyond a copy or a kernel: the fused
 * allreduce's launch, completion word and release; the copy-engine two-shot's streams, events
 * and staging memory; the allreduce's records and their comparison; and the two halves of the
 * exchange and reduce-scatter step (coll_gpu_xstep_t).  Every rank's resources here are its
 * own, made on first use; a rank that cannot make them fails the call through the team's flags
 * like any other failure.
 *
 * reduce-scatter (zero-copy): every rank lends its whole input and reduces its own piece from
 * every rank's input with one kernel, straight into its destination; each element is read once
 * by its owner only, so the call moves what a reduce-scatter must, no more.  A reduce is the
 * reduce-scatter whose root's piece is the whole input (the others' is empty).
 *   open:  export sbuf; arrive(seq)
 *   move:  wait arrive(all) >= seq; map every peer's sbuf;
 *          dst = reduce_p sbuf_p[off, off + count)  (rank order: the result is the same on all)
 *   then:  poll the stream; done(seq); wait done(all) >= seq
 *
 * exchange (allgather, alltoall and their v forms): every rank lends its send bytes and says
 * which of them each peer takes; then every rank pulls its piece from every peer, with
 * copy-engine copies, starting at the next rank so that no one rank is read by all at once.
 *   open:  export src; offers[q] = (off, len); wants[p] = len; arrive(seq)
 *   move:  wait arrive(all) >= seq; every offer of every rank == its receiver's want?
 *          for p = me+1, me+2, ... me:  map p's src; dst[p] <- src_p + off (copy, async;
 *            from 4 MiB on, the copies round-robin over three streams: exchange_streams)
 *   then:  poll the streams; done(seq); wait done(all) >= seq
 * A rank reads only what its peer lent and offered it, and writes only its own buffer.  Every
 * rank compares the same offers and wants, so an erroneous call (counts that differ) returns
 * MPI_ERR_TRUNCATE on every rank before a byte moves.
 */
#include "ompi_config.h"

#include <ctype.h>
#include <inttypes.h>
#include <string.h>

#include "coll_gpu.h"

/* ---- the device side's own state of a team ---------------------------------------------- */

typedef struct coll_gpu_nvl_state_t {
    uint64_t *done_host;                   /* fused: mapped word its kernel sets to seq */
    void *done_dev;                        /* the same word as kernels address it */
    coll_gpu_ce_t ce;                      /* copy-engine two-shot (and the exchange's spread) */
} coll_gpu_nvl_state_t;

void mca_coll_gpu_nvl_release(coll_gpu_team_t *t)
{
    coll_gpu_nvl_state_t *st = t->nvl;

    if (NULL == st) {
        return;
    }
    mca_coll_gpu_nvl_drain(t); /* nothing of ours may still use what goes now */
    if (NULL != st->ce.pull) {
        (void) dev_stream_destroy(st->ce.pull);
    }
    if (NULL != st->ce.push) {
        (void) dev_stream_destroy(st->ce.push);
    }
    for (int i = 0; i < COLL_GPU_CE_DEPTH; ++i) {
        if (NULL != st->ce.copied[i]) {
            (void) dev_event_destroy(st->ce.copied[i]);
        }
        if (NULL != st->ce.reduced[i]) {
            (void) dev_event_destroy(st->ce.reduced[i]);
        }
    }
    if (NULL != st->ce.stage) {
        (void) dev_mem_free(st->ce.stage);
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

int mca_coll_gpu_nvl_ce(coll_gpu_team_t *t, size_t bytes, coll_gpu_ce_t **out)
{
    coll_gpu_nvl_state_t *st = NULL;
    coll_gpu_ce_t *ce;
    int rc = nvl_state(t, &st);

    if (DEV_OK != rc) {
        return rc;
    }
    ce = &st->ce;
    if (NULL == ce->pull) {
        rc = dev_stream_create(&ce->pull);
    }
    if (DEV_OK == rc && NULL == ce->push) {
        rc = dev_stream_create(&ce->push);
    }
    for (int i = 0; DEV_OK == rc && i < COLL_GPU_CE_DEPTH; ++i) {
        if (NULL == ce->copied[i]) {
            rc = dev_event_create(&ce->copied[i]);
        }
        if (DEV_OK == rc && NULL == ce->reduced[i]) {
            rc = dev_event_create(&ce->reduced[i]);
        }
    }
    if (DEV_OK == rc && ce->stage_bytes < bytes) {
        if (NULL != ce->stage) {
            mca_coll_gpu_nvl_drain(t);
            (void) dev_mem_free(ce->stage);
            ce->stage = NULL;
            ce->stage_bytes = 0;
        }
        rc = dev_mem_alloc(&ce->stage, bytes);
        ce->stage_bytes = (DEV_OK == rc) ? bytes : 0;
    }
    *out = ce;
    return rc;
}

void mca_coll_gpu_nvl_drain(coll_gpu_team_t *t)
{
    coll_gpu_nvl_state_t *st = t->nvl;

    if (NULL != t->stream) {
        (void) dev_stream_sync(t->stream);
    }
    if (NULL != st && NULL != st->ce.pull) {
        (void) dev_stream_sync(st->ce.pull);
    }
    if (NULL != st && NULL != st->ce.push) {
        (void) dev_stream_sync(st->ce.push);
    }
}

/* ---- fused allreduce (schedule in coll_gpu_engine.c) ---------------------------------------- */

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
 * Every rank's record of allreduce seq, read once all are there (the engine's agreement step):
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

/* ---- exchange and reduce-scatter (schedules at the top of the file) ----------------------- */

/* The exchange and the reduce-scatter are one kind of team step (coll_gpu_xstep_t), run by the
 * engine of coll_gpu_engine.c for blocking, nonblocking and persistent calls alike: open it
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
    if (x->reduce) {
        me->offer_len[0] = x->src_bytes; /* the input's size, compared by every rank */
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

/* Is every rank's whole input of a reduce-scatter (or reduce) of one size?  The ranks agreed
 * on the element type and op, not always on the counts (mpi_assert_memory_alloc_kinds, the
 * nonblocking calls): a rank whose input is shorter would have its peers read past it, or a
 * root with a shorter one reduce a prefix of every input and return success.  Every rank reads
 * the same sizes, so every rank answers the same; rank 0 says what differed. */
static bool reduce_matches(coll_gpu_team_t *t, const char *what,
                           struct ompi_communicator_t *comm, uint64_t seq)
{
    uint64_t first = t->ctl->rank[0].offer_len[0];

    for (int p = 1; p < t->size; ++p) {
        uint64_t bytes = t->ctl->rank[p].offer_len[0];
        if (bytes == first) {
            continue;
        }
        if (0 == t->rank) {
            opal_output(0, "coll/gpu: erroneous MPI_%c%s on communicator %d (call %" PRIu64
                        "): rank 0 reduces an input of %" PRIu64 " B, rank %d one of %" PRIu64
                        " B; the call returns MPI_ERR_COUNT on every rank and moves no data",
                        toupper((unsigned char) what[0]), what + 1, coll_gpu_comm_cid(comm),
                        seq, first, p, bytes);
        }
        return false;
    }
    return true;
}

/* The exchange's copies go on one stream, or, when this rank pulls NVL_XCHG_SPREAD_MIN bytes or
 * more, round-robin over the team's stream and the copy-engine streams: copies from different
 * peers (and the own block's local copy) then run at once instead of one after another, which
 * on NVLink lets each peer link carry its own piece.  A rank's own choice: it changes only which
 * of its streams carry its own copies, nothing its peers see. */
#define NVL_XCHG_SPREAD_MIN ((uint64_t) 4 << 20)
_Static_assert(3 <= COLL_GPU_XSTEP_STREAMS, "the engine's stream slots");

static void exchange_streams(coll_gpu_team_t *t, const uint64_t *want_len,
                             dev_stream_t **streams, int *nstreams)
{
    coll_gpu_ce_t *ce = NULL;
    uint64_t total = 0;

    streams[0] = t->stream;
    *nstreams = 1;
    for (int p = 0; p < t->size; ++p) {
        total += want_len[p];
    }
    /* no copy streams (they could not be made): one stream is slower, not wrong */
    if (total < NVL_XCHG_SPREAD_MIN || DEV_OK != mca_coll_gpu_nvl_ce(t, 0, &ce)) {
        return;
    }
    streams[(*nstreams)++] = ce->pull;
    streams[(*nstreams)++] = ce->push;
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
    if (x->reduce && !reduce_matches(t, what, comm, seq)) {
        return MPI_ERR_COUNT; /* on every rank, nothing moved */
    }
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
