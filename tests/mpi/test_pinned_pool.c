/*
 * test_pinned_pool.c - staged nonblocking and persistent calls take their pinned bounce memory
 * from the process's pool (coll_gpu_pinned_pool.c) instead of pinning memory per call, the
 * pool keeps no more than coll_gpu_pinned_pool_bytes, and a copy back that fails completes its
 * request with an error (coll_gpu_stage_async.c).  Device buffers on every rank; the wrapper
 * (pinned_pool.sh) forces the staged algorithms.  Pinned allocations are counted by the device
 * layer (dev_host_stats), which the component and this program share.
 *
 *   test_pinned_pool percall    two rounds of warm-up, then 50 rounds of: MPI_Iallgather of
 *                               16 B per rank, MPI_Iallreduce, MPI_Ibcast, MPI_Ialltoall, each
 *                               with MPI_Wait; 8 MPI_Iallgather in flight and MPI_Waitall; an
 *                               MPI_Iallgather of 24 KiB per rank; a persistent allgather made,
 *                               started twice and freed.  Every result right, and no pinned
 *                               allocation after the warm-up (each call pinned two buffers
 *                               before the pool).  Rank 0 prints "# pinned allocations: N in
 *                               M calls" for the wrapper.
 *   test_pinned_pool bounded B  B = coll_gpu_pinned_pool_bytes of the run (at least 64 KiB):
 *                               64 MPI_Iallgather of 32 KiB per rank in flight at once (more
 *                               pinned blocks live than B holds: checked), MPI_Waitall, one
 *                               more small call (it frees what waits to be freed); then at most
 *                               B / 32 KiB + 2 blocks more are live than before.  One call of
 *                               more than B: after the next call nothing of it is left.
 *   test_pinned_pool copyfail   COLL_GPU_TEST_FAIL_COPYBACK names a rank, whose copies back
 *                               fail: its MPI_Iallgather and MPI_Start of a persistent
 *                               allgather complete with an error, every other rank's with the
 *                               right data, nobody hangs, and a host allreduce works after.
 *
 * After MPI_Finalize every rank checks that all pinned memory was freed (the pool goes at the
 * component's close): a rank that finds some exits with 1 and says so on stderr.
 */
#include "mpitest.h"

/* Open MPI 4.1 has the persistent collectives as MPIX_<coll>_init (pcollreq extension) */
#if OMPI_MAJOR_VERSION < 5
#    include <mpi-ext.h>
#    define MPI_Allgather_init MPIX_Allgather_init
#endif

#define POISON ((int32_t) -7)
#define ROUNDS 50
#define INFLIGHT 8
#define BOUNDED_CALLS 64

static unsigned next_round = 1;

/* Pinned allocations live now (made and not freed), and made so far. */
static int64_t pinned_live(void)
{
    dev_host_stats_t st;
    dev_host_stats(&st);
    return (int64_t) (st.allocs - st.frees);
}

static uint64_t pinned_made(void)
{
    dev_host_stats_t st;
    dev_host_stats(&st);
    return st.allocs;
}

/* A staged allgather's buffers: count int32 per rank, in device memory. */
typedef struct {
    int count;
    unsigned round;
    int32_t *dsend, *drecv;
    MPI_Request req;
} gather_t;

static int gather_new(gather_t *g, int count)
{
    g->count = count;
    g->req = MPI_REQUEST_NULL;
    g->dsend = mt_mem_alloc(MT_MEM_DEVICE, (size_t) count * sizeof(int32_t));
    g->drecv = mt_mem_alloc(MT_MEM_DEVICE, (size_t) count * mt_size * sizeof(int32_t));
    return NULL != g->dsend && NULL != g->drecv;
}

static void gather_free(gather_t *g)
{
    mt_mem_free(MT_MEM_DEVICE, g->dsend);
    mt_mem_free(MT_MEM_DEVICE, g->drecv);
    g->dsend = g->drecv = NULL;
}

/* Fresh input for a new round, poisoned output. */
static int gather_fill(gather_t *g)
{
    size_t n = (size_t) g->count * mt_size;
    int32_t *h = malloc(n * sizeof(int32_t));
    int ok = NULL != h;

    g->round = next_round++;
    for (size_t i = 0; ok && i < (size_t) g->count; ++i) {
        h[i] = mt_input(mt_rank, i, g->round);
    }
    ok = ok && 0 == mt_mem_put(MT_MEM_DEVICE, g->dsend, h, (size_t) g->count * sizeof(int32_t));
    for (size_t i = 0; ok && i < n; ++i) {
        h[i] = POISON;
    }
    ok = ok && 0 == mt_mem_put(MT_MEM_DEVICE, g->drecv, h, n * sizeof(int32_t));
    free(h);
    return ok;
}

/* Is every rank's block in the output? */
static int gather_check(const gather_t *g, char *diag)
{
    size_t n = (size_t) g->count * mt_size;
    int32_t *h = malloc(n * sizeof(int32_t));
    int ok = NULL != h && 0 == mt_mem_get(MT_MEM_DEVICE, h, g->drecv, n * sizeof(int32_t));

    for (int r = 0; ok && r < mt_size; ++r) {
        for (size_t i = 0; ok && i < (size_t) g->count; ++i) {
            int32_t want = mt_input(r, i, g->round), got = h[(size_t) r * g->count + i];
            if (got != want) {
                mt_diag_add(diag, "allgather of %d int32: rank %d's element %zu is %d, not %d; ",
                            g->count, r, i, got, want);
                ok = 0;
            }
        }
    }
    free(h);
    return ok;
}

static int gather_start(gather_t *g)
{
    return MPI_Iallgather(g->dsend, g->count, MPI_INT32_T, g->drecv, g->count, MPI_INT32_T,
                          MPI_COMM_WORLD, &g->req);
}

/* Note a failed MPI call; 1 when rc is success. */
static int mpi_ok(int rc, const char *call, char *diag)
{
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s: %s; ", call, mt_mpi_error(rc));
        return 0;
    }
    return 1;
}

/* One MPI_Iallgather of count int32 per rank with MPI_Wait; right? */
static int one_iallgather(gather_t *g, char *diag)
{
    int ok = gather_fill(g);
    ok = ok && mpi_ok(gather_start(g), "MPI_Iallgather", diag);
    ok = ok && mpi_ok(MPI_Wait(&g->req, MPI_STATUS_IGNORE), "MPI_Wait", diag);
    return ok && gather_check(g, diag);
}

/* MPI_Iallreduce (sum), MPI_Ibcast (from round % size) and MPI_Ialltoall of count int32 on
 * device buffers, each waited for; right? */
static int other_calls(int count, char *diag)
{
    size_t n = (size_t) count * mt_size;
    int32_t *h = malloc(n * sizeof(int32_t));
    int32_t *ds = mt_mem_alloc(MT_MEM_DEVICE, n * sizeof(int32_t));
    int32_t *dr = mt_mem_alloc(MT_MEM_DEVICE, n * sizeof(int32_t));
    unsigned k = next_round++;
    int root = (int) (k % (unsigned) mt_size);
    MPI_Request req;
    int ok = NULL != h && NULL != ds && NULL != dr;

    /* allreduce */
    for (size_t i = 0; ok && i < (size_t) count; ++i) {
        h[i] = mt_input(mt_rank, i, k);
    }
    ok = ok && 0 == mt_mem_put(MT_MEM_DEVICE, ds, h, (size_t) count * sizeof(int32_t));
    ok = ok && mpi_ok(MPI_Iallreduce(ds, dr, count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD, &req),
                      "MPI_Iallreduce", diag);
    ok = ok && mpi_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait (iallreduce)", diag);
    ok = ok && 0 == mt_mem_get(MT_MEM_DEVICE, h, dr, (size_t) count * sizeof(int32_t));
    for (size_t i = 0; ok && i < (size_t) count; ++i) {
        int32_t want = 0;
        for (int r = 0; r < mt_size; ++r) {
            want += mt_input(r, i, k);
        }
        if (h[i] != want) {
            mt_diag_add(diag, "iallreduce element %zu is %d, not %d; ", i, h[i], want);
            ok = 0;
        }
    }
    /* bcast: the root's input into the others' poisoned buffers */
    for (size_t i = 0; ok && i < (size_t) count; ++i) {
        h[i] = (mt_rank == root) ? mt_input(root, i, k + 7) : POISON;
    }
    ok = ok && 0 == mt_mem_put(MT_MEM_DEVICE, ds, h, (size_t) count * sizeof(int32_t));
    ok = ok && mpi_ok(MPI_Ibcast(ds, count, MPI_INT32_T, root, MPI_COMM_WORLD, &req),
                      "MPI_Ibcast", diag);
    ok = ok && mpi_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait (ibcast)", diag);
    ok = ok && 0 == mt_mem_get(MT_MEM_DEVICE, h, ds, (size_t) count * sizeof(int32_t));
    for (size_t i = 0; ok && i < (size_t) count; ++i) {
        if (h[i] != mt_input(root, i, k + 7)) {
            mt_diag_add(diag, "ibcast element %zu is %d, not %d; ", i, h[i],
                        mt_input(root, i, k + 7));
            ok = 0;
        }
    }
    /* alltoall: block j of rank r's input is (r, j * count + i) */
    for (size_t i = 0; ok && i < n; ++i) {
        h[i] = mt_input(mt_rank, i, k + 13);
    }
    ok = ok && 0 == mt_mem_put(MT_MEM_DEVICE, ds, h, n * sizeof(int32_t));
    ok = ok && mpi_ok(MPI_Ialltoall(ds, count, MPI_INT32_T, dr, count, MPI_INT32_T,
                                    MPI_COMM_WORLD, &req),
                      "MPI_Ialltoall", diag);
    ok = ok && mpi_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait (ialltoall)", diag);
    ok = ok && 0 == mt_mem_get(MT_MEM_DEVICE, h, dr, n * sizeof(int32_t));
    for (int r = 0; ok && r < mt_size; ++r) {
        for (size_t i = 0; ok && i < (size_t) count; ++i) {
            int32_t want = mt_input(r, (size_t) mt_rank * count + i, k + 13);
            if (h[(size_t) r * count + i] != want) {
                mt_diag_add(diag, "ialltoall block %d element %zu is %d, not %d; ", r, i,
                            h[(size_t) r * count + i], want);
                ok = 0;
            }
        }
    }
    free(h);
    mt_mem_free(MT_MEM_DEVICE, ds);
    mt_mem_free(MT_MEM_DEVICE, dr);
    return ok;
}

/* A persistent allgather on g's buffers, made, started twice on fresh data, freed; right? */
static int persistent_allgather(gather_t *g, char *diag)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int ok = mpi_ok(MPI_Allgather_init(g->dsend, g->count, MPI_INT32_T, g->drecv, g->count,
                                       MPI_INT32_T, MPI_COMM_WORLD, MPI_INFO_NULL, &req),
                    "MPI_Allgather_init", diag);

    for (int start = 0; ok && start < 2; ++start) {
        ok = gather_fill(g);
        ok = ok && mpi_ok(MPI_Start(&req), "MPI_Start", diag);
        ok = ok && mpi_ok(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait (persistent)", diag);
        ok = ok && gather_check(g, diag);
    }
    if (MPI_REQUEST_NULL != req) {
        ok = mpi_ok(MPI_Request_free(&req), "MPI_Request_free", diag) && ok;
    }
    return ok;
}

/* One round of percall's calls; how many calls it made goes to *calls. */
static int percall_round(gather_t *small, gather_t *batch, gather_t *mid, char *diag, int *calls)
{
    int ok = one_iallgather(small, diag);

    ok = ok && other_calls(4, diag);
    for (int b = 0; ok && b < INFLIGHT; ++b) {
        ok = gather_fill(&batch[b]) && mpi_ok(gather_start(&batch[b]), "MPI_Iallgather", diag);
    }
    for (int b = INFLIGHT - 1; ok && b >= 0; --b) {
        ok = mpi_ok(MPI_Wait(&batch[b].req, MPI_STATUS_IGNORE), "MPI_Wait (batch)", diag)
             && gather_check(&batch[b], diag);
    }
    ok = ok && one_iallgather(mid, diag);
    ok = ok && persistent_allgather(small, diag);
    *calls += 1 + 3 + INFLIGHT + 1 + 2;
    return ok;
}

static void run_percall(void)
{
    gather_t small, mid, batch[INFLIGHT];
    char diag[MT_DIAG_LEN] = "";
    uint64_t made = 0;
    int ok, calls = 0, warm = 0;

    ok = gather_new(&small, 4) && gather_new(&mid, 6144);
    for (int b = 0; b < INFLIGHT; ++b) {
        ok = gather_new(&batch[b], 4) && ok;
    }
    ok = mt_agree(ok);
    mt_set_case("percall warm-up");
    for (int round = 0; ok && round < 2; ++round) {
        ok = percall_round(&small, batch, &mid, diag, &warm);
    }
    mt_check(ok, diag, "warm-up: staged nonblocking and persistent calls on device buffers are "
             "right");
    mt_set_case("percall");
    diag[0] = '\0';
    made = pinned_made();
    for (int round = 0; ok && round < ROUNDS; ++round) {
        ok = percall_round(&small, batch, &mid, diag, &calls);
    }
    made = pinned_made() - made;
    mt_check(ok, diag, "%d rounds of staged MPI_Iallgather, MPI_Iallreduce, MPI_Ibcast, "
             "MPI_Ialltoall, %d MPI_Iallgather in flight, a persistent allgather: right",
             ROUNDS, INFLIGHT);
    if (0 == mt_rank) {
        printf("# pinned allocations: %llu in %d calls\n", (unsigned long long) made, calls);
    }
    diag[0] = '\0';
    if (0 != made) {
        mt_diag_add(diag, "%llu pinned allocations in %d staged calls after the warm-up",
                    (unsigned long long) made, calls);
    }
    mt_check(0 == made, diag, "no pinned host allocation in %d staged calls after the warm-up "
             "(the pool serves them)", calls);
    gather_free(&small);
    gather_free(&mid);
    for (int b = 0; b < INFLIGHT; ++b) {
        gather_free(&batch[b]);
    }
}

static void run_bounded(size_t bound)
{
    gather_t *g = calloc(BOUNDED_CALLS, sizeof(*g)), small, big;
    const int count = 8192; /* 32 KiB per rank: blocks of 32 KiB and more */
    char diag[MT_DIAG_LEN] = "";
    int64_t before, peak, after, allowed = (int64_t) (bound / (32 << 10)) + 2;
    int ok = NULL != g && gather_new(&small, 4);

    for (int i = 0; ok && i < BOUNDED_CALLS; ++i) {
        ok = gather_new(&g[i], count);
    }
    ok = mt_agree(ok);
    mt_set_case("bounded");
    before = pinned_live();
    for (int i = 0; ok && i < BOUNDED_CALLS; ++i) {
        ok = gather_fill(&g[i]) && mpi_ok(gather_start(&g[i]), "MPI_Iallgather", diag);
    }
    peak = pinned_live() - before;
    for (int i = 0; ok && i < BOUNDED_CALLS; ++i) {
        ok = mpi_ok(MPI_Wait(&g[i].req, MPI_STATUS_IGNORE), "MPI_Wait", diag)
             && gather_check(&g[i], diag);
    }
    ok = ok && one_iallgather(&small, diag);
    after = pinned_live() - before;
    if (ok && (after > allowed || peak <= allowed)) {
        mt_diag_add(diag, "pinned blocks live: %lld more at the peak, %lld more after (at most "
                    "%lld allowed after; the peak must exceed that)",
                    (long long) peak, (long long) after, (long long) allowed);
        ok = 0;
    }
    mt_check(ok, diag, "%d MPI_Iallgather of 32 KiB per rank in flight, pool bound %zu B: "
             "right, and at most %lld pinned blocks kept after", BOUNDED_CALLS, bound,
             (long long) allowed);

    /* a call larger than the bound: allocated for itself, freed by the next call */
    mt_set_case("bounded above");
    diag[0] = '\0';
    ok = mt_agree(gather_new(&big, (int) (bound / sizeof(int32_t)) + 1024));
    before = pinned_live();
    ok = ok && one_iallgather(&big, diag);
    ok = ok && one_iallgather(&small, diag);
    after = pinned_live() - before;
    if (ok && 0 < after) {
        mt_diag_add(diag, "%lld pinned blocks more than before the call above the bound",
                    (long long) after);
        ok = 0;
    }
    mt_check(ok, diag, "an MPI_Iallgather above the pool bound: right, its pinned memory freed "
             "by the next call");
    gather_free(&big);
    for (int i = 0; i < BOUNDED_CALLS && NULL != g; ++i) {
        gather_free(&g[i]);
    }
    gather_free(&small);
    free(g);
}

static void run_copyfail(int failing)
{
    gather_t g;
    char diag[MT_DIAG_LEN] = "";
    MPI_Request req = MPI_REQUEST_NULL;
    int ok = mt_agree(gather_new(&g, 4)), rc, sum = 0;

    /* nonblocking */
    mt_set_case("copyfail iallgather");
    ok = ok && gather_fill(&g) && mpi_ok(gather_start(&g), "MPI_Iallgather", diag);
    rc = ok ? MPI_Wait(&g.req, MPI_STATUS_IGNORE) : MPI_SUCCESS;
    if (ok && mt_rank == failing && MPI_SUCCESS == rc) {
        mt_diag_add(diag, "MPI_Wait returned success on the failing rank");
        ok = 0;
    } else if (ok && mt_rank != failing) {
        ok = mpi_ok(rc, "MPI_Wait", diag) && gather_check(&g, diag);
    }
    mt_check(ok, diag, "MPI_Iallgather, rank %d's copy back failing: it gets an error, the "
             "others the right data", failing);

    /* persistent: a request whose MPI_Wait fails is freed by it (Open MPI's error handling
     * of requests), so each start has a request of its own */
    mt_set_case("copyfail persistent");
    diag[0] = '\0';
    ok = 1;
    for (int start = 0; ok && start < 2; ++start) {
        ok = mpi_ok(MPI_Allgather_init(g.dsend, g.count, MPI_INT32_T, g.drecv, g.count,
                                       MPI_INT32_T, MPI_COMM_WORLD, MPI_INFO_NULL, &req),
                    "MPI_Allgather_init", diag);
        ok = ok && gather_fill(&g) && mpi_ok(MPI_Start(&req), "MPI_Start", diag);
        rc = ok ? MPI_Wait(&req, MPI_STATUS_IGNORE) : MPI_SUCCESS;
        if (ok && mt_rank == failing && MPI_SUCCESS == rc) {
            mt_diag_add(diag, "MPI_Wait of start %d returned success on the failing rank", start);
            ok = 0;
        } else if (ok && mt_rank != failing) {
            ok = mpi_ok(rc, "MPI_Wait", diag) && gather_check(&g, diag);
        }
        if (MPI_REQUEST_NULL != req) {
            ok = mpi_ok(MPI_Request_free(&req), "MPI_Request_free", diag) && ok;
        }
    }
    mt_check(ok, diag, "persistent allgather, 2 requests started once each, rank %d's copy back "
             "failing: it gets errors, the others the right data", failing);

    mt_set_case("copyfail after");
    diag[0] = '\0';
    ok = mpi_ok(MPI_Allreduce(&mt_rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
                "MPI_Allreduce", diag);
    ok = ok && sum == mt_size * (mt_size - 1) / 2;
    mt_check(ok, diag, "a host allreduce after the failures works");
    gather_free(&g);
}

int main(int argc, char **argv)
{
    const char *mode = (1 < argc) ? argv[1] : "";
    char why[300];
    int64_t left;
    int rc;

    mt_init(&argc, &argv);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    if (0 == strcmp(mode, "percall")) {
        run_percall();
    } else if (0 == strcmp(mode, "bounded") && 2 < argc && 65536 <= atol(argv[2])) {
        run_bounded((size_t) atol(argv[2]));
    } else if (0 == strcmp(mode, "copyfail")) {
        const char *env = getenv("COLL_GPU_TEST_FAIL_COPYBACK");
        int failing = (NULL != env && '\0' != env[0]) ? atoi(env) : -1;
        if (0 > failing || failing >= mt_size) {
            mt_skip_all("COLL_GPU_TEST_FAIL_COPYBACK names no rank of this job");
        }
        run_copyfail(failing);
    } else {
        if (0 == mt_rank) {
            fprintf(stderr, "usage: test_pinned_pool percall | bounded BYTES (>= 65536) | "
                    "copyfail\n");
        }
        MPI_Finalize();
        return 2;
    }
    /* mt_finish, with a look at the pinned memory between MPI_Finalize and the device's close:
     * everything coll/gpu pinned is freed by then */
    rc = tap_done();
    MPI_Finalize();
    left = pinned_live();
    if (0 != left) {
        fprintf(stderr, "coll/gpu test rank %d: %lld pinned host allocations not freed after "
                "MPI_Finalize\n", mt_rank, (long long) left);
        rc = 1;
    }
    dev_close();
    return rc;
}
