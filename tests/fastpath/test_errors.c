/*
 * test_errors.c - an erroneous MPI_Allreduce on device buffers through the node team: every
 * rank gets an error, nobody hangs, nothing outside the call's buffers is written, and the
 * communicator stays usable.  The wrapper (fastpath/errors.sh) forces each allreduce algorithm
 * and runs 2 and 3 ranks; this program checks the return codes and the memory.
 *
 *   test_errors KINDS MODES
 *     KINDS   comma-separated: count (16 elements on rank 0, 262144 on the others: expects
 *             MPI_ERR_COUNT), op (MPI_SUM on rank 0, MPI_MAX on the others: MPI_ERR_OP), type
 *             (MPI_INT on rank 0, MPI_FLOAT on the others, the same byte count: MPI_ERR_OTHER),
 *             inplace (MPI_IN_PLACE on rank 0, a send buffer on the others: MPI_ERR_BUFFER)
 *     MODES   comma-separated: blocking (MPI_Allreduce), nb (MPI_Iallreduce + MPI_Wait)
 *
 * Each round, for one kind and mode:
 *   1. a correct allreduce of 262144 floats into a fresh receive buffer P, checked;
 *   2. P refilled with a known pattern: the program reuses it, as the one that showed the bug
 *      did (a stale handle of P, left in the control block by call 1, was written through);
 *   3. the erroneous call on fresh buffers S, R: every rank's error class is the expected one,
 *      and P, S and R are unchanged (R's data too: no data moves);
 *   4. a correct allreduce on S, R afterwards: succeeds and is right on every rank.
 * Every buffer is one device allocation with a guard region before and after it (filled with a
 * pattern of its own); what a call must not change is compared with a copy taken before it.
 * Values are small integers, exact in float.
 * Exit: TAP.
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"
#include "mpi/mpitest.h"

#define BIG 262144
#define SMALL 16
#define GUARD 4096 /* bytes before and after every buffer */

typedef struct {
    unsigned char *base; /* the allocation: guard, data, guard */
    void *data;
    size_t bytes;        /* of data */
    unsigned char *snap; /* a host copy of the whole allocation (gbuf_snap) */
} gbuf_t;

static unsigned round_no = 1;

static unsigned char pattern(unsigned char tag, size_t i)
{
    return (unsigned char) (tag * 31u + (unsigned) i * 7u + (unsigned) (i >> 8));
}

/* The whole allocation (guards and data) filled with tag's pattern. */
static int gbuf_fill(gbuf_t *b, unsigned char tag)
{
    size_t len = b->bytes + 2 * GUARD;
    unsigned char *h = malloc(len);
    int ok = (NULL != h);

    for (size_t i = 0; ok && i < len; ++i) {
        h[i] = pattern(tag, i);
    }
    ok = ok && DEV_OK == dev_memcpy(b->base, h, len);
    free(h);
    return ok;
}

static int gbuf_alloc(gbuf_t *b, size_t bytes, unsigned char tag)
{
    void *p = NULL;

    memset(b, 0, sizeof(*b));
    if (DEV_OK != dev_mem_alloc(&p, bytes + 2 * GUARD)) {
        return 0;
    }
    b->base = p;
    b->data = b->base + GUARD;
    b->bytes = bytes;
    return gbuf_fill(b, tag);
}

static void gbuf_free(gbuf_t *b)
{
    if (NULL != b->base) {
        dev_mem_free(b->base);
    }
    free(b->snap);
    memset(b, 0, sizeof(*b));
}

/* Take the host copy that gbuf_intact compares with. */
static int gbuf_snap(gbuf_t *b)
{
    size_t len = b->bytes + 2 * GUARD;

    if (NULL == b->snap) {
        b->snap = malloc(len);
    }
    return NULL != b->snap && DEV_OK == dev_memcpy(b->snap, b->base, len);
}

/* Is the allocation as at its last gbuf_snap: everywhere, or (guards_only) in the guards?  The
 * first difference goes to diag. */
static int gbuf_intact(const gbuf_t *b, bool guards_only, const char *name, char *diag)
{
    size_t len = b->bytes + 2 * GUARD;
    unsigned char *h = malloc(len);
    int ok = (NULL != h) && NULL != b->snap && DEV_OK == dev_memcpy(h, b->base, len);

    for (size_t i = 0; ok && i < len; ++i) {
        bool in_data = (GUARD <= i && i < GUARD + b->bytes);
        if ((!guards_only || !in_data) && h[i] != b->snap[i]) {
            mt_diag_add(diag, "%s: byte %zd (from the data's start) changed; ", name,
                        (ssize_t) i - GUARD);
            ok = 0;
        }
    }
    free(h);
    return ok;
}

/* A float buffer's data set to this rank's input of round k (n elements). */
static int put_input(gbuf_t *b, size_t n, unsigned k, bool as_int)
{
    void *h = malloc(n * 4);
    int ok = (NULL != h);

    for (size_t i = 0; ok && i < n; ++i) {
        if (as_int) {
            ((int32_t *) h)[i] = mt_input(mt_rank, i, k);
        } else {
            ((float *) h)[i] = (float) mt_input(mt_rank, i, k);
        }
    }
    ok = ok && DEV_OK == dev_memcpy(b->data, h, n * 4);
    free(h);
    return ok;
}

/* One allreduce, blocking or MPI_Iallreduce + MPI_Wait; the error code. */
static int allreduce(const void *s, void *r, int count, MPI_Datatype type, MPI_Op op, bool nb)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;

    if (!nb) {
        return MPI_Allreduce(s, r, count, type, op, MPI_COMM_WORLD);
    }
    rc = MPI_Iallreduce(s, r, count, type, op, MPI_COMM_WORLD, &req);
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    return MPI_Wait(&req, MPI_STATUS_IGNORE);
}

/* A correct sum of BIG floats from s into r, checked against the reference, and the guards of
 * both left as they were. */
static int correct_call(gbuf_t *s, gbuf_t *r, bool nb, char *diag)
{
    unsigned k = round_no++;
    float *h = malloc((size_t) BIG * sizeof(float));
    int rc, ok = (NULL != h) && put_input(s, BIG, k, false);

    for (size_t i = 0; ok && i < BIG; ++i) {
        h[i] = -7.0f;
    }
    ok = ok && DEV_OK == dev_memcpy(r->data, h, (size_t) BIG * sizeof(float)) && gbuf_snap(s)
         && gbuf_snap(r);
    if (!mt_agree(ok)) {
        mt_diag_add(diag, "buffers not set up; ");
        free(h);
        return 0;
    }
    rc = allreduce(s->data, r->data, BIG, MPI_FLOAT, MPI_SUM, nb);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "correct call returned %s; ", mt_mpi_error(rc));
        ok = 0;
    }
    ok = ok && DEV_OK == dev_memcpy(h, r->data, (size_t) BIG * sizeof(float));
    for (size_t i = 0; ok && i < BIG; ++i) {
        float want = 0.0f;
        for (int q = 0; q < mt_size; ++q) {
            want += (float) mt_input(q, i, k);
        }
        if (h[i] != want) {
            mt_diag_add(diag, "correct call: element %zu is %g, not %g; ", i, (double) h[i],
                        (double) want);
            ok = 0;
        }
    }
    free(h);
    ok &= gbuf_intact(s, true, "the send buffer's guards", diag);
    ok &= gbuf_intact(r, true, "the receive buffer's guards", diag);
    return ok;
}

/* One round (the file's header); one TAP check each for the error, the memory and the call
 * after. */
static void run_round(const char *kind, bool nb)
{
    const char *mode = nb ? "MPI_Iallreduce" : "MPI_Allreduce";
    int expect = MPI_ERR_OTHER, count = BIG, rc, cls = MPI_SUCCESS, ok;
    MPI_Datatype type = MPI_FLOAT;
    MPI_Op op = MPI_SUM;
    bool in_place = false;
    gbuf_t ps, p, s, r;
    char diag[MT_DIAG_LEN] = "";
    char name[128], want[MPI_MAX_ERROR_STRING];

    if (0 == strcmp(kind, "count")) {
        expect = MPI_ERR_COUNT;
        count = (0 == mt_rank) ? SMALL : BIG;
    } else if (0 == strcmp(kind, "op")) {
        expect = MPI_ERR_OP;
        op = (0 == mt_rank) ? MPI_SUM : MPI_MAX;
    } else if (0 == strcmp(kind, "inplace")) {
        expect = MPI_ERR_BUFFER;
        in_place = (0 == mt_rank);
    } else {
        type = (0 == mt_rank) ? MPI_INT : MPI_FLOAT;
    }
    snprintf(name, sizeof(name), "%s, %s differs", mode, kind);
    mt_set_case(name);
    ok = gbuf_alloc(&ps, (size_t) BIG * 4, 11) && gbuf_alloc(&p, (size_t) BIG * 4, 12)
         && gbuf_alloc(&s, (size_t) BIG * 4, 13) && gbuf_alloc(&r, (size_t) BIG * 4, 14);
    if (!mt_agree(ok)) {
        mt_check(0, "device buffers could not be allocated", "%s: set-up", name);
        return;
    }
    ok = correct_call(&ps, &p, nb, diag);
    /* P reused by the program; this call's input in S (or, in place, in R) */
    ok = ok && gbuf_fill(&p, 15) && gbuf_fill(&ps, 16)
         && put_input(in_place ? &r : &s, BIG, round_no++, MPI_INT == type) && gbuf_snap(&p)
         && gbuf_snap(&ps) && gbuf_snap(&s) && gbuf_snap(&r);
    if (!mt_agree(ok)) {
        mt_check(0, diag, "%s: a correct call of %d floats before the erroneous one", name,
                 BIG);
        goto out;
    }

    rc = allreduce(in_place ? MPI_IN_PLACE : s.data, r.data, count, type, op, nb);
    if (MPI_SUCCESS != rc) {
        MPI_Error_class(rc, &cls);
    }
    snprintf(want, sizeof(want), "%s", mt_mpi_error(expect));
    if (cls != expect) {
        mt_diag_add(diag, "returned %s (class %d), want %s; ",
                    MPI_SUCCESS == rc ? "MPI_SUCCESS" : mt_mpi_error(rc), cls, want);
        ok = 0;
    }
    mt_check(ok, diag, "%s: every rank gets %s", name, want);
    diag[0] = '\0';
    ok = gbuf_intact(&p, false, "the previous call's receive buffer", diag);
    ok &= gbuf_intact(&ps, false, "the previous call's send buffer", diag);
    ok &= gbuf_intact(&s, false, "the send buffer", diag);
    ok &= gbuf_intact(&r, false, "the receive buffer", diag);
    mt_check(ok, diag, "%s: the previous call's buffers and every guard are unchanged, and no "
             "data moved", name);
    diag[0] = '\0';
    ok = correct_call(&s, &r, nb, diag);
    mt_check(ok, diag, "%s: a correct call after it succeeds and is right", name);
out:
    gbuf_free(&ps);
    gbuf_free(&p);
    gbuf_free(&s);
    gbuf_free(&r);
}

int main(int argc, char **argv)
{
    char why[256], kinds[64], modes[64];

    mt_init(&argc, &argv);
    if (3 > argc) {
        if (0 == mt_rank) {
            fprintf(stderr, "usage: test_errors count,op,type,inplace blocking,nb\n");
        }
        MPI_Finalize();
        return 2;
    }
    if (2 > mt_size) {
        mt_skip_all("needs 2 ranks or more");
    }
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    snprintf(modes, sizeof(modes), "%s", argv[2]);
    for (char *m = strtok(modes, ","); NULL != m; m = strtok(NULL, ",")) {
        char *save = NULL;
        snprintf(kinds, sizeof(kinds), "%s", argv[1]);
        for (char *k = strtok_r(kinds, ",", &save); NULL != k; k = strtok_r(NULL, ",", &save)) {
            run_round(k, 0 == strcmp(m, "nb"));
        }
    }
    return mt_finish();
}
