/*
 * test_kinds_sweep.c - memory kinds chosen at random per rank and per call, under coll/gpu's
 * defaults: every call must be right and none may hang.
 *
 * MPI lets every rank pass any kind of memory to any collective, changing from call to call.
 * A program opens as CUDA-aware codes do (MPI_Comm_split_type first, whose host allreduce Open
 * MPI makes itself), then makes communicators by split_type, dup, split (reversed order) and
 * create_group, and on each runs a random sequence of calls, with host-memory collectives of
 * the program's own and new communicators made in between:
 *
 *   blocking     MPI_Allreduce (in place too), MPI_Bcast and MPI_Reduce from a random root,
 *                MPI_Allgather, MPI_Alltoall, MPI_Allgatherv, MPI_Alltoallv,
 *                MPI_Reduce_scatter, MPI_Reduce_scatter_block
 *   nonblocking  MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather, MPI_Ialltoall, MPI_Iallgatherv,
 *                MPI_Ireduce_scatter_block, MPI_Ireduce
 *   persistent   MPI_Allreduce_init, MPI_Bcast_init, MPI_Allgatherv_init, MPI_Alltoallv_init,
 *                MPI_Reduce_scatter_init, MPI_Reduce_scatter_block_init, MPI_Reduce_init (two
 *                starts each)
 *
 * The v calls and MPI_Reduce_scatter have uneven counts, some zero; the displacements of the
 * v calls leave gaps, which must stay poisoned in a receive buffer, as must the elements after
 * a reduce-scatter's piece.  MPI_Allgatherv and the reduce-scatters run in place one time in
 * three (the persistent ones put their input back before the second start).  Each rank draws
 * the kind of every buffer of every call on its own (host, pinned, device, managed); the call,
 * the element count (from a few sizes up to a two-shot-sized one), the root, the counts and
 * displacements and in place are drawn alike on every rank.  Inputs are fresh random values,
 * outputs poisoned first, results compared with references computed here.
 *
 * Then MPI_Comm_idup on a communicator whose calls follow device memory, while another's first
 * device call sets its node team up (Open MPI's own nonblocking calls nested in coll/gpu's).
 *
 * Then two communicators whose ranks all make the MPI 4.1 promise mpi_assert_memory_alloc_kinds
 * (device kinds only; host kinds only), each with calls on the kinds it promises.
 *
 * With THREADS above 1 (MPI_THREAD_MULTIPLE), each of THREADS threads runs the random sequence
 * of its own on communicators of its own, made from its own duplicate of MPI_COMM_WORLD, all at
 * once: several communicators in flight, each with its history of kinds, sharing coll/gpu's
 * caches, pools and progress.  Each thread draws from a seed of its own; every rank's thread t
 * draws the calls alike.
 *
 * Usage: test_kinds_sweep [SEED [ROUNDS [THREADS]]]   (the seed is printed; 0 or none: from the
 *        clock)
 */
#include <time.h>
#include <unistd.h>

#include "mpitest.h"

#if OMPI_MAJOR_VERSION < 5
#    include <mpi-ext.h>
#    define MPI_Allgatherv_init MPIX_Allgatherv_init
#    define MPI_Allreduce_init MPIX_Allreduce_init
#    define MPI_Alltoallv_init MPIX_Alltoallv_init
#    define MPI_Bcast_init MPIX_Bcast_init
#    define MPI_Reduce_scatter_block_init MPIX_Reduce_scatter_block_init
#    define MPI_Reduce_scatter_init MPIX_Reduce_scatter_init
#    define MPI_Reduce_init MPIX_Reduce_init
#endif

#define POISON ((int32_t) 0x5a5a5a5a)
#define MAX_COUNT 300000 /* above the one-shot slot of 1 MiB in floats: two-shot or ring */

static const size_t sizes[] = {1, 7, 1000, 70000, MAX_COUNT};
static const mt_kind_t kinds[] = {MT_KIND_HOST, MT_KIND_PINNED, MT_KIND_DEVICE, MT_KIND_MANAGED};

/* Each thread's own draws (one thread but in the threads mode). */
static uint64_t base_seed;            /* the seed printed, of the whole run */
static _Thread_local uint64_t seed;   /* this thread's (seed_thread) */
static _Thread_local uint64_t my_state;  /* this rank's own draws (kinds) */
static _Thread_local uint64_t all_state; /* draws every rank makes alike (call, size, root) */
static _Thread_local uint64_t call_no;
/* where the ranks agree that a call's buffers are made (a communicator no other thread uses) */
static _Thread_local MPI_Comm agree_comm;

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
static _Thread_local const mt_kind_t *draw_from = kinds;
static _Thread_local size_t draw_n = sizeof(kinds) / sizeof(kinds[0]);

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
    C_ALLGATHERV, /* from here on, calls with a block per rank (per_rank_blocks) */
    C_ALLTOALLV,
    C_REDUCE_SCATTER,
    C_REDUCE_SCATTER_BLOCK,
    C_IALLTOALL,
    C_IALLGATHERV,
    C_IREDUCE_SCATTER_BLOCK,
    C_ALLGATHERV_INIT,
    C_ALLTOALLV_INIT,
    C_REDUCE_SCATTER_INIT,
    C_REDUCE_SCATTER_BLOCK_INIT,
    C_IREDUCE, /* not a block per rank, kept to those sizes all the same */
    C_REDUCE_INIT,
    C_COUNT
} coll_t;
static const char *const coll_names[C_COUNT] = {
    "allreduce", "allreduce in place", "bcast", "reduce", "allgather", "alltoall",
    "iallreduce", "ibcast", "iallgather", "allreduce_init", "bcast_init", "allgatherv",
    "alltoallv", "reduce_scatter", "reduce_scatter_block", "ialltoall", "iallgatherv",
    "ireduce_scatter_block", "allgatherv_init", "alltoallv_init", "reduce_scatter_init",
    "reduce_scatter_block_init", "ireduce", "reduce_init"};
/* calls made of each kind, for the closing line: each thread's, then added up under the lock */
static _Thread_local int drawn[C_COUNT];
static int drawn_all[C_COUNT];
static pthread_mutex_t drawn_lock = PTHREAD_MUTEX_INITIALIZER;

static void drawn_add_up(void)
{
    pthread_mutex_lock(&drawn_lock);
    for (int c = 0; c < C_COUNT; ++c) {
        drawn_all[c] += drawn[c];
        drawn[c] = 0;
    }
    pthread_mutex_unlock(&drawn_lock);
}

/* The calls whose buffers hold a block per rank: their size is kept to 70000 per block. */
static bool per_rank_blocks(coll_t c)
{
    return C_ALLGATHER == c || C_IALLGATHER == c || C_ALLTOALL == c || c >= C_ALLGATHERV;
}

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

/* A block of a v call: empty one time in four, else 1 to n elements (every rank draws alike). */
static int draw_count(size_t n)
{
    return 0 == next(&all_state) % 4 ? 0 : 1 + (int) (next(&all_state) % n);
}

/* The gap before a block of a v call, left poisoned in a receive buffer: 0 to 3 elements. */
static int draw_gap(void)
{
    return (int) (next(&all_state) % 4);
}

/* The shape of a v call or a reduce-scatter on a communicator of size ranks, drawn alike by
 * every rank.  Alltoallv: cnt[p * size + q] elements go from rank p to rank q, from
 * sdis[p * size + q] of p's send buffer into rdis[q * size + p] of q's receive buffer.  The
 * others have one row (every row of cnt is row 0): cnt[q] is rank q's block, at rdis[q] of
 * every receive buffer (allgatherv) or reduced into rank q from sdis[q] of every send buffer
 * (reduce-scatter).  Returns the elements of rank me's send and receive buffers, gaps and a
 * poisoned tail included. */
static void draw_shape(coll_t c, int size, int me, size_t n, int *cnt, int *sdis, int *rdis,
                       size_t *sn, size_t *rn)
{
    size_t end;

    *sn = *rn = 0;
    for (int p = 0; p < size; ++p) {
        for (int q = 0; q < size; ++q) {
            if (C_ALLTOALLV == c || C_ALLTOALLV_INIT == c || 0 == p) {
                cnt[p * size + q] = draw_count(n);
            } else {
                cnt[p * size + q] = cnt[q]; /* one row: the counts of every rank */
            }
        }
    }
    if (C_ALLTOALLV == c || C_ALLTOALLV_INIT == c) {
        for (int p = 0; p < size; ++p) { /* sender p's layout, then receiver p's */
            end = 0;
            for (int q = 0; q < size; ++q) {
                sdis[p * size + q] = (int) end + draw_gap();
                end = (size_t) sdis[p * size + q] + (size_t) cnt[p * size + q];
            }
            if (p == me) {
                *sn = end;
            }
            end = 0;
            for (int q = 0; q < size; ++q) {
                rdis[p * size + q] = (int) end + draw_gap();
                end = (size_t) rdis[p * size + q] + (size_t) cnt[q * size + p];
            }
            if (p == me) {
                *rn = end + (size_t) draw_gap();
            } else {
                (void) draw_gap();
            }
        }
    } else if (C_REDUCE_SCATTER == c || C_REDUCE_SCATTER_INIT == c) {
        end = 0;
        for (int q = 0; q < size; ++q) {
            sdis[q] = (int) end;
            end += (size_t) cnt[q];
        }
        *sn = end;
        *rn = (size_t) cnt[me] + 2; /* two elements that must stay poisoned */
    } else { /* allgatherv */
        end = 0;
        for (int q = 0; q < size; ++q) {
            rdis[q] = (int) end + draw_gap();
            end = (size_t) rdis[q] + (size_t) cnt[q];
        }
        *sn = (size_t) cnt[me];
        *rn = end + (size_t) draw_gap();
    }
}

/* One call on comm (whose rank i is world rank world_of[i]); 1 when this rank's part is right. */
static int one_call(MPI_Comm comm, const int *world_of, coll_t c, int root, size_t n,
                    int32_t *tmp, int32_t *want, char *diag)
{
    int rank, size, rc = MPI_SUCCESS, ok = 1, starts = 0; /* persistent: two starts */
    int *cnt = NULL, *sdis = NULL, *rdis = NULL, *rcnt = NULL;
    size_t sn = n, rn = n, cn; /* elements of the send and receive buffers, and those checked */
    buf_t s = {NULL, MT_KIND_HOST}, r = {NULL, MT_KIND_HOST};
    MPI_Request req = MPI_REQUEST_NULL;
    int32_t *input = NULL; /* in place and persistent: the input, put back before each start */
    bool check = true, in_place = false, shaped = false, gatherv;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ++call_no;
    ++drawn[c];
    switch (c) {
    case C_ALLGATHER:
    case C_IALLGATHER:
        rn = n * (size_t) size;
        break;
    case C_ALLTOALL:
    case C_IALLTOALL:
        sn = rn = n * (size_t) size;
        break;
    case C_REDUCE_SCATTER_BLOCK:
    case C_IREDUCE_SCATTER_BLOCK:
    case C_REDUCE_SCATTER_BLOCK_INIT:
        sn = n * (size_t) size;
        in_place = (0 == next(&all_state) % 3);
        break;
    case C_ALLGATHERV:
    case C_IALLGATHERV:
    case C_ALLGATHERV_INIT:
    case C_REDUCE_SCATTER:
    case C_REDUCE_SCATTER_INIT:
        in_place = (0 == next(&all_state) % 3);
        /* fall through */
    case C_ALLTOALLV:
    case C_ALLTOALLV_INIT:
        shaped = true;
        cnt = malloc((size_t) size * (size_t) size * sizeof(int));
        sdis = malloc((size_t) size * (size_t) size * sizeof(int));
        rdis = malloc((size_t) size * (size_t) size * sizeof(int));
        rcnt = malloc((size_t) size * sizeof(int));
        draw_shape(c, size, rank, n, cnt, sdis, rdis, &sn, &rn);
        for (int p = 0; p < size; ++p) {
            rcnt[p] = cnt[p * size + rank]; /* alltoallv: what rank p sends here */
        }
        break;
    default:
        break;
    }
    gatherv = (C_ALLGATHERV == c || C_IALLGATHERV == c || C_ALLGATHERV_INIT == c);
    if (in_place && !gatherv) {
        rn = sn; /* a reduce-scatter in place: its input in the receive buffer */
    }
    cn = rn;
    for (size_t i = 0; i < sn; ++i) {
        tmp[i] = value(world_of[rank], i);
    }
    if (in_place) {
        /* the receive buffer holds the input (allgatherv: this rank's block, poison around) */
        if (gatherv) {
            for (size_t i = 0; i < rn; ++i) {
                tmp[i] = POISON;
            }
            for (int i = 0; i < cnt[rank]; ++i) {
                tmp[rdis[rank] + i] = value(world_of[rank], (size_t) i);
            }
        }
        if (C_REDUCE_SCATTER_BLOCK_INIT == c || C_REDUCE_SCATTER_INIT == c) {
            input = malloc(rn * sizeof(int32_t) + 1);
            memcpy(input, tmp, rn * sizeof(int32_t));
        }
    } else {
        if (0 != buf_new(&s, sn, tmp)) {
            ok = 0;
        }
        for (size_t i = 0; i < rn; ++i) {
            tmp[i] = POISON;
        }
    }
    if (0 != buf_new(&r, rn, tmp)) {
        ok = 0;
    }
    if (!mt_agree_on(agree_comm, ok)) {
        ok = 0;
        mt_diag_add(diag, "%s: buffers of %zu ints could not be made; ", coll_names[c], rn);
        goto out;
    }
    /* what this rank must hold in its receive buffer (bcast: its one buffer) */
    for (size_t i = 0; i < rn; ++i) {
        want[i] = POISON;
    }
    switch (c) {
    case C_BCAST:
    case C_IBCAST:
    case C_BCAST_INIT:
        for (size_t i = 0; i < rn; ++i) {
            want[i] = value(world_of[root], i);
        }
        break;
    case C_ALLGATHER:
    case C_IALLGATHER:
        for (size_t i = 0; i < rn; ++i) {
            want[i] = value(world_of[i / n], i % n);
        }
        break;
    case C_ALLTOALL:
    case C_IALLTOALL:
        for (size_t i = 0; i < rn; ++i) {
            want[i] = value(world_of[i / n], (size_t) rank * n + i % n);
        }
        break;
    case C_ALLGATHERV:
    case C_IALLGATHERV:
    case C_ALLGATHERV_INIT:
        for (int p = 0; p < size; ++p) {
            for (int i = 0; i < cnt[p]; ++i) {
                want[rdis[p] + i] = value(world_of[p], (size_t) i);
            }
        }
        break;
    case C_ALLTOALLV:
    case C_ALLTOALLV_INIT:
        for (int p = 0; p < size; ++p) {
            for (int i = 0; i < rcnt[p]; ++i) {
                want[rdis[rank * size + p] + i] = value(world_of[p],
                                                        (size_t) (sdis[p * size + rank] + i));
            }
        }
        break;
    case C_REDUCE_SCATTER:
    case C_REDUCE_SCATTER_INIT:
    case C_REDUCE_SCATTER_BLOCK:
    case C_IREDUCE_SCATTER_BLOCK:
    case C_REDUCE_SCATTER_BLOCK_INIT: {
        /* this rank's piece starts at from in every input; in place, what follows the piece
         * in the buffer is undefined, and not checked */
        size_t len = shaped ? (size_t) cnt[rank] : n;
        size_t from = shaped ? (size_t) sdis[rank] : (size_t) rank * n;
        for (size_t i = 0; i < len; ++i) {
            want[i] = 0;
            for (int p = 0; p < size; ++p) {
                want[i] += value(world_of[p], from + i);
            }
        }
        if (in_place) {
            cn = len;
        }
        break;
    }
    default:
        for (size_t i = 0; i < rn; ++i) {
            want[i] = 0;
            for (int p = 0; p < size; ++p) {
                want[i] += value(world_of[p], i);
            }
        }
        break;
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
    case C_IREDUCE:
        rc = MPI_Ireduce(s.p, r.p, (int) n, MPI_INT, MPI_SUM, root, comm, &req);
        check = (rank == root);
        break;
    case C_REDUCE_INIT:
        rc = MPI_Reduce_init(s.p, r.p, (int) n, MPI_INT, MPI_SUM, root, comm, MPI_INFO_NULL,
                             &req);
        check = (rank == root);
        break;
    case C_IALLGATHER:
        rc = MPI_Iallgather(s.p, (int) n, MPI_INT, r.p, (int) n, MPI_INT, comm, &req);
        break;
    case C_IALLTOALL:
        rc = MPI_Ialltoall(s.p, (int) n, MPI_INT, r.p, (int) n, MPI_INT, comm, &req);
        break;
    case C_ALLREDUCE_INIT:
        rc = MPI_Allreduce_init(s.p, r.p, (int) n, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &req);
        break;
    case C_ALLGATHERV:
        rc = MPI_Allgatherv(in_place ? MPI_IN_PLACE : s.p, cnt[rank], MPI_INT, r.p, cnt, rdis,
                            MPI_INT, comm);
        break;
    case C_IALLGATHERV:
        rc = MPI_Iallgatherv(in_place ? MPI_IN_PLACE : s.p, cnt[rank], MPI_INT, r.p, cnt, rdis,
                             MPI_INT, comm, &req);
        break;
    case C_ALLGATHERV_INIT:
        rc = MPI_Allgatherv_init(in_place ? MPI_IN_PLACE : s.p, cnt[rank], MPI_INT, r.p, cnt,
                                 rdis, MPI_INT, comm, MPI_INFO_NULL, &req);
        break;
    case C_ALLTOALLV:
        rc = MPI_Alltoallv(s.p, &cnt[rank * size], &sdis[rank * size], MPI_INT, r.p, rcnt,
                           &rdis[rank * size], MPI_INT, comm);
        break;
    case C_ALLTOALLV_INIT:
        rc = MPI_Alltoallv_init(s.p, &cnt[rank * size], &sdis[rank * size], MPI_INT, r.p, rcnt,
                                &rdis[rank * size], MPI_INT, comm, MPI_INFO_NULL, &req);
        break;
    case C_REDUCE_SCATTER:
        rc = MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : s.p, r.p, cnt, MPI_INT, MPI_SUM, comm);
        break;
    case C_REDUCE_SCATTER_INIT:
        rc = MPI_Reduce_scatter_init(in_place ? MPI_IN_PLACE : s.p, r.p, cnt, MPI_INT, MPI_SUM,
                                     comm, MPI_INFO_NULL, &req);
        break;
    case C_REDUCE_SCATTER_BLOCK:
        rc = MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : s.p, r.p, (int) n, MPI_INT,
                                      MPI_SUM, comm);
        break;
    case C_IREDUCE_SCATTER_BLOCK:
        rc = MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : s.p, r.p, (int) n, MPI_INT,
                                       MPI_SUM, comm, &req);
        break;
    case C_REDUCE_SCATTER_BLOCK_INIT:
        rc = MPI_Reduce_scatter_block_init(in_place ? MPI_IN_PLACE : s.p, r.p, (int) n,
                                           MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &req);
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
        }
        break;
    }
    if (C_ALLREDUCE_INPLACE == c) {
        buf_t t = r;
        r = s;
        s = t;
    }
    switch (c) {
    case C_ALLREDUCE_INIT:
    case C_BCAST_INIT:
    case C_ALLGATHERV_INIT:
    case C_ALLTOALLV_INIT:
    case C_REDUCE_SCATTER_INIT:
    case C_REDUCE_SCATTER_BLOCK_INIT:
    case C_REDUCE_INIT:
        starts = 2;
        break;
    default:
        break;
    }
    if (MPI_SUCCESS == rc && starts > 0) {
        for (int k = 0; k < starts && MPI_SUCCESS == rc; ++k) {
            /* a reduce-scatter in place overwrote its input: the same input again */
            if (NULL != input && k > 0
                && DEV_OK != dev_memcpy(r.p, input, rn * sizeof(int32_t))) {
                mt_diag_add(diag, "%s: cannot put the input back; ", coll_names[c]);
                ok = 0;
            }
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
        for (size_t i = 0; ok && i < cn; ++i) {
            if (tmp[i] != want[i]) {
                mt_diag_add(diag, "%s%s of %zu ints on %s from %s (root %d, call %lu): [%zu] = "
                            "%d, want %d; ", coll_names[c], in_place ? " in place" : "", n,
                            mt_kind_names[r.kind], in_place ? "itself" : mt_kind_names[s.kind],
                            root, (unsigned long) call_no, i, tmp[i], want[i]);
                ok = 0;
            }
        }
    }
out:
    mt_kind_free(s.kind, s.p);
    mt_kind_free(r.kind, r.p);
    free(input);
    free(cnt);
    free(sdis);
    free(rdis);
    free(rcnt);
    return ok;
}

static const char *const hows[] = {"split_type", "dup", "reversed split", "create_group"};

/* One communicator made from parent in the way how (0 to 3), and on it a random sequence of
 * calls, with communicators of Open MPI's own made in between; freed after.  Returns whether
 * every call was right; *ncalls: how many were made. */
static int sweep_comm(MPI_Comm parent, int how, int32_t *tmp, int32_t *want, char *diag,
                      int *ncalls)
{
    int ok = 1, size, *world_of;
    MPI_Comm comm = MPI_COMM_NULL, extra = MPI_COMM_NULL;
    MPI_Group group;
    int psize, prank;

    *ncalls = 24 + (int) (next(&all_state) % 24);
    MPI_Comm_size(parent, &psize);
    MPI_Comm_rank(parent, &prank);
    if (0 == how) {
        MPI_Comm_split_type(parent, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comm);
    } else if (1 == how) {
        MPI_Comm_dup(parent, &comm);
    } else if (2 == how) {
        MPI_Comm_split(parent, 0, psize - prank, &comm);
    } else {
        MPI_Comm_group(parent, &group);
        MPI_Comm_create_group(parent, group, 7, &comm);
        MPI_Group_free(&group);
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_size(comm, &size);
    world_of = malloc((size_t) size * sizeof(int));
    MPI_Allgather(&mt_rank, 1, MPI_INT, world_of, 1, MPI_INT, comm);
    for (int k = 0; k < *ncalls; ++k) {
        coll_t c = (coll_t) (next(&all_state) % C_COUNT);
        size_t n = sizes[next(&all_state) % (sizeof(sizes) / sizeof(sizes[0]))];
        int root = (int) (next(&all_state) % (uint64_t) size);
        if (per_rank_blocks(c) && n > 70000) {
            n = 70000;
        }
        ok &= one_call(comm, world_of, c, root, n, tmp, want, diag);
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
    return ok;
}

/* This thread's draws: from base_seed and the thread's index, alike on every rank (mixed: a
 * seed one step of next() from another would draw the other's sequence, one call later). */
static void seed_thread(int index)
{
    uint64_t s = base_seed ^ ((uint64_t) index << 32);
    seed = (0 == index) ? base_seed : next(&s);
    my_state = seed ^ (0xd1b54a32d192ed03ULL * (uint64_t) (mt_rank + 1));
    all_state = seed;
    call_no = 0;
}

/* The threads mode: each thread its sweep on communicators from its own parent. */
typedef struct {
    int index, rounds, ok, calls;
    MPI_Comm parent, agree;
    char diag[MT_DIAG_LEN];
} sweeper_t;

static void *sweeper(void *arg)
{
    sweeper_t *w = arg;
    int32_t *tmp = malloc(MAX_COUNT * (size_t) mt_size * sizeof(int32_t));
    int32_t *want = malloc(MAX_COUNT * (size_t) mt_size * sizeof(int32_t));

    w->ok = 1;
    seed_thread(w->index);
    agree_comm = w->agree;
    for (int round = 0; round < w->rounds; ++round) {
        for (int how = 0; how < 4; ++how) {
            int ncalls, ok = sweep_comm(w->parent, how, tmp, want, w->diag, &ncalls);
            if (!ok) {
                mt_diag_add(w->diag, "(thread %d, round %d, by %s); ", w->index, round,
                            hows[how]);
            }
            w->ok &= ok;
            w->calls += ncalls;
        }
    }
    drawn_add_up();
    free(tmp);
    free(want);
    return NULL;
}

int main(int argc, char **argv)
{
    int rounds = 3, comms = 0, calls = 0, threads = (argc > 3) ? atoi(argv[3]) : 1;
    int32_t *tmp, *want;
    char why[256];

    if (threads > 1) {
        mt_init_threads(&argc, &argv);
    } else {
        mt_init(&argc, &argv);
    }
    base_seed = (argc > 1) ? strtoull(argv[1], NULL, 0) : 0;
    if (argc > 2) {
        rounds = atoi(argv[2]);
    }
    if (0 == base_seed) {
        base_seed = (uint64_t) time(NULL);
    }
    /* host memory: a call of its own */
    MPI_Bcast(&base_seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    tap_diag("seed %llu (rerun: test_kinds_sweep %llu %d %d)", (unsigned long long) base_seed,
             (unsigned long long) base_seed, rounds, threads > 1 ? threads : 1);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    seed_thread(0);
    agree_comm = MPI_COMM_WORLD;
    tmp = malloc(MAX_COUNT * (size_t) mt_size * sizeof(int32_t));
    want = malloc(MAX_COUNT * (size_t) mt_size * sizeof(int32_t));

    if (threads > 1) {
        sweeper_t *w = calloc((size_t) threads, sizeof(*w));
        char devdiag[MT_DIAG_LEN] = "";
        int on_device;

        for (int t = 0; t < threads; ++t) {
            w[t].index = t + 1;
            w[t].rounds = rounds;
            MPI_Comm_dup(MPI_COMM_WORLD, &w[t].parent);
            MPI_Comm_dup(MPI_COMM_WORLD, &w[t].agree);
        }
        on_device = mt_threads_run(threads, sweeper, w, sizeof(*w), devdiag);
        for (int t = 0; t < threads; ++t) {
            char name[160];
            snprintf(name, sizeof(name), "thread %d of %d, its own communicators", t + 1,
                     threads);
            mt_set_case(name);
            mt_check(w[t].ok && on_device, on_device ? w[t].diag : devdiag,
                     "%s: %d calls of random kinds per rank right, none hung, %d threads at "
                     "once", name, w[t].calls, threads);
            calls += w[t].calls;
            comms += 4 * rounds;
            MPI_Comm_free(&w[t].parent);
            MPI_Comm_free(&w[t].agree);
        }
        free(w);
    } else {
        for (int round = 0; round < rounds; ++round) {
            for (int how = 0; how < 4; ++how) {
                char diag[MT_DIAG_LEN] = "", name[160];
                int ncalls, ok;

                snprintf(name, sizeof(name), "round %d, a communicator by %s", round,
                         hows[how]);
                mt_set_case(name);
                ok = sweep_comm(MPI_COMM_WORLD, how, tmp, want, diag, &ncalls);
                calls += ncalls;
                ++comms;
                mt_check(ok, diag, "%s: %d calls of random kinds per rank right, none hung",
                         name, ncalls);
            }
        }
    }
    /* Open MPI's nonblocking calls inside ours: MPI_Comm_idup agrees the new communicator's id
     * by MPI_Iallreduce calls on its parent that Open MPI makes in opal_progress, where they
     * come back into coll/gpu.  Here they come inside the node-team setup of another
     * communicator's first device call, which polls its requests under the engine's lock: with
     * the lock real (MPI_THREAD_MULTIPLE: the threads mode), the nested call waited for the lock
     * its own thread held, and the rank hung. */
    {
        char diag[MT_DIAG_LEN] = "";
        int ok = 1;
        const size_t n = 1000;

        mt_set_case("MPI_Comm_idup's id agreement inside a node team's setup");
        for (int k = 0; k < 4; ++k) {
            MPI_Comm parent, fresh, dup = MPI_COMM_NULL;
            MPI_Request req = MPI_REQUEST_NULL;
            void *sdev, *rdev;
            int made;

            ++call_no;
            for (size_t i = 0; i < n; ++i) {
                tmp[i] = value(mt_rank, i);
            }
            sdev = mt_kind_alloc(MT_KIND_DEVICE, n * sizeof(int32_t));
            rdev = mt_kind_alloc(MT_KIND_DEVICE, n * (size_t) mt_size * sizeof(int32_t));
            made = NULL != sdev && NULL != rdev
                   && DEV_OK == dev_memcpy(sdev, tmp, n * sizeof(int32_t));
            if (!mt_agree(made)) {
                mt_diag_add(diag, "buffers could not be made; ");
                ok = 0;
            } else {
                MPI_Comm_dup(MPI_COMM_WORLD, &parent);
                MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
                MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
                MPI_Comm_set_errhandler(fresh, MPI_ERRORS_RETURN);
                /* the parent's calls follow device memory: its iallreduces take the team (the
                 * sum lands where the allgather writes next) */
                ok &= MPI_SUCCESS == MPI_Allreduce(sdev, rdev, (int) n, MPI_INT, MPI_SUM,
                                                   parent);
                ok &= MPI_SUCCESS == MPI_Comm_idup(parent, &dup, &req);
                /* the fresh communicator's first device call sets its node team up */
                ok &= MPI_SUCCESS == MPI_Allgather(sdev, (int) n, MPI_INT, rdev, (int) n,
                                                   MPI_INT, fresh);
                ok &= MPI_SUCCESS == MPI_Wait(&req, MPI_STATUS_IGNORE);
                ok &= DEV_OK == dev_memcpy(want, rdev, n * (size_t) mt_size * sizeof(int32_t));
                for (int p = 0; ok && p < mt_size; ++p) {
                    for (size_t i = 0; i < n; ++i) {
                        if (want[(size_t) p * n + i] != value(p, i)) {
                            mt_diag_add(diag, "round %d: block %d [%zu] = %d, want %d; ", k, p,
                                        i, want[(size_t) p * n + i], value(p, i));
                            ok = 0;
                            break;
                        }
                    }
                }
                /* and the communicator made works */
                if (MPI_COMM_NULL != dup) {
                    int32_t one = 1, sum = 0;
                    ok &= MPI_SUCCESS == MPI_Allreduce(&one, &sum, 1, MPI_INT32_T, MPI_SUM, dup);
                    if (sum != mt_size) {
                        mt_diag_add(diag, "round %d: the idup's communicator summed %d, want %d; ",
                                    k, (int) sum, mt_size);
                        ok = 0;
                    }
                    MPI_Comm_free(&dup);
                }
                MPI_Comm_free(&fresh);
                MPI_Comm_free(&parent);
            }
            mt_kind_free(MT_KIND_DEVICE, sdev);
            mt_kind_free(MT_KIND_DEVICE, rdev);
        }
        mt_check(ok, diag, "MPI_Comm_idup's id agreement inside a node team's setup (4 times): "
                 "allgathers right, the communicators made work, none hung");
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
             * that it did (twelve drawn calls would miss all three once in about 11 seeds) */
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
    drawn_add_up();
    tap_diag("%d communicators, %d calls", comms, calls);
    {
        char line[1024] = "";
        for (int c = 0; c < C_COUNT; ++c) {
            size_t used = strlen(line);
            snprintf(line + used, sizeof(line) - used, "%s%s %d", c ? ", " : "", coll_names[c],
                     drawn_all[c]);
        }
        tap_diag("calls of each kind (with the promises'): %s", line);
    }
    free(tmp);
    free(want);
    return mt_finish();
}
