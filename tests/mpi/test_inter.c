/*
 * test_inter.c - every collective MPI defines on an intercommunicator, through coll/gpu.
 *
 * The world is split twice into two groups of unequal or equal size (rank 0 against the rest,
 * then even against odd ranks: 1+3 and 2+2 on 4 ranks), joined by MPI_Intercomm_create.  On
 * each intercommunicator, blocking and nonblocking: bcast, allreduce, reduce, gather(v),
 * scatter(v), allgather(v), alltoall(v,w), reduce_scatter(_block), barrier; the rooted ones
 * with the root in either group (MPI_ROOT at the root, MPI_PROC_NULL at the rest of its group,
 * the root's rank at the remote group).  Receive sides hold one block per rank of the REMOTE
 * group.  Every buffer's kind (host or device) cycles from call to call and differs between
 * ranks of one call; send data is pseudo-random from a seed rank 0 draws, receive buffers are
 * poisoned first, and each rank checks against a reference computed on the host (gaps of v
 * layouts and buffers MPI_PROC_NULL ranks pass must keep their poison).  Finally
 * MPI_Intercomm_merge, and a device-buffer allreduce on the merged communicator.
 *
 * With THREADS above 1 (MPI_THREAD_MULTIPLE), THREADS threads run all of it at once, each on
 * intercommunicators of its own made from its own duplicate of MPI_COMM_WORLD; one check per
 * thread then.
 *
 * Run by inter.sh under several coll component lists (gpu,tuned among them: coll/gpu must
 * fill the intercommunicator's slots itself).
 *
 * Usage: test_inter [THREADS]
 */
#include "mpitest.h"

#include <stdarg.h>
#include <time.h>

#define N 37        /* elements per block */
#define T 12        /* reduce_scatter total: divisible by every group size used here */
#define POISON ((int32_t) 0x5A5A5A5A)

static unsigned seed;
static _Thread_local unsigned call_no;
static int have_dev;

/* The threads mode: a thread's own world (a duplicate of MPI_COMM_WORLD) and its verdict. */
typedef struct {
    int index, ok, checks;
    MPI_Comm world;
    char diag[MT_DIAG_LEN];
} worker_t;
static _Thread_local worker_t *me; /* NULL: the one thread, a TAP check per case */

static MPI_Comm world_comm(void)
{
    return NULL != me ? me->world : MPI_COMM_WORLD;
}

static void set_case(const char *name)
{
    if (NULL == me) {
        mt_set_case(name);
    }
}

/* A case's verdict: a TAP check (collective over MPI_COMM_WORLD) with one thread; with several,
 * this thread's tally, reported when they are all done. */
static int report(int ok, const char *diag, const char *fmt, ...)
{
    char line[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (NULL == me) {
        return mt_check(ok, diag, "%s", line);
    }
    ++me->checks;
    if (!ok) {
        me->ok = 0;
        mt_diag_add(me->diag, "thread %d, %s: %s; ", me->index, line, NULL != diag ? diag : "");
    }
    return ok;
}

/* Element i of what world rank w contributes in the case with salt s. */
static int32_t val(unsigned s, int w, int i)
{
    uint32_t x = (seed + s) * 2654435761u ^ (uint32_t) (w + 1) * 40503u
                 ^ (uint32_t) (i + 7) * 2246822519u;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    return (int32_t) (x % 2001) - 1000;
}

/* The kind of the next buffer: a hash of the buffer's number, the rank and the seed, so that
 * every role of every rank sees both kinds over a run and ranks of one call differ. */
static mt_mem_t next_kind(void)
{
    uint32_t x;

    if (!have_dev) {
        return MT_MEM_HOST;
    }
    x = (call_no++ + seed) * 2654435761u ^ (uint32_t) (mt_rank + 1) * 40503u;
    x ^= x >> 16;
    x *= 2246822519u;
    x ^= x >> 13;
    return (0 != (x & 1)) ? MT_MEM_DEVICE : MT_MEM_HOST;
}

/* A test buffer of n int32: its memory (host or device) and a host image. */
typedef struct {
    mt_mem_t kind;
    void *p;
    int32_t *h;
    size_t n;
} tb_t;

/* Allocate n elements of the next kind holding init (or the poison when init is NULL). */
static int tb_new(tb_t *b, size_t n, const int32_t *init)
{
    b->kind = next_kind();
    b->n = n;
    b->h = malloc((n ? n : 1) * sizeof(int32_t));
    b->p = mt_mem_alloc(b->kind, n * sizeof(int32_t));
    if (NULL == b->h || NULL == b->p) {
        return -1;
    }
    for (size_t i = 0; i < n; ++i) {
        b->h[i] = (NULL != init) ? init[i] : POISON;
    }
    return mt_mem_put(b->kind, b->p, b->h, n * sizeof(int32_t));
}

static int tb_fetch(tb_t *b)
{
    return mt_mem_get(b->kind, b->h, b->p, b->n * sizeof(int32_t));
}

static void tb_free(tb_t *b)
{
    mt_mem_free(b->kind, b->p);
    free(b->h);
    memset(b, 0, sizeof(*b));
}

/* One intercommunicator and who is where. */
typedef struct {
    const char *name;
    MPI_Comm ic;
    int group;          /* 0 or 1 */
    int lr, ls, rs;     /* local rank, local size, remote size */
    int members[2][64]; /* world ranks of each group, in local-rank order */
    int nmembers[2];
} ictx_t;

/* Compare got[i] with want; note the first difference. */
static int expect(char *diag, const char *what, int idx, int32_t got, int32_t want)
{
    if (got != want) {
        mt_diag_add(diag, "%s[%d]: expected %d got %d (kind cycle %u) ", what, idx, want, got,
                    call_no);
        return 0;
    }
    return 1;
}

/* Wait for a nonblocking call, or pass a blocking call's result on. */
static int finish(int rc, int nb, MPI_Request *req)
{
    if (nb && MPI_SUCCESS == rc) {
        rc = MPI_Wait(req, MPI_STATUS_IGNORE);
    }
    return rc;
}

/* Block counts of the v collectives: the block of (local rank j) in a group. */
static int vcount(int j)
{
    return 1 + (j * 3) % 5;
}

/* Counts of the all-to-all v/w calls: from world rank s to world rank r. */
static int pcount(int s, int r)
{
    return 1 + (s + 2 * r) % 4;
}

/* reduce_scatter counts of the group of size ls (they sum to T in every group). */
static int rs_count(int ls, int k)
{
    if (2 == ls) {
        return 0 == k ? 5 : 7;
    }
    if (3 == ls) {
        return 3 + k;
    }
    return T / ls;
}

#define CHECK_RC(rc)                                               \
    do {                                                           \
        if (MPI_SUCCESS != (rc)) {                                 \
            mt_diag_add(diag, "returned %s ", mt_mpi_error(rc));   \
            ok = 0;                                                \
        }                                                          \
    } while (0)

/* ---- rooted collectives ------------------------------------------------------------------ */

/* The root's world rank and its argument on this rank, for a root at the last local rank of
 * group rg. */
static int root_arg(const ictx_t *c, int rg, int *root_w, int *is_root, int *idle)
{
    int root_lr = c->nmembers[rg] - 1;
    *root_w = c->members[rg][root_lr];
    *is_root = (c->group == rg && c->lr == root_lr);
    *idle = (c->group == rg && !*is_root);
    return *is_root ? MPI_ROOT : *idle ? MPI_PROC_NULL : root_lr;
}

static int case_bcast(const ictx_t *c, int nb, int rg, unsigned s, char *diag)
{
    int root_w, is_root, idle, ok = 1, rc;
    int root = root_arg(c, rg, &root_w, &is_root, &idle);
    int32_t mine[N];
    MPI_Request req;
    tb_t b;

    for (int i = 0; i < N; ++i) {
        mine[i] = val(s, mt_rank, i);
    }
    if (0 != tb_new(&b, N, is_root ? mine : NULL)) {
        mt_diag_add(diag, "allocation failed");
        return 0;
    }
    rc = nb ? MPI_Ibcast(b.p, N, MPI_INT32_T, root, c->ic, &req)
            : MPI_Bcast(b.p, N, MPI_INT32_T, root, c->ic);
    rc = finish(rc, nb, &req);
    CHECK_RC(rc);
    ok = ok && 0 == tb_fetch(&b);
    for (int i = 0; ok && i < N; ++i) {
        int32_t want = is_root ? mine[i] : idle ? POISON : val(s, root_w, i);
        ok = expect(diag, is_root ? "root buffer" : idle ? "MPI_PROC_NULL buffer" : "buffer", i,
                    b.h[i], want);
    }
    tb_free(&b);
    return ok;
}

static int case_reduce(const ictx_t *c, int nb, int rg, unsigned s, char *diag)
{
    int root_w, is_root, idle, ok = 1, rc;
    int root = root_arg(c, rg, &root_w, &is_root, &idle);
    int other = 1 - rg;
    int32_t mine[N];
    MPI_Request req;
    tb_t sb = {0}, rb = {0};

    for (int i = 0; i < N; ++i) {
        mine[i] = val(s, mt_rank, i);
    }
    /* the root's group sends nothing (its idle ranks pass a poisoned buffer that must stay so);
     * the remote group's receive buffer means nothing (NULL) */
    int sender = !is_root && !idle;
    if ((sender && 0 != tb_new(&sb, N, mine)) || (!sender && 0 != tb_new(&rb, N, NULL))) {
        mt_diag_add(diag, "allocation failed");
        return 0;
    }
    rc = nb ? MPI_Ireduce(sb.p, rb.p, N, MPI_INT32_T, MPI_SUM, root, c->ic, &req)
            : MPI_Reduce(sb.p, rb.p, N, MPI_INT32_T, MPI_SUM, root, c->ic);
    rc = finish(rc, nb, &req);
    CHECK_RC(rc);
    if (is_root || idle) {
        ok = ok && 0 == tb_fetch(&rb);
        for (int i = 0; ok && i < N; ++i) {
            int32_t want = POISON;
            if (is_root) {
                want = 0;
                for (int k = 0; k < c->nmembers[other]; ++k) {
                    want += val(s, c->members[other][k], i);
                }
            }
            ok = expect(diag, is_root ? "root result" : "MPI_PROC_NULL buffer", i, rb.h[i], want);
        }
    }
    tb_free(&sb);
    tb_free(&rb);
    return ok;
}

/* gather (v: blocks of vcount(j) with a one-element gap after each) */
static int case_gather(const ictx_t *c, int nb, int v, int rg, unsigned s, char *diag)
{
    int root_w, is_root, idle, ok = 1, rc;
    int root = root_arg(c, rg, &root_w, &is_root, &idle);
    int other = 1 - rg;
    int counts[64], displs[64], total = 0;
    int32_t mine[N];
    MPI_Request req;
    tb_t sb = {0}, rb = {0};
    int scount = v ? vcount(c->lr) : N;

    for (int j = 0; j < c->rs; ++j) {
        counts[j] = v ? vcount(j) : N;
        displs[j] = total;
        total += counts[j] + (v ? 1 : 0);
    }
    for (int i = 0; i < N; ++i) {
        mine[i] = val(s, mt_rank, i);
    }
    if ((!is_root && !idle && 0 != tb_new(&sb, (size_t) scount, mine))
        || (is_root && 0 != tb_new(&rb, (size_t) total, NULL))) {
        mt_diag_add(diag, "allocation failed");
        return 0;
    }
    if (v) {
        rc = nb ? MPI_Igatherv(sb.p, scount, MPI_INT32_T, rb.p, counts, displs, MPI_INT32_T, root,
                               c->ic, &req)
                : MPI_Gatherv(sb.p, scount, MPI_INT32_T, rb.p, counts, displs, MPI_INT32_T, root,
                              c->ic);
    } else {
        rc = nb ? MPI_Igather(sb.p, N, MPI_INT32_T, rb.p, N, MPI_INT32_T, root, c->ic, &req)
                : MPI_Gather(sb.p, N, MPI_INT32_T, rb.p, N, MPI_INT32_T, root, c->ic);
    }
    rc = finish(rc, nb, &req);
    CHECK_RC(rc);
    if (is_root) {
        ok = ok && 0 == tb_fetch(&rb);
        for (int j = 0; ok && j < c->rs; ++j) {
            for (int i = 0; ok && i < counts[j]; ++i) {
                ok = expect(diag, "gathered", displs[j] + i, rb.h[displs[j] + i],
                            val(s, c->members[other][j], i));
            }
            if (ok && v) {
                ok = expect(diag, "gap", displs[j] + counts[j], rb.h[displs[j] + counts[j]],
                            POISON);
            }
        }
    }
    tb_free(&sb);
    tb_free(&rb);
    return ok;
}

static int case_scatter(const ictx_t *c, int nb, int v, int rg, unsigned s, char *diag)
{
    int root_w, is_root, idle, ok = 1, rc;
    int root = root_arg(c, rg, &root_w, &is_root, &idle);
    int counts[64], displs[64], total = 0;
    int32_t *src = NULL;
    MPI_Request req;
    tb_t sb = {0}, rb = {0};
    int rcount = v ? vcount(c->lr) : N;

    for (int j = 0; j < c->rs; ++j) {
        counts[j] = v ? vcount(j) : N;
        displs[j] = total;
        total += counts[j] + (v ? 1 : 0);
    }
    if (is_root) {
        src = malloc((size_t) total * sizeof(int32_t));
        for (int i = 0; NULL != src && i < total; ++i) {
            src[i] = val(s, mt_rank, i);
        }
    }
    if ((is_root && (NULL == src || 0 != tb_new(&sb, (size_t) total, src)))
        || (!is_root && !idle && 0 != tb_new(&rb, (size_t) rcount, NULL))) {
        mt_diag_add(diag, "allocation failed");
        free(src);
        return 0;
    }
    if (v) {
        rc = nb ? MPI_Iscatterv(sb.p, counts, displs, MPI_INT32_T, rb.p, rcount, MPI_INT32_T,
                                root, c->ic, &req)
                : MPI_Scatterv(sb.p, counts, displs, MPI_INT32_T, rb.p, rcount, MPI_INT32_T,
                               root, c->ic);
    } else {
        rc = nb ? MPI_Iscatter(sb.p, N, MPI_INT32_T, rb.p, N, MPI_INT32_T, root, c->ic, &req)
                : MPI_Scatter(sb.p, N, MPI_INT32_T, rb.p, N, MPI_INT32_T, root, c->ic);
    }
    rc = finish(rc, nb, &req);
    CHECK_RC(rc);
    if (!is_root && !idle) {
        int off = v ? 0 : c->lr * N;
        if (v) {
            for (int j = 0; j < c->lr; ++j) {
                off += vcount(j) + 1;
            }
        }
        ok = ok && 0 == tb_fetch(&rb);
        for (int i = 0; ok && i < rcount; ++i) {
            ok = expect(diag, "scattered", i, rb.h[i], val(s, root_w, off + i));
        }
    }
    if (is_root) {
        /* the root's send buffer is read only */
        ok = ok && 0 == tb_fetch(&sb);
        for (int i = 0; ok && i < total; ++i) {
            ok = expect(diag, "root send buffer", i, sb.h[i], src[i]);
        }
    }
    free(src);
    tb_free(&sb);
    tb_free(&rb);
    return ok;
}

/* ---- the others -------------------------------------------------------------------------- */

static int case_allreduce(const ictx_t *c, int nb, unsigned s, char *diag)
{
    int other = 1 - c->group, ok = 1, rc;
    int32_t mine[N];
    MPI_Request req;
    tb_t sb, rb;

    for (int i = 0; i < N; ++i) {
        mine[i] = val(s, mt_rank, i);
    }
    if (0 != tb_new(&sb, N, mine) || 0 != tb_new(&rb, N, NULL)) {
        mt_diag_add(diag, "allocation failed");
        return 0;
    }
    rc = nb ? MPI_Iallreduce(sb.p, rb.p, N, MPI_INT32_T, MPI_SUM, c->ic, &req)
            : MPI_Allreduce(sb.p, rb.p, N, MPI_INT32_T, MPI_SUM, c->ic);
    rc = finish(rc, nb, &req);
    CHECK_RC(rc);
    ok = ok && 0 == tb_fetch(&rb);
    for (int i = 0; ok && i < N; ++i) {
        int32_t want = 0;
        for (int k = 0; k < c->nmembers[other]; ++k) {
            want += val(s, c->members[other][k], i);
        }
        ok = expect(diag, "result", i, rb.h[i], want);
    }
    tb_free(&sb);
    tb_free(&rb);
    return ok;
}

static int case_allgather(const ictx_t *c, int nb, int v, unsigned s, char *diag)
{
    int other = 1 - c->group, ok = 1, rc;
    int counts[64], displs[64], total = 0;
    int scount = v ? vcount(c->lr) : N;
    int32_t mine[N];
    MPI_Request req;
    tb_t sb, rb;

    for (int j = 0; j < c->rs; ++j) {
        counts[j] = v ? vcount(j) : N;
        displs[j] = total;
        total += counts[j] + (v ? 1 : 0);
    }
    for (int i = 0; i < N; ++i) {
        mine[i] = val(s, mt_rank, i);
    }
    if (0 != tb_new(&sb, (size_t) scount, mine) || 0 != tb_new(&rb, (size_t) total, NULL)) {
        mt_diag_add(diag, "allocation failed");
        return 0;
    }
    if (v) {
        rc = nb ? MPI_Iallgatherv(sb.p, scount, MPI_INT32_T, rb.p, counts, displs, MPI_INT32_T,
                                  c->ic, &req)
                : MPI_Allgatherv(sb.p, scount, MPI_INT32_T, rb.p, counts, displs, MPI_INT32_T,
                                 c->ic);
    } else {
        rc = nb ? MPI_Iallgather(sb.p, N, MPI_INT32_T, rb.p, N, MPI_INT32_T, c->ic, &req)
                : MPI_Allgather(sb.p, N, MPI_INT32_T, rb.p, N, MPI_INT32_T, c->ic);
    }
    rc = finish(rc, nb, &req);
    CHECK_RC(rc);
    ok = ok && 0 == tb_fetch(&rb);
    for (int j = 0; ok && j < c->rs; ++j) {
        for (int i = 0; ok && i < counts[j]; ++i) {
            ok = expect(diag, "gathered", displs[j] + i, rb.h[displs[j] + i],
                        val(s, c->members[other][j], i));
        }
        if (ok && v) {
            ok = expect(diag, "gap", displs[j] + counts[j], rb.h[displs[j] + counts[j]], POISON);
        }
    }
    tb_free(&sb);
    tb_free(&rb);
    return ok;
}

/* alltoall (mode 0), alltoallv (1), alltoallw (2) */
static int case_alltoall(const ictx_t *c, int nb, int mode, unsigned s, char *diag)
{
    int other = 1 - c->group, ok = 1, rc;
    int sc[64], sd[64], rc_[64], rd[64], sdb[64], rdb[64], stot = 0, rtot = 0;
    MPI_Datatype types[64];
    int32_t *src;
    MPI_Request req;
    tb_t sb, rb;

    for (int j = 0; j < c->rs; ++j) {
        int peer = c->members[other][j];
        sc[j] = mode ? pcount(mt_rank, peer) : N;
        rc_[j] = mode ? pcount(peer, mt_rank) : N;
        sd[j] = stot;
        rd[j] = rtot;
        sdb[j] = stot * (int) sizeof(int32_t);
        rdb[j] = rtot * (int) sizeof(int32_t);
        stot += sc[j] + (mode ? 1 : 0);
        rtot += rc_[j] + (mode ? 1 : 0);
        types[j] = MPI_INT32_T;
    }
    src = malloc((size_t) stot * sizeof(int32_t));
    if (NULL == src) {
        mt_diag_add(diag, "allocation failed");
        return 0;
    }
    for (int j = 0; j < c->rs; ++j) {
        for (int i = 0; i < sc[j]; ++i) {
            src[sd[j] + i] = val(s, mt_rank, 100 * j + i);
        }
        if (mode) {
            src[sd[j] + sc[j]] = POISON;
        }
    }
    if (0 != tb_new(&sb, (size_t) stot, src) || 0 != tb_new(&rb, (size_t) rtot, NULL)) {
        mt_diag_add(diag, "allocation failed");
        free(src);
        return 0;
    }
    if (0 == mode) {
        rc = nb ? MPI_Ialltoall(sb.p, N, MPI_INT32_T, rb.p, N, MPI_INT32_T, c->ic, &req)
                : MPI_Alltoall(sb.p, N, MPI_INT32_T, rb.p, N, MPI_INT32_T, c->ic);
    } else if (1 == mode) {
        rc = nb ? MPI_Ialltoallv(sb.p, sc, sd, MPI_INT32_T, rb.p, rc_, rd, MPI_INT32_T, c->ic,
                                 &req)
                : MPI_Alltoallv(sb.p, sc, sd, MPI_INT32_T, rb.p, rc_, rd, MPI_INT32_T, c->ic);
    } else {
        rc = nb ? MPI_Ialltoallw(sb.p, sc, sdb, types, rb.p, rc_, rdb, types, c->ic, &req)
                : MPI_Alltoallw(sb.p, sc, sdb, types, rb.p, rc_, rdb, types, c->ic);
    }
    rc = finish(rc, nb, &req);
    CHECK_RC(rc);
    ok = ok && 0 == tb_fetch(&rb);
    for (int j = 0; ok && j < c->rs; ++j) {
        for (int i = 0; ok && i < rc_[j]; ++i) {
            ok = expect(diag, "received", rd[j] + i, rb.h[rd[j] + i],
                        val(s, c->members[other][j], 100 * c->lr + i));
        }
        if (ok && mode) {
            ok = expect(diag, "gap", rd[j] + rc_[j], rb.h[rd[j] + rc_[j]], POISON);
        }
    }
    free(src);
    tb_free(&sb);
    tb_free(&rb);
    return ok;
}

/* reduce_scatter (block 0) and reduce_scatter_block (1): counts of the LOCAL group */
static int case_reduce_scatter(const ictx_t *c, int nb, int block, unsigned s, char *diag)
{
    int other = 1 - c->group, ok = 1, rc, off = 0;
    int counts[64];
    int32_t mine[T];
    MPI_Request req;
    tb_t sb, rb;

    for (int k = 0; k < c->ls; ++k) {
        counts[k] = block ? T / c->ls : rs_count(c->ls, k);
        if (k < c->lr) {
            off += counts[k];
        }
    }
    for (int i = 0; i < T; ++i) {
        mine[i] = val(s, mt_rank, i);
    }
    if (0 != tb_new(&sb, T, mine) || 0 != tb_new(&rb, (size_t) counts[c->lr], NULL)) {
        mt_diag_add(diag, "allocation failed");
        return 0;
    }
    if (block) {
        rc = nb ? MPI_Ireduce_scatter_block(sb.p, rb.p, counts[0], MPI_INT32_T, MPI_SUM, c->ic,
                                            &req)
                : MPI_Reduce_scatter_block(sb.p, rb.p, counts[0], MPI_INT32_T, MPI_SUM, c->ic);
    } else {
        rc = nb ? MPI_Ireduce_scatter(sb.p, rb.p, counts, MPI_INT32_T, MPI_SUM, c->ic, &req)
                : MPI_Reduce_scatter(sb.p, rb.p, counts, MPI_INT32_T, MPI_SUM, c->ic);
    }
    rc = finish(rc, nb, &req);
    CHECK_RC(rc);
    ok = ok && 0 == tb_fetch(&rb);
    for (int i = 0; ok && i < counts[c->lr]; ++i) {
        int32_t want = 0;
        for (int k = 0; k < c->nmembers[other]; ++k) {
            want += val(s, c->members[other][k], off + i);
        }
        ok = expect(diag, "block", i, rb.h[i], want);
    }
    tb_free(&sb);
    tb_free(&rb);
    return ok;
}

static int case_barrier(const ictx_t *c, int nb, char *diag)
{
    MPI_Request req;
    int ok = 1, rc = nb ? MPI_Ibarrier(c->ic, &req) : MPI_Barrier(c->ic);
    rc = finish(rc, nb, &req);
    CHECK_RC(rc);
    return ok;
}

/* ---- driver ------------------------------------------------------------------------------ */

static int make_inter(ictx_t *c, const char *name, int (*color)(int))
{
    MPI_Comm local;
    int rc, leader[2] = {-1, -1};

    memset(c, 0, sizeof(*c));
    c->name = name;
    c->ic = MPI_COMM_NULL;
    for (int w = 0; w < mt_size; ++w) {
        int g = color(w);
        if (0 > leader[g]) {
            leader[g] = w;
        }
        c->members[g][c->nmembers[g]++] = w;
    }
    c->group = color(mt_rank);
    rc = MPI_Comm_split(world_comm(), c->group, mt_rank, &local);
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    rc = MPI_Intercomm_create(local, 0, world_comm(), leader[1 - c->group], 77, &c->ic);
    MPI_Comm_free(&local);
    if (MPI_SUCCESS != rc) {
        c->ic = MPI_COMM_NULL;
        return rc;
    }
    MPI_Comm_set_errhandler(c->ic, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->ic, &c->lr);
    MPI_Comm_size(c->ic, &c->ls);
    MPI_Comm_remote_size(c->ic, &c->rs);
    return MPI_SUCCESS;
}

static int color_one_vs_rest(int w)
{
    return 0 == w ? 0 : 1;
}

static int color_even_odd(int w)
{
    return w % 2;
}

typedef struct {
    const char *name;
    int (*color)(int);
} split_t;
static const split_t splits[] = {{"1+rest", color_one_vs_rest}, {"even/odd", color_even_odd}};

/* Every case on the intercommunicator of one split; *salt counts the cases. */
static void run_split(const split_t *sp, unsigned *salt)
{
    ictx_t c;
    int rc, ok;
    char tag[96], diag[MT_DIAG_LEN];

    set_case("MPI_Intercomm_create");
    diag[0] = '\0';
    rc = make_inter(&c, sp->name, sp->color);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s", mt_mpi_error(rc));
    }
    snprintf(tag, sizeof(tag), "%s (%d+%d)", c.name, c.nmembers[0], c.nmembers[1]);
    ok = report(MPI_SUCCESS == rc, diag, "MPI_Intercomm_create %s", tag);
    if (NULL != me) {
        ok = mt_agree_on(me->world, ok); /* every rank of this thread's world goes on, or none */
    }
    if (!ok) {
        return;
    }
    for (int nb = 0; nb <= 1; ++nb) {
        const char *b = nb ? "nonblocking" : "blocking";
#define RUN(label, expr)                                                   \
    do {                                                                   \
        char case_name[200];                                               \
        snprintf(case_name, sizeof(case_name), "%s %s %s", tag, b, label); \
        set_case(case_name);                                               \
        diag[0] = '\0';                                                    \
        ++*salt;                                                           \
        ok = (expr);                                                       \
        report(ok, diag, "intercommunicator %s: %s %s", tag, b, label);    \
    } while (0)
        for (int rg = 0; rg <= 1; ++rg) {
            char l[64];
            snprintf(l, sizeof(l), "bcast, root in group %d", rg);
            RUN(l, case_bcast(&c, nb, rg, *salt, diag));
            snprintf(l, sizeof(l), "reduce, root in group %d", rg);
            RUN(l, case_reduce(&c, nb, rg, *salt, diag));
            snprintf(l, sizeof(l), "gather, root in group %d", rg);
            RUN(l, case_gather(&c, nb, 0, rg, *salt, diag));
            snprintf(l, sizeof(l), "gatherv, root in group %d", rg);
            RUN(l, case_gather(&c, nb, 1, rg, *salt, diag));
            snprintf(l, sizeof(l), "scatter, root in group %d", rg);
            RUN(l, case_scatter(&c, nb, 0, rg, *salt, diag));
            snprintf(l, sizeof(l), "scatterv, root in group %d", rg);
            RUN(l, case_scatter(&c, nb, 1, rg, *salt, diag));
        }
        RUN("allreduce", case_allreduce(&c, nb, *salt, diag));
        RUN("allgather", case_allgather(&c, nb, 0, *salt, diag));
        RUN("allgatherv", case_allgather(&c, nb, 1, *salt, diag));
        RUN("alltoall", case_alltoall(&c, nb, 0, *salt, diag));
        RUN("alltoallv", case_alltoall(&c, nb, 1, *salt, diag));
        RUN("alltoallw", case_alltoall(&c, nb, 2, *salt, diag));
        RUN("reduce_scatter", case_reduce_scatter(&c, nb, 0, *salt, diag));
        RUN("reduce_scatter_block", case_reduce_scatter(&c, nb, 1, *salt, diag));
        RUN("barrier", case_barrier(&c, nb, diag));
#undef RUN
    }

    /* merge, and a device allreduce over everyone */
    {
        MPI_Comm merged = MPI_COMM_NULL;
        int32_t mine[N];
        tb_t sb = {0}, rb = {0};

        set_case("MPI_Intercomm_merge");
        diag[0] = '\0';
        ++*salt;
        ok = 1;
        rc = MPI_Intercomm_merge(c.ic, 1 == c.group, &merged);
        CHECK_RC(rc);
        for (int i = 0; i < N; ++i) {
            mine[i] = val(*salt, mt_rank, i);
        }
        if (ok) {
            MPI_Comm_set_errhandler(merged, MPI_ERRORS_RETURN);
            ok = 0 == tb_new(&sb, N, mine) && 0 == tb_new(&rb, N, NULL);
        }
        if (ok) {
            rc = MPI_Allreduce(sb.p, rb.p, N, MPI_INT32_T, MPI_SUM, merged);
            CHECK_RC(rc);
            ok = ok && 0 == tb_fetch(&rb);
            for (int i = 0; ok && i < N; ++i) {
                int32_t want = 0;
                for (int w = 0; w < mt_size; ++w) {
                    want += val(*salt, w, i);
                }
                ok = expect(diag, "merged allreduce", i, rb.h[i], want);
            }
        }
        report(ok, diag, "MPI_Intercomm_merge %s, then MPI_Allreduce on it", tag);
        tb_free(&sb);
        tb_free(&rb);
        if (MPI_COMM_NULL != merged) {
            MPI_Comm_free(&merged);
        }
    }
    set_case("MPI_Comm_free (intercommunicator)");
    rc = MPI_Comm_free(&c.ic);
    report(MPI_SUCCESS == rc, NULL, "MPI_Comm_free %s", tag);
}

static void *worker(void *arg)
{
    unsigned salt = 100000u * (unsigned) ((worker_t *) arg)->index;

    me = arg;
    for (size_t sp = 0; sp < sizeof(splits) / sizeof(splits[0]); ++sp) {
        run_split(&splits[sp], &salt);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    char why[300];
    unsigned salt = 0;
    int threads = (argc > 1) ? atoi(argv[1]) : 1;

    if (threads > 1) {
        mt_init_threads(&argc, &argv);
    } else {
        mt_init(&argc, &argv);
    }
    if (2 > mt_size || 64 < mt_size) {
        mt_skip_all("needs 2 to 64 ranks");
    }
    have_dev = mt_device_open(why, sizeof(why));
    seed = (unsigned) time(NULL);
    MPI_Bcast(&seed, 1, MPI_UNSIGNED, 0, MPI_COMM_WORLD);
    {
        const char *coll = getenv("OMPI_MCA_coll");
        tap_diag("%d ranks, %d thread(s), coll components: %s, seed %u, buffers: %s", mt_size,
                 threads > 1 ? threads : 1, coll ? coll : "(default)", seed,
                 have_dev ? "host and device" : why);
    }

    if (threads > 1) {
        worker_t *w = calloc((size_t) threads, sizeof(*w));
        char devdiag[MT_DIAG_LEN] = "";
        int on_device;

        for (int t = 0; t < threads; ++t) {
            w[t].index = t + 1;
            w[t].ok = 1;
            MPI_Comm_dup(MPI_COMM_WORLD, &w[t].world);
        }
        on_device = mt_threads_run(threads, worker, w, sizeof(*w), devdiag);
        for (int t = 0; t < threads; ++t) {
            mt_set_case("a thread's intercommunicators");
            mt_check(w[t].ok && on_device, on_device ? w[t].diag : devdiag,
                     "thread %d of %d: %d intercommunicator checks right, "
                     "the other threads' at once", t + 1, threads, w[t].checks);
            MPI_Comm_free(&w[t].world);
        }
        free(w);
        return mt_finish();
    }
    for (size_t sp = 0; sp < sizeof(splits) / sizeof(splits[0]); ++sp) {
        run_split(&splits[sp], &salt);
    }
    return mt_finish();
}
