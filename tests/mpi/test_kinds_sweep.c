/*
 * test_kinds_sweep.c - memory kinds chosen at random per rank and per call, under coll/gpu's
 * defaults: every call must be right and none may hang.
 *
 * MPI lets every rank pass any kind of memory to any collective, changing from call to call.
 * A program opens as CUDA-aware codes do (MPI_Comm_split_type first, whose host allreduce Open
 * MPI makes itself), then makes communicators by split_type, dup, split (reversed order) and
 * create_group, and on each runs a random sequence of calls: MPI_Allreduce (in place too),
 * MPI_Bcast from a random root, MPI_Reduce, MPI_Allgather, MPI_Alltoall, MPI_Iallreduce,
 * MPI_Ibcast, MPI_Iallgather, MPI_Allreduce_init and MPI_Bcast_init (two starts each), with
 * host-memory collectives of the program's own and new communicators made in between.  Each
 * rank draws the kind of every buffer of every call on its own (host, pinned, device, managed)
 * and the element count from a few sizes up to a two-shot-sized one.  Inputs are fresh random
 * values, outputs poisoned first, results compared with references computed here.
 *
 * Then two communicators whose ranks all make the MPI 4.1 promise mpi_assert_memory_alloc_kinds
 * (device kinds only; host kinds only), each with calls on the kinds it promises.
 *
 * Usage: test_kinds_sweep [SEED [ROUNDS]]   (the seed is printed; 0 or none: from the clock)
 */
#include <time.h>
#include <unistd.h>

#include "mpitest.h"

#if OMPI_MAJOR_VERSION < 5
#    include <mpi-ext.h>
#    define MPI_Allreduce_init MPIX_Allreduce_init
#    define MPI_Bcast_init MPIX_Bcast_init
#endif

#define POISON ((int32_t) 0x5a5a5a5a)
#define MAX_COUNT 300000 /* above the one-shot slot of 1 MiB in floats: two-shot or ring */

static const size_t sizes[] = {1, 7, 1000, 70000, MAX_COUNT};
static const mt_kind_t kinds[] = {MT_KIND_HOST, MT_KIND_PINNED, MT_KIND_DEVICE, MT_KIND_MANAGED};

static uint64_t seed;
static uint64_t my_state;  /* this rank's own draws (kinds) */
static uint64_t all_state; /* draws every rank makes alike (call, size, root) */
static uint64_t call_no;

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The input of world rank r at index i of the current call: never zero, small enough that a
 * sum over 16 ranks fits an int. */
static int32_t value(int r, size_t i)
{
    uint64_t s = seed ^ (call_no * 0x100000001b3ULL) ^ ((uint64_t) r << 40) ^ i;
    int32_t v = (int32_t) (next(&s) % 2000) - 1000;
    return v >= 0 ? v + 1 : v;
}

/* The kinds a case lets the ranks draw from: all of kinds[], or a promise's (below). */
static const mt_kind_t *draw_from = kinds;
static size_t draw_n = sizeof(kinds) / sizeof(kinds[0]);

static mt_kind_t draw_kind(void)
{
    return draw_from[next(&my_state) % draw_n];
}

typedef enum {
    C_ALLREDUCE,
    C_ALLREDUCE_INPLACE,
    C_BCAST,
    C_REDUCE,
    C_ALLGATHER,
    C_ALLTOALL,
    C_IALLREDUCE,
    C_IBCAST,
    C_IALLGATHER,
    C_ALLREDUCE_INIT,
    C_BCAST_INIT,
    C_COUNT
} coll_t;
static const char *const coll_names[C_COUNT] = {
    "allreduce", "allreduce in place", "bcast", "reduce", "allgather", "alltoall",
    "iallreduce", "ibcast", "iallgather", "allreduce_init", "bcast_init"};

typedef struct {
    void *p;
    mt_kind_t kind;
} buf_t;

static int buf_new(buf_t *b, size_t n, const int32_t *init)
{
    b->kind = draw_kind();
    b->p = mt_kind_alloc(b->kind, n * sizeof(int32_t));
    return NULL != b->p && DEV_OK == dev_memcpy(b->p, init, n * sizeof(int32_t)) ? 0 : -1;
}

/* One call on comm (whose rank i is world rank world_of[i]); 1 when this rank's part is right. */
static int one_call(MPI_Comm comm, const int *world_of, coll_t c, int root, size_t n,
                    int32_t *tmp, int32_t *want, char *diag)
{
    int rank, size, rc = MPI_SUCCESS, ok = 1, starts = 1;
    size_t sn = n, rn = n; /* elements of the send and receive buffers */
    buf_t s = {NULL, MT_KIND_HOST}, r = {NULL, MT_KIND_HOST};
    MPI_Request req = MPI_REQUEST_NULL;
    bool check = true;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ++call_no;
    if (C_ALLGATHER == c || C_IALLGATHER == c) {
        rn = n * (size_t) size;
    } else if (C_ALLTOALL == c) {
        sn = rn = n * (size_t) size;
    }
    for (size_t i = 0; i < sn; ++i) {
        tmp[i] = value(world_of[rank], i);
    }
    if (0 != buf_new(&s, sn, tmp)) {
        ok = 0;
    }
    for (size_t i = 0; i < rn; ++i) {
        tmp[i] = POISON;
    }
    if (0 != buf_new(&r, rn, tmp)) {
        ok = 0;
    }
    if (!mt_agree(ok)) {
        mt_diag_add(diag, "%s: buffers of %zu ints could not be made; ", coll_names[c], rn);
        goto out;
    }
    /* what this rank must hold in its receive buffer (bcast: its one buffer) */
    for (size_t i = 0; i < rn; ++i) {
        int32_t v = 0;
        switch (c) {
        case C_BCAST:
        case C_IBCAST:
        case C_BCAST_INIT:
            v = value(world_of[root], i);
            break;
        case C_ALLGATHER:
        case C_IALLGATHER:
            v = value(world_of[i / n], i % n);
            break;
        case C_ALLTOALL:
            v = value(world_of[i / n], (size_t) rank * n + i % n);
            break;
        default:
            for (int p = 0; p < size; ++p) {
                v += value(world_of[p], i);
            }
            break;
        }
        want[i] = v;
    }
    switch (c) {
    case C_ALLREDUCE:
        rc = MPI_Allreduce(s.p, r.p, (int) n, MPI_INT, MPI_SUM, comm);
        break;
    case C_ALLREDUCE_INPLACE:
        rc = MPI_Allreduce(MPI_IN_PLACE, s.p, (int) n, MPI_INT, MPI_SUM, comm);
        break;
    case C_REDUCE:
        rc = MPI_Reduce(s.p, r.p, (int) n, MPI_INT, MPI_SUM, root, comm);
        check = (rank == root);
        break;
    case C_ALLGATHER:
        rc = MPI_Allgather(s.p, (int) n, MPI_INT, r.p, (int) n, MPI_INT, comm);
        break;
    case C_ALLTOALL:
        rc = MPI_Alltoall(s.p, (int) n, MPI_INT, r.p, (int) n, MPI_INT, comm);
        break;
    case C_IALLREDUCE:
        rc = MPI_Iallreduce(s.p, r.p, (int) n, MPI_INT, MPI_SUM, comm, &req);
        break;
    case C_IALLGATHER:
        rc = MPI_Iallgather(s.p, (int) n, MPI_INT, r.p, (int) n, MPI_INT, comm, &req);
        break;
    case C_ALLREDUCE_INIT:
        rc = MPI_Allreduce_init(s.p, r.p, (int) n, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &req);
        starts = 2;
        break;
    default: /* the bcasts: the root's data in place of its poisoned buffer */
        if (rank == root) {
            void *t = r.p;
            mt_kind_t k = r.kind;
            r = s;
            s.p = t;
            s.kind = k;
        }
        if (C_BCAST == c) {
            rc = MPI_Bcast(r.p, (int) n, MPI_INT, root, comm);
        } else if (C_IBCAST == c) {
            rc = MPI_Ibcast(r.p, (int) n, MPI_INT, root, comm, &req);
        } else {
            rc = MPI_Bcast_init(r.p, (int) n, MPI_INT, root, comm, MPI_INFO_NULL, &req);
            starts = 2;
        }
        break;
    }
    if (C_ALLREDUCE_INPLACE == c) {
        buf_t t = r;
        r = s;
        s = t;
    }
    if (MPI_SUCCESS == rc && (C_ALLREDUCE_INIT == c || C_BCAST_INIT == c)) {
        for (int k = 0; k < starts && MPI_SUCCESS == rc; ++k) {
            rc = MPI_Start(&req);
            if (MPI_SUCCESS == rc) {
                rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
        }
        MPI_Request_free(&req);
    } else if (MPI_SUCCESS == rc && MPI_REQUEST_NULL != req) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s of %zu ints (root %d, call %lu): %s; ", coll_names[c], n, root,
                    (unsigned long) call_no, mt_mpi_error(rc));
        ok = 0;
    } else if (check) {
        if (DEV_OK != dev_memcpy(tmp, r.p, rn * sizeof(int32_t))) {
            mt_diag_add(diag, "%s: cannot read the result back; ", coll_names[c]);
            ok = 0;
        }
        for (size_t i = 0; ok && i < rn; ++i) {
            if (tmp[i] != want[i]) {
                mt_diag_add(diag, "%s of %zu ints on %s (root %d, call %lu): [%zu] = %d, want "
                            "%d; ", coll_names[c], n, mt_kind_names[r.kind], root,
                            (unsigned long) call_no, i, tmp[i], want[i]);
                ok = 0;
            }
        }
    }
out:
    mt_kind_free(s.kind, s.p);
    mt_kind_free(r.kind, r.p);
    return ok;
}

int main(int argc, char **argv)
{
    int rounds = 3, comms = 0, calls = 0;
    int32_t *tmp, *want;
    char why[256];

    mt_init(&argc, &argv);
    seed = (argc > 1) ? strtoull(argv[1], NULL, 0) : 0;
    if (argc > 2) {
        rounds = atoi(argv[2]);
    }
    if (0 == seed) {
        seed = (uint64_t) time(NULL);
    }
    MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD); /* host memory: a call of its own */
    tap_diag("seed %llu (rerun: test_kinds_sweep %llu %d)", (unsigned long long) seed,
             (unsigned long long) seed, rounds);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    my_state = seed ^ (0xd1b54a32d192ed03ULL * (uint64_t) (mt_rank + 1));
    all_state = seed;
    tmp = malloc(MAX_COUNT * (size_t) mt_size * sizeof(int32_t));
    want = malloc(MAX_COUNT * (size_t) mt_size * sizeof(int32_t));

    for (int round = 0; round < rounds; ++round) {
        for (int how = 0; how < 4; ++how) {
            static const char *const hows[] = {"split_type", "dup", "reversed split",
                                               "create_group"};
            char diag[MT_DIAG_LEN] = "", name[160];
            int ok = 1, size, *world_of, ncalls = 12 + (int) (next(&all_state) % 12);
            MPI_Comm comm = MPI_COMM_NULL, extra = MPI_COMM_NULL;
            MPI_Group group;

            snprintf(name, sizeof(name), "round %d, a communicator by %s", round, hows[how]);
            mt_set_case(name);
            if (0 == how) {
                MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                    &comm);
            } else if (1 == how) {
                MPI_Comm_dup(MPI_COMM_WORLD, &comm);
            } else if (2 == how) {
                MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &comm);
            } else {
                MPI_Comm_group(MPI_COMM_WORLD, &group);
                MPI_Comm_create_group(MPI_COMM_WORLD, group, 7, &comm);
                MPI_Group_free(&group);
            }
            MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
            MPI_Comm_size(comm, &size);
            world_of = malloc((size_t) size * sizeof(int));
            MPI_Allgather(&mt_rank, 1, MPI_INT, world_of, 1, MPI_INT, comm);
            for (int k = 0; k < ncalls; ++k) {
                coll_t c = (coll_t) (next(&all_state) % C_COUNT);
                size_t n = sizes[next(&all_state) % (sizeof(sizes) / sizeof(sizes[0]))];
                int root = (int) (next(&all_state) % (uint64_t) size);
                if ((C_ALLGATHER == c || C_IALLGATHER == c || C_ALLTOALL == c) && n > 70000) {
                    n = 70000;
                }
                ok &= one_call(comm, world_of, c, root, n, tmp, want, diag);
                ++calls;
                if (0 == k % 5) {
                    /* collectives Open MPI makes itself on this communicator, host memory */
                    if (MPI_COMM_NULL == extra) {
                        MPI_Comm_dup(comm, &extra);
                    } else {
                        MPI_Comm_free(&extra);
                    }
                }
            }
            if (MPI_COMM_NULL != extra) {
                MPI_Comm_free(&extra);
            }
            free(world_of);
            MPI_Comm_free(&comm);
            ++comms;
            mt_check(ok, diag, "%s: %d calls of random kinds per rank right, none hung", name,
                     ncalls);
        }
    }
    /* a root far ahead: rank 0 broadcasts 600 times from host memory (eager messages, it waits
     * for nobody) while the others, late, receive into device memory: they must still find
     * rank 0's note of every call (the board's ring bounds the lead, coll_gpu_kinds.c) */
    {
        char diag[MT_DIAG_LEN] = "";
        int ok = 1, vals[8];
        void *dbuf = NULL;
        MPI_Comm comm;

        mt_set_case("a root 600 calls ahead");
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        if (0 != mt_rank) {
            dbuf = mt_kind_alloc(MT_KIND_DEVICE, sizeof(vals));
            usleep(300000);
        }
        for (int k = 0; k < 600 && ok; ++k) {
            for (int i = 0; i < 8; ++i) {
                vals[i] = k * 8 + i + 1;
            }
            if (0 == mt_rank) {
                ok &= MPI_SUCCESS == MPI_Bcast(vals, 8, MPI_INT, 0, comm);
            } else {
                int got[8];
                ok &= MPI_SUCCESS == MPI_Bcast(dbuf, 8, MPI_INT, 0, comm);
                ok &= DEV_OK == dev_memcpy(got, dbuf, sizeof(got));
                for (int i = 0; ok && i < 8; ++i) {
                    if (got[i] != vals[i]) {
                        mt_diag_add(diag, "call %d: [%d] = %d, want %d; ", k, i, got[i],
                                    vals[i]);
                        ok = 0;
                    }
                }
            }
        }
        mt_kind_free(MT_KIND_DEVICE, dbuf);
        MPI_Comm_free(&comm);
        mt_check(ok, diag, "a host root 600 bcasts ahead of device receivers: every call right");
    }
    /* the MPI 4.1 promise: a communicator whose ranks all assert device kinds only, then one
     * whose ranks all assert host kinds only (coll/gpu then skips the agreement) */
    for (int promise = 0; promise < 2; ++promise) {
        static const mt_kind_t device_kinds[] = {MT_KIND_DEVICE, MT_KIND_MANAGED};
        static const mt_kind_t host_kinds[] = {MT_KIND_HOST, MT_KIND_PINNED};
        char diag[MT_DIAG_LEN] = "", name[160];
        int ok = 1, size, *world_of;
        MPI_Comm comm;
        MPI_Info info;

        snprintf(name, sizeof(name), "mpi_assert_memory_alloc_kinds=%s on every rank",
                 promise ? "system,cuda:host" : "cuda:device,cuda:managed");
        mt_set_case(name);
        MPI_Info_create(&info);
        MPI_Info_set(info, "mpi_assert_memory_alloc_kinds",
                     promise ? "system,cuda:host" : "cuda:device,cuda:managed");
        MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm);
        MPI_Info_free(&info);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        MPI_Comm_size(comm, &size);
        world_of = malloc((size_t) size * sizeof(int));
        MPI_Allgather(&mt_rank, 1, MPI_INT, world_of, 1, MPI_INT, comm);
        draw_from = promise ? host_kinds : device_kinds;
        draw_n = 2;
        for (int k = 0; k < 12; ++k) {
            /* the first call is a blocking allreduce: coll/gpu reads the promise at the
             * communicator's first blocking allreduce, bcast or reduce, and the script checks
             * that it did (twelve drawn calls miss all three once in about 230 seeds) */
            coll_t c = (coll_t) (next(&all_state) % C_COUNT);
            size_t n = sizes[next(&all_state) % 4];
            int root = (int) (next(&all_state) % (uint64_t) size);
            ok &= one_call(comm, world_of, 0 == k ? C_ALLREDUCE : c, root, n, tmp, want, diag);
        }
        draw_from = kinds;
        draw_n = sizeof(kinds) / sizeof(kinds[0]);
        if (0 == promise) {
            /* a program that breaks the device promise (any kind on any rank) is still right:
             * the agreement puts every rank on the device path, a host buffer through a device
             * temporary (a host rank went below while its peers took the team, and hung) */
            for (int k = 0; k < 8; ++k) {
                coll_t c = (coll_t) (next(&all_state) % C_COUNT);
                size_t n = sizes[next(&all_state) % 4];
                int root = (int) (next(&all_state) % (uint64_t) size);
                ok &= one_call(comm, world_of, k < 2 ? C_ALLREDUCE : c, root, n, tmp, want,
                               diag);
            }
        }
        free(world_of);
        MPI_Comm_free(&comm);
        mt_check(ok, diag, "%s: 12 calls right%s, none hung", name,
                 promise ? "" : ", and 8 on any kinds (the promise broken)");
    }
    tap_diag("%d communicators, %d calls", comms, calls);
    free(tmp);
    free(want);
    return mt_finish();
}
