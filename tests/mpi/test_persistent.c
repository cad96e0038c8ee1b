/*
 * test_persistent.c - MPI-4's persistent collectives on device buffers (Open MPI 5.0; on 4.1
 * the same calls by their MPIX_ names, from its pcollreq extension): every
 * MPI_<coll>_init that carries data, on MPI_COMM_WORLD, each request started several times
 * with fresh data and a poisoned output each time, compared element by element with a
 * reference computed on the host (holes between the blocks of the v collectives must keep
 * their poison).
 *
 * Usage: test_persistent dev     every rank's buffers in device memory
 *        test_persistent mixed   even ranks device, odd ranks host memory
 *        test_persistent neighbor  the neighborhood collectives on a periodic and a
 *                                non-periodic 1-D cartesian topology (MPI_PROC_NULL blocks
 *                                keep their poison)
 *        test_persistent inter   an intercommunicator of the first and second half of the
 *                                ranks: allreduce, bcast, reduce, allgather, gather, scatter,
 *                                alltoall (roots MPI_ROOT / MPI_PROC_NULL in the first half)
 *        test_persistent team [nofree]  MPI_Allreduce_init and MPI_Bcast_init on device
 *                                buffers, for the node team's path (the wrappers force its
 *                                algorithms and read coll_gpu_verbose for the decisions):
 *                                many starts of one request (in place and not, every root);
 *                                several requests started together and completed with
 *                                MPI_Waitall, MPI_Testall, MPI_Test in different orders;
 *                                blocking and nonblocking calls on the same communicator
 *                                while they run; MPI_Request_free never started, after
 *                                completion and (but with nofree: the staged path's libnbc
 *                                refuses it) while started; a user-defined op (staged).
 *                                Rank 0 prints "# inits: allreduce_init N bcast_init M
 *                                user_op K", the _init calls each rank made
 *        test_persistent teamfail  with COLL_GPU_TEST_FAIL_ASYNC naming a rank: every start
 *                                of those requests completes with an error on every rank
 *
 * Without coll/gpu's persistent path the component below it (libnbc) runs its schedule on the
 * device pointers: on the emulated device, whose memory the host cannot touch, the program
 * dies of SIGSEGV in the first MPI_Start.
 */
#include "mpitest.h"

/* Open MPI 4.1 has them as MPIX_<coll>_init, from its pcollreq extension (5.0 too says
 * MPI_VERSION 3, but names them MPI_) */
#if OMPI_MAJOR_VERSION < 5
#    include <mpi-ext.h>
#    define MPI_Allgather_init MPIX_Allgather_init
#    define MPI_Allgatherv_init MPIX_Allgatherv_init
#    define MPI_Allreduce_init MPIX_Allreduce_init
#    define MPI_Alltoall_init MPIX_Alltoall_init
#    define MPI_Alltoallv_init MPIX_Alltoallv_init
#    define MPI_Alltoallw_init MPIX_Alltoallw_init
#    define MPI_Bcast_init MPIX_Bcast_init
#    define MPI_Exscan_init MPIX_Exscan_init
#    define MPI_Gather_init MPIX_Gather_init
#    define MPI_Gatherv_init MPIX_Gatherv_init
#    define MPI_Neighbor_allgather_init MPIX_Neighbor_allgather_init
#    define MPI_Neighbor_allgatherv_init MPIX_Neighbor_allgatherv_init
#    define MPI_Neighbor_alltoall_init MPIX_Neighbor_alltoall_init
#    define MPI_Neighbor_alltoallv_init MPIX_Neighbor_alltoallv_init
#    define MPI_Neighbor_alltoallw_init MPIX_Neighbor_alltoallw_init
#    define MPI_Reduce_init MPIX_Reduce_init
#    define MPI_Reduce_scatter_block_init MPIX_Reduce_scatter_block_init
#    define MPI_Reduce_scatter_init MPIX_Reduce_scatter_init
#    define MPI_Scan_init MPIX_Scan_init
#    define MPI_Scatter_init MPIX_Scatter_init
#    define MPI_Scatterv_init MPIX_Scatterv_init
#endif

#define N 7        /* elements per block */
#define STARTS 3   /* MPI_Start calls per request */
#define GAP 2      /* ints of poison between the blocks of the v layouts */
#define POISON ((int32_t) 0x5A5A5A5A)

typedef enum {
    C_ALLREDUCE,
    C_ALLREDUCE_IN_PLACE,
    C_BCAST,
    C_REDUCE,
    C_SCAN,
    C_EXSCAN,
    C_ALLGATHER,
    C_ALLGATHERV,
    C_GATHER,
    C_GATHERV,
    C_SCATTER,
    C_SCATTERV,
    C_ALLTOALL,
    C_ALLTOALLV,
    C_ALLTOALLW,
    C_REDUCE_SCATTER,
    C_REDUCE_SCATTER_BLOCK,
    C_COUNT
} coll_t;

static const char *const coll_names[C_COUNT] = {
    "MPI_Allreduce_init", "MPI_Allreduce_init (MPI_IN_PLACE)", "MPI_Bcast_init",
    "MPI_Reduce_init", "MPI_Scan_init", "MPI_Exscan_init", "MPI_Allgather_init",
    "MPI_Allgatherv_init", "MPI_Gather_init", "MPI_Gatherv_init", "MPI_Scatter_init",
    "MPI_Scatterv_init", "MPI_Alltoall_init", "MPI_Alltoallv_init", "MPI_Alltoallw_init",
    "MPI_Reduce_scatter_init", "MPI_Reduce_scatter_block_init"};

/* The value of element j of rank r's input at start it: every rank can compute every input. */
static int32_t val(int r, int it, int j)
{
    uint64_t z = 0x9E3779B97F4A7C15ull * (uint64_t) (r + 1)
                 + 0xBF58476D1CE4E5B9ull * (uint64_t) (it + 7)
                 + 0x94D049BB133111EBull * (uint64_t) (j + 3);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (int32_t) (z % 2001) - 1000;
}

/* Block sizes and offsets of the v layouts: rank r's block has N + r elements. */
static int vcount(int r)
{
    return N + r;
}

static int vdispl(int r) /* packed with GAP ints of poison after each block */
{
    int d = 0;
    for (int q = 0; q < r; ++q) {
        d += vcount(q) + GAP;
    }
    return d;
}

static int vpacked(int r) /* packed without gaps (reduce_scatter's blocks) */
{
    int d = 0;
    for (int q = 0; q < r; ++q) {
        d += vcount(q);
    }
    return d;
}

/* alltoallv/w: what rank s sends to rank d, at which offsets (GAP between blocks) */
static int a2a_count(int s, int d)
{
    return 1 + (s + 2 * d) % 3;
}

static int a2a_sdispl(int s, int d)
{
    int o = 0;
    for (int q = 0; q < d; ++q) {
        o += a2a_count(s, q) + GAP;
    }
    return o;
}

static int a2a_rdispl(int d, int s)
{
    int o = 0;
    for (int q = 0; q < s; ++q) {
        o += a2a_count(q, d) + GAP + 1;
    }
    return o;
}

/* One case's buffers: what goes in (sin, rin) and what must come out (rexp; check[i] says
 * whether element i of the receive buffer is defined on this rank). */
typedef struct {
    int root;
    int32_t *sin, *rin, *rexp;
    char *check;
    size_t sn, rn;      /* ints in the send and receive buffers (0: the buffer is not used) */
    int in_place;
} case_t;

static void sum_into(int32_t *out, int P, int it, int from_rank_lo, int from_rank_hi, int off,
                     int n)
{
    for (int i = 0; i < n; ++i) {
        int32_t s = 0;
        for (int r = from_rank_lo; r < from_rank_hi && r < P; ++r) {
            s += val(r, it, off + i);
        }
        out[i] = s;
    }
}

/* Fill sin, rin, rexp and check of case c for start it on rank me of P. */
static void build(coll_t c, int me, int P, int it, case_t *k)
{
    size_t sn = 0, rn = 0;

    k->in_place = (C_ALLREDUCE_IN_PLACE == c);
    k->root = (C_BCAST == c) ? P - 1 : (C_REDUCE == c) ? 1 % P : 0;
    switch (c) {
    case C_ALLREDUCE: case C_SCAN: case C_EXSCAN:
        sn = N; rn = N; break;
    case C_ALLREDUCE_IN_PLACE: case C_BCAST:
        sn = 0; rn = N; break;
    case C_REDUCE:
        sn = N; rn = (me == k->root) ? N : 0; break;
    case C_ALLGATHER:
        sn = N; rn = (size_t) P * N; break;
    case C_GATHER:
        sn = N; rn = (me == k->root) ? (size_t) P * N : 0; break;
    case C_ALLGATHERV:
        sn = (size_t) vcount(me); rn = (size_t) vdispl(P); break;
    case C_GATHERV:
        sn = (size_t) vcount(me); rn = (me == k->root) ? (size_t) vdispl(P) : 0; break;
    case C_SCATTER:
        sn = (me == k->root) ? (size_t) P * N : 0; rn = N; break;
    case C_SCATTERV:
        sn = (me == k->root) ? (size_t) vdispl(P) : 0; rn = (size_t) vcount(me); break;
    case C_ALLTOALL:
        sn = (size_t) P * N; rn = (size_t) P * N; break;
    case C_ALLTOALLV: case C_ALLTOALLW:
        sn = (size_t) a2a_sdispl(me, P); rn = (size_t) a2a_rdispl(me, P); break;
    case C_REDUCE_SCATTER:
        sn = (size_t) vpacked(P); rn = (size_t) vcount(me); break;
    case C_REDUCE_SCATTER_BLOCK:
        sn = (size_t) P * N; rn = N; break;
    default:
        break;
    }
    k->sn = sn;
    k->rn = rn;
    k->sin = calloc(sn + 1, sizeof(int32_t));
    k->rin = calloc(rn + 1, sizeof(int32_t));
    k->rexp = calloc(rn + 1, sizeof(int32_t));
    k->check = calloc(rn + 1, 1);
    for (size_t i = 0; i < sn; ++i) {
        k->sin[i] = POISON;
    }
    for (size_t i = 0; i < rn; ++i) {
        k->rin[i] = POISON;
        k->rexp[i] = POISON; /* holes keep their poison */
        k->check[i] = 1;
    }

    switch (c) {
    case C_ALLREDUCE: case C_ALLREDUCE_IN_PLACE: case C_SCAN: case C_EXSCAN: case C_REDUCE:
        for (int i = 0; i < N; ++i) {
            if (k->in_place) {
                k->rin[i] = val(me, it, i);
            } else {
                k->sin[i] = val(me, it, i);
            }
        }
        if (0 < rn) {
            int lo = 0, hi = P;
            if (C_SCAN == c) {
                hi = me + 1;
            } else if (C_EXSCAN == c) {
                hi = me;
            }
            sum_into(k->rexp, P, it, lo, hi, 0, N);
            if (C_EXSCAN == c && 0 == me) {
                memset(k->check, 0, rn); /* undefined on rank 0 */
            }
        }
        break;
    case C_BCAST:
        for (int i = 0; i < N; ++i) {
            if (me == k->root) {
                k->rin[i] = val(me, it, i);
            }
            k->rexp[i] = val(k->root, it, i);
        }
        break;
    case C_ALLGATHER: case C_GATHER:
        for (int i = 0; i < N; ++i) {
            k->sin[i] = val(me, it, i);
        }
        for (int r = 0; 0 < rn && r < P; ++r) {
            for (int i = 0; i < N; ++i) {
                k->rexp[r * N + i] = val(r, it, i);
            }
        }
        break;
    case C_ALLGATHERV: case C_GATHERV:
        for (int i = 0; i < vcount(me); ++i) {
            k->sin[i] = val(me, it, i);
        }
        for (int r = 0; 0 < rn && r < P; ++r) {
            for (int i = 0; i < vcount(r); ++i) {
                k->rexp[vdispl(r) + i] = val(r, it, i);
            }
        }
        break;
    case C_SCATTER:
        for (size_t j = 0; j < sn; ++j) {
            k->sin[j] = val(me, it, (int) j);
        }
        for (int i = 0; i < N; ++i) {
            k->rexp[i] = val(k->root, it, me * N + i);
        }
        break;
    case C_SCATTERV:
        for (int r = 0; 0 < sn && r < P; ++r) {
            for (int i = 0; i < vcount(r); ++i) {
                k->sin[vdispl(r) + i] = val(me, it, vdispl(r) + i);
            }
        }
        for (int i = 0; i < vcount(me); ++i) {
            k->rexp[i] = val(k->root, it, vdispl(me) + i);
        }
        break;
    case C_ALLTOALL:
        for (int d = 0; d < P; ++d) {
            for (int i = 0; i < N; ++i) {
                k->sin[d * N + i] = val(me, it, d * N + i);
                k->rexp[d * N + i] = val(d, it, me * N + i);
            }
        }
        break;
    case C_ALLTOALLV: case C_ALLTOALLW:
        for (int d = 0; d < P; ++d) {
            for (int i = 0; i < a2a_count(me, d); ++i) {
                k->sin[a2a_sdispl(me, d) + i] = val(me, it, 1000 * d + i);
            }
            for (int i = 0; i < a2a_count(d, me); ++i) {
                k->rexp[a2a_rdispl(me, d) + i] = val(d, it, 1000 * me + i);
            }
        }
        break;
    case C_REDUCE_SCATTER:
        for (size_t j = 0; j < sn; ++j) {
            k->sin[j] = val(me, it, (int) j);
        }
        sum_into(k->rexp, P, it, 0, P, vpacked(me), vcount(me));
        break;
    case C_REDUCE_SCATTER_BLOCK:
        for (size_t j = 0; j < sn; ++j) {
            k->sin[j] = val(me, it, (int) j);
        }
        sum_into(k->rexp, P, it, 0, P, me * N, N);
        break;
    default:
        break;
    }
}

static void release(case_t *k)
{
    free(k->sin);
    free(k->rin);
    free(k->rexp);
    free(k->check);
}

/* MPI_<coll>_init of case c on the buffers sbuf and rbuf. */
static int init(coll_t c, const case_t *k, int P, int me, void *sbuf, void *rbuf,
                MPI_Request *req)
{
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Info none = MPI_INFO_NULL;
    int counts[64], displs[64], rcounts[64], rdispls[64];
    MPI_Datatype types[64];

    for (int r = 0; r < P && r < 64; ++r) {
        counts[r] = vcount(r);
        displs[r] = vdispl(r);
        types[r] = MPI_INT;
    }
    switch (c) {
    case C_ALLREDUCE:
        return MPI_Allreduce_init(sbuf, rbuf, N, MPI_INT, MPI_SUM, w, none, req);
    case C_ALLREDUCE_IN_PLACE:
        return MPI_Allreduce_init(MPI_IN_PLACE, rbuf, N, MPI_INT, MPI_SUM, w, none, req);
    case C_BCAST:
        return MPI_Bcast_init(rbuf, N, MPI_INT, k->root, w, none, req);
    case C_REDUCE:
        return MPI_Reduce_init(sbuf, rbuf, N, MPI_INT, MPI_SUM, k->root, w, none, req);
    case C_SCAN:
        return MPI_Scan_init(sbuf, rbuf, N, MPI_INT, MPI_SUM, w, none, req);
    case C_EXSCAN:
        return MPI_Exscan_init(sbuf, rbuf, N, MPI_INT, MPI_SUM, w, none, req);
    case C_ALLGATHER:
        return MPI_Allgather_init(sbuf, N, MPI_INT, rbuf, N, MPI_INT, w, none, req);
    case C_GATHER:
        return MPI_Gather_init(sbuf, N, MPI_INT, rbuf, N, MPI_INT, k->root, w, none, req);
    case C_ALLGATHERV:
        return MPI_Allgatherv_init(sbuf, vcount(me), MPI_INT, rbuf, counts, displs, MPI_INT, w,
                                   none, req);
    case C_GATHERV:
        return MPI_Gatherv_init(sbuf, vcount(me), MPI_INT, rbuf, counts, displs, MPI_INT,
                                k->root, w, none, req);
    case C_SCATTER:
        return MPI_Scatter_init(sbuf, N, MPI_INT, rbuf, N, MPI_INT, k->root, w, none, req);
    case C_SCATTERV:
        return MPI_Scatterv_init(sbuf, counts, displs, MPI_INT, rbuf, vcount(me), MPI_INT,
                                 k->root, w, none, req);
    case C_ALLTOALL:
        return MPI_Alltoall_init(sbuf, N, MPI_INT, rbuf, N, MPI_INT, w, none, req);
    case C_ALLTOALLV:
    case C_ALLTOALLW:
        for (int r = 0; r < P && r < 64; ++r) {
            counts[r] = a2a_count(me, r);
            displs[r] = a2a_sdispl(me, r);
            rcounts[r] = a2a_count(r, me);
            rdispls[r] = a2a_rdispl(me, r);
        }
        if (C_ALLTOALLV == c) {
            return MPI_Alltoallv_init(sbuf, counts, displs, MPI_INT, rbuf, rcounts, rdispls,
                                      MPI_INT, w, none, req);
        }
        for (int r = 0; r < P && r < 64; ++r) { /* byte displacements */
            displs[r] *= (int) sizeof(int32_t);
            rdispls[r] *= (int) sizeof(int32_t);
        }
        return MPI_Alltoallw_init(sbuf, counts, displs, types, rbuf, rcounts, rdispls, types, w,
                                  none, req);
    case C_REDUCE_SCATTER:
        return MPI_Reduce_scatter_init(sbuf, rbuf, counts, MPI_INT, MPI_SUM, w, none, req);
    case C_REDUCE_SCATTER_BLOCK:
        return MPI_Reduce_scatter_block_init(sbuf, rbuf, N, MPI_INT, MPI_SUM, w, none, req);
    default:
        return MPI_ERR_ARG;
    }
}

/* ---- intercommunicators ------------------------------------------------------------------ */

/* The intercommunicator cases: MPI_COMM_WORLD split into a first half (group A, where the
 * rooted calls have their root) and the rest (group B). */
typedef enum {
    I_ALLREDUCE,
    I_BCAST,
    I_REDUCE,
    I_ALLGATHER,
    I_GATHER,
    I_SCATTER,
    I_ALLTOALL,
    I_COUNT
} icoll_t;

static const char *const icoll_names[I_COUNT] = {
    "MPI_Allreduce_init", "MPI_Bcast_init", "MPI_Reduce_init", "MPI_Allgather_init",
    "MPI_Gather_init",    "MPI_Scatter_init", "MPI_Alltoall_init"};

/* One intercommunicator case on rank `me` of MPI_COMM_WORLD; local rank lr in group in_a (A)
 * or B; remote rank r has world rank rw0 + r.  Returns the TAP verdict's inputs. */
static void run_inter_case(icoll_t c, MPI_Comm inter, int in_a, int lr, int nremote, int rw0,
                           int aw0, char *diag, int *ok_out, int *starts_out)
{
    mt_mem_t kind = MT_MEM_DEVICE;
    size_t sn = 0, rn = 0;
    int me = mt_rank, ok = 1, starts_ok = 0, rc, root;
    void *sbuf = NULL, *rbuf = NULL;
    MPI_Request req = MPI_REQUEST_NULL;
    int32_t *sin, *rin, *rexp;

    /* rooted calls: the root is A's local rank 0 */
    root = in_a ? (0 == lr ? MPI_ROOT : MPI_PROC_NULL) : 0;
    switch (c) {
    case I_ALLREDUCE: sn = N; rn = N; break;
    case I_BCAST: rn = (in_a && 0 != lr) ? 0 : N; break;
    case I_REDUCE: sn = in_a ? 0 : N; rn = (MPI_ROOT == root) ? N : 0; break;
    case I_ALLGATHER: sn = N; rn = (size_t) nremote * N; break;
    case I_GATHER: sn = in_a ? 0 : N; rn = (MPI_ROOT == root) ? (size_t) nremote * N : 0; break;
    case I_SCATTER: sn = (MPI_ROOT == root) ? (size_t) nremote * N : 0; rn = in_a ? 0 : N; break;
    case I_ALLTOALL: sn = (size_t) nremote * N; rn = (size_t) nremote * N; break;
    default: break;
    }
    if (0 < sn) {
        sbuf = mt_mem_alloc(kind, sn * 4);
        ok = ok && NULL != sbuf;
    }
    if (0 < rn) {
        rbuf = mt_mem_alloc(kind, rn * 4);
        ok = ok && NULL != rbuf;
    }
    if (!mt_agree(ok)) {
        *ok_out = 0;
        *starts_out = 0;
        mt_diag_add(diag, "allocation failed");
        mt_mem_free(kind, sbuf);
        mt_mem_free(kind, rbuf);
        return;
    }
    switch (c) {
    case I_ALLREDUCE:
        rc = MPI_Allreduce_init(sbuf, rbuf, N, MPI_INT, MPI_SUM, inter, MPI_INFO_NULL, &req);
        break;
    case I_BCAST:
        rc = MPI_Bcast_init(rbuf, N, MPI_INT, root, inter, MPI_INFO_NULL, &req);
        break;
    case I_REDUCE:
        rc = MPI_Reduce_init(sbuf, rbuf, N, MPI_INT, MPI_SUM, root, inter, MPI_INFO_NULL, &req);
        break;
    case I_ALLGATHER:
        rc = MPI_Allgather_init(sbuf, N, MPI_INT, rbuf, N, MPI_INT, inter, MPI_INFO_NULL, &req);
        break;
    case I_GATHER:
        rc = MPI_Gather_init(sbuf, N, MPI_INT, rbuf, N, MPI_INT, root, inter, MPI_INFO_NULL,
                             &req);
        break;
    case I_SCATTER:
        rc = MPI_Scatter_init(sbuf, N, MPI_INT, rbuf, N, MPI_INT, root, inter, MPI_INFO_NULL,
                              &req);
        break;
    default:
        rc = MPI_Alltoall_init(sbuf, N, MPI_INT, rbuf, N, MPI_INT, inter, MPI_INFO_NULL, &req);
        break;
    }
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s: %s; ", icoll_names[c], mt_mpi_error(rc));
        ok = 0;
    }
    sin = calloc(sn + 1, 4);
    rin = calloc(rn + 1, 4);
    rexp = calloc(rn + 1, 4);
    for (int it = 0; MPI_REQUEST_NULL != req && it < STARTS; ++it) {
        int start_ok = 1;
        for (size_t j = 0; j < sn; ++j) {
            sin[j] = val(me, it, (int) j);
        }
        for (size_t j = 0; j < rn; ++j) {
            rin[j] = POISON;
            rexp[j] = POISON;
        }
        switch (c) {
        case I_ALLREDUCE: case I_REDUCE: /* the remote group's sum */
            for (int i = 0; 0 < rn && i < N; ++i) {
                int32_t v = 0;
                for (int r = 0; r < nremote; ++r) {
                    v += val(rw0 + r, it, i);
                }
                rexp[i] = v;
            }
            break;
        case I_BCAST:
            for (int i = 0; 0 < rn && i < N; ++i) {
                rexp[i] = val(aw0, it, i);
                if (MPI_ROOT == root) {
                    rin[i] = rexp[i];
                }
            }
            break;
        case I_ALLGATHER: case I_GATHER:
            for (int r = 0; 0 < rn && r < nremote; ++r) {
                for (int i = 0; i < N; ++i) {
                    rexp[r * N + i] = val(rw0 + r, it, i);
                }
            }
            break;
        case I_SCATTER:
            for (int i = 0; 0 < rn && i < N; ++i) {
                rexp[i] = val(aw0, it, lr * N + i);
            }
            break;
        default: /* alltoall: block r from remote rank r, its block for me */
            for (int r = 0; r < nremote; ++r) {
                for (int i = 0; i < N; ++i) {
                    rexp[r * N + i] = val(rw0 + r, it, lr * N + i);
                }
            }
            break;
        }
        if ((0 < sn && 0 != mt_mem_put(kind, sbuf, sin, sn * 4))
            || (0 < rn && 0 != mt_mem_put(kind, rbuf, rin, rn * 4))) {
            start_ok = 0;
        }
        rc = MPI_Start(&req);
        if (MPI_SUCCESS == rc) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "start %d: %s; ", it, mt_mpi_error(rc));
            start_ok = 0;
        }
        if (start_ok && 0 < rn && 0 != mt_mem_get(kind, rin, rbuf, rn * 4)) {
            start_ok = 0;
        }
        for (size_t j = 0; start_ok && j < rn; ++j) {
            if (rin[j] != rexp[j]) {
                mt_diag_add(diag, "start %d: element %zu: expected %d got %d; ", it, j,
                            (int) rexp[j], (int) rin[j]);
                start_ok = 0;
            }
        }
        starts_ok += start_ok;
        ok = ok && start_ok;
    }
    if (MPI_REQUEST_NULL != req && MPI_SUCCESS != MPI_Request_free(&req)) {
        mt_diag_add(diag, "MPI_Request_free failed; ");
        ok = 0;
    }
    free(sin);
    free(rin);
    free(rexp);
    mt_mem_free(kind, sbuf);
    mt_mem_free(kind, rbuf);
    *ok_out = ok;
    *starts_out = starts_ok;
}

static int run_inter(void)
{
    int na = mt_size / 2, in_a = mt_rank < na, lr, nremote, rw0;
    MPI_Comm local, inter;
    char diag[MT_DIAG_LEN];

    if (mt_size < 2) {
        mt_skip_all("an intercommunicator needs 2 ranks or more");
    }
    MPI_Comm_split(MPI_COMM_WORLD, in_a, mt_rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, in_a ? na : 0, 77, &inter);
    MPI_Comm_rank(local, &lr);
    MPI_Comm_remote_size(inter, &nremote);
    rw0 = in_a ? na : 0;
    tap_diag("%d ranks: an intercommunicator of %d and %d, device buffers, %d starts per request",
             mt_size, na, mt_size - na, STARTS);
    for (int ci = 0; ci < I_COUNT; ++ci) {
        int ok = 0, starts_ok = 0;
        mt_set_case(icoll_names[ci]);
        diag[0] = '\0';
        run_inter_case((icoll_t) ci, inter, in_a, lr, nremote, rw0, 0, diag, &ok, &starts_ok);
        mt_check(ok, diag, "%s on an intercommunicator, device buffers: %d of %d starts right",
                 icoll_names[ci], starts_ok, STARTS);
    }
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
    return mt_finish();
}

/* ---- neighborhood collectives ------------------------------------------------------------ */

/* On a 1-D cartesian topology every rank has two neighbors, left (block 0) and right (block 1);
 * without periods the ends have MPI_PROC_NULL there, whose blocks must keep their poison. */
typedef enum {
    NB_ALLGATHER,
    NB_ALLGATHERV,
    NB_ALLTOALL,
    NB_ALLTOALLV,
    NB_ALLTOALLW,
    NB_COUNT
} ncoll_t;

static const char *const ncoll_names[NB_COUNT] = {
    "MPI_Neighbor_allgather_init", "MPI_Neighbor_allgatherv_init", "MPI_Neighbor_alltoall_init",
    "MPI_Neighbor_alltoallv_init", "MPI_Neighbor_alltoallw_init"};

static int nb_scount(int r) /* allgatherv: what rank r sends */
{
    return N + r % 3;
}

static int nb_count(int s, int k) /* alltoallv/w: what rank s sends to its neighbor k */
{
    return 1 + (s + k) % 3;
}

static void run_neighbor_case(ncoll_t c, MPI_Comm cart, int periodic, char *diag, int *ok_out,
                              int *starts_out)
{
    mt_mem_t kind = MT_MEM_DEVICE;
    int me = mt_rank, P = mt_size, ok = 1, starts_ok = 0, rc;
    int nbr[2], scounts[2], sdispls[2], rcounts[2], rdispls[2];
    MPI_Aint sdispa[2], rdispa[2];
    MPI_Datatype types[2] = {MPI_INT, MPI_INT};
    size_t sn = 0, rn = 0;
    void *sbuf, *rbuf;
    int32_t *sin, *rin, *rexp;
    MPI_Request req = MPI_REQUEST_NULL;

    nbr[0] = periodic ? (me + P - 1) % P : (0 < me ? me - 1 : MPI_PROC_NULL);
    nbr[1] = periodic ? (me + 1) % P : (me + 1 < P ? me + 1 : MPI_PROC_NULL);
    for (int k = 0; k < 2; ++k) {
        switch (c) {
        case NB_ALLGATHER: case NB_ALLTOALL:
            scounts[k] = N;
            rcounts[k] = N;
            break;
        case NB_ALLGATHERV:
            scounts[k] = nb_scount(me);
            rcounts[k] = MPI_PROC_NULL == nbr[k] ? 1 : nb_scount(nbr[k]);
            break;
        default: /* from my neighbor k, the block it sends to its neighbor 1 - k (me) */
            scounts[k] = nb_count(me, k);
            rcounts[k] = MPI_PROC_NULL == nbr[k] ? 1 : nb_count(nbr[k], 1 - k);
            break;
        }
    }
    /* the v and w calls with GAP ints of poison between the blocks, the others dense */
    {
        int gap = (NB_ALLGATHER == c || NB_ALLTOALL == c) ? 0 : GAP;
        sdispls[0] = 0;
        sdispls[1] = (NB_ALLGATHER == c || NB_ALLGATHERV == c) ? 0 : scounts[0] + gap;
        rdispls[0] = 0;
        rdispls[1] = rcounts[0] + gap;
    }
    sn = (NB_ALLGATHER == c || NB_ALLGATHERV == c) ? (size_t) scounts[0]
                                                  : (size_t) (sdispls[1] + scounts[1]);
    rn = (size_t) (rdispls[1] + rcounts[1]);
    for (int k = 0; k < 2; ++k) {
        sdispa[k] = (MPI_Aint) sdispls[k] * 4;
        rdispa[k] = (MPI_Aint) rdispls[k] * 4;
    }
    sbuf = mt_mem_alloc(kind, sn * 4);
    rbuf = mt_mem_alloc(kind, rn * 4);
    if (!mt_agree(NULL != sbuf && NULL != rbuf)) {
        mt_diag_add(diag, "allocation failed");
        *ok_out = 0;
        *starts_out = 0;
        mt_mem_free(kind, sbuf);
        mt_mem_free(kind, rbuf);
        return;
    }
    switch (c) {
    case NB_ALLGATHER:
        rc = MPI_Neighbor_allgather_init(sbuf, N, MPI_INT, rbuf, N, MPI_INT, cart, MPI_INFO_NULL,
                                         &req);
        break;
    case NB_ALLGATHERV:
        rc = MPI_Neighbor_allgatherv_init(sbuf, scounts[0], MPI_INT, rbuf, rcounts, rdispls,
                                          MPI_INT, cart, MPI_INFO_NULL, &req);
        break;
    case NB_ALLTOALL:
        rc = MPI_Neighbor_alltoall_init(sbuf, N, MPI_INT, rbuf, N, MPI_INT, cart, MPI_INFO_NULL,
                                        &req);
        break;
    case NB_ALLTOALLV:
        rc = MPI_Neighbor_alltoallv_init(sbuf, scounts, sdispls, MPI_INT, rbuf, rcounts,
                                         rdispls, MPI_INT, cart, MPI_INFO_NULL, &req);
        break;
    default:
        rc = MPI_Neighbor_alltoallw_init(sbuf, scounts, sdispa, types, rbuf, rcounts, rdispa,
                                         types, cart, MPI_INFO_NULL, &req);
        break;
    }
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s: %s; ", ncoll_names[c], mt_mpi_error(rc));
        ok = 0;
    }
    sin = calloc(sn + 1, 4);
    rin = calloc(rn + 1, 4);
    rexp = calloc(rn + 1, 4);
    for (int it = 0; MPI_REQUEST_NULL != req && it < STARTS; ++it) {
        int start_ok = 1;
        /* element i of the block for neighbor k: val(me, it, 100 * k + i) (allgather: k = 0) */
        for (size_t j = 0; j < sn; ++j) {
            sin[j] = POISON;
        }
        for (int k = 0; k < 2; ++k) {
            for (int i = 0; i < scounts[k]; ++i) {
                int kk = (NB_ALLGATHER == c || NB_ALLGATHERV == c) ? 0 : k;
                sin[sdispls[k] + i] = val(me, it, 100 * kk + i);
            }
        }
        for (size_t j = 0; j < rn; ++j) {
            rin[j] = POISON;
            rexp[j] = POISON;
        }
        for (int k = 0; k < 2; ++k) {
            int kk = (NB_ALLGATHER == c || NB_ALLGATHERV == c) ? 0 : 1 - k;
            for (int i = 0; MPI_PROC_NULL != nbr[k] && i < rcounts[k]; ++i) {
                rexp[rdispls[k] + i] = val(nbr[k], it, 100 * kk + i);
            }
        }
        if (0 != mt_mem_put(kind, sbuf, sin, sn * 4)
            || 0 != mt_mem_put(kind, rbuf, rin, rn * 4)) {
            start_ok = 0;
        }
        rc = MPI_Start(&req);
        if (MPI_SUCCESS == rc) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "start %d: %s; ", it, mt_mpi_error(rc));
            start_ok = 0;
        }
        if (start_ok && 0 != mt_mem_get(kind, rin, rbuf, rn * 4)) {
            start_ok = 0;
        }
        for (size_t j = 0; start_ok && j < rn; ++j) {
            if (rin[j] != rexp[j]) {
                mt_diag_add(diag, "start %d: element %zu: expected %d got %d; ", it, j,
                            (int) rexp[j], (int) rin[j]);
                start_ok = 0;
            }
        }
        starts_ok += start_ok;
        ok = ok && start_ok;
    }
    if (MPI_REQUEST_NULL != req && MPI_SUCCESS != MPI_Request_free(&req)) {
        mt_diag_add(diag, "MPI_Request_free failed; ");
        ok = 0;
    }
    free(sin);
    free(rin);
    free(rexp);
    mt_mem_free(kind, sbuf);
    mt_mem_free(kind, rbuf);
    *ok_out = ok;
    *starts_out = starts_ok;
}

static int run_neighbor(void)
{
    char diag[MT_DIAG_LEN];

    tap_diag("%d ranks on a 1-D cartesian topology, device buffers, %d starts per request",
             mt_size, STARTS);
    for (int periodic = 1; periodic >= 0; --periodic) {
        MPI_Comm cart;
        int dims[1] = {mt_size}, periods[1] = {periodic};
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
        for (int ci = 0; ci < NB_COUNT; ++ci) {
            int ok = 0, starts_ok = 0;
            mt_set_case(ncoll_names[ci]);
            diag[0] = '\0';
            run_neighbor_case((ncoll_t) ci, cart, periodic, diag, &ok, &starts_ok);
            mt_check(ok, diag, "%s on a %s ring, device buffers: %d of %d starts right",
                     ncoll_names[ci], periodic ? "periodic" : "non-periodic", starts_ok,
                     STARTS);
        }
        MPI_Comm_free(&cart);
    }
    return mt_finish();
}

/* ---- test_persistent team: MPI_Allreduce_init and MPI_Bcast_init on the team's path -------- */

#define TEAM_STARTS 8 /* starts per request in the "many" cases */
#define TEAM_NREQ 4   /* requests started together */

static const int team_counts[] = {1, 1021, 65537};
static unsigned team_round = 100; /* the data of every start is new: the round never repeats */
static int team_inits_ar, team_inits_bc, team_inits_user;
static int team_nofree;

typedef enum { PQ_ALLREDUCE, PQ_IN_PLACE, PQ_BCAST, PQ_USER_OP } pq_kind_t;

/* One persistent request on device buffers and the round of its current start. */
typedef struct {
    pq_kind_t kind;
    int count, root;
    void *sbuf, *rbuf;
    MPI_Request req;
    unsigned round;
} preq_t;

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void) dt;
    for (int i = 0; i < *len; ++i) {
        ((int32_t *) inout)[i] += ((const int32_t *) in)[i];
    }
}

static MPI_Op team_user_op = MPI_OP_NULL;
static MPI_Comm preq_comm = MPI_COMM_WORLD; /* where preq_init makes its request */

/* Device buffers and the request (not started); 0 on success on this rank. */
static int preq_init(preq_t *q, pq_kind_t kind, int count, int root, char *diag)
{
    size_t bytes = (size_t) count * sizeof(int32_t);
    int rc = MPI_SUCCESS;

    q->kind = kind;
    q->count = count;
    q->root = root;
    q->req = MPI_REQUEST_NULL;
    q->sbuf = (PQ_ALLREDUCE == kind || PQ_USER_OP == kind) ? mt_mem_alloc(MT_MEM_DEVICE, bytes)
                                                           : NULL;
    q->rbuf = mt_mem_alloc(MT_MEM_DEVICE, bytes);
    if (NULL == q->rbuf || ((PQ_ALLREDUCE == kind || PQ_USER_OP == kind) && NULL == q->sbuf)) {
        mt_diag_add(diag, "device allocation failed; ");
        return -1;
    }
    switch (kind) {
    case PQ_ALLREDUCE:
        rc = MPI_Allreduce_init(q->sbuf, q->rbuf, count, MPI_INT32_T, MPI_SUM, preq_comm,
                                MPI_INFO_NULL, &q->req);
        ++team_inits_ar;
        break;
    case PQ_IN_PLACE:
        rc = MPI_Allreduce_init(MPI_IN_PLACE, q->rbuf, count, MPI_INT32_T, MPI_SUM,
                                preq_comm, MPI_INFO_NULL, &q->req);
        ++team_inits_ar;
        break;
    case PQ_BCAST:
        rc = MPI_Bcast_init(q->rbuf, count, MPI_INT32_T, root, preq_comm, MPI_INFO_NULL,
                            &q->req);
        ++team_inits_bc;
        break;
    case PQ_USER_OP:
        rc = MPI_Allreduce_init(q->sbuf, q->rbuf, count, MPI_INT32_T, team_user_op,
                                preq_comm, MPI_INFO_NULL, &q->req);
        ++team_inits_user;
        break;
    }
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "init: %s; ", mt_mpi_error(rc));
        q->req = MPI_REQUEST_NULL;
        return -1;
    }
    return 0;
}

static void preq_free(preq_t *q, int *ok, char *diag)
{
    if (MPI_REQUEST_NULL != q->req) {
        int rc = MPI_Request_free(&q->req);
        if (MPI_SUCCESS != rc || MPI_REQUEST_NULL != q->req) {
            mt_diag_add(diag, "MPI_Request_free: %s; ", mt_mpi_error(rc));
            *ok = 0;
        }
    }
    mt_mem_free(MT_MEM_DEVICE, q->sbuf);
    mt_mem_free(MT_MEM_DEVICE, q->rbuf);
    q->sbuf = q->rbuf = NULL;
}

/* Element i of q's input on rank r in its current round. */
static int32_t preq_in(const preq_t *q, int r, int i)
{
    return val(r, (int) q->round, i);
}

/* Before a start: a new round, fresh input, poisoned output; 0 on success. */
static int preq_fill(preq_t *q)
{
    int32_t *in = malloc((size_t) q->count * sizeof(int32_t));
    int32_t *out = malloc((size_t) q->count * sizeof(int32_t));
    int rc = -1;

    q->round = team_round++;
    if (NULL != in && NULL != out) {
        for (int i = 0; i < q->count; ++i) {
            in[i] = preq_in(q, mt_rank, i);
            out[i] = POISON;
        }
        switch (q->kind) {
        case PQ_ALLREDUCE:
        case PQ_USER_OP:
            rc = mt_mem_put(MT_MEM_DEVICE, q->sbuf, in, (size_t) q->count * 4)
                 | mt_mem_put(MT_MEM_DEVICE, q->rbuf, out, (size_t) q->count * 4);
            break;
        case PQ_IN_PLACE:
            rc = mt_mem_put(MT_MEM_DEVICE, q->rbuf, in, (size_t) q->count * 4);
            break;
        case PQ_BCAST:
            rc = mt_mem_put(MT_MEM_DEVICE, q->rbuf, mt_rank == q->root ? in : out,
                            (size_t) q->count * 4);
            break;
        }
    }
    free(in);
    free(out);
    return rc;
}

/* After completion: the result against the host reference; 1 when right. */
static int preq_right(const preq_t *q, const char *when, char *diag)
{
    int32_t *got = malloc((size_t) q->count * sizeof(int32_t));
    int ok = NULL != got
             && 0 == mt_mem_get(MT_MEM_DEVICE, got, q->rbuf, (size_t) q->count * 4);

    if (!ok) {
        mt_diag_add(diag, "%s: reading the result failed; ", when);
    }
    for (int i = 0; ok && i < q->count; ++i) {
        int32_t want = 0;
        if (PQ_BCAST == q->kind) {
            want = preq_in(q, q->root, i);
        } else {
            for (int r = 0; r < mt_size; ++r) {
                want += preq_in(q, r, i);
            }
        }
        if (got[i] != want) {
            mt_diag_add(diag, "%s: %s of %d (root %d), element %d: expected %d got %d; ", when,
                        PQ_BCAST == q->kind ? "bcast" : "allreduce", q->count, q->root, i,
                        (int) want, (int) got[i]);
            ok = 0;
        }
    }
    free(got);
    return ok;
}

/* Start q (fresh data), complete it (MPI_Wait, or an MPI_Test loop), check it. */
static int preq_run(preq_t *q, int use_test, const char *when, char *diag)
{
    int rc, ok = 0 == preq_fill(q);

    rc = MPI_Start(&q->req);
    if (MPI_SUCCESS == rc && use_test) {
        int flag = 0;
        while (MPI_SUCCESS == rc && !flag) {
            rc = MPI_Test(&q->req, &flag, MPI_STATUS_IGNORE);
        }
    } else if (MPI_SUCCESS == rc) {
        rc = MPI_Wait(&q->req, MPI_STATUS_IGNORE);
    }
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "%s: %s; ", when, mt_mpi_error(rc));
        return 0;
    }
    return ok && preq_right(q, when, diag);
}

/* Many starts of one request: allreduce (in place and not) and bcast from every root. */
static void team_many(void)
{
    char diag[MT_DIAG_LEN], when[64];

    for (size_t c = 0; c < sizeof(team_counts) / sizeof(team_counts[0]); ++c) {
        int count = team_counts[c];
        for (int k = PQ_ALLREDUCE; k <= PQ_BCAST; ++k) {
            int roots = (PQ_BCAST == k) ? mt_size : 1, starts_ok = 0, ok = 1;
            mt_set_case(PQ_BCAST == k ? "team: many starts, bcast" : "team: many starts, allreduce");
            diag[0] = '\0';
            for (int root = 0; root < roots; ++root) {
                preq_t q;
                int go = mt_agree(0 == preq_init(&q, (pq_kind_t) k, count, root, diag));
                ok = go && ok;
                /* a rank whose result is wrong still takes part in every start */
                for (int it = 0; go && it < TEAM_STARTS; ++it) {
                    int right;
                    snprintf(when, sizeof(when), "root %d start %d", root, it);
                    right = preq_run(&q, it % 2, when, diag);
                    starts_ok += right;
                    ok = ok && right;
                }
                preq_free(&q, &ok, diag);
            }
            mt_check(ok, diag, "%s of %d int32 (%s), device buffers: %d of %d starts right, "
                     "fresh data into a poisoned output each time",
                     PQ_BCAST == k ? "MPI_Bcast_init" : "MPI_Allreduce_init", count,
                     PQ_BCAST == k ? "every root" : PQ_IN_PLACE == k ? "MPI_IN_PLACE" : "sum",
                     starts_ok, TEAM_STARTS * roots);
        }
    }
}

/* Several requests started together and completed in different orders. */
static void team_together(void)
{
    preq_t q[TEAM_NREQ];
    MPI_Request reqs[TEAM_NREQ];
    char diag[MT_DIAG_LEN];
    const int rounds = 5;
    int ok = 1, rounds_ok = 0;

    mt_set_case("team: requests together");
    diag[0] = '\0';
    ok = 0 == preq_init(&q[0], PQ_ALLREDUCE, 1021, 0, diag);
    ok = 0 == preq_init(&q[1], PQ_IN_PLACE, 65537, 0, diag) && ok;
    ok = 0 == preq_init(&q[2], PQ_BCAST, 1021, 0, diag) && ok;
    ok = 0 == preq_init(&q[3], PQ_BCAST, 65537, mt_size - 1, diag) && ok;
    ok = mt_agree(ok);
    for (int round = 0; ok && round < rounds; ++round) {
        int rc = MPI_SUCCESS, right = 1;
        for (int i = 0; i < TEAM_NREQ; ++i) {
            right = (0 == preq_fill(&q[i])) && right;
            reqs[i] = q[i].req;
        }
        /* every rank starts in the same order; completion orders differ between rounds */
        if (2 == round) {
            for (int i = 0; MPI_SUCCESS == rc && i < TEAM_NREQ; ++i) {
                rc = MPI_Start(&reqs[i]);
            }
        } else if (4 == round) {
            for (int i = TEAM_NREQ - 1; MPI_SUCCESS == rc && i >= 0; --i) {
                rc = MPI_Start(&reqs[i]);
            }
        } else {
            rc = MPI_Startall(TEAM_NREQ, reqs);
        }
        if (MPI_SUCCESS == rc && 1 == round) { /* MPI_Waitall, reversed */
            MPI_Request rev[TEAM_NREQ];
            for (int i = 0; i < TEAM_NREQ; ++i) {
                rev[i] = reqs[TEAM_NREQ - 1 - i];
            }
            rc = MPI_Waitall(TEAM_NREQ, rev, MPI_STATUSES_IGNORE);
        } else if (MPI_SUCCESS == rc && 2 == round) { /* MPI_Testall */
            int flag = 0;
            while (MPI_SUCCESS == rc && !flag) {
                rc = MPI_Testall(TEAM_NREQ, reqs, &flag, MPI_STATUSES_IGNORE);
            }
        } else if (MPI_SUCCESS == rc && 3 == round) { /* MPI_Test, a rank's own order */
            int left = TEAM_NREQ, done[TEAM_NREQ] = {0};
            while (MPI_SUCCESS == rc && 0 < left) {
                for (int j = 0; MPI_SUCCESS == rc && j < TEAM_NREQ; ++j) {
                    int i = (j + mt_rank) % TEAM_NREQ, flag = 0;
                    if (!done[i]) {
                        rc = MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
                        if (flag) {
                            done[i] = 1;
                            --left;
                        }
                    }
                }
            }
        } else if (MPI_SUCCESS == rc) { /* MPI_Waitall, in order */
            rc = MPI_Waitall(TEAM_NREQ, reqs, MPI_STATUSES_IGNORE);
        }
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "round %d: %s; ", round, mt_mpi_error(rc));
            right = 0;
        }
        for (int i = 0; MPI_SUCCESS == rc && i < TEAM_NREQ; ++i) {
            char when[32];
            snprintf(when, sizeof(when), "round %d", round);
            right = preq_right(&q[i], when, diag) && right;
        }
        ok = mt_agree(right); /* the same verdict on every rank: no rank starts alone */
        rounds_ok += ok;
    }
    for (int i = 0; i < TEAM_NREQ; ++i) {
        preq_free(&q[i], &ok, diag);
    }
    mt_check(ok, diag, "%d requests started together (MPI_Startall, MPI_Start in and against "
             "order), completed by MPI_Waitall (in and against order), MPI_Testall, MPI_Test in "
             "each rank's order: %d of %d rounds right",
             TEAM_NREQ, rounds_ok, rounds);
}

/* Blocking and nonblocking device collectives on the same communicator while persistent ones
 * run. */
static void team_interleaved(void)
{
    enum { NB = 777 };
    preq_t a, b, c;
    char diag[MT_DIAG_LEN];
    int ok, rounds_ok = 0;
    int32_t *host = malloc(NB * sizeof(int32_t)), *want = malloc(NB * sizeof(int32_t));
    void *x = mt_mem_alloc(MT_MEM_DEVICE, NB * 4), *y = mt_mem_alloc(MT_MEM_DEVICE, NB * 4);
    void *z = mt_mem_alloc(MT_MEM_DEVICE, NB * 4), *w = mt_mem_alloc(MT_MEM_DEVICE, NB * 4);

    mt_set_case("team: interleaved");
    diag[0] = '\0';
    ok = NULL != host && NULL != want && NULL != x && NULL != y && NULL != z && NULL != w;
    ok = 0 == preq_init(&a, PQ_ALLREDUCE, 1021, 0, diag) && ok;
    ok = 0 == preq_init(&b, PQ_IN_PLACE, 4099, 0, diag) && ok;
    ok = 0 == preq_init(&c, PQ_BCAST, 1021, 1 % mt_size, diag) && ok;
    ok = mt_agree(ok);
    for (int round = 0; ok && round < 3; ++round) {
        MPI_Request nb[2], all[5];
        unsigned k = team_round;
        int rc, right = 1;

        team_round += 8;
        right = 0 == preq_fill(&a) && 0 == preq_fill(&c);
        rc = MPI_Start(&a.req);
        rc = (MPI_SUCCESS == rc) ? MPI_Start(&c.req) : rc;
        /* a blocking allreduce while they run: x (input) -> y */
        for (int i = 0; i < NB; ++i) {
            host[i] = val(mt_rank, (int) k, i);
        }
        right = 0 == mt_mem_put(MT_MEM_DEVICE, x, host, NB * 4) && right;
        rc = (MPI_SUCCESS == rc)
                 ? MPI_Allreduce(x, y, NB, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD)
                 : rc;
        /* a nonblocking allreduce in place on z and bcast on w, and a persistent one more */
        for (int i = 0; i < NB; ++i) {
            host[i] = val(mt_rank, (int) k + 1, i);
        }
        right = 0 == mt_mem_put(MT_MEM_DEVICE, z, host, NB * 4) && right;
        for (int i = 0; i < NB; ++i) {
            host[i] = (0 == mt_rank) ? val(0, (int) k + 2, i) : POISON;
        }
        right = 0 == mt_mem_put(MT_MEM_DEVICE, w, host, NB * 4) && right;
        right = 0 == preq_fill(&b) && right;
        rc = (MPI_SUCCESS == rc)
                 ? MPI_Iallreduce(MPI_IN_PLACE, z, NB, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD,
                                  &nb[0])
                 : rc;
        rc = (MPI_SUCCESS == rc) ? MPI_Start(&b.req) : rc;
        rc = (MPI_SUCCESS == rc) ? MPI_Ibcast(w, NB, MPI_INT32_T, 0, MPI_COMM_WORLD, &nb[1]) : rc;
        /* a blocking bcast of x from the last rank while all of them run */
        for (int i = 0; i < NB; ++i) {
            host[i] = (mt_size - 1 == mt_rank) ? val(mt_size - 1, (int) k + 3, i) : POISON;
        }
        right = 0 == mt_mem_put(MT_MEM_DEVICE, x, host, NB * 4) && right;
        rc = (MPI_SUCCESS == rc) ? MPI_Bcast(x, NB, MPI_INT32_T, mt_size - 1, MPI_COMM_WORLD)
                                 : rc;
        all[0] = nb[1];
        all[1] = b.req;
        all[2] = a.req;
        all[3] = nb[0];
        all[4] = c.req;
        rc = (MPI_SUCCESS == rc) ? MPI_Waitall(5, all, MPI_STATUSES_IGNORE) : rc;
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "round %d: %s; ", round, mt_mpi_error(rc));
            right = 0;
        }
        right = right && preq_right(&a, "persistent allreduce", diag)
                && preq_right(&b, "persistent allreduce in place", diag)
                && preq_right(&c, "persistent bcast", diag);
        for (int j = 0; right && j < 4; ++j) {
            void *buf = (0 == j) ? y : (1 == j) ? z : (2 == j) ? w : x;
            const char *what = (0 == j)   ? "blocking allreduce"
                               : (1 == j) ? "nonblocking allreduce"
                               : (2 == j) ? "nonblocking bcast"
                                          : "blocking bcast";
            for (int i = 0; i < NB; ++i) {
                want[i] = 0;
                if (2 == j) {
                    want[i] = val(0, (int) k + 2, i);
                } else if (3 == j) {
                    want[i] = val(mt_size - 1, (int) k + 3, i);
                } else {
                    for (int r = 0; r < mt_size; ++r) {
                        want[i] += val(r, (int) k + j, i);
                    }
                }
            }
            right = 0 == mt_mem_get(MT_MEM_DEVICE, host, buf, NB * 4);
            for (int i = 0; right && i < NB; ++i) {
                if (host[i] != want[i]) {
                    mt_diag_add(diag, "round %d: %s, element %d: expected %d got %d; ", round,
                                what, i, (int) want[i], (int) host[i]);
                    right = 0;
                }
            }
        }
        ok = mt_agree(right);
        rounds_ok += ok;
    }
    preq_free(&a, &ok, diag);
    preq_free(&b, &ok, diag);
    preq_free(&c, &ok, diag);
    mt_check(ok, diag, "persistent allreduce, allreduce in place and bcast started while blocking "
             "MPI_Allreduce, MPI_Bcast and nonblocking MPI_Iallreduce, MPI_Ibcast run on the "
             "same communicator: %d of 3 rounds right", rounds_ok);
    free(host);
    free(want);
    mt_mem_free(MT_MEM_DEVICE, x);
    mt_mem_free(MT_MEM_DEVICE, y);
    mt_mem_free(MT_MEM_DEVICE, z);
    mt_mem_free(MT_MEM_DEVICE, w);
}

/* MPI_Request_free of an inactive request (never started, or after completion), and of a
 * started one (its call still completes: the next call on the team's queue waits for it). */
static void team_freed(void)
{
    preq_t q, f, g;
    char diag[MT_DIAG_LEN];
    int ok = 1, go, rc;

    mt_set_case("team: freed");
    diag[0] = '\0';
    memset(&f, 0, sizeof(f));
    memset(&g, 0, sizeof(g));
    f.req = g.req = MPI_REQUEST_NULL;
    /* never started */
    ok = mt_agree(0 == preq_init(&q, PQ_ALLREDUCE, 1021, 0, diag));
    preq_free(&q, &ok, diag);
    /* after completion: MPI_Wait, and an MPI_Test loop */
    go = mt_agree(0 == preq_init(&q, PQ_BCAST, 65537, 0, diag));
    ok = mt_agree(go && preq_run(&q, 0, "bcast before its free", diag)) && ok;
    preq_free(&q, &ok, diag);
    go = mt_agree(0 == preq_init(&q, PQ_IN_PLACE, 1021, 0, diag));
    ok = mt_agree(go && preq_run(&q, 1, "allreduce before its free", diag)) && ok;
    preq_free(&q, &ok, diag);
    if (!team_nofree) {
        /* while active: f is freed at once, g (behind it on the team's queue) waited for */
        int right;
        go = 0 == preq_init(&f, PQ_ALLREDUCE, 65537, 0, diag);
        go = mt_agree(0 == preq_init(&g, PQ_BCAST, 1021, mt_size - 1, diag) && go);
        right = go && 0 == preq_fill(&f) && 0 == preq_fill(&g);
        rc = go ? MPI_Start(&f.req) : MPI_ERR_OTHER;
        rc = (MPI_SUCCESS == rc) ? MPI_Request_free(&f.req) : rc;
        if (MPI_SUCCESS == rc && MPI_REQUEST_NULL != f.req) {
            mt_diag_add(diag, "MPI_Request_free left the handle; ");
            right = 0;
        }
        rc = (MPI_SUCCESS == rc) ? MPI_Start(&g.req) : rc;
        rc = (MPI_SUCCESS == rc) ? MPI_Wait(&g.req, MPI_STATUS_IGNORE) : rc;
        if (go && MPI_SUCCESS != rc) {
            mt_diag_add(diag, "free while active: %s; ", mt_mpi_error(rc));
            right = 0;
        }
        right = right && preq_right(&f, "the request freed while active", diag)
                && preq_right(&g, "the next request", diag);
        ok = mt_agree(right) && ok;
        preq_free(&f, &ok, diag);
        preq_free(&g, &ok, diag);
    }
    mt_check(ok, diag, "MPI_Request_free of persistent requests: never started, after "
             "completion%s", team_nofree ? "" : ", and started (its call completes, right)");
}

/* A reduction the team cannot take (a user-defined op): the staged path, right. */
static void team_user(void)
{
    preq_t q;
    char diag[MT_DIAG_LEN];
    int ok, starts_ok = 0;

    mt_set_case("team: user op");
    diag[0] = '\0';
    ok = mt_agree(0 == preq_init(&q, PQ_USER_OP, 1021, 0, diag));
    for (int it = 0; ok && it < 3; ++it) {
        int right = preq_run(&q, 0, "user op", diag);
        starts_ok += right;
        ok = mt_agree(right);
    }
    preq_free(&q, &ok, diag);
    mt_check(ok, diag, "MPI_Allreduce_init with a user-defined op (staged): %d of 3 starts "
             "right", starts_ok);
}

static int run_team(void)
{
    tap_diag("%d ranks, device buffers, MPI_Allreduce_init and MPI_Bcast_init", mt_size);
    MPI_Op_create(user_sum, 1, &team_user_op);
    team_many();
    team_together();
    team_interleaved();
    team_freed();
    team_user();
    MPI_Op_free(&team_user_op);
    if (0 == mt_rank) {
        /* for the wrapper's count of decisions in the verbose log (every rank made these) */
        printf("# inits: allreduce_init %d bcast_init %d user_op %d\n", team_inits_ar,
               team_inits_bc, team_inits_user);
    }
    return mt_finish();
}

/* test_persistent teamfail, run with COLL_GPU_TEST_FAIL_ASYNC naming a rank: that rank fails
 * locally in every call of the team's path; every rank's every start must complete with an
 * error (no hang), with MPI_Wait and with MPI_Waitall, and a host collective works after.
 * Open MPI's error path frees a request that completed with an error (its handle comes back
 * MPI_REQUEST_NULL), so every start here is on a request of its own. */
static int run_teamfail(void)
{
    char diag[MT_DIAG_LEN];
    int errs = 0, ok = 1, want = 0;
    const pq_kind_t kinds[3] = {PQ_ALLREDUCE, PQ_IN_PLACE, PQ_BCAST};

    tap_diag("%d ranks, device buffers, one rank failing locally", mt_size);
    mt_set_case("teamfail");
    diag[0] = '\0';
    for (int it = 0; ok && it < 2; ++it) {
        preq_t q[3];
        MPI_Request reqs[3];
        MPI_Status sts[3];
        int go = 1, rc;

        for (int i = 0; i < 3; ++i) { /* one at a time, MPI_Wait */
            go = mt_agree(0 == preq_init(&q[i], kinds[i], 1021, 0, diag));
            if (go) {
                (void) preq_fill(&q[i]);
                rc = MPI_Start(&q[i].req);
                rc = (MPI_SUCCESS == rc) ? MPI_Wait(&q[i].req, MPI_STATUS_IGNORE) : rc;
                errs += (MPI_SUCCESS != rc);
                ++want;
            }
            preq_free(&q[i], &ok, diag);
            ok = ok && go;
        }
        for (int i = 0; i < 3; ++i) { /* together, MPI_Waitall */
            go = (0 == preq_init(&q[i], kinds[i], 1021, 0, diag)) && go;
            reqs[i] = q[i].req;
            q[i].req = MPI_REQUEST_NULL; /* reqs has it now */
        }
        go = mt_agree(go);
        for (int i = 0; go && i < 3; ++i) {
            (void) preq_fill(&q[i]);
        }
        rc = go ? MPI_Startall(3, reqs) : MPI_ERR_OTHER;
        for (int i = 0; i < 3; ++i) {
            sts[i].MPI_ERROR = MPI_SUCCESS;
        }
        rc = (MPI_SUCCESS == rc) ? MPI_Waitall(3, reqs, sts) : rc;
        /* Open MPI 5.0.7's MPI_Waitall returns MPI_SUCCESS when a persistent request that
         * was still running at its entry completes with an error (it skips the check for
         * persistent requests); the error is in the request's status */
        for (int i = 0; i < 3; ++i) {
            rc = (MPI_SUCCESS == rc) ? sts[i].MPI_ERROR : rc;
        }
        errs += go && (MPI_SUCCESS != rc);
        want += go;
        for (int i = 0; i < 3; ++i) {
            /* those MPI_Waitall left pending (MPI_ERR_PENDING) end before their buffers go */
            if (MPI_REQUEST_NULL != reqs[i]) {
                (void) MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
            }
            if (MPI_REQUEST_NULL != reqs[i]) {
                (void) MPI_Request_free(&reqs[i]);
            }
            preq_free(&q[i], &ok, diag);
        }
        ok = mt_agree(ok && go);
    }
    mt_diag_add(diag, "%d of %d completions returned an error; ", errs, want);
    {
        int one = 1, sum = 0, rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (MPI_SUCCESS != rc || mt_size != sum) {
            mt_diag_add(diag, "host allreduce after: %s, sum %d; ", mt_mpi_error(rc), sum);
            ok = 0;
        }
    }
    mt_check(ok && 0 < want && errs == want, diag, "with one rank failing locally, every start "
             "of MPI_Allreduce_init (in place and not) and MPI_Bcast_init completes with an "
             "error on every rank (MPI_Wait, MPI_Waitall); a host allreduce works after");
    return mt_finish();
}

/* Inits and starts on two fresh dups of world in different orders on different ranks (legal:
 * the order only has to agree per communicator): even ranks make MPI_Allreduce_init and
 * MPI_Bcast_init on A, then on B, odd ranks on B, then on A, and start them in that order, twice,
 * MPI_Waitall each time.  An _init is local and nonblocking in MPI-4: the first one of a fresh
 * communicator must not wait for the other ranks (the node team's setup). */
static int run_crossed(void)
{
    MPI_Comm d[2];
    preq_t q[4]; /* communicator c: q[2c] allreduce, q[2c + 1] bcast */
    char diag[MT_DIAG_LEN] = "";
    int first = mt_rank % 2, ok = 1, go, right = 0;

    mt_set_case("crossed: inits and starts on two fresh communicators in different orders");
    MPI_Comm_dup(MPI_COMM_WORLD, &d[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &d[1]);
    /* a blocking host allreduce on each, in one order: the kinds are agreed (one on every
     * rank), so the inits take the node team, whose setup the first one starts */
    for (int c = 0; c < 2; ++c) {
        int one = 1, sum = 0;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d[c]);
    }
    for (int j = 0; j < 2; ++j) {
        int c = (j + first) % 2;
        preq_comm = d[c];
        ok = 0 == preq_init(&q[2 * c], PQ_ALLREDUCE, 1021, 0, diag) && ok;
        ok = 0 == preq_init(&q[2 * c + 1], PQ_BCAST, 65537, mt_size - 1, diag) && ok;
    }
    preq_comm = MPI_COMM_WORLD;
    go = mt_agree(ok);
    for (int round = 0; go && round < 2; ++round) {
        MPI_Request reqs[4];
        char when[48];
        int rc = MPI_SUCCESS;
        for (int i = 0; i < 4; ++i) {
            ok = 0 == preq_fill(&q[i]) && ok;
        }
        for (int j = 0; j < 2; ++j) {
            int c = (j + first) % 2;
            rc = (MPI_SUCCESS == rc) ? MPI_Start(&q[2 * c].req) : rc;
            rc = (MPI_SUCCESS == rc) ? MPI_Start(&q[2 * c + 1].req) : rc;
        }
        for (int i = 0; i < 4; ++i) {
            reqs[i] = q[i].req;
        }
        rc = (MPI_SUCCESS == rc) ? MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE) : rc;
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "round %d: %s; ", round, mt_mpi_error(rc));
            ok = 0;
            break;
        }
        for (int i = 0; i < 4; ++i) {
            snprintf(when, sizeof(when), "round %d, %s on dup %c", round,
                     0 == i % 2 ? "allreduce" : "bcast", 'A' + i / 2);
            if (preq_right(&q[i], when, diag)) {
                ++right;
            } else {
                ok = 0;
            }
        }
    }
    for (int i = 0; i < 4; ++i) {
        preq_free(&q[i], &ok, diag);
    }
    MPI_Comm_free(&d[0]);
    MPI_Comm_free(&d[1]);
    mt_check(go && ok, diag, "crossed: MPI_Allreduce_init and MPI_Bcast_init on two fresh dups, "
             "made and started in different orders on even and odd ranks, MPI_Waitall, twice: "
             "%d of 8 results right", right);
    return mt_finish();
}

int main(int argc, char **argv)
{
    int mixed = 0;
    char why[300], diag[MT_DIAG_LEN];

    mt_init(&argc, &argv);
    if (argc > 1 && 0 == strcmp(argv[1], "mixed")) {
        mixed = 1;
    }
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    if (mt_size > 64) {
        mt_skip_all("more than 64 ranks");
    }
    if (argc > 1 && 0 == strcmp(argv[1], "inter")) {
        return run_inter();
    }
    if (argc > 1 && 0 == strcmp(argv[1], "neighbor")) {
        return run_neighbor();
    }
    if (argc > 1 && 0 == strcmp(argv[1], "team")) {
        team_nofree = (argc > 2 && 0 == strcmp(argv[2], "nofree"));
        return run_team();
    }
    if (argc > 1 && 0 == strcmp(argv[1], "teamfail")) {
        return run_teamfail();
    }
    if (argc > 1 && 0 == strcmp(argv[1], "crossed")) {
        return run_crossed();
    }
    tap_diag("%d ranks, %s buffers, %d starts per request", mt_size,
             mixed ? "device (even ranks) and host (odd ranks)" : "device", STARTS);

    for (int ci = 0; ci < C_COUNT; ++ci) {
        coll_t c = (coll_t) ci;
        mt_mem_t kind = (mixed && 1 == mt_rank % 2) ? MT_MEM_HOST : MT_MEM_DEVICE;
        case_t k;
        void *sbuf = NULL, *rbuf = NULL;
        MPI_Request req = MPI_REQUEST_NULL;
        int ok = 1, rc, starts_ok = 0;

        mt_set_case(coll_names[c]);
        diag[0] = '\0';
        build(c, mt_rank, mt_size, 0, &k);
        if (0 < k.sn) {
            sbuf = mt_mem_alloc(kind, k.sn * sizeof(int32_t));
            ok = ok && NULL != sbuf;
        }
        if (0 < k.rn) {
            rbuf = mt_mem_alloc(kind, k.rn * sizeof(int32_t));
            ok = ok && NULL != rbuf;
        }
        release(&k);
        if (!mt_agree(ok)) {
            mt_check(0, "allocation failed", "%s: buffers", coll_names[c]);
            continue;
        }
        rc = init(c, &k, mt_size, mt_rank, sbuf, rbuf, &req);
        if (MPI_SUCCESS != rc) {
            mt_diag_add(diag, "%s: %s; ", coll_names[c], mt_mpi_error(rc));
            ok = 0;
        }
        /* one request, started STARTS times, fresh data and a fresh poison each time; a rank
         * whose result is wrong still takes part in every start (its peers would hang) */
        for (int it = 0; MPI_REQUEST_NULL != req && it < STARTS; ++it) {
            int32_t *got;
            int start_ok = 1;
            build(c, mt_rank, mt_size, it, &k);
            got = malloc((k.rn + 1) * sizeof(int32_t));
            if (0 < k.sn && 0 != mt_mem_put(kind, sbuf, k.sin, k.sn * sizeof(int32_t))) {
                start_ok = 0;
            }
            if (0 < k.rn && 0 != mt_mem_put(kind, rbuf, k.rin, k.rn * sizeof(int32_t))) {
                start_ok = 0;
            }
            rc = MPI_Start(&req);
            if (MPI_SUCCESS != rc) {
                mt_diag_add(diag, "start %d: MPI_Start: %s; ", it, mt_mpi_error(rc));
                start_ok = 0;
            } else {
                MPI_Status st;
                rc = MPI_Wait(&req, &st);
                if (MPI_SUCCESS != rc) {
                    mt_diag_add(diag, "start %d: MPI_Wait: %s; ", it, mt_mpi_error(rc));
                    start_ok = 0;
                }
            }
            if (start_ok && 0 < k.rn
                && 0 != mt_mem_get(kind, got, rbuf, k.rn * sizeof(int32_t))) {
                mt_diag_add(diag, "start %d: reading the result back failed; ", it);
                start_ok = 0;
            }
            for (size_t i = 0; start_ok && i < k.rn; ++i) {
                if (k.check[i] && got[i] != k.rexp[i]) {
                    mt_diag_add(diag, "start %d: element %zu: expected %d got %d; ", it, i,
                                (int) k.rexp[i], (int) got[i]);
                    start_ok = 0;
                }
            }
            starts_ok += start_ok;
            ok = ok && start_ok;
            free(got);
            release(&k);
        }
        if (MPI_REQUEST_NULL != req) {
            rc = MPI_Request_free(&req);
            if (MPI_SUCCESS != rc || MPI_REQUEST_NULL != req) {
                mt_diag_add(diag, "MPI_Request_free: %s; ", mt_mpi_error(rc));
                ok = 0;
            }
        }
        mt_check(ok, diag, "%s, %s buffers: %d of %d starts right", coll_names[c],
                 mixed ? "mixed" : "device", starts_ok, STARTS);
        mt_mem_free(kind, sbuf);
        mt_mem_free(kind, rbuf);
    }

    /* MPI_Startall on two requests at once, then MPI_Waitall: each gets its own copies */
    {
        mt_mem_t kind = (mixed && 1 == mt_rank % 2) ? MT_MEM_HOST : MT_MEM_DEVICE;
        void *s1 = mt_mem_alloc(kind, N * 4), *r1 = mt_mem_alloc(kind, N * 4);
        void *b2 = mt_mem_alloc(kind, N * 4);
        MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        int ok = NULL != s1 && NULL != r1 && NULL != b2, starts_ok = 0;
        int root = mt_size - 1;

        mt_set_case("startall");
        diag[0] = '\0';
        ok = mt_agree(ok);
        ok = ok && MPI_SUCCESS == MPI_Allreduce_init(s1, r1, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                                                     MPI_INFO_NULL, &reqs[0]);
        ok = ok && MPI_SUCCESS == MPI_Bcast_init(b2, N, MPI_INT, root, MPI_COMM_WORLD,
                                                 MPI_INFO_NULL, &reqs[1]);
        for (int it = 0; ok && it < STARTS; ++it) { /* the same verdict on every rank */
            int32_t in[N], out[N], exp[N], bin[N], bexp[N];
            sum_into(exp, mt_size, 10 + it, 0, mt_size, 0, N);
            for (int i = 0; i < N; ++i) {
                in[i] = val(mt_rank, 10 + it, i);
                out[i] = POISON;
                bexp[i] = val(root, 20 + it, i);
                bin[i] = (mt_rank == root) ? bexp[i] : POISON;
            }
            ok = 0 == mt_mem_put(kind, s1, in, sizeof(in)) &&
                 0 == mt_mem_put(kind, r1, out, sizeof(out)) &&
                 0 == mt_mem_put(kind, b2, bin, sizeof(bin));
            ok = ok && MPI_SUCCESS == MPI_Startall(2, reqs);
            ok = ok && MPI_SUCCESS == MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
            ok = ok && 0 == mt_mem_get(kind, out, r1, sizeof(out)) &&
                 0 == mt_mem_get(kind, bin, b2, sizeof(bin));
            for (int i = 0; ok && i < N; ++i) {
                if (out[i] != exp[i] || bin[i] != bexp[i]) {
                    mt_diag_add(diag, "start %d: element %d: allreduce %d (expected %d), bcast "
                                "%d (expected %d)", it, i, out[i], exp[i], bin[i], bexp[i]);
                    ok = 0;
                }
            }
            ok = mt_agree(ok);
            starts_ok += ok;
        }
        for (int i = 0; i < 2; ++i) {
            if (MPI_REQUEST_NULL != reqs[i]) {
                ok = (MPI_SUCCESS == MPI_Request_free(&reqs[i])) && ok;
            }
        }
        mt_check(ok, diag, "MPI_Startall of an allreduce and a bcast request, %s buffers: %d of "
                 "%d starts right", mixed ? "mixed" : "device", starts_ok, STARTS);
        mt_mem_free(kind, s1);
        mt_mem_free(kind, r1);
        mt_mem_free(kind, b2);
    }
    return mt_finish();
}
