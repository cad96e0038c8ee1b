/*
 * test_robust.c - what real MPI programs do to device-buffer collectives that a matrix of
 * single calls does not: communicators freed under running nonblocking calls, many calls
 * outstanding, completion in different orders on different ranks, threads.
 *
 *   test_robust freed     MPI_Comm_free and MPI_Comm_disconnect on a communicator (a dup of
 *                         world) while device MPI_Iallreduce / MPI_Ibcast (node team) and staged
 *                         MPI_Iallgather / MPI_Ialltoall / MPI_Ireduce_scatter_block are still
 *                         outstanding on it, then MPI_Wait on each (last first, in issue
 *                         order); the free returns at once while a rank is late; with
 *                         coll_gpu_uniform_buffers=true also MPI_Request_free before the free;
 *                         the last case frees, waits and calls MPI_Finalize right after the
 *                         last MPI_Wait
 *   test_robust many [N]  N (default 300) MPI_Iallreduce outstanding on one communicator, then
 *                         MPI_Waitall; then N mixed calls on three communicators
 *   test_robust any       MPI_Waitany, MPI_Waitsome and MPI_Testany over device calls on three
 *                         communicators, issued in one order and completed in a rank-dependent
 *                         one
 *
 * Every call runs on fresh random data into poisoned device outputs and is compared with a
 * host reference computed from every rank's inputs.
 */
#include <stdbool.h>
#include <time.h>

#include "mpitest.h"

#define POISON (-7)

static unsigned next_round = 1;

/* rank r's element i in round k: random, never zero, small enough to sum exactly. */
static int32_t input(int r, size_t i, unsigned k)
{
    uint32_t x = (uint32_t) r * 2654435761u ^ (uint32_t) i * 40503u ^ k * 2246822519u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (int32_t) (x % 1000u) + 1;
}

typedef enum {
    K_ALLREDUCE,     /* int32 sum */
    K_ALLREDUCE_IP,  /* in place */
    K_BCAST,
    K_ALLGATHER,
    K_ALLTOALL,
    K_RSB,           /* reduce_scatter_block, int32 sum */
    K_COUNT
} kind_t;

static const char *const kind_names[K_COUNT] = {"iallreduce", "iallreduce(in place)", "ibcast",
                                                "iallgather", "ialltoall",
                                                "ireduce_scatter_block"};

/* One nonblocking call on device buffers. */
typedef struct {
    kind_t kind;
    int n, me;          /* the communicator's size and this rank's rank, at the start */
    int count;          /* elements per rank (per block for allgather, alltoall, rsb) */
    int root;
    unsigned k;
    size_t sn, rn;      /* elements of the send and receive buffers */
    void *s, *r;
    MPI_Request req;
    int rc;
} call_t;

static size_t recv_elems(kind_t kind, int count, int n)
{
    switch (kind) {
    case K_ALLGATHER:
    case K_ALLTOALL:
        return (size_t) count * (size_t) n;
    default:
        return (size_t) count;
    }
}

static size_t send_elems(kind_t kind, int count, int n)
{
    switch (kind) {
    case K_ALLTOALL:
    case K_RSB:
        return (size_t) count * (size_t) n;
    case K_ALLREDUCE_IP:
    case K_BCAST:
        return 0;
    default:
        return (size_t) count;
    }
}

/* What rank me's receive buffer holds at element i when the call is over. */
static int32_t expected(const call_t *c, size_t i)
{
    int32_t sum = 0;
    switch (c->kind) {
    case K_ALLREDUCE:
    case K_ALLREDUCE_IP:
        for (int q = 0; q < c->n; ++q) {
            sum += input(q, i, c->k);
        }
        return sum;
    case K_BCAST:
        return input(c->root, i, c->k);
    case K_ALLGATHER:
        return input((int) (i / (size_t) c->count), i % (size_t) c->count, c->k);
    case K_ALLTOALL:
        /* block q came from rank q, its block me */
        return input((int) (i / (size_t) c->count),
                     (size_t) c->me * (size_t) c->count + i % (size_t) c->count, c->k);
    case K_RSB:
        for (int q = 0; q < c->n; ++q) {
            sum += input(q, (size_t) c->me * (size_t) c->count + i, c->k);
        }
        return sum;
    default:
        return 0;
    }
}

/* Make the buffers (input fresh, output poisoned) and start the call; 0 when the buffers could
 * not be had (nothing started). */
static int call_start(call_t *c, kind_t kind, MPI_Comm comm, int count, int root)
{
    int32_t *h;
    size_t hn;
    bool ok = true;

    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->count = count;
    c->root = root;
    c->k = next_round++;
    c->req = MPI_REQUEST_NULL;
    MPI_Comm_size(comm, &c->n);
    MPI_Comm_rank(comm, &c->me);
    c->sn = send_elems(kind, count, c->n);
    c->rn = recv_elems(kind, count, c->n);
    hn = (c->sn > c->rn ? c->sn : c->rn) + 1;
    h = malloc(hn * sizeof(int32_t));
    c->s = mt_mem_alloc(MT_MEM_DEVICE, c->sn * 4);
    c->r = mt_mem_alloc(MT_MEM_DEVICE, c->rn * 4);
    ok = NULL != h && NULL != c->s && NULL != c->r;
    if (ok) {
        for (size_t i = 0; i < c->sn; ++i) {
            h[i] = input(c->me, i, c->k);
        }
        ok = 0 == mt_mem_put(MT_MEM_DEVICE, c->s, h, c->sn * 4);
        for (size_t i = 0; i < c->rn; ++i) {
            bool live = (K_ALLREDUCE_IP == kind) || (K_BCAST == kind && c->me == root);
            h[i] = live ? input(c->me, i, c->k) : POISON;
        }
        ok = ok && 0 == mt_mem_put(MT_MEM_DEVICE, c->r, h, c->rn * 4);
    }
    free(h);
    if (!ok) {
        mt_mem_free(MT_MEM_DEVICE, c->s);
        mt_mem_free(MT_MEM_DEVICE, c->r);
        c->s = c->r = NULL;
        return 0;
    }
    switch (kind) {
    case K_ALLREDUCE:
        c->rc = MPI_Iallreduce(c->s, c->r, count, MPI_INT32_T, MPI_SUM, comm, &c->req);
        break;
    case K_ALLREDUCE_IP:
        c->rc = MPI_Iallreduce(MPI_IN_PLACE, c->r, count, MPI_INT32_T, MPI_SUM, comm, &c->req);
        break;
    case K_BCAST:
        c->rc = MPI_Ibcast(c->r, count, MPI_INT32_T, root, comm, &c->req);
        break;
    case K_ALLGATHER:
        c->rc = MPI_Iallgather(c->s, count, MPI_INT32_T, c->r, count, MPI_INT32_T, comm, &c->req);
        break;
    case K_ALLTOALL:
        c->rc = MPI_Ialltoall(c->s, count, MPI_INT32_T, c->r, count, MPI_INT32_T, comm, &c->req);
        break;
    case K_RSB:
        c->rc = MPI_Ireduce_scatter_block(c->s, c->r, count, MPI_INT32_T, MPI_SUM, comm, &c->req);
        break;
    default:
        break;
    }
    if (MPI_SUCCESS != c->rc) {
        c->req = MPI_REQUEST_NULL;
    }
    return 1;
}

/* After completion (c->rc holds what the wait said): compare, free; diag gets the first
 * mismatch. */
static int call_check(call_t *c, char *diag)
{
    int32_t *h = malloc(c->rn * sizeof(int32_t) + 4);
    int ok = MPI_SUCCESS == c->rc && NULL != h
             && 0 == mt_mem_get(MT_MEM_DEVICE, h, c->r, c->rn * 4);

    if (MPI_SUCCESS != c->rc) {
        mt_diag_add(diag, "%s of %d returned %d; ", kind_names[c->kind], c->count, c->rc);
    }
    for (size_t i = 0; ok && i < c->rn; ++i) {
        if (h[i] != expected(c, i)) {
            mt_diag_add(diag, "%s of %d (round %u): element %zu is %d, not %d; ",
                        kind_names[c->kind], c->count, c->k, i, (int) h[i], (int) expected(c, i));
            ok = 0;
        }
    }
    free(h);
    mt_mem_free(MT_MEM_DEVICE, c->s);
    mt_mem_free(MT_MEM_DEVICE, c->r);
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
    mt_check(ok, diag, "many: %d device calls of 6 kinds outstanding on world and two dups, "
                       "MPI_Waitall in reverse order: right", n);
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

int main(int argc, char **argv)
{
    const char *mode = (1 < argc) ? argv[1] : "freed";
    char why[256];

    mt_init(&argc, &argv);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    if (0 == strcmp(mode, "freed")) {
        case_freed(false, false);
        case_freed(false, true);
        case_freed(true, true);
        case_freed_late();
        if (NULL != getenv("OMPI_MCA_coll_gpu_uniform_buffers")
            && 0 == strcmp(getenv("OMPI_MCA_coll_gpu_uniform_buffers"), "true")) {
            case_freed_request();
        }
        return case_final();
    } else if (0 == strcmp(mode, "many")) {
        case_many(2 < argc ? atoi(argv[2]) : 300);
    } else if (0 == strcmp(mode, "any")) {
        case_any();
    } else {
        mt_check(0, "unknown mode", "test_robust: mode '%s' is known", mode);
    }
    MPI_Finalize();
    return tap_done();
}
