/*
 * test_nbc.c - MPI_Iallreduce and MPI_Ibcast on device buffers (the node team's nonblocking
 * path, coll_gpu_engine.c): results, ordering, concurrency, failures.  The wrapper
 * (fastpath/nbc.sh, gpu/nbc_cuda.sh) forces the algorithms and checks from coll_gpu_verbose that
 * every call took the team's algorithm; this program checks the data and return codes.
 *
 *   test_nbc all      every case below, each a TAP check (collective over MPI_COMM_WORLD):
 *     single          one call at a time, MPI_Wait: allreduce (int32 sum, double sum; in place
 *                     and not) and bcast (every root) at 1 .. 600000 elements
 *     layouts         bcast of a vector type on some ranks and a contiguous type on the others
 *                     (one type signature): packed through the request's device temporary;
 *                     gaps keep their bytes (reductions take predefined types only)
 *     queue           8 calls outstanding on world and 8 on a dup, issued alternately, mixed
 *                     allreduce and bcast, completed with MPI_Waitall in reverse order
 *     test            6 calls outstanding, completed by MPI_Test loops (and MPI_Testall)
 *     mixed           nonblocking calls outstanding while blocking device allreduce and bcast
 *                     run on world and on the dup, then MPI_Waitall
 *     freed           MPI_Request_free on a running call; later calls are right (left out
 *                     by "test_nbc all nofree": the staged path's libnbc refuses it)
 *   test_nbc late [S] the last rank enters S s (default 1) after the others: rank 0's
 *                     MPI_Iallreduce and MPI_Ibcast return at once (well under 0.5 s), and the
 *                     results are right
 *   test_nbc giveup [S]  the last rank S s (default 3) late, coll_gpu_hang_error_seconds below S:
 *                     every rank's call fails, and the next one; host collectives still work
 *   test_nbc giveup-bcast [S]  the same with MPI_Ibcast whose root is the late rank (the others
 *                     give up waiting for the root's plan)
 *   test_nbc fail     run with COLL_GPU_TEST_FAIL_ASYNC naming a rank: every rank's MPI_Wait
 *                     returns an error for allreduce and bcast, outstanding calls on world and
 *                     the dup all complete (with errors), MPI_Iallgather and MPI_Ialltoall
 *                     too, a host collective works after
 *
 * Every call runs on fresh random data (round numbers never repeat) into poisoned outputs and is
 * compared with a host reference; values are small integers, exact in every type.  At the end
 * rank 0 prints "# calls: iallreduce N ibcast M" (per rank) for the wrapper's counts.
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dev.h"
#include "mpi/mpitest.h"

#define POISON (-7)
#define GAP (-3)
#define MAXQ 16

static int rank, size;
static unsigned next_round = 1;
static int n_iallreduce, n_ibcast;

typedef enum { OP_ALLREDUCE, OP_BCAST } op_kind_t;

/* One nonblocking call: its buffers, the request and what to check. */
typedef struct {
    op_kind_t kind;
    MPI_Comm comm;
    int count;          /* elements (of the element type) */
    bool dbl;           /* double instead of int32 */
    bool in_place;
    bool vec;           /* this rank's buffers through a vector type (stride 2, gaps) */
    int root;
    unsigned k;         /* the round: fresh data */
    size_t elems;       /* elements a buffer holds (2 x count with the vector) */
    void *s, *r;        /* device buffers */
    MPI_Datatype type;
    MPI_Request req;
    int rc;
} call_t;

static size_t esize(const call_t *c)
{
    return c->dbl ? sizeof(double) : sizeof(int32_t);
}

static void put(const call_t *c, void *host, size_t i, int32_t v)
{
    if (c->dbl) {
        ((double *) host)[i] = (double) v;
    } else {
        ((int32_t *) host)[i] = v;
    }
}

static int32_t get(const call_t *c, const void *host, size_t i)
{
    return c->dbl ? (int32_t) ((const double *) host)[i] : ((const int32_t *) host)[i];
}

/* Fill the device buffers (input fresh, output poisoned, gaps marked) and start the call.
 * Returns 0 when the buffers could not be made (the caller agrees before going on). */
static int call_start(call_t *c, op_kind_t kind, MPI_Comm comm, int count, bool dbl,
                      bool in_place, bool vec, int root)
{
    int me;
    size_t stride;
    char *hs, *hr;
    int ok = 1;

    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->comm = comm;
    c->count = count;
    c->dbl = dbl;
    c->in_place = in_place;
    c->vec = vec;
    c->root = root;
    c->k = next_round++;
    MPI_Comm_rank(comm, &me);
    stride = vec ? 2 : 1;
    c->elems = (size_t) count * stride;
    /* a bcast moves one element of a derived type (vector: gaps; contiguous: none), an
     * allreduce count predefined elements (predefined ops take predefined types only) */
    if (vec) {
        MPI_Type_vector(count, 1, 2, dbl ? MPI_DOUBLE : MPI_INT32_T, &c->type);
        MPI_Type_commit(&c->type);
    } else if (OP_BCAST == kind) {
        MPI_Type_contiguous(count, dbl ? MPI_DOUBLE : MPI_INT32_T, &c->type);
        MPI_Type_commit(&c->type);
    } else {
        c->type = dbl ? MPI_DOUBLE : MPI_INT32_T;
    }
    hs = malloc(c->elems * esize(c) + 8);
    hr = malloc(c->elems * esize(c) + 8);
    ok = (NULL != hs && NULL != hr) && DEV_OK == dev_mem_alloc(&c->s, c->elems * esize(c) + 8)
         && DEV_OK == dev_mem_alloc(&c->r, c->elems * esize(c) + 8);
    for (size_t i = 0; ok && i < c->elems; ++i) {
        bool gap = (0 != i % stride);
        size_t e = i / stride;
        put(c, hs, i, gap ? GAP : mt_input(me, e, c->k));
        if (OP_BCAST == kind) {
            put(c, hr, i, gap ? GAP : (me == root) ? mt_input(root, e, c->k) : POISON);
        } else {
            put(c, hr, i, gap ? GAP : in_place ? mt_input(me, e, c->k) : POISON);
        }
    }
    ok = ok && DEV_OK == dev_memcpy(c->s, hs, c->elems * esize(c))
         && DEV_OK == dev_memcpy(c->r, hr, c->elems * esize(c));
    free(hs);
    free(hr);
    if (!ok) {
        return 0;
    }
    if (OP_BCAST == kind) {
        ++n_ibcast;
        c->rc = MPI_Ibcast(c->r, 1, c->type, root, comm, &c->req);
    } else {
        ++n_iallreduce;
        c->rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : c->s, c->r, count, c->type, MPI_SUM,
                               comm, &c->req);
    }
    if (MPI_SUCCESS != c->rc) {
        c->req = MPI_REQUEST_NULL;
    }
    return 1;
}

/* After completion: compare with the reference (msg gets the first mismatch), free. */
static int call_check(call_t *c, char *msg, size_t len)
{
    size_t stride = c->vec ? 2 : 1;
    char *h = malloc(c->elems * esize(c) + 8);
    int n, ok = (MPI_SUCCESS == c->rc) && NULL != h
                && DEV_OK == dev_memcpy(h, c->r, c->elems * esize(c));

    MPI_Comm_size(c->comm, &n);
    if (MPI_SUCCESS != c->rc) {
        snprintf(msg, len, "%s of %d returned %d", OP_BCAST == c->kind ? "ibcast" : "iallreduce",
                 c->count, c->rc);
    }
    for (size_t i = 0; ok && i < c->elems; ++i) {
        int32_t want = 0;
        if (0 != i % stride) {
            want = GAP;
        } else if (OP_BCAST == c->kind) {
            want = mt_input(c->root, i / stride, c->k);
        } else {
            for (int q = 0; q < n; ++q) {
                want += mt_input(q, i / stride, c->k);
            }
        }
        if (get(c, h, i) != want) {
            snprintf(msg, len, "%s of %d%s%s: element %zu is %d, not %d",
                     OP_BCAST == c->kind ? "ibcast" : "iallreduce", c->count,
                     c->dbl ? " double" : " int32", c->in_place ? " in place" : "", i,
                     (int) get(c, h, i), (int) want);
            ok = 0;
        }
    }
    free(h);
    dev_mem_free(c->s);
    dev_mem_free(c->r);
    if (OP_BCAST == c->kind || c->vec) {
        MPI_Type_free(&c->type);
    }
    return ok;
}

/* One TAP verdict from every rank's; rank 0 prints the first failing rank's message. */
static int check_all(int ok, const char *msg, const char *what)
{
    int every = 0, first = -1, mine = ok ? size : rank;
    char text[256] = "";

    MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!every && first < size) {
        if (rank == first) {
            snprintf(text, sizeof(text), "%s", msg);
        }
        MPI_Bcast(text, sizeof(text), MPI_CHAR, first, MPI_COMM_WORLD);
    }
    tap_ok(every, "%s", what);
    if (!every) {
        tap_diag("rank %d: %s", first, text);
    }
    return every;
}

static const int sizes[] = {1, 1021, 65537, 600000};
#define NSIZES ((int) (sizeof(sizes) / sizeof(sizes[0])))

static void case_single(void)
{
    char msg[256] = "";
    int ok = 1;

    for (int z = 0; z < NSIZES; ++z) {
        for (int v = 0; v < 3; ++v) {
            call_t c;
            /* int32 not in place, double not in place, int32 in place */
            int made = call_start(&c, OP_ALLREDUCE, MPI_COMM_WORLD, sizes[z], 1 == v, 2 == v,
                                  false, 0);
            if (made && MPI_SUCCESS == c.rc) {
                c.rc = MPI_Wait(&c.req, MPI_STATUS_IGNORE);
            }
            ok = made && call_check(&c, msg, sizeof(msg)) && ok;
        }
        for (int root = 0; root < size; ++root) {
            call_t c;
            int made = call_start(&c, OP_BCAST, MPI_COMM_WORLD, sizes[z], 1 == root % 2, false,
                                  false, root);
            if (made && MPI_SUCCESS == c.rc) {
                c.rc = MPI_Wait(&c.req, MPI_STATUS_IGNORE);
            }
            ok = made && call_check(&c, msg, sizeof(msg)) && ok;
        }
    }
    check_all(ok, msg, "single: allreduce (int32, double, in place) and bcast (every root), "
                       "1 .. 600000 elements, MPI_Wait: right on every rank");
}

static void case_layouts(void)
{
    char msg[256] = "";
    int ok = 1;
    bool vec = (1 == rank % 2);

    for (int z = 0; z < NSIZES; ++z) {
        call_t a, b;
        int made = call_start(&a, OP_BCAST, MPI_COMM_WORLD, sizes[z], false, false, vec, 0);
        made = call_start(&b, OP_BCAST, MPI_COMM_WORLD, sizes[z], true, false, !vec,
                          size - 1) && made;
        if (made && MPI_SUCCESS == a.rc) {
            a.rc = MPI_Wait(&a.req, MPI_STATUS_IGNORE);
        }
        if (made && MPI_SUCCESS == b.rc) {
            b.rc = MPI_Wait(&b.req, MPI_STATUS_IGNORE);
        }
        ok = made && call_check(&a, msg, sizeof(msg)) && call_check(&b, msg, sizeof(msg)) && ok;
    }
    check_all(ok, msg, "layouts: bcast of a vector type on odd ranks (then even), contiguous on "
                       "the others (one signature): right, gaps untouched");
}

/* Calls i = 0 .. n-1 alternately on world and dup, mixed kinds and sizes. */
static int start_many(call_t *c, int n, MPI_Comm dup, int salt)
{
    int made = 1;
    for (int i = 0; i < n; ++i) {
        MPI_Comm comm = (0 == i % 2) ? MPI_COMM_WORLD : dup;
        op_kind_t kind = (0 == (i / 2 + salt) % 3) ? OP_BCAST : OP_ALLREDUCE;
        int count = sizes[(i + salt) % NSIZES];
        made = call_start(&c[i], kind, comm, count, 1 == i % 3, 2 == (i + salt) % 4, false,
                          (i + salt) % size) && made;
    }
    return made;
}

static void case_queue(MPI_Comm dup)
{
    call_t c[MAXQ];
    MPI_Request reqs[MAXQ];
    char msg[256] = "";
    int ok, rc = MPI_SUCCESS, n = MAXQ;

    ok = start_many(c, n, dup, 0);
    for (int i = 0; i < n; ++i) {
        reqs[n - 1 - i] = c[i].req; /* reverse order */
    }
    if (ok) {
        rc = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    }
    for (int i = 0; i < n; ++i) {
        if (MPI_REQUEST_NULL != reqs[i]) {
            (void) MPI_Wait(&reqs[i], MPI_STATUS_IGNORE); /* left pending by an error */
        }
    }
    for (int i = 0; i < n; ++i) {
        c[i].rc = (MPI_SUCCESS == c[i].rc) ? rc : c[i].rc;
        ok = call_check(&c[i], msg, sizeof(msg)) && ok;
    }
    check_all(ok, msg, "queue: 8 calls outstanding on world and 8 on a dup, issued alternately, "
                       "MPI_Waitall in reverse order: right");
}

static void case_test(MPI_Comm dup)
{
    call_t c[6];
    char msg[256] = "";
    int ok, n = 6, left = n, flag = 0;
    bool done[6] = {false};
    MPI_Request last[2];

    ok = start_many(c, n, dup, 1);
    /* MPI_Test from the last one issued backwards, over and over, until all are done */
    for (long spins = 0; ok && left > 2 && spins < 100000000L; ++spins) {
        for (int i = n - 1; i >= 2; --i) {
            if (!done[i]) {
                int rc = MPI_Test(&c[i].req, &flag, MPI_STATUS_IGNORE);
                if (MPI_SUCCESS != rc || flag) {
                    c[i].rc = rc;
                    done[i] = true;
                    --left;
                }
            }
        }
    }
    last[0] = c[0].req;
    last[1] = c[1].req;
    for (long spins = 0; ok && left > 0 && spins < 100000000L; ++spins) {
        int rc = MPI_Testall(2, last, &flag, MPI_STATUSES_IGNORE);
        if (MPI_SUCCESS != rc || flag) {
            c[0].rc = c[1].rc = rc;
            left = 0;
        }
    }
    ok = ok && 0 == left;
    for (int i = 0; i < n; ++i) {
        ok = call_check(&c[i], msg, sizeof(msg)) && ok;
    }
    check_all(ok, msg, "test: 6 calls outstanding on world and a dup, completed by MPI_Test "
                       "loops (last issued first) and MPI_Testall: right");
}

/* A blocking device allreduce of count int32 on comm: right? */
static int blocking_allreduce(MPI_Comm comm, int count, char *msg, size_t len)
{
    call_t c;
    int n, me, ok;
    int32_t *h = malloc((size_t) count * sizeof(int32_t));

    memset(&c, 0, sizeof(c));
    c.k = next_round++;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    ok = NULL != h && DEV_OK == dev_mem_alloc(&c.s, (size_t) count * 4)
         && DEV_OK == dev_mem_alloc(&c.r, (size_t) count * 4);
    for (int i = 0; ok && i < count; ++i) {
        h[i] = mt_input(me, (size_t) i, c.k);
    }
    ok = ok && DEV_OK == dev_memcpy(c.s, h, (size_t) count * 4);
    for (int i = 0; ok && i < count; ++i) {
        h[i] = POISON;
    }
    ok = ok && DEV_OK == dev_memcpy(c.r, h, (size_t) count * 4);
    ok = ok && MPI_SUCCESS == MPI_Allreduce(c.s, c.r, count, MPI_INT32_T, MPI_SUM, comm);
    ok = ok && DEV_OK == dev_memcpy(h, c.r, (size_t) count * 4);
    for (int i = 0; ok && i < count; ++i) {
        int32_t want = 0;
        for (int q = 0; q < n; ++q) {
            want += mt_input(q, (size_t) i, c.k);
        }
        if (h[i] != want) {
            snprintf(msg, len, "blocking allreduce of %d: element %d is %d, not %d", count, i,
                     h[i], want);
            ok = 0;
        }
    }
    free(h);
    dev_mem_free(c.s);
    dev_mem_free(c.r);
    return ok;
}

/* A blocking device bcast of count int32 from root on comm: right? */
static int blocking_bcast(MPI_Comm comm, int count, int root, char *msg, size_t len)
{
    void *b = NULL;
    int me, ok;
    unsigned k = next_round++;
    int32_t *h = malloc((size_t) count * sizeof(int32_t));

    MPI_Comm_rank(comm, &me);
    ok = NULL != h && DEV_OK == dev_mem_alloc(&b, (size_t) count * 4);
    for (int i = 0; ok && i < count; ++i) {
        h[i] = (me == root) ? mt_input(root, (size_t) i, k) : POISON;
    }
    ok = ok && DEV_OK == dev_memcpy(b, h, (size_t) count * 4);
    ok = ok && MPI_SUCCESS == MPI_Bcast(b, count, MPI_INT32_T, root, comm);
    ok = ok && DEV_OK == dev_memcpy(h, b, (size_t) count * 4);
    for (int i = 0; ok && i < count; ++i) {
        if (h[i] != mt_input(root, (size_t) i, k)) {
            snprintf(msg, len, "blocking bcast of %d: element %d is %d", count, i, h[i]);
            ok = 0;
        }
    }
    free(h);
    dev_mem_free(b);
    return ok;
}

static void case_mixed(MPI_Comm dup)
{
    call_t c[8];
    MPI_Request reqs[8];
    char msg[256] = "";
    int ok, rc = MPI_SUCCESS;

    ok = start_many(c, 4, dup, 2);
    ok = blocking_allreduce(MPI_COMM_WORLD, 1021, msg, sizeof(msg)) && ok;
    ok = blocking_bcast(dup, 65537, size - 1, msg, sizeof(msg)) && ok;
    ok = start_many(c + 4, 4, dup, 3) && ok;
    ok = blocking_allreduce(dup, 600000, msg, sizeof(msg)) && ok;
    ok = blocking_bcast(MPI_COMM_WORLD, 7, 0, msg, sizeof(msg)) && ok;
    for (int i = 0; i < 8; ++i) {
        reqs[i] = c[7 - i].req;
    }
    rc = MPI_Waitall(8, reqs, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 8; ++i) {
        if (MPI_REQUEST_NULL != reqs[i]) {
            (void) MPI_Wait(&reqs[i], MPI_STATUS_IGNORE); /* left pending by an error */
        }
    }
    for (int i = 0; i < 8; ++i) {
        c[i].rc = (MPI_SUCCESS == c[i].rc) ? rc : c[i].rc;
        ok = call_check(&c[i], msg, sizeof(msg)) && ok;
    }
    check_all(ok, msg, "mixed: blocking device allreduce and bcast on world and the dup while "
                       "nonblocking calls are outstanding on both: all right");
}

static void case_freed(MPI_Comm dup)
{
    call_t a, b;
    char msg[256] = "";
    int ok;

    ok = call_start(&a, OP_ALLREDUCE, dup, 65537, false, false, false, 0);
    ok = call_start(&b, OP_BCAST, dup, 1021, false, false, false, size - 1) && ok;
    MPI_Request_free(&a.req);
    if (MPI_SUCCESS == b.rc) {
        b.rc = MPI_Wait(&b.req, MPI_STATUS_IGNORE); /* after a, in order: a ended too */
    }
    ok = call_check(&a, msg, sizeof(msg)) && ok;
    ok = call_check(&b, msg, sizeof(msg)) && ok;
    check_all(ok, msg, "freed: MPI_Request_free on a running allreduce; it still ends (before "
                       "the bcast issued after it) with the right result");
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static void case_late(int seconds)
{
    call_t a, b;
    char msg[256] = "";
    double ta = 0, tb = 0, t0;
    int ok;

    /* the team is built by the first device call of the communicator (a collective host
     * exchange, once): not the call measured */
    ok = blocking_allreduce(MPI_COMM_WORLD, 1021, msg, sizeof(msg));
    MPI_Barrier(MPI_COMM_WORLD);
    if (size - 1 == rank) {
        sleep((unsigned) seconds);
    }
    t0 = now();
    ok = call_start(&a, OP_ALLREDUCE, MPI_COMM_WORLD, 1021, false, false, false, 0) && ok;
    ta = now() - t0;
    t0 = now();
    ok = call_start(&b, OP_BCAST, MPI_COMM_WORLD, 65537, false, false, false, 0) && ok;
    tb = now() - t0;
    if (MPI_SUCCESS == a.rc) {
        a.rc = MPI_Wait(&a.req, MPI_STATUS_IGNORE);
    }
    if (MPI_SUCCESS == b.rc) {
        b.rc = MPI_Wait(&b.req, MPI_STATUS_IGNORE);
    }
    ok = call_check(&a, msg, sizeof(msg)) && ok;
    ok = call_check(&b, msg, sizeof(msg)) && ok;
    check_all(ok, msg, "late: the last rank late, results right");
    if (0 == rank) {
        snprintf(msg, sizeof(msg), "MPI_Iallreduce took %.3f s, MPI_Ibcast %.3f s", ta, tb);
    }
    check_all(0 != rank || (ta < 0.5 && tb < 0.5), msg,
              "late: rank 0's MPI_Iallreduce and MPI_Ibcast return before the late rank "
              "enters (< 0.5 s each)");
    tap_diag("rank 0: MPI_Iallreduce returned after %.6f s, MPI_Ibcast after %.6f s", ta, tb);
}

/* The last rank sleeps before an allreduce (or a bcast it is the root of) that rank 0 gives up
 * on (coll_gpu_hang_error_seconds below the sleep): every rank's call fails, the late one's
 * too, and so does the next call of the team (the give-up stays); host collectives still
 * work. */
static void case_giveup(int seconds, op_kind_t kind)
{
    call_t c;
    char msg[256] = "";
    int rc[2], errs = 0;

    (void) blocking_allreduce(MPI_COMM_WORLD, 1021, msg, sizeof(msg)); /* the team first */
    MPI_Barrier(MPI_COMM_WORLD);
    if (size - 1 == rank) {
        sleep((unsigned) seconds);
    }
    for (int i = 0; i < 2; ++i) {
        int made = call_start(&c, kind, MPI_COMM_WORLD, 1021, false, false, false, size - 1);
        rc[i] = made && MPI_SUCCESS == c.rc ? MPI_Wait(&c.req, MPI_STATUS_IGNORE) : c.rc;
        errs += (MPI_SUCCESS != rc[i]);
        (void) dev_mem_free(c.s);
        (void) dev_mem_free(c.r);
    }
    snprintf(msg, sizeof(msg), "returned %d, then %d", rc[0], rc[1]);
    check_all(2 == errs, msg, "giveup: the call a rank gave up on fails on every rank, the late "
                              "one included, and so does the next");
    {
        int one = 1, sum = 0;
        int hrc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        snprintf(msg, sizeof(msg), "host allreduce returned %d, sum %d", hrc, sum);
        check_all(MPI_SUCCESS == hrc && size == sum, msg, "giveup: a host allreduce works after");
    }
}

static void case_fail(MPI_Comm dup)
{
    call_t c[4];
    MPI_Request reqs[4];
    int sts[4], errs = 0, ok, rc;
    char msg[256] = "";

    /* one at a time */
    for (int i = 0; i < 2; ++i) {
        ok = call_start(&c[i], 0 == i ? OP_ALLREDUCE : OP_BCAST, MPI_COMM_WORLD, 1021, false,
                        false, false, 0);
        rc = ok && MPI_SUCCESS == c[i].rc ? MPI_Wait(&c[i].req, MPI_STATUS_IGNORE) : c[i].rc;
        errs += (MPI_SUCCESS != rc);
        (void) dev_mem_free(c[i].s);
        (void) dev_mem_free(c[i].r);
        if (OP_BCAST == c[i].kind) {
            MPI_Type_free(&c[i].type);
        }
    }
    snprintf(msg, sizeof(msg), "%d of 2 calls returned an error", errs);
    check_all(2 == errs, msg, "fail: with one rank failing locally, MPI_Wait returns an error on "
                              "every rank, for allreduce and bcast");
    /* several outstanding on two communicators */
    ok = start_many(c, 4, dup, 0);
    for (int i = 0; i < 4; ++i) {
        reqs[i] = c[3 - i].req;
    }
    rc = MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE);
    /* Open MPI's MPI_Waitall returns at the first error and leaves the others pending
     * (MPI_ERR_PENDING): wait for them before their buffers go */
    for (int i = 0; i < 4; ++i) {
        if (MPI_REQUEST_NULL != reqs[i]) {
            (void) MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
        }
    }
    errs = 0;
    for (int i = 0; i < 4; ++i) {
        sts[i] = c[i].rc;
        errs += (MPI_SUCCESS != rc);
        (void) dev_mem_free(c[i].s);
        (void) dev_mem_free(c[i].r);
        if (OP_BCAST == c[i].kind) {
            MPI_Type_free(&c[i].type);
        }
    }
    (void) sts;
    snprintf(msg, sizeof(msg), "MPI_Waitall returned %d", rc);
    check_all(ok && MPI_SUCCESS != rc, msg,
              "fail: 4 calls outstanding on world and a dup all complete, with an error");
    /* the engine's exchange too (MPI_Iallgather, MPI_Ialltoall on the team once a blocking
     * device call has found it ready; the reduce-scatters are staged while the wrapper forces
     * an allreduce algorithm): the failing rank takes part without data, every rank's
     * MPI_Wait returns an error */
    {
        const int n = 1021;
        void *d = NULL, *e = NULL;
        MPI_Request req = MPI_REQUEST_NULL;
        int e1 = MPI_SUCCESS, e2 = MPI_SUCCESS;

        ok = DEV_OK == dev_mem_alloc(&d, (size_t) n * size * sizeof(int32_t))
             && DEV_OK == dev_mem_alloc(&e, (size_t) n * size * sizeof(int32_t))
             && MPI_SUCCESS == MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_INT32_T, MPI_SUM,
                                             MPI_COMM_WORLD);
        if (ok) {
            e1 = MPI_Iallgather(d, n, MPI_INT32_T, e, n, MPI_INT32_T, MPI_COMM_WORLD, &req);
            e1 = (MPI_SUCCESS == e1) ? MPI_Wait(&req, MPI_STATUS_IGNORE) : e1;
            e2 = MPI_Ialltoall(e, n, MPI_INT32_T, d, n, MPI_INT32_T, MPI_COMM_WORLD, &req);
            e2 = (MPI_SUCCESS == e2) ? MPI_Wait(&req, MPI_STATUS_IGNORE) : e2;
        }
        (void) dev_mem_free(d);
        (void) dev_mem_free(e);
        snprintf(msg, sizeof(msg), "buffers %s, iallgather %d, ialltoall %d",
                 ok ? "made" : "not made", e1, e2);
        check_all(ok && MPI_SUCCESS != e1 && MPI_SUCCESS != e2, msg,
                  "fail: MPI_Iallgather and MPI_Ialltoall on the team return an error on every "
                  "rank");
    }
    /* a blocking exchange runs on the engine's requests too, but it is no nonblocking call:
     * the switch leaves it alone, and its result is right */
    {
        const int n = 1021;
        void *d = NULL, *e = NULL;
        int32_t *hd = malloc((size_t) n * sizeof(int32_t));
        int32_t *he = malloc((size_t) n * size * sizeof(int32_t));
        int bad = -1;

        rc = MPI_ERR_OTHER;
        ok = NULL != hd && NULL != he
             && DEV_OK == dev_mem_alloc(&d, (size_t) n * sizeof(int32_t))
             && DEV_OK == dev_mem_alloc(&e, (size_t) n * size * sizeof(int32_t));
        for (int i = 0; ok && i < n; ++i) {
            hd[i] = 7 * i + 1000 * rank + 1;
        }
        ok = ok && DEV_OK == dev_memcpy(d, hd, (size_t) n * sizeof(int32_t))
             && DEV_OK == dev_memset(e, 0x5a, (size_t) n * size * sizeof(int32_t));
        if (ok) {
            rc = MPI_Allgather(d, n, MPI_INT32_T, e, n, MPI_INT32_T, MPI_COMM_WORLD);
        }
        if (MPI_SUCCESS == rc
            && DEV_OK == dev_memcpy(he, e, (size_t) n * size * sizeof(int32_t))) {
            bad = 0;
            for (int p = 0; p < size; ++p) {
                for (int i = 0; i < n; ++i) {
                    bad += (he[(size_t) p * n + i] != 7 * i + 1000 * p + 1);
                }
            }
        }
        (void) dev_mem_free(d);
        (void) dev_mem_free(e);
        free(hd);
        free(he);
        snprintf(msg, sizeof(msg), "MPI_Allgather returned %d, %d wrong elements", rc, bad);
        check_all(MPI_SUCCESS == rc && 0 == bad, msg,
                  "fail: a blocking MPI_Allgather on the team is untouched by the switch and "
                  "right");
    }
    {
        int one = 1, sum = 0;
        rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        snprintf(msg, sizeof(msg), "host allreduce returned %d, sum %d", rc, sum);
        check_all(MPI_SUCCESS == rc && size == sum, msg, "fail: a host allreduce works after");
    }
}

int main(int argc, char **argv)
{
    const char *mode = (1 < argc) ? argv[1] : "all";
    char why[256];
    MPI_Comm dup;

    mt_init(&argc, &argv);
    rank = mt_rank;
    size = mt_size;
    if (2 > size) {
        mt_skip_all("needs 2 ranks or more");
    }
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    /* each communicator's first blocking allreduce (host memory, as programs make before their
     * device work): its ranks agree there on one memory kind, which the nonblocking calls then
     * assume; before it they are staged (mca_coll_gpu_nb_assume_uniform, kinds_first.sh) */
    for (int i = 0; i < 2; ++i) {
        int one = 1, sum = 0;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, 0 == i ? MPI_COMM_WORLD : dup);
    }
    if (0 == strcmp(mode, "late")) {
        case_late(2 < argc ? atoi(argv[2]) : 1);
    } else if (0 == strcmp(mode, "giveup")) {
        case_giveup(2 < argc ? atoi(argv[2]) : 3, OP_ALLREDUCE);
    } else if (0 == strcmp(mode, "giveup-bcast")) {
        case_giveup(2 < argc ? atoi(argv[2]) : 3, OP_BCAST);
    } else if (0 == strcmp(mode, "fail")) {
        case_fail(dup);
    } else {
        case_single();
        case_layouts();
        case_queue(dup);
        case_test(dup);
        case_mixed(dup);
        if (!(2 < argc && 0 == strcmp(argv[2], "nofree"))) {
            case_freed(dup);
        }
    }
    tap_diag("calls: iallreduce %d ibcast %d", n_iallreduce, n_ibcast);
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return tap_done();
}
