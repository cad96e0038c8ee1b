/*
 * test_erroneous.c - erroneous MPI_Allreduce, MPI_Bcast, MPI_Allgather(v), MPI_Alltoallv,
 * MPI_Reduce, MPI_Reduce_scatter and
 * MPI_Reduce_scatter_block calls on device memory, under
 * coll/gpu's defaults: every rank returns an MPI error, none hangs, and no byte outside the
 * call's buffers is written (MPI calls these programs erroneous; real programs have such bugs
 * while they are being written, and must be told, not corrupted).
 *
 * Every buffer lies inside a device allocation between two guard regions of a known pattern;
 * the previous call's receive buffer, refilled by the program after that call (a live buffer
 * of other data), is checked too.  The patterns, each after one correct call of the same size
 * (so that a peer could find the previous call's handles in the team's control block):
 *   count      allreduce, 16 ints on rank 0 and 262144 on the others   MPI_ERR_COUNT
 *   op         allreduce, MPI_SUM on rank 0, MPI_MAX on the others      MPI_ERR_OP
 *   user op    allreduce, a user-defined op on rank 0, MPI_SUM elsewhere MPI_ERR_OP
 *   type       allreduce, MPI_FLOAT on rank 0, MPI_INT on the others    MPI_ERR_OTHER
 *   type-kernel allreduce of the same bytes, MPI_LONG_DOUBLE on rank 0 (no GPU kernel),
 *              MPI_DOUBLE on the others                                  MPI_ERR_OTHER
 *   root       bcast, root 0 on rank 0, root 1 on the others            MPI_ERR_ROOT
 *   bcast count bcast, 16 ints at the root, 262144 on the others        MPI_ERR_TRUNCATE
 *   allgather-count allgather, blocks of 16 ints on rank 0 and 262144 / size on the others
 *                                                                        MPI_ERR_TRUNCATE
 *   rsb-count  reduce_scatter_block, blocks of 16 ints on rank 0, 262144 / size elsewhere
 *                                                                        MPI_ERR_COUNT
 *   rsb-op     reduce_scatter_block, MPI_SUM on rank 0, MPI_MAX on the others  MPI_ERR_OP
 *   allgatherv-count allgatherv, 16 ints a block on rank 0, 262144 / size elsewhere
 *                                                                        MPI_ERR_TRUNCATE
 *   alltoallv-count  alltoallv, 16 ints to and from each rank on rank 0, 262144 / size
 *              elsewhere (no total tells it: the exchange's own check)   MPI_ERR_TRUNCATE
 *   ialltoallv-count the same as MPI_Ialltoallv + MPI_Wait (the engine's exchange, taken
 *              after the correct call before it)                       MPI_ERR_TRUNCATE
 *   rs-count   reduce_scatter, counts per rank that differ from rank to rank (zero on every
 *              third), whose totals differ: 16 + i on rank 0, 262144 / size - i elsewhere
 *                                                                        MPI_ERR_COUNT
 *   reduce-count reduce to the last rank, 16 ints on rank 0 and 262144 on the others (the
 *              root would read past rank 0's input: the agreement stops it) MPI_ERR_COUNT
 *   reduce-count-promise reduce to rank 0, 16 ints there and 262144 on the others, on a
 *              communicator whose ranks assert device memory (mpi_assert_memory_alloc_kinds:
 *              no agreement per call; a root that reads a prefix of every input must not
 *              pass for right)                                           MPI_ERR_COUNT
 *   ireduce-count the same as MPI_Ireduce + MPI_Wait to rank 0 (the engine's reduce step,
 *              where no agreement compares the counts: the step compares the inputs' sizes)
 *                                                                        MPI_ERR_COUNT
 * After each, a correct call on the same communicator must still be right.
 *
 * Usage: test_erroneous [PATTERN ...]   (default: all)
 */
#include "mpitest.h"

#define BIG 262144
#define GUARD 4096 /* bytes of pattern before and after each buffer */
#define GUARD_BYTE 0xa7
#define LIVE_BYTE 0x3c

typedef struct {
    char *base;   /* the allocation */
    void *buf;    /* base + GUARD */
    size_t bytes; /* of buf */
} guarded_t;

static int guarded_new(guarded_t *g, size_t bytes)
{
    size_t total = bytes + 2 * GUARD;
    char *host = malloc(total);
    int rc = -1;

    g->bytes = bytes;
    g->base = NULL;
    if (NULL != host && DEV_OK == dev_mem_alloc((void **) &g->base, total)) {
        memset(host, GUARD_BYTE, total);
        rc = (DEV_OK == dev_memcpy(g->base, host, total)) ? 0 : -1;
    }
    free(host);
    g->buf = (NULL != g->base) ? g->base + GUARD : NULL;
    return rc;
}

/* Fill buf with byte b (a live buffer of the program's own data). */
static int guarded_fill(guarded_t *g, int b)
{
    char *host = malloc(g->bytes);
    int rc = -1;
    if (NULL != host) {
        memset(host, b, g->bytes);
        rc = (DEV_OK == dev_memcpy(g->buf, host, g->bytes)) ? 0 : -1;
    }
    free(host);
    return rc;
}

/* 1 when the guards hold their pattern and (live >= 0) buf holds only byte live. */
static int guarded_intact(guarded_t *g, int live, const char *what, char *diag)
{
    size_t total = g->bytes + 2 * GUARD;
    unsigned char *host = malloc(total);
    int ok = 1;

    if (NULL == host || DEV_OK != dev_memcpy(host, g->base, total)) {
        mt_diag_add(diag, "%s: cannot read back; ", what);
        free(host);
        return 0;
    }
    for (size_t i = 0; ok && i < total; ++i) {
        bool in_buf = i >= GUARD && i < GUARD + g->bytes;
        if (!in_buf && GUARD_BYTE != host[i]) {
            mt_diag_add(diag, "%s: guard byte %zd written; ", what,
                        (ssize_t) i - (ssize_t) GUARD);
            ok = 0;
        } else if (in_buf && 0 <= live && live != host[i]) {
            mt_diag_add(diag, "%s: byte %zu of the live buffer written; ", what, i - GUARD);
            ok = 0;
        }
    }
    free(host);
    return ok;
}

static void guarded_free(guarded_t *g)
{
    if (NULL != g->base) {
        (void) dev_mem_free(g->base);
    }
    g->base = NULL;
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void) type;
    for (int i = 0; i < *len; ++i) {
        ((int *) inout)[i] += ((int *) in)[i];
    }
}

/* A correct allreduce (or bcast) of n ints through device buffers; 1 when right. */
static int correct_call(MPI_Comm comm, bool bcast, int n, guarded_t *s, guarded_t *r,
                        char *diag)
{
    int rank, size, rc, ok = 1;
    int *in = malloc((size_t) n * sizeof(int)), *out = malloc((size_t) n * sizeof(int));

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int i = 0; i < n; ++i) {
        in[i] = (bcast ? 1000 : rank + 1) + i % 97;
    }
    dev_memcpy(s->buf, in, (size_t) n * sizeof(int));
    if (bcast) {
        rc = MPI_Bcast(s->buf, n, MPI_INT, 0, comm);
        dev_memcpy(out, s->buf, (size_t) n * sizeof(int));
    } else {
        rc = MPI_Allreduce(s->buf, r->buf, n, MPI_INT, MPI_SUM, comm);
        dev_memcpy(out, r->buf, (size_t) n * sizeof(int));
    }
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "a correct %s of %d ints failed: %s; ", bcast ? "bcast" : "allreduce",
                    n, mt_mpi_error(rc));
        ok = 0;
    }
    for (int i = 0; ok && i < n; ++i) {
        int want = bcast ? 1000 + i % 97 : size * (size + 1) / 2 + size * (i % 97);
        if (out[i] != want) {
            mt_diag_add(diag, "a correct call: [%d] = %d, want %d; ", i, out[i], want);
            ok = 0;
        }
    }
    free(in);
    free(out);
    return ok;
}

static int run_pattern(const char *pattern)
{
    char diag[MT_DIAG_LEN] = "";
    bool bcast = (0 == strcmp(pattern, "root") || 0 == strcmp(pattern, "bcast-count"));
    int want_class = 0, got_class = -1, rc = MPI_SUCCESS, ok = 1;
    guarded_t s, r, prev_r, prev_s;
    MPI_Comm comm;
    MPI_Op uop = MPI_OP_NULL;

    mt_set_case(pattern);
    if (0 == strcmp(pattern, "reduce-count-promise")) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "mpi_assert_memory_alloc_kinds", "cuda:device");
        MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm);
        MPI_Info_free(&info);
    } else {
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    ok &= 0 == guarded_new(&prev_s, BIG * sizeof(int));
    ok &= 0 == guarded_new(&prev_r, BIG * sizeof(int));
    ok &= 0 == guarded_new(&s, BIG * sizeof(int));
    ok &= 0 == guarded_new(&r, BIG * sizeof(int));
    if (!mt_agree(ok)) {
        mt_check(0, "device memory could not be had", "%s", pattern);
        return 0;
    }
    /* one correct call of the big size; then its buffers hold other data of the program's */
    ok &= correct_call(comm, bcast, BIG, &prev_s, &prev_r, diag);
    ok &= 0 == guarded_fill(&prev_r, LIVE_BYTE) && 0 == guarded_fill(&prev_s, LIVE_BYTE);
    ok &= 0 == guarded_fill(&r, LIVE_BYTE);
    ok &= 0 == guarded_fill(&s, 1);

    if (0 == strcmp(pattern, "count")) {
        want_class = MPI_ERR_COUNT;
        rc = MPI_Allreduce(s.buf, r.buf, 0 == mt_rank ? 16 : BIG, MPI_INT, MPI_SUM, comm);
    } else if (0 == strcmp(pattern, "op")) {
        want_class = MPI_ERR_OP;
        rc = MPI_Allreduce(s.buf, r.buf, BIG, MPI_INT, 0 == mt_rank ? MPI_SUM : MPI_MAX, comm);
    } else if (0 == strcmp(pattern, "user-op")) {
        want_class = MPI_ERR_OP;
        MPI_Op_create(user_sum, 1, &uop);
        rc = MPI_Allreduce(s.buf, r.buf, BIG, MPI_INT, 0 == mt_rank ? uop : MPI_SUM, comm);
    } else if (0 == strcmp(pattern, "type")) {
        want_class = MPI_ERR_OTHER;
        rc = MPI_Allreduce(s.buf, r.buf, BIG, 0 == mt_rank ? MPI_FLOAT : MPI_INT, MPI_SUM, comm);
    } else if (0 == strcmp(pattern, "type-kernel")) {
        /* the same bytes, but a type the kernels take on some ranks and not on the others */
        want_class = MPI_ERR_OTHER;
        rc = MPI_Allreduce(s.buf, r.buf, 0 == mt_rank ? BIG / 4 : BIG / 2,
                           0 == mt_rank ? MPI_LONG_DOUBLE : MPI_DOUBLE, MPI_SUM, comm);
    } else if (0 == strcmp(pattern, "root")) {
        want_class = MPI_ERR_ROOT;
        rc = MPI_Bcast(s.buf, BIG, MPI_INT, 0 == mt_rank ? 0 : 1, comm);
    } else if (0 == strcmp(pattern, "allgather-count")) {
        int block = 0 == mt_rank ? 16 : BIG / mt_size;
        want_class = MPI_ERR_TRUNCATE;
        rc = MPI_Allgather(s.buf, block, MPI_INT, r.buf, block, MPI_INT, comm);
    } else if (0 == strcmp(pattern, "rsb-count")) {
        want_class = MPI_ERR_COUNT;
        rc = MPI_Reduce_scatter_block(s.buf, r.buf, 0 == mt_rank ? 16 : BIG / mt_size, MPI_INT,
                                      MPI_SUM, comm);
    } else if (0 == strcmp(pattern, "rsb-op")) {
        want_class = MPI_ERR_OP;
        rc = MPI_Reduce_scatter_block(s.buf, r.buf, BIG / mt_size, MPI_INT,
                                      0 == mt_rank ? MPI_SUM : MPI_MAX, comm);
    } else if (0 == strcmp(pattern, "allgatherv-count") || 0 == strcmp(pattern, "alltoallv-count")
               || 0 == strcmp(pattern, "ialltoallv-count")) {
        /* each rank's idea of every block: 16 ints on rank 0, BIG / size elsewhere */
        int *counts = malloc((size_t) mt_size * sizeof(int));
        int *displs = malloc((size_t) mt_size * sizeof(int));
        for (int i = 0; i < mt_size; ++i) {
            counts[i] = 0 == mt_rank ? 16 : BIG / mt_size;
            displs[i] = i * counts[i];
        }
        want_class = MPI_ERR_TRUNCATE;
        if (0 == strcmp(pattern, "allgatherv-count")) {
            rc = MPI_Allgatherv(s.buf, counts[0], MPI_INT, r.buf, counts, displs, MPI_INT, comm);
        } else if (0 == strcmp(pattern, "alltoallv-count")) {
            rc = MPI_Alltoallv(s.buf, counts, displs, MPI_INT, r.buf, counts, displs, MPI_INT,
                               comm);
        } else {
            /* nonblocking: on the team's engine after the correct call above */
            MPI_Request req = MPI_REQUEST_NULL;
            rc = MPI_Ialltoallv(s.buf, counts, displs, MPI_INT, r.buf, counts, displs, MPI_INT,
                                comm, &req);
            rc = (MPI_SUCCESS == rc) ? MPI_Wait(&req, MPI_STATUS_IGNORE) : rc;
        }
        free(counts);
        free(displs);
    } else if (0 == strcmp(pattern, "rs-count")) {
        int *rcounts = malloc((size_t) mt_size * sizeof(int));
        want_class = MPI_ERR_COUNT;
        for (int i = 0; i < mt_size; ++i) {
            rcounts[i] = (1 == i % 3) ? 0 : (0 == mt_rank) ? 16 + i : BIG / mt_size - i;
        }
        rc = MPI_Reduce_scatter(s.buf, r.buf, rcounts, MPI_INT, MPI_SUM, comm);
        free(rcounts);
    } else if (0 == strcmp(pattern, "ireduce-count")) {
        MPI_Request req = MPI_REQUEST_NULL;
        want_class = MPI_ERR_COUNT;
        rc = MPI_Ireduce(s.buf, r.buf, 0 == mt_rank ? 16 : BIG, MPI_INT, MPI_SUM, 0, comm, &req);
        rc = (MPI_SUCCESS == rc) ? MPI_Wait(&req, MPI_STATUS_IGNORE) : rc;
    } else if (0 == strcmp(pattern, "reduce-count")
               || 0 == strcmp(pattern, "reduce-count-promise")) {
        bool promise = (0 == strcmp(pattern, "reduce-count-promise"));
        want_class = MPI_ERR_COUNT;
        rc = MPI_Reduce(s.buf, r.buf, 0 == mt_rank ? 16 : BIG, MPI_INT, MPI_SUM,
                        promise ? 0 : mt_size - 1, comm);
    } else {
        want_class = MPI_ERR_TRUNCATE;
        rc = MPI_Bcast(s.buf, 0 == mt_rank ? 16 : BIG, MPI_INT, 0, comm);
    }
    MPI_Error_class(rc, &got_class);
    if (want_class != got_class) {
        mt_diag_add(diag, "returned %s, want error class %d; ", mt_mpi_error(rc), want_class);
        ok = 0;
    }
    ok &= guarded_intact(&prev_r, LIVE_BYTE, "the previous call's receive buffer", diag);
    ok &= guarded_intact(&prev_s, LIVE_BYTE, "the previous call's send buffer", diag);
    ok &= guarded_intact(&r, bcast ? LIVE_BYTE : -1, "this call's receive buffer", diag);
    ok &= guarded_intact(&s, -1, "this call's send buffer", diag);
    /* the communicator goes on */
    ok &= correct_call(comm, bcast, 1000, &s, &r, diag);
    ok &= correct_call(comm, !bcast, BIG, &s, &r, diag);
    if (MPI_OP_NULL != uop) {
        MPI_Op_free(&uop);
    }
    guarded_free(&s);
    guarded_free(&r);
    guarded_free(&prev_s);
    guarded_free(&prev_r);
    MPI_Comm_free(&comm);
    return mt_check(ok, diag, "%s: every rank returned the error class, nothing outside the "
                    "call's buffers written, the communicator goes on", pattern);
}

int main(int argc, char **argv)
{
    static const char *const all[] = {"count",       "op",   "user-op",     "type",
                                      "type-kernel", "root", "bcast-count", "allgather-count",
                                      "rsb-count",   "rsb-op", "allgatherv-count",
                                      "alltoallv-count", "ialltoallv-count", "rs-count",
                                      "reduce-count", "reduce-count-promise", "ireduce-count"};
    char why[256];

    mt_init(&argc, &argv);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    if (argc > 1) {
        for (int i = 1; i < argc; ++i) {
            run_pattern(argv[i]);
        }
    } else {
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) {
            run_pattern(all[i]);
        }
    }
    return mt_finish();
}
