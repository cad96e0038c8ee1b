/*
 * test_robust.c - what real MPI programs do to device-buffer collectives that a matrix of
 * single calls does not: communicators freed under running nonblocking calls, many calls
 * outstanding, completion in different orders on different ranks, many communicators, memory
 * kinds mixed across ranks and calls, threads.
 *
 *   test_robust freed     MPI_Comm_free and MPI_Comm_disconnect on a communicator (a dup of
 *                         world) while device MPI_Iallreduce / MPI_Ibcast (node team) and staged
 *                         MPI_Iallgather / MPI_Ialltoall / MPI_Ireduce_scatter_block are still
 *                         outstanding on it, then MPI_Wait on each (last first, in issue
 *                         order); the free returns at once while a rank is late; with
 *                         coll_gpu_uniform_buffers=true also MPI_Request_free before the free;
 *                         an intercommunicator freed under staged calls; the last case frees,
 *                         waits and calls MPI_Finalize right after the last MPI_Wait
 *   test_robust many [N]  N (default 300) MPI_Iallreduce outstanding on one communicator, then
 *                         MPI_Waitall; then N mixed calls on three communicators
 *   test_robust any       MPI_Waitany, MPI_Waitsome and MPI_Testany over device calls on three
 *                         communicators, issued in one order and completed in a rank-dependent
 *                         one
 *   test_robust crossed [warm|agreed]  even ranks start MPI_Iallreduce and MPI_Ibcast on dup
 *                         A then dup B, odd ranks B then A (legal: the order only has to agree
 *                         per communicator); first on fresh dups, then again; warm: after a
 *                         blocking device allreduce on each dup (its node team is there);
 *                         agreed: after a blocking host allreduce on each (the kinds are
 *                         agreed, so the calls take the team, whose setup they start)
 *   test_robust kinds     14 collectives (allreduce, bcast, allgather(v), alltoall(v), reduce,
 *                         reduce_scatter_block, gather, scatter, scan, exscan; in place where
 *                         listed), blocking, then nonblocking all at once with an MPI_Ibarrier,
 *                         counts 0 .. 40000, the buffers' memory kind (device, host, pinned,
 *                         managed, pool) mixed across ranks and changing per call: with
 *                         coll_gpu_uniform_buffers=false as MPICH's suite does (even ranks
 *                         device, odd host) and rotating; with true within a class per call
 *   test_robust comms [N] N (default 300) dups of world alive at once, each with a node team
 *                         (blocking and nonblocking device allreduce large enough to map peer
 *                         buffers), all used twice
 *   test_robust reducefirst  a host MPI_Reduce as a fresh dup's first collective, then device
 *                         MPI_Iallreduce and MPI_Ibcast there (the reduce agrees on the kinds)
 *   test_robust settled [N]  a fresh dup's first device calls nonblocking (they begin its node
 *                         team's setup), then a blocking device allreduce (it settles the
 *                         setup on every rank), then N (default 3) rounds of MPI_Iallreduce and
 *                         MPI_Ibcast
 *   test_robust stale     names in /dev/shm that a killed process with this process' pid left
 *                         (pids wrap): device allreduce and bcast on world and a dup right
 *   test_robust threads   MPI_THREAD_MULTIPLE: 3 threads, each on its own dup of world, loop
 *                         over blocking and nonblocking allreduce and bcast and a blocking
 *                         allgather(v), alltoall(v) or reduce_scatter_block with buffers
 *                         allocated and freed in the loop; device buffers, then host buffers
 *
 * COLL_GPU_TEST_THREAD_MULTIPLE set: every mode runs under MPI_THREAD_MULTIPLE (as mpi4py
 * initializes MPI).
 *
 * Every call runs on fresh random data into poisoned device outputs and is compared with a
 * host reference computed from every rank's inputs.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mpitest.h"

#define POISON (-7)
#define MAXP 64 /* ranks at most (the v calls' count arrays) */

static unsigned next_round = 1;

/* Buffer kinds: mpitest.h's mt_kind_t, every kind a CUDA program allocates.
 * dev_memcpy copies between any two kinds: host code never touches device memory itself. */
static int mem_copy(void *dst, const void *src, size_t bytes)
{
    return (0 == bytes || DEV_OK == dev_memcpy(dst, src, bytes)) ? 0 : -1;
}

typedef enum {
    K_ALLREDUCE,     /* int32 sum */
    K_ALLREDUCE_IP,  /* in place */
    K_BCAST,
    K_ALLGATHER,
    K_ALLTOALL,
    K_RSB,           /* reduce_scatter_block, int32 sum */
    K_REDUCE,        /* to root, int32 sum */
    K_GATHER,
    K_SCATTER,
    K_SCAN,
    K_EXSCAN,
    K_ALLGATHERV,    /* blocks of count + 3q elements, a hole of one element after each */
    K_ALLTOALLV,     /* blocks of count + (me + 2p) % 5 elements, packed */
    K_ALLGATHER_IP,  /* in place */
    K_COUNT
} kind_t;

/* The first six: what the node team takes (allreduce, bcast) and staged calls beside them. */
#define K_BASIC 6

static const char *const kind_names[K_COUNT] = {
    "allreduce", "allreduce(in place)", "bcast", "allgather", "alltoall",
    "reduce_scatter_block", "reduce", "gather", "scatter", "scan", "exscan", "allgatherv",
    "alltoallv", "allgather(in place)"};

/* One call on buffers of one kind. */
typedef struct {
    kind_t kind;
    int n, me;          /* the communicator's size and this rank's rank, at the start */
    int count;          /* elements per rank (per block for allgather, alltoall, rsb) */
    int root;
    unsigned k;
    mt_kind_t mem;          /* the buffers' kind */
    bool blocking;
    size_t sn, rn;      /* elements of the send and receive buffers */
    void *s, *r;
    int counts[2][MAXP], displs[2][MAXP]; /* v calls: [0] send, [1] receive */
    MPI_Request req;
    int rc;
} call_t;

/* Block counts of the v calls (count 0: all empty). */
static int allgatherv_block(int count, int q)
{
    return 0 == count ? 0 : count + 3 * q;
}

static int alltoallv_block(int count, int from, int to)
{
    return 0 == count ? 0 : count + (from + 2 * to) % 5;
}

/* The layouts of the v calls and the buffers' element counts. */
static void call_shape(call_t *c)
{
    int count = c->count, n = c->n, me = c->me, at = 0;

    c->sn = c->rn = (size_t) count;
    switch (c->kind) {
    case K_ALLGATHER:
    case K_ALLGATHER_IP:
    case K_GATHER:
        c->rn = (size_t) count * (size_t) n;
        break;
    case K_ALLTOALL:
        c->sn = c->rn = (size_t) count * (size_t) n;
        break;
    case K_RSB:
    case K_SCATTER:
        c->sn = (size_t) count * (size_t) n;
        break;
    case K_ALLGATHERV:
        c->sn = (size_t) allgatherv_block(count, me);
        for (int q = 0; q < n; ++q) {
            c->counts[1][q] = allgatherv_block(count, q);
            c->displs[1][q] = at;
            at += c->counts[1][q] + 1;
        }
        c->rn = (size_t) at;
        break;
    case K_ALLTOALLV:
        for (int p = 0; p < n; ++p) {
            c->counts[0][p] = alltoallv_block(count, me, p);
            c->displs[0][p] = at;
            at += c->counts[0][p];
        }
        c->sn = (size_t) at;
        at = 0;
        for (int p = 0; p < n; ++p) {
            c->counts[1][p] = alltoallv_block(count, p, me);
            c->displs[1][p] = at;
            at += c->counts[1][p];
        }
        c->rn = (size_t) at;
        break;
    default:
        break;
    }
    if (K_ALLREDUCE_IP == c->kind || K_BCAST == c->kind || K_ALLGATHER_IP == c->kind) {
        c->sn = 0;
    }
}

/* Where rank q's alltoallv block for rank p starts in q's send buffer. */
static int alltoallv_sdispl(int count, int q, int p)
{
    int at = 0;
    for (int j = 0; j < p; ++j) {
        at += alltoallv_block(count, q, j);
    }
    return at;
}

/* What rank me's receive buffer holds at element i when the call is over; *undefined when MPI
 * leaves it undefined (exscan at rank 0). */
static int32_t expected(const call_t *c, size_t i, bool *undefined)
{
    int32_t sum = 0;
    size_t cnt = (size_t) c->count;

    *undefined = false;
    switch (c->kind) {
    case K_ALLREDUCE:
    case K_ALLREDUCE_IP:
        for (int q = 0; q < c->n; ++q) {
            sum += mt_input(q, i, c->k);
        }
        return sum;
    case K_REDUCE:
        if (c->me != c->root) {
            return POISON;
        }
        for (int q = 0; q < c->n; ++q) {
            sum += mt_input(q, i, c->k);
        }
        return sum;
    case K_BCAST:
        return mt_input(c->root, i, c->k);
    case K_ALLGATHER:
    case K_ALLGATHER_IP:
        return mt_input((int) (i / cnt), i % cnt, c->k);
    case K_GATHER:
        return c->me == c->root ? mt_input((int) (i / cnt), i % cnt, c->k) : POISON;
    case K_ALLTOALL:
        /* block q came from rank q, its block me */
        return mt_input((int) (i / cnt), (size_t) c->me * cnt + i % cnt, c->k);
    case K_RSB:
        for (int q = 0; q < c->n; ++q) {
            sum += mt_input(q, (size_t) c->me * cnt + i, c->k);
        }
        return sum;
    case K_SCATTER:
        return mt_input(c->root, (size_t) c->me * cnt + i, c->k);
    case K_SCAN:
    case K_EXSCAN:
        *undefined = (K_EXSCAN == c->kind && 0 == c->me);
        for (int q = 0; q < c->me + (K_SCAN == c->kind); ++q) {
            sum += mt_input(q, i, c->k);
        }
        return sum;
    case K_ALLGATHERV:
        for (int q = 0; q < c->n; ++q) {
            size_t lo = (size_t) c->displs[1][q];
            if (i >= lo && i < lo + (size_t) c->counts[1][q]) {
                return mt_input(q, i - lo, c->k);
            }
        }
        return POISON; /* a hole */
    case K_ALLTOALLV:
        for (int p = 0; p < c->n; ++p) {
            size_t lo = (size_t) c->displs[1][p];
            if (i >= lo && i < lo + (size_t) c->counts[1][p]) {
                return mt_input(p, (size_t) alltoallv_sdispl(c->count, p, c->me) + (i - lo),
                             c->k);
            }
        }
        return POISON;
    default:
        return 0;
    }
}

/* What the receive buffer holds before the call: poison, but the input where the call reads
 * it (in place, the bcast root). */
static int32_t recv_before(const call_t *c, size_t i)
{
    size_t cnt = (size_t) c->count;

    switch (c->kind) {
    case K_ALLREDUCE_IP:
        return mt_input(c->me, i, c->k);
    case K_BCAST:
        return c->me == c->root ? mt_input(c->me, i, c->k) : POISON;
    case K_ALLGATHER_IP:
        return (i / cnt == (size_t) c->me) ? mt_input(c->me, i % cnt, c->k) : POISON;
    default:
        return POISON;
    }
}

/* The blocking call; done at return. */
static int call_blocking(call_t *c, MPI_Comm comm)
{
    const MPI_Datatype T = MPI_INT32_T;
    int n = c->count, root = c->root;
    void *s = c->s, *r = c->r;

    switch (c->kind) {
    case K_ALLREDUCE:
        return MPI_Allreduce(s, r, n, T, MPI_SUM, comm);
    case K_ALLREDUCE_IP:
        return MPI_Allreduce(MPI_IN_PLACE, r, n, T, MPI_SUM, comm);
    case K_BCAST:
        return MPI_Bcast(r, n, T, root, comm);
    case K_ALLGATHER:
        return MPI_Allgather(s, n, T, r, n, T, comm);
    case K_ALLTOALL:
        return MPI_Alltoall(s, n, T, r, n, T, comm);
    case K_RSB:
        return MPI_Reduce_scatter_block(s, r, n, T, MPI_SUM, comm);
    case K_REDUCE:
        return MPI_Reduce(s, r, n, T, MPI_SUM, root, comm);
    case K_GATHER:
        return MPI_Gather(s, n, T, r, n, T, root, comm);
    case K_SCATTER:
        return MPI_Scatter(s, n, T, r, n, T, root, comm);
    case K_SCAN:
        return MPI_Scan(s, r, n, T, MPI_SUM, comm);
    case K_EXSCAN:
        return MPI_Exscan(s, r, n, T, MPI_SUM, comm);
    case K_ALLGATHERV:
        return MPI_Allgatherv(s, (int) c->sn, T, r, c->counts[1], c->displs[1], T, comm);
    case K_ALLTOALLV:
        return MPI_Alltoallv(s, c->counts[0], c->displs[0], T, r, c->counts[1], c->displs[1], T,
                             comm);
    case K_ALLGATHER_IP:
        return MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, n, T, comm);
    default:
        return MPI_ERR_OTHER;
    }
}

/* Its nonblocking twin. */
static int call_nonblocking(call_t *c, MPI_Comm comm)
{
    const MPI_Datatype T = MPI_INT32_T;
    int n = c->count, root = c->root;
    void *s = c->s, *r = c->r;
    MPI_Request *q = &c->req;

    switch (c->kind) {
    case K_ALLREDUCE:
        return MPI_Iallreduce(s, r, n, T, MPI_SUM, comm, q);
    case K_ALLREDUCE_IP:
        return MPI_Iallreduce(MPI_IN_PLACE, r, n, T, MPI_SUM, comm, q);
    case K_BCAST:
        return MPI_Ibcast(r, n, T, root, comm, q);
    case K_ALLGATHER:
        return MPI_Iallgather(s, n, T, r, n, T, comm, q);
    case K_ALLTOALL:
        return MPI_Ialltoall(s, n, T, r, n, T, comm, q);
    case K_RSB:
        return MPI_Ireduce_scatter_block(s, r, n, T, MPI_SUM, comm, q);
    case K_REDUCE:
        return MPI_Ireduce(s, r, n, T, MPI_SUM, root, comm, q);
    case K_GATHER:
        return MPI_Igather(s, n, T, r, n, T, root, comm, q);
    case K_SCATTER:
        return MPI_Iscatter(s, n, T, r, n, T, root, comm, q);
    case K_SCAN:
        return MPI_Iscan(s, r, n, T, MPI_SUM, comm, q);
    case K_EXSCAN:
        return MPI_Iexscan(s, r, n, T, MPI_SUM, comm, q);
    case K_ALLGATHERV:
        return MPI_Iallgatherv(s, (int) c->sn, T, r, c->counts[1], c->displs[1], T, comm, q);
    case K_ALLTOALLV:
        return MPI_Ialltoallv(s, c->counts[0], c->displs[0], T, r, c->counts[1], c->displs[1], T,
                              comm, q);
    case K_ALLGATHER_IP:
        return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, n, T, comm, q);
    default:
        return MPI_ERR_OTHER;
    }
}

/* Make the buffers (input fresh, output poisoned) and start the call (blocking: run it); 0 when
 * the buffers could not be had (nothing started). */
static int call_start_at(call_t *c, kind_t kind, MPI_Comm comm, int count, int root,
                         mt_kind_t mem, unsigned k, bool blocking)
{
    int32_t *h;
    size_t hn;
    bool ok = true;

    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->count = count;
    c->root = root;
    c->k = k;
    c->mem = mem;
    c->blocking = blocking;
    c->req = MPI_REQUEST_NULL;
    MPI_Comm_size(comm, &c->n);
    MPI_Comm_rank(comm, &c->me);
    if (c->n > MAXP) {
        return 0;
    }
    call_shape(c);
    hn = (c->sn > c->rn ? c->sn : c->rn) + 1;
    h = malloc(hn * sizeof(int32_t));
    c->s = mt_kind_alloc(c->mem, c->sn * 4);
    c->r = mt_kind_alloc(c->mem, c->rn * 4);
    ok = NULL != h && NULL != c->s && NULL != c->r;
    if (ok) {
        for (size_t i = 0; i < c->sn; ++i) {
            h[i] = mt_input(c->me, i, c->k);
        }
        ok = 0 == mem_copy(c->s, h, c->sn * 4);
        for (size_t i = 0; i < c->rn; ++i) {
            h[i] = recv_before(c, i);
        }
        ok = ok && 0 == mem_copy(c->r, h, c->rn * 4);
    }
    free(h);
    if (!ok) {
        mt_kind_free(c->mem, c->s);
        mt_kind_free(c->mem, c->r);
        c->s = c->r = NULL;
        return 0;
    }
    if (blocking) {
        c->rc = call_blocking(c, comm);
        return 1;
    }
    c->rc = call_nonblocking(c, comm);
    if (MPI_SUCCESS != c->rc) {
        c->req = MPI_REQUEST_NULL;
    }
    return 1;
}

/* A call on device buffers, in the next round (the same on every rank: every rank starts the
 * same calls in the same order). */
static int call_start(call_t *c, kind_t kind, MPI_Comm comm, int count, int root)
{
    return call_start_at(c, kind, comm, count, root, MT_KIND_DEVICE, next_round++, false);
}

/* After completion (c->rc holds what the wait said): compare, free; diag gets the first
 * mismatch. */
static int call_check(call_t *c, char *diag)
{
    int32_t *h = malloc(c->rn * sizeof(int32_t) + 4);
    int ok = MPI_SUCCESS == c->rc && NULL != h && 0 == mem_copy(h, c->r, c->rn * 4);

    if (MPI_SUCCESS != c->rc) {
        mt_diag_add(diag, "%s%s of %d on %s memory returned %d; ", c->blocking ? "" : "i",
                    kind_names[c->kind], c->count, mt_kind_names[c->mem], c->rc);
    }
    for (size_t i = 0; ok && i < c->rn; ++i) {
        bool undefined;
        int32_t want = expected(c, i, &undefined);
        if (!undefined && h[i] != want) {
            mt_diag_add(diag, "%s%s of %d on %s memory (round %u): element %zu is %d, not %d; ",
                        c->blocking ? "" : "i", kind_names[c->kind], c->count,
                        mt_kind_names[c->mem], c->k, i, (int) h[i], (int) want);
            ok = 0;
        }
    }
    free(h);
    mt_kind_free(c->mem, c->s);
    mt_kind_free(c->mem, c->r);
    c->s = c->r = NULL;
    return ok;
}

/* Wait for every call of c[0..n) (in issue order, or the reverse), record each one's own
 * status. */
static void wait_in_order(call_t *c, int n, bool forward)
{
    for (int j = 0; j < n; ++j) {
        int i = forward ? j : n - 1 - j;
        if (MPI_REQUEST_NULL != c[i].req) {
            c[i].rc = MPI_Wait(&c[i].req, MPI_STATUS_IGNORE);
        }
    }
}

static void wait_all(call_t *c, int n)
{
    wait_in_order(c, n, false);
}

static int check_all_calls(call_t *c, int n, char *diag)
{
    int ok = 1;
    for (int i = 0; i < n; ++i) {
        ok = call_check(&c[i], diag) && ok;
    }
    return ok;
}

/* ---- freed --------------------------------------------------------------------------------- */

/* The calls left outstanding on a communicator about to be freed: the node team's (allreduce
 * small and large, in place, bcast) and staged ones, interleaved. */
static const struct {
    kind_t kind;
    int count;
} freed_calls[] = {
    {K_ALLREDUCE, 1021},  {K_BCAST, 65537},   {K_ALLGATHER, 333}, {K_ALLREDUCE_IP, 4099},
    {K_ALLTOALL, 257},    {K_ALLREDUCE, 1},   {K_RSB, 1021},      {K_BCAST, 7},
    {K_ALLREDUCE, 600000},
};
#define NFREED ((int) (sizeof(freed_calls) / sizeof(freed_calls[0])))

static void case_freed(bool disconnect, bool forward)
{
    call_t c[NFREED];
    char diag[MT_DIAG_LEN] = "";
    MPI_Comm dup;
    int made = 1, ok;

    mt_set_case(disconnect ? "freed: MPI_Comm_disconnect" : "freed: MPI_Comm_free");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (int i = 0; i < NFREED; ++i) {
        made = call_start(&c[i], freed_calls[i].kind, dup, freed_calls[i].count,
                          i % mt_size) && made;
    }
    if (disconnect) {
        ok = MPI_SUCCESS == MPI_Comm_disconnect(&dup);
    } else {
        ok = MPI_SUCCESS == MPI_Comm_free(&dup);
    }
    if (!ok) {
        mt_diag_add(diag, "freeing the communicator failed; ");
    }
    ok = ok && MPI_COMM_NULL == dup;
    wait_in_order(c, NFREED, forward);
    ok = check_all_calls(c, made ? NFREED : 0, diag) && made && ok;
    mt_check(ok, diag, "freed: %s on a dup of world with %d device calls outstanding (node team "
                       "and staged), then MPI_Wait on each (%s): right",
             disconnect ? "MPI_Comm_disconnect" : "MPI_Comm_free", NFREED,
             forward ? "in issue order" : "last first");
    /* world still works after, on device memory */
    mt_set_case("freed: a call on world after");
    made = call_start(&c[0], K_ALLREDUCE, MPI_COMM_WORLD, 1021, 0);
    wait_all(c, made);
    ok = made && check_all_calls(c, 1, diag);
    mt_check(ok, diag, "freed: a device MPI_Iallreduce on world after the free: right");
}

/* MPI_Request_free on a running call of the node team, then MPI_Comm_free: the freed request's
 * reference on the communicator goes when it ends (inside progress), the last one at the
 * MPI_Wait of the call queued behind it.  Only where the team takes the calls
 * (coll_gpu_uniform_buffers=true): the staged path's libnbc refuses MPI_Request_free on an
 * active request. */
static void case_freed_request(void)
{
    call_t c[3];
    char diag[MT_DIAG_LEN] = "";
    MPI_Comm dup;
    int made = 1, ok;

    mt_set_case("freed: MPI_Request_free, then MPI_Comm_free");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    /* the kinds agreed first (a blocking host allreduce): the calls then take the node team,
     * whose requests MPI_Request_free takes while they run (libnbc 4.1's refuse it) */
    {
        int one = 1, sum = 0;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, dup);
    }
    made = call_start(&c[0], K_ALLREDUCE, dup, 65537, 0) && made;
    made = call_start(&c[1], K_ALLREDUCE_IP, dup, 1021, 0) && made;
    made = call_start(&c[2], K_BCAST, dup, 3, mt_size - 1) && made;
    ok = MPI_SUCCESS == MPI_Request_free(&c[0].req) && MPI_SUCCESS == MPI_Request_free(&c[1].req);
    ok = MPI_SUCCESS == MPI_Comm_free(&dup) && ok;
    wait_all(c, 3); /* the bcast, queued after both on the team: they ended first */
    ok = check_all_calls(c, made ? 3 : 0, diag) && made && ok;
    mt_check(ok, diag, "freed: MPI_Request_free on two running allreduces, MPI_Comm_free, "
                       "MPI_Wait on the bcast queued after them: all right");
}

/* The same on an intercommunicator (even ranks one group, odd ranks the other; staged): an
 * MPI_Iallreduce, an MPI_Ibcast from the first even rank and an MPI_Iallgather outstanding when
 * it is freed.  Open MPI frees an intercommunicator's local communicator at MPI_Comm_free, under
 * calls that still use it. */
static void case_freed_inter(void)
{
    char diag[MT_DIAG_LEN] = "";
    MPI_Comm local, inter;
    MPI_Request reqs[3];
    int color = mt_rank % 2, lsize, rsize, lrank, ok = 1, rc;
    int32_t *h = NULL, *want = NULL;
    void *sb = NULL, *rb[3] = {NULL, NULL, NULL};
    const int n = 4099;
    unsigned k = next_round++;

    mt_set_case("freed: MPI_Comm_free on an intercommunicator");
    if (2 > mt_size) {
        tap_skip("needs 2 ranks", "freed: an intercommunicator freed under calls");
        return;
    }
    MPI_Comm_split(MPI_COMM_WORLD, color, mt_rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 77, &inter);
    MPI_Comm_size(local, &lsize);
    MPI_Comm_rank(local, &lrank);
    MPI_Comm_remote_size(inter, &rsize);
    h = malloc((size_t) n * (size_t) (rsize > 1 ? rsize : 1) * sizeof(int32_t));
    want = malloc((size_t) n * (size_t) (rsize > 1 ? rsize : 1) * sizeof(int32_t));
    sb = mt_kind_alloc(MT_KIND_DEVICE, (size_t) n * 4);
    rb[0] = mt_kind_alloc(MT_KIND_DEVICE, (size_t) n * 4);
    rb[1] = mt_kind_alloc(MT_KIND_DEVICE, (size_t) n * 4);
    rb[2] = mt_kind_alloc(MT_KIND_DEVICE, (size_t) n * (size_t) rsize * 4);
    ok = NULL != h && NULL != want && NULL != sb && NULL != rb[0] && NULL != rb[1]
         && NULL != rb[2];
    ok = mt_agree(ok);
    if (ok) {
        int root_side = 0 == color; /* the even group's rank 0 broadcasts to the odd group */
        for (int i = 0; i < n; ++i) {
            h[i] = mt_input(mt_rank, (size_t) i, k);
        }
        ok = 0 == mem_copy(sb, h, (size_t) n * 4);
        ok = ok && 0 == mem_copy(rb[1], h, (size_t) n * 4); /* the root's data, or overwritten */
        rc = MPI_Iallreduce(sb, rb[0], n, MPI_INT32_T, MPI_SUM, inter, &reqs[0]);
        rc = (MPI_SUCCESS != rc) ? rc
             : MPI_Ibcast(rb[1], n, MPI_INT32_T,
                          root_side ? (0 == lrank ? MPI_ROOT : MPI_PROC_NULL) : 0, inter,
                          &reqs[1]);
        rc = (MPI_SUCCESS != rc) ? rc
             : MPI_Iallgather(sb, n, MPI_INT32_T, rb[2], n, MPI_INT32_T, inter, &reqs[2]);
        ok = ok && MPI_SUCCESS == rc;
        if (MPI_SUCCESS == rc) {
            ok = MPI_SUCCESS == MPI_Comm_free(&inter) && ok;
            MPI_Comm_free(&local);
            ok = MPI_SUCCESS == MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE) && ok;
        }
        /* allreduce: the sum over the remote group; remote ranks are the world ranks of the
         * other parity */
        ok = ok && 0 == mem_copy(h, rb[0], (size_t) n * 4);
        for (int i = 0; ok && i < n; ++i) {
            int32_t sum = 0;
            for (int q = 1 - color; q < mt_size; q += 2) {
                sum += mt_input(q, (size_t) i, k);
            }
            if (h[i] != sum) {
                mt_diag_add(diag, "allreduce element %d is %d, not %d; ", i, (int) h[i],
                            (int) sum);
                ok = 0;
            }
        }
        ok = ok && 0 == mem_copy(h, rb[1], (size_t) n * 4);
        for (int i = 0; ok && i < n; ++i) {
            /* the odd group gets world rank 0's data; the even group keeps its own */
            int32_t w = mt_input(root_side ? mt_rank : 0, (size_t) i, k);
            if (h[i] != w) {
                mt_diag_add(diag, "bcast element %d is %d, not %d; ", i, (int) h[i], (int) w);
                ok = 0;
            }
        }
        ok = ok && 0 == mem_copy(h, rb[2], (size_t) n * (size_t) rsize * 4);
        for (int q = 0; ok && q < rsize; ++q) {
            for (int i = 0; ok && i < n; ++i) {
                int32_t w = mt_input(1 - color + 2 * q, (size_t) i, k);
                if (h[(size_t) q * (size_t) n + (size_t) i] != w) {
                    mt_diag_add(diag, "allgather block %d element %d is %d, not %d; ", q, i,
                                (int) h[(size_t) q * (size_t) n + (size_t) i], (int) w);
                    ok = 0;
                }
            }
        }
    } else {
        MPI_Comm_free(&inter);
        MPI_Comm_free(&local);
    }
    mt_kind_free(MT_KIND_DEVICE, sb);
    for (int i = 0; i < 3; ++i) {
        mt_kind_free(MT_KIND_DEVICE, rb[i]);
    }
    free(h);
    free(want);
    mt_check(ok, diag, "freed: MPI_Comm_free (and its local communicator) under device "
                       "MPI_Iallreduce, MPI_Ibcast and MPI_Iallgather on an intercommunicator, "
                       "MPI_Waitall: right");
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/* MPI_Comm_free only marks the communicator: with calls of the node team outstanding and the
 * last rank away from MPI for a while (its calls issued, then a sleep), the other ranks' free
 * returns at once instead of waiting for the late rank to move the calls along. */
static void case_freed_late(void)
{
    call_t c[2];
    char diag[MT_DIAG_LEN] = "";
    MPI_Comm dup;
    double t0, took = 0.0;
    int made = 1, ok, late = mt_size - 1;

    mt_set_case("freed: MPI_Comm_free with the last rank late");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    made = call_start(&c[0], K_ALLREDUCE, dup, 1021, 0) && made;
    made = call_start(&c[1], K_BCAST, dup, 4099, late) && made;
    if (late == mt_rank) {
        sleep(2);
    }
    t0 = now();
    ok = MPI_SUCCESS == MPI_Comm_free(&dup);
    took = now() - t0;
    wait_all(c, 2);
    ok = check_all_calls(c, made ? 2 : 0, diag) && made && ok;
    mt_check(ok, diag, "freed: MPI_Comm_free under an MPI_Iallreduce and an MPI_Ibcast with the "
                       "last rank 2 s late: right");
    if (0 == mt_rank) {
        snprintf(diag, sizeof(diag), "MPI_Comm_free took %.3f s", took);
    }
    mt_check(0 != mt_rank || took < 1.0, diag,
             "freed: rank 0's MPI_Comm_free returns before the late rank moves the calls (< 1 s; "
             "the free is deferred, not waited for)");
    tap_diag("rank 0: MPI_Comm_free returned after %.6f s", took);
}

/* The program's end: calls outstanding on world and on a dup freed under them, MPI_Wait, and
 * MPI_Finalize right after the last wait.  No collective may come between, so each rank judges
 * its own results: rank 0 prints the TAP line, a failing rank says why on stderr and exits 1
 * (mpirun's exit status then fails the run). */
static int case_final(void)
{
    call_t c[4];
    char diag[MT_DIAG_LEN] = "";
    MPI_Comm dup;
    int made = 1, ok;

    mt_set_case("final: MPI_Finalize right after the last MPI_Wait");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    made = call_start(&c[0], K_ALLREDUCE, dup, 65537, 0) && made;
    made = call_start(&c[1], K_BCAST, MPI_COMM_WORLD, 1021, mt_size - 1) && made;
    made = call_start(&c[2], K_ALLREDUCE_IP, dup, 17, 0) && made;
    made = call_start(&c[3], K_ALLGATHER, MPI_COMM_WORLD, 99, 0) && made;
    ok = MPI_SUCCESS == MPI_Comm_free(&dup);
    wait_all(c, 4);
    ok = check_all_calls(c, made ? 4 : 0, diag) && made && ok;
    mt_set_case("final: MPI_Finalize");
    MPI_Finalize();
    alarm(0);
    if (!ok) {
        fprintf(stderr, "%sfinal: %s\n", mt_rank_prefix, diag);
    }
    tap_ok(ok, "final: device calls outstanding on world and on a dup freed under them, "
               "MPI_Wait, MPI_Finalize at once: right (rank 0's verdict; the others' is their "
               "exit status)");
    return tap_done();
}

/* ---- many ---------------------------------------------------------------------------------- */

static void case_many(int n)
{
    call_t *c = calloc((size_t) n, sizeof(call_t));
    MPI_Request *reqs = calloc((size_t) n, sizeof(MPI_Request));
    MPI_Comm dups[2];
    char diag[MT_DIAG_LEN] = "";
    int made = NULL != c && NULL != reqs, rc = MPI_SUCCESS, ok;

    mt_set_case("many: MPI_Iallreduce outstanding on one communicator");
    for (int i = 0; made && i < n; ++i) {
        made = call_start(&c[i], (0 == i % 3) ? K_ALLREDUCE_IP : K_ALLREDUCE, MPI_COMM_WORLD,
                          1 + (i * 37) % 3000, 0);
        if (!made) {
            n = i;
        }
    }
    for (int i = 0; i < n; ++i) {
        reqs[i] = c[i].req;
    }
    rc = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    for (int i = 0; i < n; ++i) {
        c[i].req = reqs[i];
        c[i].rc = (MPI_SUCCESS == c[i].rc) ? rc : c[i].rc;
    }
    wait_all(c, n); /* left pending by an error */
    ok = check_all_calls(c, n, diag) && made;
    mt_check(ok, diag, "many: %d device MPI_Iallreduce outstanding on world, MPI_Waitall: right",
             n);

    mt_set_case("many: mixed calls outstanding on three communicators");
    MPI_Comm_dup(MPI_COMM_WORLD, &dups[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &dups[1]);
    made = 1;
    for (int i = 0; made && i < n; ++i) {
        MPI_Comm comm = (0 == i % 3) ? MPI_COMM_WORLD : dups[i % 3 - 1];
        made = call_start(&c[i], (kind_t) (i % K_COUNT), comm, 1 + (i * 53) % 700,
                          i % mt_size);
        if (!made) {
            n = i;
        }
    }
    for (int i = 0; i < n; ++i) {
        reqs[i] = c[n - 1 - i].req;
    }
    rc = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    for (int i = 0; i < n; ++i) {
        c[n - 1 - i].req = reqs[i];
        c[n - 1 - i].rc = (MPI_SUCCESS == c[n - 1 - i].rc) ? rc : c[n - 1 - i].rc;
    }
    wait_all(c, n);
    ok = check_all_calls(c, n, diag) && made;
    mt_check(ok, diag, "many: %d device calls of %d kinds outstanding on world and two dups, "
                       "MPI_Waitall in reverse order: right", n, (int) K_COUNT);
    MPI_Comm_free(&dups[0]);
    MPI_Comm_free(&dups[1]);
    free(c);
    free(reqs);
}

/* ---- any ----------------------------------------------------------------------------------- */

#define NANY 12

static void start_any(call_t *c, MPI_Comm *comms, int salt, int *made)
{
    for (int i = 0; i < NANY; ++i) {
        kind_t kind = (kind_t) ((i + salt) % K_COUNT);
        /* up to 70000 elements per rank; a block per peer for the staged kinds, smaller */
        int count = 1 + ((i + salt) * 811) % 70000 / (kind >= K_ALLGATHER ? 8 : 1);
        *made = call_start(&c[i], kind, comms[i % 3], count, (i + salt) % mt_size) && *made;
    }
}

static void case_any(void)
{
    call_t c[NANY];
    MPI_Request reqs[NANY];
    MPI_Comm comms[3];
    char diag[MT_DIAG_LEN] = "";
    int made = 1, ok = 1, idx, flag, outcount, indices[NANY];
    bool done[NANY];

    comms[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &comms[2]); /* reversed ranks */

    /* MPI_Waitany: the array rotated by rank, so each rank sees another order */
    mt_set_case("any: MPI_Waitany");
    start_any(c, comms, 0, &made);
    for (int i = 0; i < NANY; ++i) {
        reqs[i] = c[(i + mt_rank * 5) % NANY].req;
    }
    for (int left = NANY; left > 0; --left) {
        int rc = MPI_Waitany(NANY, reqs, &idx, MPI_STATUS_IGNORE);
        if (MPI_UNDEFINED == idx) {
            break;
        }
        c[(idx + mt_rank * 5) % NANY].rc = rc;
        c[(idx + mt_rank * 5) % NANY].req = MPI_REQUEST_NULL;
    }
    wait_all(c, NANY);
    ok = check_all_calls(c, NANY, diag) && made;
    mt_check(ok, diag, "any: %d device calls on three communicators completed by MPI_Waitany "
                       "(array rotated by rank): right", NANY);

    /* MPI_Waitsome, reversed on odd ranks */
    mt_set_case("any: MPI_Waitsome");
    made = 1;
    start_any(c, comms, 1, &made);
    for (int i = 0; i < NANY; ++i) {
        reqs[i] = c[(mt_rank % 2) ? NANY - 1 - i : i].req;
    }
    for (int left = NANY; left > 0;) {
        int rc = MPI_Waitsome(NANY, reqs, &outcount, indices, MPI_STATUSES_IGNORE);
        if (MPI_UNDEFINED == outcount || 0 > outcount) {
            break;
        }
        for (int j = 0; j < outcount; ++j) {
            int at = (mt_rank % 2) ? NANY - 1 - indices[j] : indices[j];
            c[at].rc = rc;
            c[at].req = MPI_REQUEST_NULL;
        }
        left -= outcount;
    }
    wait_all(c, NANY);
    ok = check_all_calls(c, NANY, diag) && made;
    mt_check(ok, diag, "any: %d device calls on three communicators completed by MPI_Waitsome "
                       "(reversed on odd ranks): right", NANY);

    /* MPI_Testany, with a blocking device allreduce on world between polls on rank 0 */
    mt_set_case("any: MPI_Testany");
    made = 1;
    start_any(c, comms, 2, &made);
    memset(done, 0, sizeof(done));
    for (int i = 0; i < NANY; ++i) {
        reqs[i] = c[(i * 7 + mt_rank) % NANY].req;
    }
    for (long spins = 0, left = NANY; left > 0 && spins < 200000000L; ++spins) {
        int rc = MPI_Testany(NANY, reqs, &idx, &flag, MPI_STATUS_IGNORE);
        if (MPI_SUCCESS != rc && MPI_UNDEFINED != idx) {
            flag = 1;
        }
        if (flag && MPI_UNDEFINED == idx) {
            break;
        }
        if (flag) {
            int at = (idx * 7 + mt_rank) % NANY;
            c[at].rc = rc;
            c[at].req = MPI_REQUEST_NULL;
            --left;
        }
    }
    wait_all(c, NANY);
    ok = check_all_calls(c, NANY, diag) && made;
    mt_check(ok, diag, "any: %d device calls on three communicators completed by MPI_Testany "
                       "polls (array permuted by rank): right", NANY);
    MPI_Comm_free(&comms[1]);
    MPI_Comm_free(&comms[2]);
}

/* ---- comms --------------------------------------------------------------------------------- */

/* Many communicators alive at once, each with a node team (a device allreduce large enough to
 * map the peers' buffers, blocking and nonblocking), then every one of them used again. */
static void case_comms(int ncomm)
{
    MPI_Comm *d = calloc((size_t) ncomm, sizeof(MPI_Comm));
    char diag[MT_DIAG_LEN] = "";
    int ok = NULL != d;

    mt_set_case("comms: many communicators with a team each");
    for (int pass = 0; ok && pass < 2; ++pass) {
        for (int i = 0; ok && i < ncomm; ++i) {
            call_t c[2];
            int made;
            if (0 == pass) {
                MPI_Comm_dup(MPI_COMM_WORLD, &d[i]);
            }
            made = call_start_at(&c[0], K_ALLREDUCE, d[i], 70001, 0, MT_KIND_DEVICE, next_round++,
                                 true);
            made = call_start_at(&c[1], K_ALLREDUCE, d[i], 70001, 0, MT_KIND_DEVICE, next_round++,
                                 false) && made;
            wait_all(c, made ? 2 : 0);
            if (!(made && check_all_calls(c, 2, diag))) {
                mt_diag_add(diag, "(communicator %d, pass %d) ", i, pass);
                ok = 0;
            }
        }
    }
    for (int i = 0; NULL != d && i < ncomm; ++i) {
        if (MPI_COMM_NULL != d[i] && 0 != d[i]) {
            MPI_Comm_free(&d[i]);
        }
    }
    free(d);
    mt_check(ok, diag, "comms: %d dups of world alive at once, each with a blocking and a "
                       "nonblocking device allreduce of 70001 int32, twice over: right", ncomm);
}

/* ---- reduce first --------------------------------------------------------------------------- */

/* A fresh dup whose first collective with buffers is a blocking host MPI_Reduce (a benchmark's
 * statistics): the kinds are agreed there, so the device MPI_Iallreduce and MPI_Ibcast after it
 * take the node team (robust.sh reads that from the log); both right. */
static void case_reduce_first(void)
{
    char diag[MT_DIAG_LEN] = "";
    int one = 1, sum = 0, made, ok;
    call_t c[2];
    MPI_Comm dup;

    mt_set_case("reduce first: a host MPI_Reduce, then device nonblocking calls");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    ok = MPI_SUCCESS == MPI_Reduce(&one, &sum, 1, MPI_INT, MPI_SUM, 0, dup)
         && (0 != mt_rank || mt_size == sum);
    if (!ok) {
        mt_diag_add(diag, "the host reduce failed or was wrong; ");
    }
    made = call_start(&c[0], K_ALLREDUCE, dup, 4099, 0);
    made = call_start(&c[1], K_BCAST, dup, 1021, mt_size - 1) && made;
    wait_all(c, made ? 2 : 0);
    ok = check_all_calls(c, made ? 2 : 0, diag) && made && ok;
    MPI_Comm_free(&dup);
    mt_check(ok, diag, "reduce first: a host MPI_Reduce on a fresh dup, then a device "
                       "MPI_Iallreduce and MPI_Ibcast there: right");
}

/* ---- stale --------------------------------------------------------------------------------- */

/* A job ended by a timeout or an abort leaves coll/gpu's shared-memory names behind, and pids
 * wrap (at 32768 by default: a test suite gets there), so a later process can get a dead one's
 * pid.  coll/gpu makes two kinds of names from its pid: the node team's control block
 * (/collgpu-ctl-<pid>-<n>, made by rank 0 of a team, n from 1) and, on the emulated device,
 * device memory (/collgpu-<pid>-<n>, n from 0).  Before its first device call each rank makes
 * the first STALE_NAMES of both for its own pid, as its pid's dead owner would have left them
 * (those already in use by this process stay as they are); then device allreduce and bcast on
 * world and on a dup, blocking and nonblocking, must be right.  The calls must also take the
 * node team (a name taken must not cost the team): robust.sh reads that from the log. */
#define STALE_NAMES 64

static void case_stale(void)
{
    static const char *const forms[2] = {"/collgpu-ctl-%d-%d", "/collgpu-%d-%d"};
    char names[2 * STALE_NAMES][64];
    bool mine[2 * STALE_NAMES];
    char diag[MT_DIAG_LEN] = "";
    int ok = 1, nmade = 0;
    MPI_Comm dup;

    mt_set_case("stale: names of a dead process with this pid");
    for (int f = 0; f < 2; ++f) {
        for (int i = 0; i < STALE_NAMES; ++i) {
            char *name = names[f * STALE_NAMES + i];
            int fd;
            snprintf(name, sizeof(names[0]), forms[f], (int) getpid(), i + (0 == f ? 1 : 0));
            fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
            mine[f * STALE_NAMES + i] = (0 <= fd);
            if (0 <= fd) {
                ++nmade;
                ok = ok && 0 == ftruncate(fd, 4096);
                close(fd);
            }
        }
    }
    mt_check(ok && nmade > STALE_NAMES, "", "stale: %d names of this pid made in /dev/shm",
             nmade);

    /* device memory: as many allocations as there are stale names (on the emulated device
     * each takes the next name); agreed, so that no rank enters a call its peers skip */
    {
        void *p[STALE_NAMES + 1];
        char first[MT_DIAG_LEN] = "";
        int nfailed = 0, all_ok = 0;
        for (int i = 0; i <= STALE_NAMES; ++i) {
            p[i] = NULL;
            if (DEV_OK != dev_mem_alloc(&p[i], 4096)) {
                if (0 == nfailed++) {
                    snprintf(first, sizeof(first), "%s", dev_error_string());
                }
                p[i] = NULL;
            }
        }
        for (int i = 0; i <= STALE_NAMES; ++i) {
            if (NULL != p[i]) {
                (void) dev_mem_free(p[i]);
            }
        }
        ok = (0 == nfailed);
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        mt_check(all_ok, ok ? "on another rank" : first,
                 "stale: %d device allocations beside them succeed (%d failed here)",
                 STALE_NAMES + 1, nfailed);
        ok = all_ok;
    }

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (int pass = 0; ok && pass < 2; ++pass) {
        MPI_Comm comm = (0 == pass) ? MPI_COMM_WORLD : dup;
        call_t c[4];
        int made = call_start_at(&c[0], K_ALLREDUCE, comm, 70001, 0, MT_KIND_DEVICE, next_round++,
                                 true);
        made = call_start_at(&c[1], K_BCAST, comm, 4099, mt_size - 1, MT_KIND_DEVICE,
                             next_round++, true) && made;
        made = call_start_at(&c[2], K_ALLREDUCE, comm, 1023, 0, MT_KIND_DEVICE, next_round++,
                             false) && made;
        made = call_start_at(&c[3], K_BCAST, comm, 70001, 0, MT_KIND_DEVICE, next_round++,
                             false) && made;
        wait_all(c, made ? 4 : 0);
        if (!(made && check_all_calls(c, 4, diag))) {
            mt_diag_add(diag, "(%s%s) ", 0 == pass ? "world" : "dup",
                        made ? "" : ", a device buffer could not be allocated");
            ok = 0;
        }
    }
    MPI_Comm_free(&dup);
    for (int i = 0; i < 2 * STALE_NAMES; ++i) {
        if (mine[i]) {
            shm_unlink(names[i]);
        }
    }
    mt_check(ok, diag, "stale: device allreduce and bcast, blocking and nonblocking, on world "
                       "and a dup, beside names a dead process of this pid left: right");
}

/* ---- crossed ------------------------------------------------------------------------------- */

/* Nonblocking collectives on different communicators may be started in different orders on
 * different ranks (MPI-3.1 5.12: only the order on each communicator must agree): even ranks
 * start on A then B, odd ranks on B then A, then MPI_Waitall.  Round 0 is the first device call
 * on fresh dups (whatever the first call of a communicator sets up must not block on the peers),
 * round 1 the same on the same dups again.  warm: a blocking device allreduce on A, then on B
 * (one order everywhere) comes first, so that the dups' node teams exist before the crossed
 * calls. */
static void case_crossed(bool warm, bool agreed)
{
    MPI_Comm ab[2];
    char diag[MT_DIAG_LEN] = "";

    MPI_Comm_dup(MPI_COMM_WORLD, &ab[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &ab[1]);
    if (agreed) {
        int one = 1, sum[2] = {0, 0};
        mt_set_case("crossed: blocking host allreduce on A, then B");
        MPI_Allreduce(&one, &sum[0], 1, MPI_INT, MPI_SUM, ab[0]);
        MPI_Allreduce(&one, &sum[1], 1, MPI_INT, MPI_SUM, ab[1]);
        mt_check(mt_size == sum[0] && mt_size == sum[1], "",
                 "crossed: a blocking host allreduce on dup A, then on dup B: right");
    }
    if (warm) {
        call_t w[2];
        int made;
        mt_set_case("crossed: blocking allreduce on A, then B");
        made = call_start_at(&w[0], K_ALLREDUCE, ab[0], 1021, 0, MT_KIND_DEVICE, 900, true);
        made = call_start_at(&w[1], K_ALLREDUCE, ab[1], 1021, 0, MT_KIND_DEVICE, 901, true) && made;
        mt_check(made && check_all_calls(w, made ? 2 : 0, diag), diag,
                 "crossed: a blocking device allreduce on dup A, then on dup B: right");
    }
    for (int round = 0; round < 2; ++round) {
        call_t c[4];
        MPI_Request reqs[4];
        int made = 1, ok, rc, first = mt_rank % 2;

        mt_set_case(0 == round && !warm ? "crossed: first device calls of the communicators"
                                        : "crossed: calls on communicators used before");
        /* the rounds (data) of a call are those of its communicator's order, not of issue */
        for (int j = 0; j < 2; ++j) {
            int which = (first + j) % 2;
            unsigned k = 1000u + (unsigned) round * 100u + (unsigned) which * 10u;
            made = call_start_at(&c[2 * j], K_ALLREDUCE, ab[which], 4099, 0, MT_KIND_DEVICE, k,
                                 false)
                   && made;
            made = call_start_at(&c[2 * j + 1], K_BCAST, ab[which], 1021, mt_size - 1,
                                 MT_KIND_DEVICE, k + 1, false)
                   && made;
        }
        for (int i = 0; i < 4; ++i) {
            reqs[i] = c[i].req;
        }
        rc = MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE);
        for (int i = 0; i < 4; ++i) {
            c[i].req = reqs[i];
            c[i].rc = (MPI_SUCCESS == c[i].rc) ? rc : c[i].rc;
        }
        wait_all(c, 4);
        ok = check_all_calls(c, made ? 4 : 0, diag) && made;
        mt_check(ok, diag, "crossed: even ranks start MPI_Iallreduce and MPI_Ibcast on dup A "
                           "then B, odd ranks on B then A, MPI_Waitall: right (%s)",
                 0 == round && !warm ? (agreed ? "the first device calls of both dups, after a "
                                                 "blocking host allreduce on each"
                                               : "the first calls of both dups")
                                     : "on dups used before");
    }
    MPI_Comm_free(&ab[0]);
    MPI_Comm_free(&ab[1]);
}

/* ---- settled ------------------------------------------------------------------------------- */

/* A fresh dup's first device calls are nonblocking, so they begin its node team's setup and wait
 * on its queue (with coll_gpu_uniform_buffers=true they take the team's path from the first
 * call); then a blocking device allreduce, which waits for the setup's end on every rank; then
 * rounds more nonblocking calls.  With a setup that fails (robust.sh: coll_gpu_test_fail_team)
 * the queued calls go through the host with coll/gpu's own messages, and the ones after the
 * blocking call are staged as on any communicator without a team: robust.sh counts the log's
 * lines of each.  Every answer right. */
static void case_settled(int rounds)
{
    char diag[MT_DIAG_LEN] = "";
    call_t c[2], w;
    MPI_Comm dup;
    int made, ok;

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    mt_set_case("settled: the first device calls nonblocking");
    made = call_start_at(&c[0], K_ALLREDUCE, dup, 4099, 0, MT_KIND_DEVICE, 700, false);
    made = call_start_at(&c[1], K_BCAST, dup, 1021, mt_size - 1, MT_KIND_DEVICE, 701, false)
           && made;
    wait_all(c, made ? 2 : 0);
    ok = check_all_calls(c, made ? 2 : 0, diag) && made;
    mt_check(ok, diag, "settled: a device MPI_Iallreduce and MPI_Ibcast as a dup's first calls: "
                       "right");
    mt_set_case("settled: a blocking device allreduce");
    made = call_start_at(&w, K_ALLREDUCE, dup, 1021, 0, MT_KIND_DEVICE, 702, true);
    mt_check(made && check_all_calls(&w, made ? 1 : 0, diag), diag,
             "settled: then a blocking device MPI_Allreduce: right");
    ok = 1;
    mt_set_case("settled: nonblocking calls after it");
    for (int i = 0; i < rounds; ++i) {
        unsigned k = 710u + 2u * (unsigned) i;
        made = call_start_at(&c[0], K_ALLREDUCE, dup, 4099, 0, MT_KIND_DEVICE, k, false);
        made = call_start_at(&c[1], K_BCAST, dup, 1021, i % mt_size, MT_KIND_DEVICE, k + 1,
                             false)
               && made;
        wait_all(c, made ? 2 : 0);
        ok = check_all_calls(c, made ? 2 : 0, diag) && made && ok;
    }
    mt_check(ok, diag, "settled: then %d rounds of a device MPI_Iallreduce and MPI_Ibcast: right",
             rounds);
    MPI_Comm_free(&dup);
}

/* ---- kinds --------------------------------------------------------------------------------- */

typedef enum {
    PAT_EVEN_ODD, /* MPICH's -evenmemtype=device -oddmemtype=host, for the whole run */
    PAT_ROTATE,   /* each rank its own kind, another one every call (all five kinds) */
    PAT_CLASS,    /* one class per call, alternating, kinds mixed inside it: device, managed and
                   * pool; or host and pinned (what coll_gpu_uniform_buffers=true allows) */
    PAT_COUNT
} pattern_t;

static const char *const pattern_names[PAT_COUNT] = {
    "even ranks device, odd ranks host", "every rank another kind each call",
    "device/managed/pool or host/pinned mixed, the class alternating per call"};

static mt_kind_t pick_mem(pattern_t pat, int rank, unsigned call)
{
    static const mt_kind_t dev_class[] = {MT_KIND_DEVICE, MT_KIND_MANAGED, MT_KIND_POOL};
    static const mt_kind_t host_class[] = {MT_KIND_HOST, MT_KIND_PINNED};

    switch (pat) {
    case PAT_EVEN_ODD:
        return (0 == rank % 2) ? MT_KIND_DEVICE : MT_KIND_HOST;
    case PAT_ROTATE:
        return (mt_kind_t) ((unsigned) rank + call) % MT_KIND_COUNT;
    default:
        return (0 == call % 2) ? dev_class[((unsigned) rank + call / 2) % 3]
                               : host_class[((unsigned) rank + call / 2) % 2];
    }
}

/* Every collective of the list, blocking (one after the other) or nonblocking (all of a count
 * outstanding at once, an MPI_Ibarrier among them), in place where listed, counts 0 to 40000,
 * on buffers whose kind differs across the ranks of one call and from one call to the next;
 * every buffer freed after its call and the next allocated afresh. */
static void case_kinds(pattern_t pat, bool blocking)
{
    static const int counts[] = {0, 1, 1537, 40000};
    call_t c[K_COUNT];
    char diag[MT_DIAG_LEN] = "";
    unsigned call = 0;
    int ok = 1, n;

    MPI_Comm_size(MPI_COMM_WORLD, &n);
    mt_set_case(pattern_names[pat]);
    for (size_t z = 0; z < sizeof(counts) / sizeof(counts[0]); ++z) {
        MPI_Request bar = MPI_REQUEST_NULL;
        int made = 1;
        for (int kd = 0; kd < K_COUNT; ++kd, ++call) {
            made = call_start_at(&c[kd], (kind_t) kd, MPI_COMM_WORLD, counts[z], (int) (call % n),
                                 pick_mem(pat, mt_rank, call), next_round++, blocking)
                   && made;
            if (!blocking && K_COUNT / 2 == kd) {
                (void) MPI_Ibarrier(MPI_COMM_WORLD, &bar);
            }
        }
        if (!made) {
            mt_diag_add(diag, "buffers could not be made (count %d); ", counts[z]);
        }
        wait_all(c, made ? K_COUNT : 0);
        if (MPI_REQUEST_NULL != bar && MPI_SUCCESS != MPI_Wait(&bar, MPI_STATUS_IGNORE)) {
            mt_diag_add(diag, "MPI_Ibarrier failed; ");
            ok = 0;
        }
        ok = made && check_all_calls(c, K_COUNT, diag) && ok;
    }
    mt_check(ok, diag, "kinds: %d collectives %s, counts 0 .. 40000, %s: right", (int) K_COUNT,
             blocking ? "blocking" : "nonblocking, all outstanding with an MPI_Ibarrier",
             pattern_names[pat]);
}

/* Do MPI_Iallreduce and MPI_Ibcast on device buffers take the node team's path?  Where they
 * are staged, libnbc of Open MPI 4.1 refuses MPI_Request_free on a running call. */
static bool team_takes_nonblocking(void)
{
    const char *u = getenv("OMPI_MCA_coll_gpu_uniform_buffers");
    return NULL != u && 0 == strcmp(u, "true") && 2 <= mt_size;
}

/* ---- threads ------------------------------------------------------------------------------- */

#define NTHREADS 3
#define THREAD_ITERS 24

/* The element counts the threads cycle through: fused/one-shot, two-shot, ring sizes. */
static const int thread_counts[] = {1, 257, 4099, 70001, 300007};
#define NTHREAD_COUNTS ((int) (sizeof(thread_counts) / sizeof(thread_counts[0])))

static int main_device;

typedef struct {
    int id;
    MPI_Comm comm;
    mt_kind_t mem;
    bool free_first;    /* MPI_Request_free on the nonblocking allreduce (node team only) */
    int ok;
    char diag[MT_DIAG_LEN];
} worker_t;

/* The blocking collectives of the node team's exchange and reduce-scatter, one per iteration in
 * turn: each thread's team lends and maps buffers while the other threads' teams do. */
static const kind_t thread_exchanges[] = {K_ALLGATHER, K_ALLTOALLV, K_RSB, K_ALLGATHERV,
                                          K_ALLTOALL, K_ALLGATHER_IP};
#define NTHREAD_EXCHANGES ((int) (sizeof(thread_exchanges) / sizeof(thread_exchanges[0])))

/* One thread's loop on its own communicator: a blocking allreduce, then a nonblocking allreduce
 * (in place every other time) and bcast outstanding while a blocking bcast runs, MPI_Waitall,
 * then a blocking exchange or reduce-scatter (thread_exchanges); every buffer allocated in the
 * iteration and freed at its end, so that addresses come back (to this thread or another) with
 * other contents. */
static void *thread_loop(void *arg)
{
    worker_t *w = arg;

    if (MT_KIND_HOST != w->mem && DEV_OK != dev_set_device(main_device)) {
        mt_diag_add(w->diag, "thread %d: dev_set_device: %s; ", w->id, dev_error_string());
        w->ok = 0;
        return NULL;
    }
    for (int it = 0; w->ok && it < THREAD_ITERS; ++it) {
        int count = thread_counts[(it + w->id) % NTHREAD_COUNTS];
        int n;
        unsigned k = (unsigned) (w->id * 100000 + it * 10 + 1);
        call_t c[5];
        MPI_Request reqs[2];
        int made = 1, rc;

        MPI_Comm_size(w->comm, &n);
        made = call_start_at(&c[0], K_ALLREDUCE, w->comm, count, 0, w->mem, k, true);
        made = call_start_at(&c[1], (it % 2) ? K_ALLREDUCE_IP : K_ALLREDUCE, w->comm, count, 0,
                             w->mem, k + 1, false) && made;
        made = call_start_at(&c[2], K_BCAST, w->comm, count / 3 + 1, it % n, w->mem, k + 2,
                             false) && made;
        made = call_start_at(&c[3], K_BCAST, w->comm, count, (it + 1) % n, w->mem, k + 3,
                             true) && made;
        if (w->free_first && made && MPI_SUCCESS == c[1].rc) {
            /* the allreduce ends before the bcast queued after it on the team: freed now, its
             * data checked once the bcast is done (while other threads move it along) */
            c[1].rc = MPI_Request_free(&c[1].req);
        }
        reqs[0] = c[1].req;
        reqs[1] = c[2].req;
        rc = MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        c[1].req = reqs[0];
        c[2].req = reqs[1];
        c[1].rc = (MPI_SUCCESS == c[1].rc) ? rc : c[1].rc;
        c[2].rc = (MPI_SUCCESS == c[2].rc) ? rc : c[2].rc;
        wait_all(c, 4);
        /* per rank: a tenth of the allreduce's elements, so that the largest still maps peers */
        made = call_start_at(&c[4], thread_exchanges[(it + w->id) % NTHREAD_EXCHANGES], w->comm,
                             count / 10 + 1, 0, w->mem, k + 4, true) && made;
        if (!made) {
            mt_diag_add(w->diag, "thread %d iteration %d: buffers could not be made; ", w->id,
                        it);
            w->ok = 0;
        }
        if (!check_all_calls(c, made ? 5 : 0, w->diag)) {
            mt_diag_add(w->diag, "(thread %d iteration %d, %s buffers) ", w->id, it,
                        mt_kind_names[w->mem]);
            w->ok = 0;
        }
    }
    return NULL;
}

static void case_threads(mt_kind_t mem)
{
    worker_t w[NTHREADS];
    pthread_t th[NTHREADS];
    char name[128];

    snprintf(name, sizeof(name), "threads: %d threads on %s buffers", NTHREADS,
             mt_kind_names[mem]);
    mt_set_case(name);
    for (int t = 0; t < NTHREADS; ++t) {
        memset(&w[t], 0, sizeof(w[t]));
        w[t].id = t;
        w[t].mem = mem;
        w[t].free_first = MT_KIND_DEVICE == mem && team_takes_nonblocking();
        w[t].ok = 1;
        MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm);
        MPI_Comm_set_errhandler(w[t].comm, MPI_ERRORS_RETURN);
    }
    for (int t = 0; t < NTHREADS; ++t) {
        pthread_create(&th[t], NULL, thread_loop, &w[t]);
    }
    for (int t = 0; t < NTHREADS; ++t) {
        pthread_join(th[t], NULL);
    }
    for (int t = 0; t < NTHREADS; ++t) {
        mt_check(w[t].ok, w[t].diag, "threads: thread %d, %d iterations of blocking and "
                 "nonblocking allreduce and bcast, and a blocking allgather(v), alltoall(v) or "
                 "reduce_scatter_block, on %s buffers allocated and freed in the loop, "
                 "its own communicator, %d threads at once: right", t, THREAD_ITERS,
                 mt_kind_names[mem], NTHREADS);
        MPI_Comm_free(&w[t].comm);
    }
}

int main(int argc, char **argv)
{
    const char *mode = (1 < argc) ? argv[1] : "freed";
    char why[256];

    /* threads needs MPI_THREAD_MULTIPLE; the other modes run under it too when asked, as
     * mpi4py initializes MPI (the locks are real then) */
    if (0 == strcmp(mode, "threads") || NULL != getenv("COLL_GPU_TEST_THREAD_MULTIPLE")) {
        mt_init_threads(&argc, &argv);
    } else {
        mt_init(&argc, &argv);
    }
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    if (DEV_OK != dev_current_device(&main_device)) {
        main_device = 0;
    }
    if (0 == strcmp(mode, "freed")) {
        case_freed(false, false);
        case_freed(false, true);
        case_freed(true, true);
        case_freed_late();
        case_freed_inter();
        if (team_takes_nonblocking()) {
            case_freed_request();
        }
        return case_final();
    } else if (0 == strcmp(mode, "many")) {
        case_many(2 < argc ? atoi(argv[2]) : 300);
    } else if (0 == strcmp(mode, "any")) {
        case_any();
    } else if (0 == strcmp(mode, "comms")) {
        case_comms(2 < argc ? atoi(argv[2]) : 300);
    } else if (0 == strcmp(mode, "reducefirst")) {
        case_reduce_first();
    } else if (0 == strcmp(mode, "settled")) {
        case_settled((2 < argc) ? atoi(argv[2]) : 3);
    } else if (0 == strcmp(mode, "stale")) {
        case_stale();
    } else if (0 == strcmp(mode, "crossed")) {
        case_crossed(2 < argc && 0 == strcmp(argv[2], "warm"),
                     2 < argc && 0 == strcmp(argv[2], "agreed"));
    } else if (0 == strcmp(mode, "kinds")) {
        const char *u = getenv("OMPI_MCA_coll_gpu_uniform_buffers");
        bool uniform = NULL == u || 0 != strcmp(u, "false");
        for (int pat = uniform ? PAT_CLASS : 0; pat < PAT_COUNT; ++pat) {
            case_kinds((pattern_t) pat, true);
            case_kinds((pattern_t) pat, false);
        }
    } else if (0 == strcmp(mode, "threads")) {
        case_threads(MT_KIND_DEVICE);
        case_threads(MT_KIND_HOST);
    } else {
        mt_check(0, "unknown mode", "test_robust: mode '%s' is known", mode);
    }
    MPI_Finalize();
    return tap_done();
}
