/*
 * test_defer.c - nonblocking allreduces and bcasts whose path each call decides (coll_gpu_defer.c)
 * under coll/gpu's defaults, in programs that make no blocking device call: a CUDA-aware code
 * that calls MPI_Comm_split_type first and then moves its device data with nonblocking calls
 * only.  Before, such calls stayed staged through the host for good; a device rank now defers a
 * call until it has read every rank's note of it, and the call takes the node team when every
 * rank passed device memory.
 *
 * Usage: test_defer SEED
 *
 * Cases, each on a communicator made by MPI_Comm_split_type (its one blocking call, a host
 * allreduce, sets up the kinds board; everything after is nonblocking unless named):
 *   all-device       rounds of MPI_Iallreduce and MPI_Ibcast (every root), device memory on
 *                    every rank, each waited for; the shell checks they took the node team
 *   mixed            per call, each rank picks its kind at random (device, host, pinned,
 *                    managed); eight calls outstanding at once (iallreduce, ibcast,
 *                    iallgather, and igather and ibarrier, which libnbc matches by the order
 *                    calls started), then MPI_Waitall; now and then a blocking allreduce
 *   many             100 MPI_Iallreduce outstanding before the first wait (more than the 64
 *                    calls the notes' ring keeps), device on every rank; then, on another
 *                    communicator, the same with host memory on rank 0
 *   crossed          even ranks start an MPI_Iallreduce on one communicator and then make a
 *                    blocking allreduce on another; odd ranks the other way round (legal: a
 *                    nonblocking start never waits), device memory on every rank
 *   first            communicators whose first calls are nonblocking (their kinds board set up
 *                    by them, without a wait): device memory on every rank; kinds per call
 *   erroneous        an MPI_Iallreduce with device memory everywhere whose count differs on
 *                    rank 0: MPI_ERR_COUNT on every rank, and no byte written past the count
 * And, alone (test_defer SEED late SECONDS [error]): a rank SECONDS late to a deferred call,
 * under the hang watch's limits the shell sets (case_late).
 * Every call runs on fresh random data into a poisoned output and is compared with a reference
 * computed here.  A hang is reported by the case's alarm (mpitest.h).
 */
#include "mpitest.h"

#define POISON ((int32_t) 0x5a5a5a5a)
#define N_MAX 4096
#define OUTSTANDING 8
#define MANY 100

static unsigned seed;
static unsigned round_no;

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Rank r's kind in call k: its own choice, unknown to its peers. */
static mt_kind_t pick_kind(int r, unsigned k)
{
    static const mt_kind_t kinds[] = {MT_KIND_DEVICE, MT_KIND_DEVICE, MT_KIND_HOST,
                                      MT_KIND_PINNED, MT_KIND_MANAGED};
    return kinds[mix((uint64_t) seed << 32 ^ (uint64_t) r << 20 ^ k) % 5];
}

typedef enum { OP_IALLREDUCE, OP_IBCAST, OP_IALLGATHER, OP_IGATHER, OP_IBARRIER } op_t;
static const char *const op_names[] = {"iallreduce", "ibcast", "iallgather", "igather",
                                       "ibarrier"};

/* One call in flight: its buffers, what it must end with. */
typedef struct {
    op_t op;
    mt_kind_t kind;
    int root;
    size_t n, nout;            /* elements in, elements out */
    void *sbuf, *rbuf;
    int32_t *want;
    unsigned round;
} call_t;

static int put(void *dst, const int32_t *src, size_t n)
{
    return DEV_OK == dev_memcpy(dst, src, n * sizeof(int32_t)) ? 0 : -1;
}

/* Start c on comm (this rank's world_of[]): 0, or -1 with diag said. */
static int call_start(MPI_Comm comm, const int *world_of, call_t *c, MPI_Request *req,
                      char *diag)
{
    int rank, size, rc = MPI_SUCCESS;
    int32_t *in, *poison;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    c->round = ++round_no;
    c->nout = (OP_IALLGATHER == c->op || OP_IGATHER == c->op) ? c->n * (size_t) size : c->n;
    in = malloc(c->n * sizeof(int32_t) + 1);
    poison = malloc(c->nout * sizeof(int32_t) + 1);
    c->sbuf = mt_kind_alloc(c->kind, c->n * sizeof(int32_t));
    c->rbuf = mt_kind_alloc(c->kind, c->nout * sizeof(int32_t));
    c->want = malloc(c->nout * sizeof(int32_t) + 1);
    for (size_t i = 0; i < c->nout; ++i) {
        poison[i] = POISON;
    }
    for (size_t i = 0; i < c->n; ++i) {
        in[i] = mt_input(world_of[rank], i, c->round);
    }
    if (NULL == in || NULL == poison || NULL == c->sbuf || NULL == c->rbuf || NULL == c->want
        || 0 != put(c->sbuf, in, c->n)
        || 0 != put(c->rbuf, poison, c->nout)) {
        mt_diag_add(diag, "%s: buffers of %zu ints could not be set up; ", op_names[c->op], c->n);
        free(in);
        free(poison);
        return -1;
    }
    for (size_t i = 0; i < c->nout; ++i) {
        size_t e = i % (c->n ? c->n : 1), blk = c->n ? i / c->n : 0;
        int32_t s = 0;
        switch (c->op) {
        case OP_IALLREDUCE:
            for (int p = 0; p < size; ++p) {
                s += mt_input(world_of[p], i, c->round);
            }
            c->want[i] = s;
            break;
        case OP_IBCAST:
            c->want[i] = mt_input(world_of[c->root], i, c->round);
            break;
        case OP_IGATHER:
            c->want[i] = (rank == c->root) ? mt_input(world_of[blk], e, c->round) : POISON;
            break;
        default:
            c->want[i] = mt_input(world_of[blk], e, c->round);
            break;
        }
    }
    switch (c->op) {
    case OP_IALLREDUCE:
        rc = MPI_Iallreduce(c->sbuf, c->rbuf, (int) c->n, MPI_INT32_T, MPI_SUM, comm, req);
        break;
    case OP_IBCAST:
        /* the root's data in its rbuf: the bcast's one buffer */
        rc = (rank == c->root) ? (put(c->rbuf, in, c->n) ? MPI_ERR_OTHER : MPI_SUCCESS)
                               : MPI_SUCCESS;
        if (MPI_SUCCESS == rc) {
            rc = MPI_Ibcast(c->rbuf, (int) c->n, MPI_INT32_T, c->root, comm, req);
        }
        break;
    case OP_IALLGATHER:
        rc = MPI_Iallgather(c->sbuf, (int) c->n, MPI_INT32_T, c->rbuf, (int) c->n, MPI_INT32_T,
                            comm, req);
        break;
    case OP_IGATHER:
        rc = MPI_Igather(c->sbuf, (int) c->n, MPI_INT32_T, c->rbuf, (int) c->n, MPI_INT32_T,
                         c->root, comm, req);
        break;
    default:
        c->nout = 0;
        rc = MPI_Ibarrier(comm, req);
        break;
    }
    free(in);
    free(poison);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s start: %s; ", op_names[c->op], mt_mpi_error(rc));
        return -1;
    }
    return 0;
}

/* c ended: 1 when its result is right; its buffers go. */
static int call_check(call_t *c, char *diag)
{
    int32_t *got = malloc(c->nout * sizeof(int32_t) + 1);
    int ok = 1;

    if (0 < c->nout && DEV_OK != dev_memcpy(got, c->rbuf, c->nout * sizeof(int32_t))) {
        mt_diag_add(diag, "%s: cannot read the result; ", op_names[c->op]);
        ok = 0;
    }
    for (size_t i = 0; ok && i < c->nout; ++i) {
        if (got[i] != c->want[i]) {
            mt_diag_add(diag, "%s (%s memory, %zu ints, root %d, round %u): [%zu] = %d, want "
                        "%d; ", op_names[c->op], mt_kind_names[c->kind], c->n, c->root, c->round,
                        i, (int) got[i], (int) c->want[i]);
            ok = 0;
        }
    }
    free(got);
    mt_kind_free(c->kind, c->sbuf);
    mt_kind_free(c->kind, c->rbuf);
    free(c->want);
    return ok;
}

/* A communicator of the node, as CUDA-aware codes make it, and the world rank of each of its
 * ranks (from the groups: no call on the communicator). */
static MPI_Comm comm_of_node(int **world_of)
{
    MPI_Comm comm;
    MPI_Group g, wg;
    int size, *mine;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_size(comm, &size);
    *world_of = malloc((size_t) size * sizeof(int));
    mine = malloc((size_t) size * sizeof(int));
    for (int i = 0; i < size; ++i) {
        mine[i] = i;
    }
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(g, size, mine, wg, *world_of);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    free(mine);
    return comm;
}

/* The same, and one blocking call on it (host memory: it sets up the kinds board). */
static MPI_Comm node_comm(int **world_of)
{
    MPI_Comm comm = comm_of_node(world_of);
    int one = 1, sum = 0;

    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
    return comm;
}

/* Start calls[0..n) (each rank's kinds its own), wait for them all, check them. */
static int run_batch(MPI_Comm comm, const int *world_of, call_t *calls, int n, char *diag)
{
    MPI_Request *reqs = malloc((size_t) n * sizeof(MPI_Request));
    int ok = 1, started = 0, rc;

    for (int i = 0; i < n; ++i) {
        reqs[i] = MPI_REQUEST_NULL;
    }
    for (int i = 0; i < n && ok; ++i, ++started) {
        ok = (0 == call_start(comm, world_of, &calls[i], &reqs[i], diag));
    }
    rc = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Waitall: %s; ", mt_mpi_error(rc));
        ok = 0;
    }
    for (int i = 0; i < started; ++i) {
        ok &= call_check(&calls[i], diag);
    }
    free(reqs);
    return ok;
}

static int case_all_device(char *diag)
{
    int *world_of, size, ok = 1;
    MPI_Comm comm = node_comm(&world_of);
    call_t c;

    MPI_Comm_size(comm, &size);
    for (int r = 0; r < 3 && ok; ++r) {
        for (int root = -1; root < size && ok; ++root) {
            memset(&c, 0, sizeof(c));
            c.op = (0 > root) ? OP_IALLREDUCE : OP_IBCAST;
            c.kind = MT_KIND_DEVICE;
            c.root = (0 > root) ? 0 : root;
            c.n = (0 == r) ? 1 : (1 == r) ? 1000 : N_MAX;
            ok = run_batch(comm, world_of, &c, 1, diag);
        }
    }
    free(world_of);
    MPI_Comm_free(&comm);
    return ok;
}

/* first: a communicator whose first calls are nonblocking (no blocking call to set up its
 * board): device memory on every rank, then kinds per call */
static int case_mixed_on(MPI_Comm comm, int *world_of, char *diag);

static int case_first(char *diag)
{
    int *world_of, ok;
    MPI_Comm comm = comm_of_node(&world_of);
    call_t c;

    memset(&c, 0, sizeof(c));
    c.op = OP_IALLREDUCE;
    c.kind = MT_KIND_DEVICE;
    c.n = 333;
    ok = run_batch(comm, world_of, &c, 1, diag);
    free(world_of);
    MPI_Comm_free(&comm);
    if (ok) {
        comm = comm_of_node(&world_of);
        ok = case_mixed_on(comm, world_of, diag); /* frees both */
    }
    return ok;
}

static int case_mixed(char *diag)
{
    int *world_of;
    MPI_Comm comm = node_comm(&world_of);

    return case_mixed_on(comm, world_of, diag);
}

static int case_mixed_on(MPI_Comm comm, int *world_of, char *diag)
{
    int size, rank, ok = 1;
    call_t calls[OUTSTANDING];
    unsigned k = 0;

    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    for (int batch = 0; batch < 12 && ok; ++batch) {
        for (int i = 0; i < OUTSTANDING; ++i, ++k) {
            uint64_t h = mix((uint64_t) seed * 977 + k); /* the same on every rank */
            memset(&calls[i], 0, sizeof(calls[i]));
            calls[i].op = (op_t) (h % 5);
            calls[i].root = (int) ((h >> 8) % (uint64_t) size);
            calls[i].n = 1 + (size_t) ((h >> 16) % 3000);
            calls[i].kind = pick_kind(world_of[rank], k);
        }
        ok = run_batch(comm, world_of, calls, OUTSTANDING, diag);
        if (ok && 2 == batch % 3) {
            /* a blocking call in between: the deferred calls go first */
            call_t b;
            int32_t *in = malloc(64 * sizeof(int32_t)), *out = malloc(64 * sizeof(int32_t));
            memset(&b, 0, sizeof(b));
            for (int i = 0; i < 64; ++i) {
                in[i] = mt_input(world_of[rank], (size_t) i, 7777u + (unsigned) batch);
            }
            if (MPI_SUCCESS != MPI_Allreduce(in, out, 64, MPI_INT32_T, MPI_SUM, comm)) {
                mt_diag_add(diag, "blocking allreduce failed; ");
                ok = 0;
            }
            for (int i = 0; ok && i < 64; ++i) {
                int32_t s = 0;
                for (int p = 0; p < size; ++p) {
                    s += mt_input(world_of[p], (size_t) i, 7777u + (unsigned) batch);
                }
                if (s != out[i]) {
                    mt_diag_add(diag, "blocking allreduce [%d] = %d, want %d; ", i, out[i], s);
                    ok = 0;
                }
            }
            free(in);
            free(out);
        }
    }
    free(world_of);
    MPI_Comm_free(&comm);
    return ok;
}

static int case_many(char *diag)
{
    int ok = 1;
    call_t *calls = calloc(MANY, sizeof(call_t));

    /* each pass on a communicator of its own: device everywhere (the first call decides, the
     * rest follow), then rank 0 with host memory (every call decided apart, staged) */
    for (int pass = 0; pass < 2 && ok; ++pass) {
        int *world_of, rank;
        MPI_Comm comm = node_comm(&world_of);
        MPI_Comm_rank(comm, &rank);
        for (int i = 0; i < MANY; ++i) {
            memset(&calls[i], 0, sizeof(calls[i]));
            calls[i].op = OP_IALLREDUCE;
            calls[i].n = 1 + (size_t) (i % 7) * 100;
            calls[i].kind = (1 == pass && 0 == rank) ? MT_KIND_HOST : MT_KIND_DEVICE;
        }
        ok = run_batch(comm, world_of, calls, MANY, diag);
        free(world_of);
        MPI_Comm_free(&comm);
    }
    free(calls);
    return ok;
}

static int case_crossed(char *diag)
{
    int *w1, *w2, rank, ok = 1, one = 1, sum = 0, size;
    MPI_Comm c1 = node_comm(&w1), c2 = node_comm(&w2);
    MPI_Request req = MPI_REQUEST_NULL;
    call_t c;

    MPI_Comm_rank(c1, &rank);
    MPI_Comm_size(c1, &size);
    memset(&c, 0, sizeof(c));
    c.op = OP_IALLREDUCE;
    c.kind = MT_KIND_DEVICE;
    c.n = 777;
    if (0 == rank % 2) {
        ok = (0 == call_start(c1, w1, &c, &req, diag));
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c2);
    } else {
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c2);
        ok = (0 == call_start(c1, w1, &c, &req, diag));
    }
    if (sum != size) {
        mt_diag_add(diag, "blocking allreduce: %d, want %d; ", sum, size);
        ok = 0;
    }
    if (MPI_SUCCESS != MPI_Wait(&req, MPI_STATUS_IGNORE)) {
        mt_diag_add(diag, "MPI_Wait failed; ");
        ok = 0;
    }
    ok &= call_check(&c, diag);
    free(w1);
    free(w2);
    MPI_Comm_free(&c1);
    MPI_Comm_free(&c2);
    return ok;
}

static int case_erroneous(char *diag)
{
    int *world_of, rank, ok = 1, rc, cls = 0;
    MPI_Comm comm = node_comm(&world_of);
    size_t cap = 2 * N_MAX, n;
    int32_t *host = malloc(cap * sizeof(int32_t));
    void *sbuf = mt_kind_alloc(MT_KIND_DEVICE, cap * sizeof(int32_t)),
         *rbuf = mt_kind_alloc(MT_KIND_DEVICE, cap * sizeof(int32_t));
    MPI_Request req = MPI_REQUEST_NULL;

    MPI_Comm_rank(comm, &rank);
    n = (0 == rank) ? 16 : N_MAX;
    for (size_t i = 0; i < cap; ++i) {
        host[i] = POISON;
    }
    if (NULL == sbuf || NULL == rbuf || 0 != put(sbuf, host, cap) || 0 != put(rbuf, host, cap)) {
        mt_diag_add(diag, "buffers could not be set up; ");
        ok = 0;
    }
    if (mt_agree(ok)) {
        rc = MPI_Iallreduce(sbuf, rbuf, (int) n, MPI_INT32_T, MPI_SUM, comm, &req);
        if (MPI_SUCCESS == rc) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        MPI_Error_class(rc, &cls);
        if (MPI_ERR_COUNT != cls) {
            mt_diag_add(diag, "count %zu here: %s, want MPI_ERR_COUNT; ", n, mt_mpi_error(rc));
            ok = 0;
        }
        if (0 != dev_memcpy(host, rbuf, cap * sizeof(int32_t))) {
            ok = 0;
        }
        for (size_t i = 0; ok && i < cap; ++i) {
            if (POISON != host[i]) {
                mt_diag_add(diag, "rbuf[%zu] written (%d) by an erroneous call; ", i, host[i]);
                ok = 0;
            }
        }
    }
    mt_kind_free(MT_KIND_DEVICE, sbuf);
    mt_kind_free(MT_KIND_DEVICE, rbuf);
    free(host);
    free(world_of);
    MPI_Comm_free(&comm);
    return ok;
}

/* late (test_defer SEED late SECONDS [error]): the last rank starts its device MPI_Iallreduce
 * SECONDS late while the others wait for theirs (the shell sets the hang watch's limits): the
 * call is right, or, with "error", every rank's MPI_Wait returns an error (none hangs). */
static int case_late(double seconds, int want_error, char *diag)
{
    int *world_of, rank, size, ok = 1, rc;
    MPI_Comm comm = node_comm(&world_of);
    MPI_Request req = MPI_REQUEST_NULL;
    call_t c;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    memset(&c, 0, sizeof(c));
    c.op = OP_IALLREDUCE;
    c.kind = MT_KIND_DEVICE;
    c.n = 100;
    if (rank == size - 1) {
        usleep((useconds_t) (seconds * 1e6));
    }
    ok = (0 == call_start(comm, world_of, &c, &req, diag));
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (want_error) {
        if (MPI_SUCCESS == rc) {
            mt_diag_add(diag, "MPI_Wait succeeded, want an error from the hang watch; ");
            ok = 0;
        }
        mt_kind_free(c.kind, c.sbuf);
        mt_kind_free(c.kind, c.rbuf);
        free(c.want);
    } else {
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "MPI_Wait: %s; ", mt_mpi_error(rc));
            ok = 0;
        }
        ok &= call_check(&c, diag);
    }
    free(world_of);
    MPI_Comm_free(&comm);
    return ok;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(char *diag);
    } cases[] = {
        {"all-device: nonblocking calls only, device memory on every rank", case_all_device},
        {"mixed: kinds picked per call and rank, 8 calls outstanding, libnbc's calls between",
         case_mixed},
        {"many: 100 iallreduces outstanding before the first wait", case_many},
        {"first: communicators whose first calls are nonblocking", case_first},
        {"crossed: a nonblocking start before a blocking call of another communicator",
         case_crossed},
        {"erroneous: an iallreduce whose count differs on rank 0", case_erroneous},
    };
    char why[256], diag[MT_DIAG_LEN];

    mt_init(&argc, &argv);
    seed = (argc > 1) ? (unsigned) strtoul(argv[1], NULL, 10) : 1u;
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    if (argc > 3 && 0 == strcmp(argv[2], "late")) {
        int want_error = (argc > 4 && 0 == strcmp(argv[4], "error"));
        tap_plan(1);
        diag[0] = '\0';
        mt_set_case("late");
        mt_check(case_late(atof(argv[3]), want_error, diag), diag,
                 "late: the last rank %s s late%s", argv[3],
                 want_error ? ", past the hang watch's error limit: an error everywhere" : "");
        return mt_finish();
    }
    tap_plan((int) (sizeof(cases) / sizeof(cases[0])));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        diag[0] = '\0';
        mt_set_case(cases[i].name);
        mt_check(cases[i].run(diag), diag, "%s (seed %u)", cases[i].name, seed);
    }
    return mt_finish();
}
