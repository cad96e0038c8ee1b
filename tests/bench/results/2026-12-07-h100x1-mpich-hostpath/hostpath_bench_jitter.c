/*
 * coll_gpu_hostpath_bench.c - what coll/gpu costs a host-buffer MPI_Allreduce.
 *
 * coll/gpu sits above the host components: every MPI_Allreduce goes through it, and for host
 * buffers it must hand the call down to the saved component (tuned) at a cost of at most 50 ns.
 * This program times an 8-byte MPI_Allreduce on host buffers (2 x MPI_FLOAT, MPI_SUM, as
 * osu_allreduce's smallest size) and prints the median time per call.  It knows nothing of
 * coll/gpu: hostpath.sh runs it with and without the component, alternating, in one invocation,
 * and prints the difference.
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
#include <x86intrin.h>
static unsigned jtab[1024];
static void spin(unsigned cyc) { unsigned long long t0 = __rdtsc(); while (__rdtsc() - t0 < cyc) ; }

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

static void usage(void)
{
    printf("usage: mpirun -np N coll_gpu_hostpath_bench [-b BATCHES] [-k CALLS] [-w WARMUP] [-c]\n"
           "  times an 8-byte MPI_Allreduce (2 x MPI_FLOAT, MPI_SUM; -c: MPI_Bcast from rank 0)\n"
           "  on host buffers:\n"
           "  BATCHES batches (default 50) of CALLS calls (default 1000), after WARMUP calls\n"
           "  (default 10000); prints the median per-call time over the batches\n");
}

int main(int argc, char **argv)
{
    int jit = 0, off = -1, batches = 50, calls = 1000, warmup = 10000, bcast = 0;
    int rank, size, provided, c, i, b, bad = 0, present, mpit;
    float *in, *out;
    double *per_call, t0, stats[4], gstats[4];
    char colls[1024];

    while (-1 != (c = getopt(argc, argv, "b:k:w:cho:j:"))) {
        switch (c) {
        case 'c': bcast = 1; break;
        case 'b': batches = atoi(optarg); break;
        case 'k': calls = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'h': usage(); return 0;
        case 'o': off = atoi(optarg); break;
        case 'j': jit = atoi(optarg); break;
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
    if (off < 0) {
    in = (float *) malloc(2 * sizeof(float));
    out = (float *) malloc(2 * sizeof(float));
    } else { char *base = aligned_alloc(4096, 65536); in = (float *)(base + off); out = (float *)(base + 8192 + off); }
    if (NULL == per_call || NULL == in || NULL == out) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    { unsigned long long c0 = __rdtsc(); double t1 = now_ns(); while (now_ns() - t1 < 2e6) ; double ghz = (double)(__rdtsc() - c0) / (now_ns() - t1);
      srand(12345 + rank); for (i = 0; i < 1024; ++i) jtab[i] = (unsigned)(ghz * (double)(rand() % (jit > 0 ? jit : 1))); }
    in[0] = (float) rank + 0.5f;
    in[1] = (float) -rank;
    for (i = 0; i < warmup; ++i) {
        if (bcast) {
            MPI_Bcast(out, 2, MPI_FLOAT, 0, MPI_COMM_WORLD);
        } else {
            MPI_Allreduce(in, out, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    if (bcast) {
        out[0] = (0 == rank) ? 1.5f : 0.0f;
        out[1] = (0 == rank) ? -2.0f : 0.0f;
    }
    for (b = 0; b < batches; ++b) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now_ns();
        if (bcast) {
            for (i = 0; i < calls; ++i) {
                MPI_Bcast(out, 2, MPI_FLOAT, 0, MPI_COMM_WORLD);
            }
        } else {
            for (i = 0; i < calls; ++i) {
                if (jit) spin(jtab[i & 1023]);
                MPI_Allreduce(in, out, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            }
        }
        per_call[b] = (now_ns() - t0) / calls;
    }
    /* the last result must be right, or the timing means nothing */
    if (bcast ? (out[0] != 1.5f || out[1] != -2.0f)
              : (out[0] != 0.5f * size + 0.5f * size * (size - 1)
                 || out[1] != -0.5f * size * (size - 1))) {
        bad = 1;
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

    qsort(per_call, (size_t) batches, sizeof(double), cmp_double);
    stats[0] = quantile(per_call, batches, 0.5);
    stats[1] = per_call[0];
    stats[2] = quantile(per_call, batches, 0.1);
    stats[3] = quantile(per_call, batches, 0.9);
    MPI_Reduce(stats, gstats, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (0 == rank) {
        printf("# coll_gpu_hostpath_bench: 8-byte %s (2 x MPI_FLOAT%s) on host "
               "buffers, %d ranks, %d batches x %d calls after %d warm-up\n",
               bcast ? "MPI_Bcast" : "MPI_Allreduce", bcast ? ", root 0" : ", MPI_SUM", size,
               batches, calls, warmup);
        printf("# MCA coll: %s; coll/gpu: %s\n", '\0' != colls[0] ? colls : "(default)",
               present ? "loaded" : "not loaded");
        printf("hostpath coll_gpu=%s median_ns=%.1f min_ns=%.1f p10_ns=%.1f p90_ns=%.1f%s\n",
               present ? "loaded" : "absent", gstats[0], gstats[1], gstats[2], gstats[3],
               bad ? " WRONG-RESULT" : "");
        fflush(stdout);
    }
    free(per_call);

    if (mpit) {
        MPI_T_finalize();
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}
