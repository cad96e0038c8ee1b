/*
 * coll_gpu_hostpath_bench.c - what coll/gpu costs a host-buffer MPI_Allreduce.
 *
 * coll/gpu sits above the host components: every MPI_Allreduce goes through it, and for host
 * buffers it must hand the call down to the saved component (tuned) at a cost of at most 50 ns.
 * This program times an 8-byte MPI_Allreduce on host buffers (2 x MPI_FLOAT, MPI_SUM, as
 * osu_allreduce's smallest size; -c MPI_Bcast, -C another collective, 8 bytes a block) and
 * prints the median time per call, after checking the last call's result.  It knows nothing of
 * coll/gpu: hostpath.sh runs it with and without the component, alternating, in one invocation,
 * and prints the difference; hostpath-instr.sh counts coll/gpu's instructions in it.
 *
 *   warm-up:  W calls
 *   batches:  B times { MPI_Barrier; K calls timed together }  -> per-call time of each batch
 *   report:   median over batches of the per-call time (max over ranks), with min, p10 and p90
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* The value at quantile q of sorted v (nearest rank). */
static double quantile(const double *v, int n, double q)
{
    int i = (int) (q * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* Whether coll/gpu registered its parameters in this process, i.e. Open MPI opened it. */
static int coll_gpu_present(void)
{
    int idx;
    return MPI_SUCCESS == MPI_T_cvar_get_index("coll_gpu_allreduce_algorithm", &idx);
}

static void read_coll_selection(char *buf, size_t len)
{
    int idx, count = 0;
    MPI_T_cvar_handle h;
    char tmp[4096];
    buf[0] = '\0';
    if (MPI_SUCCESS != MPI_T_cvar_get_index("coll", &idx)
        || MPI_SUCCESS != MPI_T_cvar_handle_alloc(idx, NULL, &h, &count)) {
        return;
    }
    memset(tmp, 0, sizeof(tmp));
    if (count <= (int) sizeof(tmp) && MPI_SUCCESS == MPI_T_cvar_read(h, tmp)) {
        size_t n = strnlen(tmp, len - 1);
        memcpy(buf, tmp, n);
        buf[n] = '\0';
    }
    MPI_T_cvar_handle_free(&h);
}

/* The collectives it times: 2 floats a block (8 bytes), root 0, MPI_SUM. */
typedef enum {
    C_ALLREDUCE, C_BCAST, C_REDUCE, C_ALLGATHER, C_ALLTOALL, C_GATHER, C_SCATTER,
    C_REDUCE_SCATTER_BLOCK, C_SCAN, C_IALLREDUCE, C_IBCAST, C_IGATHER, C_IALLGATHER, C_COUNT
} coll_t;
static const char *const coll_names[C_COUNT] = {
    "allreduce", "bcast", "reduce", "allgather", "alltoall", "gather", "scatter",
    "reduce_scatter_block", "scan", "iallreduce", "ibcast", "igather",
    "iallgather"};
static const char *const coll_mpi[C_COUNT] = {
    "MPI_Allreduce", "MPI_Bcast", "MPI_Reduce", "MPI_Allgather", "MPI_Alltoall", "MPI_Gather",
    "MPI_Scatter", "MPI_Reduce_scatter_block", "MPI_Scan", "MPI_Iallreduce + MPI_Wait",
    "MPI_Ibcast + MPI_Wait", "MPI_Igather + MPI_Wait", "MPI_Iallgather + MPI_Wait"};

static void usage(void)
{
    printf("usage: mpirun -np N coll_gpu_hostpath_bench [-b BATCHES] [-k CALLS] [-w WARMUP] [-c]\n"
           "           [-C COLL]\n"
           "  times an 8-byte MPI_Allreduce (2 x MPI_FLOAT, MPI_SUM; -c: MPI_Bcast from rank 0;\n"
           "  -C: allreduce, bcast, reduce, allgather, alltoall, gather, scatter,\n"
           "  reduce_scatter_block, scan, iallreduce, ibcast, igather or iallgather, 8 bytes a\n"
           "  block, root 0) on host buffers: BATCHES batches (default 50) of CALLS calls\n"
           "  (default 1000), after WARMUP calls (default 10000); prints the median per-call time\n"
           "  over the batches\n");
}

/* One call of coll on in (2 x size floats) and out (2 x size floats). */
static void one_call(coll_t coll, const float *in, float *out)
{
    MPI_Request req;

    switch (coll) {
    case C_ALLREDUCE: MPI_Allreduce(in, out, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case C_BCAST: MPI_Bcast(out, 2, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case C_REDUCE: MPI_Reduce(in, out, 2, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case C_ALLGATHER:
        MPI_Allgather(in, 2, MPI_FLOAT, out, 2, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case C_ALLTOALL: MPI_Alltoall(in, 2, MPI_FLOAT, out, 2, MPI_FLOAT, MPI_COMM_WORLD); break;
    case C_GATHER: MPI_Gather(in, 2, MPI_FLOAT, out, 2, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case C_SCATTER: MPI_Scatter(in, 2, MPI_FLOAT, out, 2, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case C_REDUCE_SCATTER_BLOCK:
        MPI_Reduce_scatter_block(in, out, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case C_SCAN: MPI_Scan(in, out, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case C_IALLREDUCE:
        MPI_Iallreduce(in, out, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        break;
    case C_IBCAST:
        MPI_Ibcast(out, 2, MPI_FLOAT, 0, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        break;
    case C_IGATHER:
        MPI_Igather(in, 2, MPI_FLOAT, out, 2, MPI_FLOAT, 0, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        break;
    case C_IALLGATHER:
        MPI_Iallgather(in, 2, MPI_FLOAT, out, 2, MPI_FLOAT, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        break;
    default: break;
    }
}

/* Rank r's input: block b holds {r + 0.5 + b, -r - b}. */
static float input(int r, int b, int j)
{
    return 0 == j ? (float) r + 0.5f + (float) b : (float) (-r - b);
}

/* Is out what coll leaves on this rank?  The sums are of small integers and halves: exact. */
static int result_wrong(coll_t coll, const float *out, int rank, int size)
{
    int wrong = 0;

    for (int b = 0; b < size; ++b) {
        for (int j = 0; j < 2; ++j) {
            float want = 0.0f, sum = 0.0f;
            int first = 2 * b + j;
            for (int r = 0; r < size; ++r) {
                sum += input(r, 0, j);
            }
            switch (coll) {
            case C_ALLREDUCE: case C_IALLREDUCE:
                if (0 < b) continue;
                want = sum;
                break;
            case C_REDUCE:
                if (0 < b || 0 != rank) continue;
                want = sum;
                break;
            case C_BCAST: case C_IBCAST:
                if (0 < b) continue;
                want = input(0, 0, j);
                break;
            case C_ALLGATHER: case C_IALLGATHER: want = input(b, 0, j); break;
            case C_GATHER: case C_IGATHER:
                if (0 != rank) continue;
                want = input(b, 0, j);
                break;
            case C_ALLTOALL: want = input(b, rank, j); break;
            case C_SCATTER:
                if (0 < b) continue;
                want = input(0, rank, j);
                break;
            case C_REDUCE_SCATTER_BLOCK:
                if (0 < b) continue;
                want = 0.0f;
                for (int r = 0; r < size; ++r) {
                    want += input(r, rank, j);
                }
                break;
            case C_SCAN:
                if (0 < b) continue;
                for (int r = 0; r <= rank; ++r) {
                    want += input(r, 0, j);
                }
                break;
            default: continue;
            }
            wrong |= (out[first] != want);
        }
    }
    return wrong;
}

int main(int argc, char **argv)
{
    int batches = 50, calls = 1000, warmup = 10000;
    int rank, size, provided, c, i, b, bad = 0, present, mpit;
    coll_t coll = C_ALLREDUCE;
    float *in, *out;
    double *per_call, t0, stats[4], gstats[4];
    char colls[1024];

    while (-1 != (c = getopt(argc, argv, "b:k:w:cC:h"))) {
        switch (c) {
        case 'c': coll = C_BCAST; break;
        case 'C':
            for (coll = 0; coll < C_COUNT && 0 != strcmp(optarg, coll_names[coll]); ++coll) {
            }
            if (C_COUNT == coll) {
                usage();
                return 2;
            }
            break;
        case 'b': batches = atoi(optarg); break;
        case 'k': calls = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'h': usage(); return 0;
        default: usage(); return 2;
        }
    }
    if (batches < 1 || calls < 1 || warmup < 0) {
        usage();
        return 2;
    }

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mpit = MPI_SUCCESS == MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    present = mpit && coll_gpu_present();
    colls[0] = '\0';
    if (mpit) {
        read_coll_selection(colls, sizeof(colls));
    }
    per_call = (double *) malloc(sizeof(double) * (size_t) batches);
    /* plain malloc memory, as applications pass: coll/gpu classifies it on every call, from its
     * cache of plain host pages when Open MPI's memory hooks let it keep one (coll_gpu_verbose 5
     * says "classification cache on"), else by asking the driver each time */
    in = (float *) malloc(2 * (size_t) size * sizeof(float));
    out = (float *) malloc(2 * (size_t) size * sizeof(float));
    if (NULL == per_call || NULL == in || NULL == out) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    for (b = 0; b < size; ++b) {
        in[2 * b] = input(rank, b, 0);
        in[2 * b + 1] = input(rank, b, 1);
    }
    /* a blocking host allreduce first, as programs make one: then no component sets the
     * communicator up in the background of the timed calls (coll/gpu's agreement on memory
     * kinds, which a first nonblocking call begins without a wait, would) */
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    for (i = 0; i < warmup; ++i) {
        one_call(coll, in, out);
    }
    for (i = 0; i < 2 * size; ++i) {
        out[i] = (C_BCAST == coll || C_IBCAST == coll) && 0 == rank ? in[i] : -1.0e9f;
    }
    for (b = 0; b < batches; ++b) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now_ns();
        for (i = 0; i < calls; ++i) {
            one_call(coll, in, out);
        }
        per_call[b] = (now_ns() - t0) / calls;
    }
    /* the last result must be right, or the timing means nothing */
    bad = result_wrong(coll, out, rank, size);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

    qsort(per_call, (size_t) batches, sizeof(double), cmp_double);
    stats[0] = quantile(per_call, batches, 0.5);
    stats[1] = per_call[0];
    stats[2] = quantile(per_call, batches, 0.1);
    stats[3] = quantile(per_call, batches, 0.9);
    MPI_Reduce(stats, gstats, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("# coll_gpu_hostpath_bench: 8-byte %s (2 x MPI_FLOAT a block%s) on host "
               "buffers, %d ranks, %d batches x %d calls after %d warm-up\n",
               coll_mpi[coll], C_BCAST == coll || C_IBCAST == coll ? ", root 0" : ", MPI_SUM",
               size, batches, calls, warmup);
        printf("# MCA coll: %s; coll/gpu: %s\n", '\0' != colls[0] ? colls : "(default)",
               present ? "loaded" : "not loaded");
        printf("hostpath coll_gpu=%s median_ns=%.1f min_ns=%.1f p10_ns=%.1f p90_ns=%.1f%s\n",
               present ? "loaded" : "absent", gstats[0], gstats[1], gstats[2], gstats[3],
               bad ? " WRONG-RESULT" : "");
        fflush(stdout);
    }
    free(per_call);
    free(in);
    free(out);
    if (mpit) {
        MPI_T_finalize();
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}
