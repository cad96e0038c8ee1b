/*
 * test_lifecycle.c - coll/gpu when ranks differ in what they can do.
 *
 *   test_lifecycle mixed      one rank sees no device (COLL_GPU_TEST_NO_DEVICE names it; the
 *                             test switch of coll_gpu_module.c), the others the emulated one,
 *                             coll_gpu_uniform_buffers=false: host allreduce and bcast on every
 *                             rank, then device buffers on the ranks that have a device and
 *                             host buffers on the one that has none, interleaved with counts
 *                             that change from call to call (a rank that paired the agreement
 *                             allreduce of its peers with a data allreduce would read the wrong
 *                             counts or hang).  Every result is checked on every rank.
 *   test_lifecycle stagefail  one rank's staging fails (COLL_GPU_TEST_FAIL_STAGE names it; the
 *                             test switch of coll_gpu_stage.c), all buffers device memory, all
 *                             staged: that rank must return an error and leave its buffers as
 *                             they were, the others must return (no hang) with MPI_SUCCESS and,
 *                             where their result does not depend on the failing rank, the right
 *                             data; afterwards the communicator still works.
 *   test_lifecycle failalloc  one rank's host allocations at one site fail
 *                             (coll_gpu_test_fail_alloc, coll_gpu_test_fail_alloc_site): allreduce,
 *                             bcast, allgather, alltoall and reduce on device buffers, blocking,
 *                             nonblocking and persistent, each on a fresh duplicate of
 *                             MPI_COMM_WORLD (so that the node team's setup runs again).  Every
 *                             rank must return, with an error or the right data: data that came
 *                             from the failing rank's staged input is not checked (it is scratch,
 *                             coll_gpu_stage.c), except that the failing rank must then fail.
 *
 *   test_lifecycle exchfail   one rank's staging fails (COLL_GPU_TEST_FAIL_STAGE), under the
 *                             defaults: an MPI_Allgather and an MPI_Alltoall whose send type has
 *                             gaps run as one exchange on the node team, each rank packing its
 *                             send blocks through host staging; the failing rank cannot pack, so
 *                             it takes part without data and every rank returns an error (none
 *                             waits for it, none receives its scratch); afterwards a correct
 *                             allgather on the same communicator is right.
 *
 * Run by mixed_device.sh, stage_failure.sh, exchange_failure.sh and fail_alloc.sh, which set the
 * switches; a hang
 * fails through COLL_GPU_TEST_TIMEOUT.
 */
#include "mpitest.h"

#include <time.h>

/* the persistent calls of failalloc: Open MPI 4.1 has them as MPIX_<coll>_init, from its
 * pcollreq extension (test_persistent.c) */
#if OMPI_MAJOR_VERSION < 5
#    include <mpi-ext.h>
#    define MPI_Allgather_init MPIX_Allgather_init
#    define MPI_Allreduce_init MPIX_Allreduce_init
#    define MPI_Alltoall_init MPIX_Alltoall_init
#    define MPI_Bcast_init MPIX_Bcast_init
#    define MPI_Reduce_init MPIX_Reduce_init
#endif

#define POISON ((int32_t) 0x5A5A5A5A)

static unsigned seed;

static int32_t val(unsigned s, int w, int i)
{
    uint32_t x = (seed + s) * 2654435761u ^ (uint32_t) (w + 1) * 40503u
                 ^ (uint32_t) (i + 7) * 2246822519u;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    return (int32_t) (x % 2001) - 1000;
}

/* The world rank an environment variable names, or -1. */
static int env_rank(const char *name)
{
    const char *v = getenv(name);
    return (NULL != v && '\0' != v[0]) ? atoi(v) : -1;
}

/* A buffer of n int32 of the given kind holding the values of (salt, rank w), or the poison. */
static void *buf_new(mt_mem_t kind, size_t n, unsigned salt, int w, int poison)
{
    int32_t *h = malloc(n * sizeof(int32_t));
    void *p = mt_mem_alloc(kind, n * sizeof(int32_t));
    if (NULL == h || NULL == p) {
        free(h);
        mt_mem_free(kind, p);
        return NULL;
    }
    for (size_t i = 0; i < n; ++i) {
        h[i] = poison ? POISON : val(salt, w, (int) i);
    }
    if (0 != mt_mem_put(kind, p, h, n * sizeof(int32_t))) {
        mt_mem_free(kind, p);
        p = NULL;
    }
    free(h);
    return p;
}

/* Compare a buffer with the values of (salt, w) (w < 0: the sum over every rank; w == -2: the
 * poison) from element lo on; note the first difference. */
static int buf_check(mt_mem_t kind, const void *p, size_t lo, size_t n, unsigned salt, int w,
                     char *diag, const char *what)
{
    int32_t *h = malloc((n + lo) * sizeof(int32_t));
    int ok = NULL != h && 0 == mt_mem_get(kind, h, p, (n + lo) * sizeof(int32_t));
    for (size_t i = lo; ok && i < lo + n; ++i) {
        int32_t want = 0;
        if (-2 == w) {
            want = POISON;
        } else if (0 > w) {
            for (int r = 0; r < mt_size; ++r) {
                want += val(salt, r, (int) i);
            }
        } else {
            want = val(salt, w, (int) i);
        }
        if (h[i] != want) {
            mt_diag_add(diag, "%s[%zu]: expected %d got %d ", what, i, want, h[i]);
            ok = 0;
        }
    }
    if (NULL == h) {
        mt_diag_add(diag, "%s: out of memory ", what);
    }
    free(h);
    return ok;
}

/* ---- mixed: one rank without a device ---------------------------------------------------- */

static int run_mixed(int hidden, int have_dev)
{
    mt_mem_t mykind = have_dev ? MT_MEM_DEVICE : MT_MEM_HOST;
    const char *uniform = getenv("OMPI_MCA_coll_gpu_uniform_buffers");
    char diag[MT_DIAG_LEN];
    unsigned salt = 0;

    tap_diag("rank %d has no device; uniform_buffers=%s", hidden,
             NULL != uniform ? uniform : "(default)");
    for (int round = 0; round < 3; ++round) {
        /* host everywhere, then device where there is one */
        for (int dev = 0; dev <= 1; ++dev) {
            mt_mem_t kind = dev ? mykind : MT_MEM_HOST;
            const char *kn = dev ? "device buffers where there is a device" : "host buffers";
            size_t n = (size_t) (17 + 113 * round + 5 * dev);
            int rc, ok;
            void *s, *r, *b;

            mt_set_case("mixed allreduce");
            diag[0] = '\0';
            ++salt;
            s = buf_new(kind, n, salt, mt_rank, 0);
            r = buf_new(kind, n, salt, mt_rank, 1);
            ok = NULL != s && NULL != r;
            if (ok) {
                rc = MPI_Allreduce(s, r, (int) n, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
                if (MPI_SUCCESS != rc) {
                    mt_diag_add(diag, "%s ", mt_mpi_error(rc));
                    ok = 0;
                }
                ok = ok && buf_check(kind, r, 0, n, salt, -1, diag, "sum");
            }
            mt_check(ok, diag, "round %d: MPI_Allreduce of %zu int32, %s, rank %d without a device",
                     round, n, kn, hidden);
            mt_mem_free(kind, s);
            mt_mem_free(kind, r);

            for (int root = 0; root < mt_size; root += (mt_size > 2 ? mt_size - 1 : 1)) {
                mt_set_case("mixed bcast");
                diag[0] = '\0';
                ++salt;
                n += 3;
                b = buf_new(kind, n, salt, root, mt_rank != root);
                ok = NULL != b;
                if (ok) {
                    rc = MPI_Bcast(b, (int) n, MPI_INT32_T, root, MPI_COMM_WORLD);
                    if (MPI_SUCCESS != rc) {
                        mt_diag_add(diag, "%s ", mt_mpi_error(rc));
                        ok = 0;
                    }
                    ok = ok && buf_check(kind, b, 0, n, salt, root, diag, "bcast");
                }
                mt_check(ok, diag, "round %d: MPI_Bcast of %zu int32 from rank %d, %s, rank %d "
                         "without a device", round, n, root, kn, hidden);
                mt_mem_free(kind, b);
            }

            mt_set_case("mixed iallreduce");
            diag[0] = '\0';
            ++salt;
            s = buf_new(kind, n, salt, mt_rank, 0);
            r = buf_new(kind, n, salt, mt_rank, 1);
            ok = NULL != s && NULL != r;
            if (ok) {
                MPI_Request req;
                rc = MPI_Iallreduce(s, r, (int) n, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD, &req);
                if (MPI_SUCCESS == rc) {
                    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
                }
                if (MPI_SUCCESS != rc) {
                    mt_diag_add(diag, "%s ", mt_mpi_error(rc));
                    ok = 0;
                }
                ok = ok && buf_check(kind, r, 0, n, salt, -1, diag, "sum");
            }
            mt_check(ok, diag,
                     "round %d: MPI_Iallreduce of %zu int32, %s, rank %d without a device", round,
                     n, kn, hidden);
            mt_mem_free(kind, s);
            mt_mem_free(kind, r);
        }
    }
    return mt_finish();
}

/* ---- stagefail: one rank's staging fails ------------------------------------------------- */

/* One verdict for a staged call: the failing rank must have an error and its receive buffer
 * (when it has one) untouched; the others MPI_SUCCESS and, when check_others, the right data. */
static void stagefail_verdict(int failing, int rc, int data_ok, const char *call, char *diag)
{
    int ok;
    if (mt_rank == failing) {
        ok = MPI_SUCCESS != rc && data_ok;
        if (MPI_SUCCESS == rc) {
            mt_diag_add(diag, "the failing rank returned MPI_SUCCESS ");
        }
    } else {
        ok = MPI_SUCCESS == rc && data_ok;
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "returned %s ", mt_mpi_error(rc));
        }
    }
    mt_check(ok, diag, "%s with rank %d's staging failing: it returns an error, the others "
             "complete", call, failing);
}

static int run_stagefail(int failing)
{
    const size_t n = 1000;
    char diag[MT_DIAG_LEN];
    unsigned salt = 100;
    int rc, ok;
    void *s, *r;
    MPI_Request req;
    const mt_mem_t D = MT_MEM_DEVICE;

    tap_diag("rank %d's staging fails", failing);

    /* bcast from rank 0: the others get rank 0's data, the failing rank keeps its poison */
    mt_set_case("stagefail bcast");
    diag[0] = '\0';
    ++salt;
    r = buf_new(D, n, salt, 0, 0 != mt_rank);
    rc = MPI_Bcast(r, (int) n, MPI_INT32_T, 0, MPI_COMM_WORLD);
    ok = buf_check(D, r, 0, n, salt, mt_rank == failing ? -2 : 0, diag, "bcast");
    stagefail_verdict(failing, rc, ok, "MPI_Bcast (staged)", diag);
    mt_mem_free(D, r);

    /* allreduce: everyone's result depends on the failing rank: no hang, codes only; the failing
     * rank's receive buffer keeps its poison */
    mt_set_case("stagefail allreduce");
    diag[0] = '\0';
    ++salt;
    s = buf_new(D, n, salt, mt_rank, 0);
    r = buf_new(D, n, salt, mt_rank, 1);
    rc = MPI_Allreduce(s, r, (int) n, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    ok = mt_rank != failing || buf_check(D, r, 0, n, salt, -2, diag, "result");
    stagefail_verdict(failing, rc, ok, "MPI_Allreduce (staged)", diag);
    mt_mem_free(D, s);
    mt_mem_free(D, r);

    /* scatter from rank 0 */
    mt_set_case("stagefail scatter");
    diag[0] = '\0';
    ++salt;
    s = buf_new(D, n * (size_t) mt_size, salt, 0, 0);
    r = buf_new(D, n, salt, 0, 1);
    rc = MPI_Scatter(s, (int) n, MPI_INT32_T, r, (int) n, MPI_INT32_T, 0, MPI_COMM_WORLD);
    if (mt_rank == failing) {
        ok = buf_check(D, r, 0, n, salt, -2, diag, "received");
    } else {
        /* block k of the send buffer holds elements k*n.. of rank 0's values */
        int32_t *h = malloc(n * sizeof(int32_t));
        ok = NULL != h && 0 == mt_mem_get(D, h, r, n * sizeof(int32_t));
        for (size_t i = 0; ok && i < n; ++i) {
            int32_t want = val(salt, 0, (int) ((size_t) mt_rank * n + i));
            if (h[i] != want) {
                mt_diag_add(diag, "received[%zu]: expected %d got %d ", i, want, h[i]);
                ok = 0;
            }
        }
        free(h);
    }
    stagefail_verdict(failing, rc, ok, "MPI_Scatter", diag);
    mt_mem_free(D, s);
    mt_mem_free(D, r);

    /* gather to the last rank: its blocks from the healthy ranks are right */
    mt_set_case("stagefail gather");
    diag[0] = '\0';
    ++salt;
    {
        int root = mt_size - 1;
        s = buf_new(D, n, salt, mt_rank, 0);
        r = buf_new(D, n * (size_t) mt_size, salt, 0, 1);
        rc = MPI_Gather(s, (int) n, MPI_INT32_T, r, (int) n, MPI_INT32_T, root, MPI_COMM_WORLD);
        ok = 1;
        if (mt_rank == root && root != failing) {
            int32_t *h = malloc(n * (size_t) mt_size * sizeof(int32_t));
            ok = NULL != h && 0 == mt_mem_get(D, h, r, n * (size_t) mt_size * sizeof(int32_t));
            for (int k = 0; ok && k < mt_size; ++k) {
                for (size_t i = 0; ok && k != failing && i < n; ++i) {
                    if (h[(size_t) k * n + i] != val(salt, k, (int) i)) {
                        mt_diag_add(diag, "block %d [%zu]: expected %d got %d ", k, i,
                                    val(salt, k, (int) i), h[(size_t) k * n + i]);
                        ok = 0;
                    }
                }
            }
            free(h);
        }
        stagefail_verdict(failing, rc, ok, "MPI_Gather", diag);
        mt_mem_free(D, s);
        mt_mem_free(D, r);
    }

    /* alltoall and allgather: codes only (every result block but the failing rank's is right,
     * but the failing rank's buffer is left alone) */
    mt_set_case("stagefail alltoall");
    diag[0] = '\0';
    ++salt;
    s = buf_new(D, n * (size_t) mt_size, salt, mt_rank, 0);
    r = buf_new(D, n * (size_t) mt_size, salt, mt_rank, 1);
    rc = MPI_Alltoall(s, (int) n, MPI_INT32_T, r, (int) n, MPI_INT32_T, MPI_COMM_WORLD);
    ok = mt_rank != failing || buf_check(D, r, 0, n * (size_t) mt_size, salt, -2, diag, "received");
    stagefail_verdict(failing, rc, ok, "MPI_Alltoall", diag);
    mt_mem_free(D, s);
    mt_mem_free(D, r);

    mt_set_case("stagefail allgather");
    diag[0] = '\0';
    ++salt;
    s = buf_new(D, n, salt, mt_rank, 0);
    r = buf_new(D, n * (size_t) mt_size, salt, mt_rank, 1);
    rc = MPI_Allgather(s, (int) n, MPI_INT32_T, r, (int) n, MPI_INT32_T, MPI_COMM_WORLD);
    ok = mt_rank != failing || buf_check(D, r, 0, n * (size_t) mt_size, salt, -2, diag, "received");
    stagefail_verdict(failing, rc, ok, "MPI_Allgather", diag);
    mt_mem_free(D, s);
    mt_mem_free(D, r);

    /* nonblocking: the error comes with the request */
    mt_set_case("stagefail iallreduce");
    diag[0] = '\0';
    ++salt;
    s = buf_new(D, n, salt, mt_rank, 0);
    r = buf_new(D, n, salt, mt_rank, 1);
    rc = MPI_Iallreduce(s, r, (int) n, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD, &req);
    if (MPI_SUCCESS == rc) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    ok = mt_rank != failing || buf_check(D, r, 0, n, salt, -2, diag, "result");
    stagefail_verdict(failing, rc, ok, "MPI_Iallreduce + MPI_Wait", diag);
    mt_mem_free(D, s);
    mt_mem_free(D, r);

    mt_set_case("stagefail ibcast");
    diag[0] = '\0';
    ++salt;
    r = buf_new(D, n, salt, 0, 0 != mt_rank);
    rc = MPI_Ibcast(r, (int) n, MPI_INT32_T, 0, MPI_COMM_WORLD, &req);
    if (MPI_SUCCESS == rc) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    ok = buf_check(D, r, 0, n, salt, mt_rank == failing ? -2 : 0, diag, "bcast");
    stagefail_verdict(failing, rc, ok, "MPI_Ibcast + MPI_Wait", diag);
    mt_mem_free(D, r);

    /* the communicator still works: host buffers stage nothing */
    mt_set_case("stagefail after");
    diag[0] = '\0';
    ++salt;
    s = buf_new(MT_MEM_HOST, n, salt, mt_rank, 0);
    r = buf_new(MT_MEM_HOST, n, salt, mt_rank, 1);
    rc = MPI_Allreduce(s, r, (int) n, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    ok = MPI_SUCCESS == rc && buf_check(MT_MEM_HOST, r, 0, n, salt, -1, diag, "sum");
    mt_check(ok, diag, "afterwards a host MPI_Allreduce on the same communicator is right");
    mt_mem_free(MT_MEM_HOST, s);
    mt_mem_free(MT_MEM_HOST, r);
    return mt_finish();
}

/* ---- failalloc: one rank's allocations at one site fail ---------------------------------- */

enum { FA_ALLREDUCE, FA_BCAST, FA_ALLGATHER, FA_ALLTOALL, FA_REDUCE, FA_NCOLL };
static const char *const fa_names[FA_NCOLL] = {"allreduce", "bcast", "allgather", "alltoall",
                                               "reduce"};
enum { FA_BLOCKING, FA_NONBLOCKING, FA_PERSISTENT, FA_NMODES };
static const char *const fa_modes[FA_NMODES] = {"blocking", "nonblocking", "persistent"};

/* Element i of rank w's send buffer. */
static int32_t fa_in(unsigned salt, int w, size_t i)
{
    return val(salt, w, (int) i);
}

/* Element i of this rank's result, n elements a block; *from: the rank whose input it is made of
 * (-1: every rank's). */
static int32_t fa_want(int coll, unsigned salt, size_t n, size_t i, int *from)
{
    int32_t sum = 0;

    switch (coll) {
    case FA_BCAST:
        *from = 0;
        return fa_in(salt, 0, i);
    case FA_ALLGATHER:
        *from = (int) (i / n);
        return fa_in(salt, *from, i % n);
    case FA_ALLTOALL:
        *from = (int) (i / n);
        return fa_in(salt, *from, (size_t) mt_rank * n + i % n);
    default:
        *from = -1;
        for (int r = 0; r < mt_size; ++r) {
            sum += fa_in(salt, r, i);
        }
        return sum;
    }
}

/* A device buffer of n elements: rank w's input of salt, or the poison. */
static void *fa_buf(size_t n, unsigned salt, int w, int poison)
{
    int32_t *h = malloc(n * sizeof(int32_t));
    void *p = mt_mem_alloc(MT_MEM_DEVICE, n * sizeof(int32_t));

    for (size_t i = 0; NULL != h && i < n; ++i) {
        h[i] = poison ? POISON : fa_in(salt, w, i);
    }
    if (NULL == h || NULL == p || 0 != mt_mem_put(MT_MEM_DEVICE, p, h, n * sizeof(int32_t))) {
        mt_mem_free(MT_MEM_DEVICE, p);
        p = NULL;
    }
    free(h);
    return p;
}

/* Start (or run) one call; *req stays MPI_REQUEST_NULL for a blocking one. */
static int fa_start(int coll, int mode, void *s, void *r, int n, MPI_Comm comm, MPI_Request *req)
{
    MPI_Datatype t = MPI_INT32_T;

    *req = MPI_REQUEST_NULL;
    if (FA_BLOCKING == mode) {
        switch (coll) {
        case FA_ALLREDUCE: return MPI_Allreduce(s, r, n, t, MPI_SUM, comm);
        case FA_BCAST: return MPI_Bcast(r, n, t, 0, comm);
        case FA_ALLGATHER: return MPI_Allgather(s, n, t, r, n, t, comm);
        case FA_ALLTOALL: return MPI_Alltoall(s, n, t, r, n, t, comm);
        default: return MPI_Reduce(s, r, n, t, MPI_SUM, 0, comm);
        }
    }
    if (FA_NONBLOCKING == mode) {
        switch (coll) {
        case FA_ALLREDUCE: return MPI_Iallreduce(s, r, n, t, MPI_SUM, comm, req);
        case FA_BCAST: return MPI_Ibcast(r, n, t, 0, comm, req);
        case FA_ALLGATHER: return MPI_Iallgather(s, n, t, r, n, t, comm, req);
        case FA_ALLTOALL: return MPI_Ialltoall(s, n, t, r, n, t, comm, req);
        default: return MPI_Ireduce(s, r, n, t, MPI_SUM, 0, comm, req);
        }
    }
    {
        int rc;
        switch (coll) {
        case FA_ALLREDUCE:
            rc = MPI_Allreduce_init(s, r, n, t, MPI_SUM, comm, MPI_INFO_NULL, req);
            break;
        case FA_BCAST: rc = MPI_Bcast_init(r, n, t, 0, comm, MPI_INFO_NULL, req); break;
        case FA_ALLGATHER:
            rc = MPI_Allgather_init(s, n, t, r, n, t, comm, MPI_INFO_NULL, req);
            break;
        case FA_ALLTOALL:
            rc = MPI_Alltoall_init(s, n, t, r, n, t, comm, MPI_INFO_NULL, req);
            break;
        default: rc = MPI_Reduce_init(s, r, n, t, MPI_SUM, 0, comm, MPI_INFO_NULL, req); break;
        }
        return (MPI_SUCCESS == rc) ? MPI_Start(req) : rc;
    }
}

/* One call on a fresh communicator: every rank must return, with an error or the right data. */
static void fa_case(int failing, const char *site, int coll, int mode, unsigned salt)
{
    const size_t n = 1000;
    size_t rn = (FA_ALLGATHER == coll || FA_ALLTOALL == coll) ? n * (size_t) mt_size : n;
    size_t sn = (FA_ALLTOALL == coll) ? n * (size_t) mt_size : n;
    int root_only = (FA_REDUCE == coll && 0 != mt_rank);
    char diag[MT_DIAG_LEN] = "";
    int rc, rc2, ok = 1, from, my_err;
    int32_t *h = malloc(rn * sizeof(int32_t));
    MPI_Request req;
    MPI_Comm comm;
    void *s, *r;

    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    s = fa_buf(sn, salt, mt_rank, 0);
    /* the bcast root's buffer holds its input; every other result buffer starts poisoned */
    r = fa_buf(rn, salt, mt_rank, !(FA_BCAST == coll && 0 == mt_rank));
    rc = fa_start(coll, mode, s, r, (int) n, comm, &req);
    if (MPI_REQUEST_NULL != req) {
        rc2 = MPI_Wait(&req, MPI_STATUS_IGNORE);
        rc = (MPI_SUCCESS == rc) ? rc2 : rc;
        if (FA_PERSISTENT == mode && MPI_REQUEST_NULL != req) {
            MPI_Request_free(&req);
        }
    }
    if (NULL == h || NULL == s || NULL == r
        || 0 != mt_mem_get(MT_MEM_DEVICE, h, r, rn * sizeof(int32_t))) {
        mt_diag_add(diag, "test buffers: out of memory ");
        ok = 0;
    }
    for (size_t i = 0; ok && MPI_SUCCESS == rc && !root_only && i < rn; ++i) {
        int32_t want = fa_want(coll, salt, n, i, &from);
        if (from == failing || (0 > from && 0 == strcmp(site, "stage"))) {
            continue; /* made of the failing rank's scratch */
        }
        if (h[i] != want) {
            mt_diag_add(diag, "result[%zu]: expected %d got %d ", i, want, h[i]);
            ok = 0;
        }
    }
    my_err = (MPI_SUCCESS != rc);
    if (my_err) {
        mt_diag_add(diag, "returned %s ", mt_mpi_error(rc));
    }
    /* a staging failure the failing rank kept quiet about would leave scratch in its peers'
     * results unannounced: it must fail itself */
    if (mt_rank == failing && 0 == strcmp(site, "stage") && !my_err && !root_only) {
        mt_diag_add(diag, "the failing rank returned MPI_SUCCESS ");
        ok = 0;
    }
    mt_check(ok, diag, "%s %s with rank %d's %s allocation failing: an error or the right data",
             fa_modes[mode], fa_names[coll], failing, site);
    free(h);
    mt_mem_free(MT_MEM_DEVICE, s);
    mt_mem_free(MT_MEM_DEVICE, r);
    MPI_Comm_free(&comm);
}

static int run_failalloc(int failing, const char *site)
{
    unsigned salt = 300;

    tap_diag("rank %d's %s allocations fail", failing, site);
    for (int mode = 0; mode < FA_NMODES; ++mode) {
        for (int coll = 0; coll < FA_NCOLL; ++coll) {
            mt_set_case(fa_names[coll]);
            fa_case(failing, site, coll, mode, ++salt);
        }
    }
    return mt_finish();
}

/* ---- exchfail: one rank cannot pack its part of an exchange ------------------------------ */

static int run_exchfail(int failing)
{
    const int n = 500;
    char diag[MT_DIAG_LEN];
    unsigned salt = 200;
    MPI_Datatype every_other;
    const mt_mem_t D = MT_MEM_DEVICE;
    void *s, *r;
    int rc, ok;

    tap_diag("rank %d's staging fails", failing);
    /* n ints, every other one of 2n: a layout with gaps, packed through the host */
    MPI_Type_vector(n, 1, 2, MPI_INT32_T, &every_other);
    MPI_Type_commit(&every_other);
    for (int k = 0; k < 2; ++k) {
        const char *call = k ? "MPI_Alltoall" : "MPI_Allgather";
        int blocks = k ? mt_size : 1;
        mt_set_case(k ? "exchfail alltoall" : "exchfail allgather");
        diag[0] = '\0';
        ++salt;
        s = buf_new(D, 2 * (size_t) n * (size_t) blocks, salt, mt_rank, 0);
        r = buf_new(D, (size_t) n * (size_t) mt_size, salt, mt_rank, 1);
        rc = k ? MPI_Alltoall(s, 1, every_other, r, n, MPI_INT32_T, MPI_COMM_WORLD)
               : MPI_Allgather(s, 1, every_other, r, n, MPI_INT32_T, MPI_COMM_WORLD);
        ok = MPI_SUCCESS != rc;
        if (!ok) {
            mt_diag_add(diag, "returned MPI_SUCCESS ");
        }
        mt_check(ok, diag, "%s on the exchange with rank %d unable to pack its blocks: every rank "
                 "returns an error", call, failing);
        mt_mem_free(D, s);
        mt_mem_free(D, r);
    }
    MPI_Type_free(&every_other);

    /* the communicator and its team go on: dense device blocks need no staging */
    mt_set_case("exchfail after");
    diag[0] = '\0';
    ++salt;
    s = buf_new(D, (size_t) n, salt, mt_rank, 0);
    r = buf_new(D, (size_t) n * (size_t) mt_size, salt, mt_rank, 1);
    rc = MPI_Allgather(s, n, MPI_INT32_T, r, n, MPI_INT32_T, MPI_COMM_WORLD);
    ok = MPI_SUCCESS == rc;
    if (!ok) {
        mt_diag_add(diag, "returned %s ", mt_mpi_error(rc));
    }
    for (int w = 0; ok && w < mt_size; ++w) {
        ok = buf_check(D, (int32_t *) r + (size_t) w * (size_t) n, 0, (size_t) n, salt, w, diag,
                       "block");
    }
    mt_check(ok, diag, "afterwards an MPI_Allgather of ints on device memory is right");
    mt_mem_free(D, s);
    mt_mem_free(D, r);
    return mt_finish();
}

int main(int argc, char **argv)
{
    const char *mode = (1 < argc) ? argv[1] : "";
    char why[300];

    mt_init(&argc, &argv);
    seed = (unsigned) time(NULL);
    MPI_Bcast(&seed, 1, MPI_UNSIGNED, 0, MPI_COMM_WORLD);
    if (0 == strcmp(mode, "mixed")) {
        int hidden = env_rank("COLL_GPU_TEST_NO_DEVICE");
        int have_dev = 0, any = 0;
        if (0 > hidden || hidden >= mt_size) {
            mt_skip_all("COLL_GPU_TEST_NO_DEVICE names no rank of this job");
        }
        /* every rank but the hidden one opens the device coll/gpu was given (not collective:
         * mt_device_open would want it on every rank); "auto" means cuda */
        if (mt_rank != hidden) {
            dev_backend_t backend = dev_backend_from_name(mt_device_name());
            if (0 == strcmp(mt_device_name(), "auto")) {
                backend = DEV_BACKEND_CUDA;
            }
            have_dev = DEV_BACKEND_NONE != backend && DEV_OK == dev_open(backend);
            mt_device_is_open = have_dev;
        }
        MPI_Allreduce(&have_dev, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (any != mt_size - 1) {
            mt_skip_all("the device did not open on every other rank");
        }
        return run_mixed(hidden, have_dev);
    }
    if (0 == strcmp(mode, "stagefail")) {
        int failing = env_rank("COLL_GPU_TEST_FAIL_STAGE");
        if (0 > failing || failing >= mt_size) {
            mt_skip_all("COLL_GPU_TEST_FAIL_STAGE names no rank of this job");
        }
        if (!mt_device_open(why, sizeof(why))) {
            mt_skip_all(why);
        }
        return run_stagefail(failing);
    }
    if (0 == strcmp(mode, "exchfail")) {
        int failing = env_rank("COLL_GPU_TEST_FAIL_STAGE");
        if (0 > failing || failing >= mt_size) {
            mt_skip_all("COLL_GPU_TEST_FAIL_STAGE names no rank of this job");
        }
        if (!mt_device_open(why, sizeof(why))) {
            mt_skip_all(why);
        }
        return run_exchfail(failing);
    }
    if (0 == strcmp(mode, "failalloc")) {
        int failing = env_rank("OMPI_MCA_coll_gpu_test_fail_alloc");
        const char *site = getenv("OMPI_MCA_coll_gpu_test_fail_alloc_site");
        if (0 > failing || failing >= mt_size || NULL == site) {
            mt_skip_all("coll_gpu_test_fail_alloc names no rank of this job");
        }
        if (!mt_device_open(why, sizeof(why))) {
            mt_skip_all(why);
        }
        return run_failalloc(failing, site);
    }
    if (0 == mt_rank) {
        fprintf(stderr, "usage: test_lifecycle mixed|stagefail|exchfail|failalloc\n");
    }
    MPI_Finalize();
    return TAP_HARD_ERROR_EXIT;
}
