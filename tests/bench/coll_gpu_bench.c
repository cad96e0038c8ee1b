/*
 * coll_gpu_bench.c - latency and bandwidth of MPI collectives on device buffers, with NCCL
 * measured side by side in the same processes on the same buffers (in the spirit of nccl-tests).
 *
 * Serves MPI_Allreduce, MPI_Bcast, MPI_Allgather, MPI_Allgatherv, MPI_Alltoall, MPI_Alltoallv,
 * MPI_Reduce_scatter_block and MPI_Reduce_scatter, and their nonblocking forms.  The v forms and
 * MPI_Reduce_scatter take equal counts on every rank, so that their bytes are those of the
 * plain form (the cost of the v interface, not of an uneven layout).  Backends:
 *   mpi        the MPI call on device buffers: through coll/gpu when the component is loaded;
 *   staged     the same call with coll/gpu forced onto its host staging path, by writing the
 *              MPI_T control variable coll_gpu_<collective>_algorithm (restored afterwards);
 *              allgather(v) and alltoall(v), which have none, through
 *              coll_gpu_exchange_algorithm (coll/gpu runs them as one exchange); a collective
 *              with no such switch has no staged backend, and the output says so (its mpi row
 *              is whatever path coll/gpu takes);
 *   mpi:ALG    the same, forcing any algorithm the control variable knows (oneshot, ring, ...);
 *   nccl       NCCL directly (bench_nccl.c), each call followed by cudaStreamSynchronize.  NCCL
 *              has no alltoall and no v forms: alltoall and alltoallv are one ncclSend and one
 *              ncclRecv per peer in a group, allgatherv is ncclAllGather (equal counts);
 *   nb, nb:ALG the nonblocking call (MPI_Iallreduce, MPI_Ibcast, ...) followed at once by
 *              MPI_Wait, through coll/gpu (algorithm forced as for mpi:ALG).  With -O US, each
 *              size of an nb backend also measures how much of a GPU compute phase of US
 *              microseconds (one warp spinning on the GPU's timer, bench_floor.cu; a host spin
 *              on the emulated device) the call overlaps:
 *                  comm      MPI_Ixxx + MPI_Wait                  (the timed calls above)
 *                  compute   the phase alone: launch + wait
 *                  together  MPI_Ixxx, launch, wait for the phase, MPI_Wait
 *                  overlap = (comm + compute - together) / min(comm, compute)
 *              1.0: the shorter one is hidden entirely; 0: nothing overlaps.
 *              An nb row is followed by its time over its blocking twin's (mpi, mpi:ALG) when
 *              the twin is listed before it in -B, and by the pinned host allocations its timed
 *              calls made per call (dev_host_stats, most on any rank): staging that pins
 *              memory per call (milliseconds each on a GPU) shows there.  The 16 B allgather
 *              against its blocking twin: -c allgather -t float -b 16 -e 16 -B mpi,nb.
 * Buffers come from the device layer (kernels/dev.h): real GPU memory with the cuda backend,
 * host memory that host code cannot touch with the emulated one.
 *
 * The copy floor (-K; issue 22's large-message goal, "within 1.3x of the copy floor at >= 16
 * MiB"): per collective and size, before its backends, the time of copying within this rank's
 * device memory (dev_memcpy: cudaMemcpyAsync device to device plus a synchronisation on cuda, a
 * memcpy on the emulated device) the bytes busbw counts, i.e. what a rank must receive from the
 * others:
 *     allgather(v), alltoall(v), reduce_scatter(_block)   (n-1) blocks, in one copy
 *     bcast                                               the whole message
 *     allreduce    two copies of (n-1)/n of it: two-shot's reduce-scatter and allgather, without
 *                  the reduction's arithmetic
 * timed as a backend is (warm-up, barrier, every rank copying at once, max over ranks of the
 * per-rank mean; never in check mode's verification).  Each row then shows the floor and its
 * time over it ("x copy").  With one rank nothing is received: no floor.
 *
 * Per size and backend (all ranks take the same steps, so the collectives match):
 *
 *   check mode only:  fresh random input, output poisoned, one call, verify  --> #wrong
 *   warm-up:          timed; every rank agrees on how many calls fit the budget (-T), judged
 *                     from the warm-up calls after the first
 *   timing:           MPI_Barrier, then each rank times each of N calls with a monotonic clock
 *   check mode only:  verify the output of the last timed call again         --> #wrong
 *   report:           time = max over ranks of the per-rank mean (CSV: also the median)
 *
 * The reference is computed on the host, by every rank for its own output, from every rank's
 * input regenerated locally (the inputs are a pure function of seed, rank and index), so it never
 * depends on the code under test.  Values are small integers or multiples of 1/8 (floating
 * point), so every result is exact whatever the order of reduction: a result is right or wrong,
 * with no tolerance to argue about.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_CUDA_AWARE_SUPPORT */
#endif

#include "bench.h"
#include "dev.h"

#define MAX_BACKENDS 16
#define MAX_SIZES 64
#define WHY_LEN 512
#define MAX_SHOWN_MISMATCHES 3

/* ---- types, ops, collectives ----------------------------------------------------------- */

typedef struct {
    const char *name;
    dev_dtype_t dev;
    int is_float;
    int is_signed;
    int bits;
} type_info_t;

static const type_info_t types[] = {
    {"float", DEV_T_FLOAT, 1, 1, 32},   {"double", DEV_T_DOUBLE, 1, 1, 64},
    {"int8", DEV_T_INT8, 0, 1, 8},      {"uint8", DEV_T_UINT8, 0, 0, 8},
    {"int16", DEV_T_INT16, 0, 1, 16},   {"uint16", DEV_T_UINT16, 0, 0, 16},
    {"int32", DEV_T_INT32, 0, 1, 32},   {"uint32", DEV_T_UINT32, 0, 0, 32},
    {"int64", DEV_T_INT64, 0, 1, 64},   {"uint64", DEV_T_UINT64, 0, 0, 64},
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

static const char *const op_names[] = {"sum", "prod", "min", "max"};
static const dev_op_t op_devs[] = {DEV_OP_SUM, DEV_OP_PROD, DEV_OP_MIN, DEV_OP_MAX};

/* What the benchmark needs to know of each collective.  A size is nccl-tests' size: for the
 * collectives made of one block per rank, the whole buffer of n blocks (allgather's receive
 * buffer, reduce_scatter_block's send buffer), and the call's count is then one block. */
typedef struct {
    const char *name;
    int reduces;  /* takes -o's op */
    int blocks;   /* a size is n blocks of count elements, one per rank */
    int send_all; /* the send buffer holds all n blocks (else one block, or count elements) */
    int recv_all; /* the receive buffer holds all n blocks */
    /* What each rank receives from the others, for bus bandwidth: the (n-1)/n of a size that
     * is not its own, `phases` times (allreduce: a reduce-scatter, then an allgather), or the
     * whole message (bcast, whatever n) */
    int phases;
    int whole;
    int vector;       /* takes per-rank counts (and displacements), all equal here */
    const char *nccl; /* what the nccl backend calls */
    /* Backends staged and mpi:ALG force coll/gpu's path by writing coll_gpu_<name>_algorithm.
     * A collective without a variable of its own may follow another's: path_of names it, with
     * path_why saying why (shown in the output).  Kept in step with coll/gpu's dispatch. */
    const char *path_of;
    const char *path_why;
} coll_info_t;

#define EXCHANGE_WHY "coll/gpu runs it on device memory as one exchange on the node team"
static const coll_info_t coll_info[BENCH_COLL_COUNT] = {
    [BENCH_ALLREDUCE] = {.name = "allreduce", .reduces = 1, .phases = 2,
                         .nccl = "ncclAllReduce"},
    [BENCH_BCAST] = {.name = "bcast", .phases = 1, .whole = 1, .nccl = "ncclBroadcast"},
    /* coll_gpu_exchange.c: coll_gpu_exchange_algorithm=staged stages the four whole */
    [BENCH_ALLGATHER] = {.name = "allgather", .blocks = 1, .recv_all = 1, .phases = 1,
                         .nccl = "ncclAllGather", .path_of = "exchange",
                         .path_why = EXCHANGE_WHY},
    /* none: coll_gpu_allreduce_algorithm=staged would stage only the allreduce inside its GPU
     * path (coll_gpu_reduce.c), a different call from its staged form */
    [BENCH_REDUCE_SCATTER_BLOCK] = {.name = "reduce_scatter_block", .reduces = 1, .blocks = 1,
                                    .send_all = 1, .phases = 1, .nccl = "ncclReduceScatter"},
    [BENCH_ALLGATHERV] = {.name = "allgatherv", .blocks = 1, .recv_all = 1, .phases = 1,
                          .vector = 1, .path_of = "exchange", .path_why = EXCHANGE_WHY,
                          .nccl = "ncclAllGather (NCCL has no v form; the counts are equal)"},
    [BENCH_ALLTOALL] = {.name = "alltoall", .blocks = 1, .send_all = 1, .recv_all = 1,
                        .phases = 1, .path_of = "exchange", .path_why = EXCHANGE_WHY, .nccl = "ncclSend + ncclRecv per peer in one group"},
    [BENCH_ALLTOALLV] = {.name = "alltoallv", .blocks = 1, .send_all = 1, .recv_all = 1,
                         .phases = 1, .vector = 1, .path_of = "exchange",
                         .path_why = EXCHANGE_WHY,
                         .nccl = "ncclSend + ncclRecv per peer in one group, as for alltoall "
                                 "(the counts are equal)"},
    [BENCH_REDUCE_SCATTER] = {.name = "reduce_scatter", .reduces = 1, .blocks = 1,
                              .send_all = 1, .phases = 1, .vector = 1,
                              .nccl = "ncclReduceScatter (the counts are equal)"},
};

static MPI_Datatype type_mpi(dev_dtype_t t)
{
    switch (t) {
    case DEV_T_FLOAT: return MPI_FLOAT;
    case DEV_T_DOUBLE: return MPI_DOUBLE;
    case DEV_T_INT8: return MPI_INT8_T;
    case DEV_T_UINT8: return MPI_UINT8_T;
    case DEV_T_INT16: return MPI_INT16_T;
    case DEV_T_UINT16: return MPI_UINT16_T;
    case DEV_T_INT32: return MPI_INT32_T;
    case DEV_T_UINT32: return MPI_UINT32_T;
    case DEV_T_INT64: return MPI_INT64_T;
    case DEV_T_UINT64: return MPI_UINT64_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op op_mpi(dev_op_t op)
{
    switch (op) {
    case DEV_OP_SUM: return MPI_SUM;
    case DEV_OP_PROD: return MPI_PROD;
    case DEV_OP_MIN: return MPI_MIN;
    case DEV_OP_MAX: return MPI_MAX;
    default: return MPI_OP_NULL;
    }
}

/* nccl-tests' bus bandwidth: what each link carries, comparable across rank counts. */
static double busbw_factor(bench_coll_t c, int n)
{
    const coll_info_t *ci = &coll_info[c];
    return ci->whole ? 1.0 : (double) ci->phases * (n - 1) / n;
}

/* One copy of the copy floor (-K) for a size of `bytes`; the floor is coll_info[c].phases of
 * them, busbw's bytes (for a whole block count; allreduce rounds down). */
static size_t copy_floor_piece(bench_coll_t c, size_t bytes, int n)
{
    return coll_info[c].whole ? bytes : bytes / (size_t) n * (size_t) (n - 1);
}

/* ---- options --------------------------------------------------------------------------- */

typedef struct {
    int colls[BENCH_COLL_COUNT];
    int ncolls;
    size_t minbytes, maxbytes;
    double factor;
    const type_info_t *type;
    dev_op_t op;
    const char *op_name;
    int root;
    int iters, warmup;
    double budget_s;
    int check;
    int in_place; /* allreduce, allgather(v) with MPI_IN_PLACE (see in_place) */
    char backends[512];
    dev_backend_t device;
    const char *csv;
    int floor;
    int copy_floor; /* -K */
    uint64_t seed;
    int seed_given;
    double overlap_us;
} options_t;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: mpirun -np N coll_gpu_bench [options]\n"
        "  -c COLL[,COLL]  allreduce bcast allgather allgatherv alltoall alltoallv\n"
        "                  reduce_scatter_block reduce_scatter (default allreduce; the v forms\n"
        "                  and reduce_scatter with equal counts)\n"
        "  -b MINBYTES     smallest size, K/M/G suffixes allowed (default 8)\n"
        "  -e MAXBYTES     largest size (default 64M)\n"
        "  -f FACTOR       size multiplier between steps (default 2)\n"
        "  -t TYPE         float double int8 uint8 int16 uint16 int32 uint32 int64 uint64\n"
        "                  (default float)\n"
        "  -o OP           sum prod min max (default sum)\n"
        "  -r ROOT         bcast root (default 0)\n"
        "  -n ITERS        timed calls per size and backend (default 20)\n"
        "  -w WARMUP       untimed calls before them (default 5)\n"
        "  -T SECONDS      cap the timed calls of one size and backend to about this long,\n"
        "                  never fewer than 3 (default 2; 0: no cap)\n"
        "  -I              allreduce, allgather and allgatherv in place (MPI_IN_PLACE;\n"
        "                  NCCL: the send buffer is the receive buffer, or this rank's block\n"
        "                  of it); check mode then verifies an allreduce's first call only\n"
        "  -C              check mode: fresh random data, poisoned output, host reference,\n"
        "                  #wrong per size (elements, summed over ranks)\n"
        "  -B LIST         backends, comma separated: mpi staged nccl mpi:ALGORITHM nb\n"
        "                  nb:ALGORITHM (nb: MPI_Ixxx + MPI_Wait)\n"
        "                  (default: mpi,staged,nccl, those available)\n"
        "  -O US           nb backends: also the overlap with a GPU compute phase of US\n"
        "                  microseconds (default 0: not measured)\n"
        "  -d DEVICE       cuda | emulated (default: cuda when a GPU is visible, else emulated)\n"
        "  -p FILE         write every row to FILE as CSV\n"
        "  -F              skip the latency-floor measurement (cuda only)\n"
        "  -K              copy floor: per collective and size, a device-to-device copy of the\n"
        "                  bytes a rank receives from the others (busbw's bytes), all ranks at\n"
        "                  once; each row adds it (copy(us)) and its time over it (x copy)\n"
        "  -s SEED         seed of the random data (default: from the clock, printed)\n"
        "  -h              this help\n");
}

/* "64K" -> 65536; K, M, G are powers of 1024; a trailing B or iB is accepted. */
static int parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    double v;
    double mult = 1;
    errno = 0;
    v = strtod(s, &end);
    if (end == s || 0 != errno || v < 0) {
        return -1;
    }
    switch (toupper((unsigned char) *end)) {
    case 'K': mult = 1024.0; ++end; break;
    case 'M': mult = 1024.0 * 1024; ++end; break;
    case 'G': mult = 1024.0 * 1024 * 1024; ++end; break;
    default: break;
    }
    if ('i' == *end) {
        ++end;
    }
    if ('B' == toupper((unsigned char) *end)) {
        ++end;
    }
    if ('\0' != *end) {
        return -1;
    }
    *out = (size_t) (v * mult);
    return 0;
}

static int parse_int(const char *s, int *out)
{
    char *end = NULL;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (end == s || '\0' != *end || 0 != errno || v < -2147483647L || v > 2147483647L) {
        return -1;
    }
    *out = (int) v;
    return 0;
}

/* Parse argv into opt.  Returns 0, 1 for -h, or -1 with a message in err. */
static int parse_options(int argc, char **argv, options_t *opt, char *err, size_t len)
{
    int c;
    memset(opt, 0, sizeof(*opt));
    opt->colls[0] = BENCH_ALLREDUCE;
    opt->ncolls = 1;
    opt->minbytes = 8;
    opt->maxbytes = 64 << 20;
    opt->factor = 2;
    opt->type = &types[0];
    opt->op = DEV_OP_SUM;
    opt->op_name = "sum";
    opt->iters = 20;
    opt->warmup = 5;
    opt->budget_s = 2.0;
    snprintf(opt->backends, sizeof(opt->backends), "mpi,staged,nccl");
    opt->device = DEV_BACKEND_NONE;
    opt->floor = 1;

    opterr = 0;
    while (-1 != (c = getopt(argc, argv, "c:b:e:f:t:o:r:n:w:T:CIB:d:p:FKs:O:h"))) {
        switch (c) {
        case 'c': {
            char buf[256], *tok, *save = NULL;
            snprintf(buf, sizeof(buf), "%s", optarg);
            opt->ncolls = 0;
            for (tok = strtok_r(buf, ",", &save); NULL != tok; tok = strtok_r(NULL, ",", &save)) {
                int k, found = -1;
                for (k = 0; k < BENCH_COLL_COUNT; ++k) {
                    if (0 == strcmp(tok, coll_info[k].name)) {
                        found = k;
                    }
                }
                if (found < 0) {
                    snprintf(err, len, "unknown collective '%s'", tok);
                    return -1;
                }
                if (opt->ncolls < BENCH_COLL_COUNT) {
                    opt->colls[opt->ncolls++] = found;
                }
            }
            if (0 == opt->ncolls) {
                snprintf(err, len, "-c needs a collective");
                return -1;
            }
            break;
        }
        case 'b':
        case 'e':
            if (0 != parse_size(optarg, 'b' == c ? &opt->minbytes : &opt->maxbytes)) {
                snprintf(err, len, "bad size '%s'", optarg);
                return -1;
            }
            break;
        case 'f': {
            char *end = NULL;
            opt->factor = strtod(optarg, &end);
            if (end == optarg || '\0' != *end || opt->factor <= 1.0) {
                snprintf(err, len, "-f needs a factor > 1");
                return -1;
            }
            break;
        }
        case 't': {
            size_t k;
            const char *name = optarg;
            if (0 == strcmp(name, "int")) {
                name = "int32";
            } else if (0 == strcmp(name, "float32")) {
                name = "float";
            } else if (0 == strcmp(name, "float64")) {
                name = "double";
            }
            opt->type = NULL;
            for (k = 0; k < NTYPES; ++k) {
                if (0 == strcmp(name, types[k].name)) {
                    opt->type = &types[k];
                }
            }
            if (NULL == opt->type) {
                snprintf(err, len, "unknown type '%s'", optarg);
                return -1;
            }
            break;
        }
        case 'o': {
            size_t k;
            int found = -1;
            for (k = 0; k < sizeof(op_names) / sizeof(op_names[0]); ++k) {
                if (0 == strcmp(optarg, op_names[k])) {
                    found = (int) k;
                }
            }
            if (found < 0) {
                snprintf(err, len, "unknown op '%s'", optarg);
                return -1;
            }
            opt->op = op_devs[found];
            opt->op_name = op_names[found];
            break;
        }
        case 'r':
        case 'n':
        case 'w': {
            int *dst = 'r' == c ? &opt->root : 'n' == c ? &opt->iters : &opt->warmup;
            if (0 != parse_int(optarg, dst) || *dst < ('n' == c ? 1 : 0)) {
                snprintf(err, len, "bad value '%s' for -%c", optarg, c);
                return -1;
            }
            break;
        }
        case 'T': {
            char *end = NULL;
            opt->budget_s = strtod(optarg, &end);
            if (end == optarg || '\0' != *end || opt->budget_s < 0) {
                snprintf(err, len, "bad value '%s' for -T", optarg);
                return -1;
            }
            break;
        }
        case 'C': opt->check = 1; break;
        case 'I': opt->in_place = 1; break;
        case 'O': {
            char *end = NULL;
            opt->overlap_us = strtod(optarg, &end);
            if (end == optarg || '\0' != *end || opt->overlap_us < 0) {
                snprintf(err, len, "bad value '%s' for -O", optarg);
                return -1;
            }
            break;
        }
        case 'B':
            snprintf(opt->backends, sizeof(opt->backends), "%s", optarg);
            break;
        case 'd':
            opt->device = dev_backend_from_name(optarg);
            if (DEV_BACKEND_NONE == opt->device) {
                snprintf(err, len, "unknown device backend '%s' (cuda or emulated)", optarg);
                return -1;
            }
            break;
        case 'p': opt->csv = optarg; break;
        case 'F': opt->floor = 0; break;
        case 'K': opt->copy_floor = 1; break;
        case 's':
            opt->seed = strtoull(optarg, NULL, 0);
            opt->seed_given = 1;
            break;
        case 'h': return 1;
        default:
            snprintf(err, len, "unknown option or missing argument: -%c", optopt);
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, len, "unexpected argument '%s'", argv[optind]);
        return -1;
    }
    if (opt->minbytes > opt->maxbytes) {
        snprintf(err, len, "-b is larger than -e");
        return -1;
    }
    return 0;
}

/* ---- small helpers --------------------------------------------------------------------- */

static int g_rank, g_size;

/* Print on rank 0 only. */
static void say(const char *fmt, ...)
{
    va_list ap;
    if (0 != g_rank) {
        return;
    }
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y ? 1 : 0;
}

static double median(double *v, int n)
{
    qsort(v, (size_t) n, sizeof(*v), cmp_double);
    return 0 == n % 2 ? 0.5 * (v[n / 2 - 1] + v[n / 2]) : v[n / 2];
}

/* strlcpy: copy what fits, always terminated */
static void copy_str(char *dst, size_t len, const char *src)
{
    size_t n = strnlen(src, len - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static int all_min(int v)
{
    int r = v;
    MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return r;
}

/* ---- data: generation, reference, comparison ------------------------------------------- */

/* Element i of rank r's input is k * scale, with k uniform in [lo, hi] (or, for prod, drawn
 * from a small set), chosen so that every reduction over the ranks is exact in the type. */
typedef struct {
    uint64_t seed;
    int64_t lo, hi;
    double scale;
    double set[4];
    int nset;
} gen_t;

static void gen_setup(gen_t *g, uint64_t seed, const type_info_t *t, dev_op_t op,
                      bench_coll_t coll, int nranks)
{
    int vbits = t->bits - (t->is_signed ? 1 : 0); /* bits of the largest positive value */
    int64_t tmax = t->is_float ? (int64_t) 1 << 20
                   : vbits >= 63 ? INT64_MAX
                                 : ((int64_t) 1 << vbits) - 1;
    memset(g, 0, sizeof(*g));
    g->seed = seed;
    g->scale = t->is_float ? 0.125 : 1.0;
    if (coll_info[coll].reduces && DEV_OP_PROD == op) {
        /* products stay exact: |product| <= 2^nranks must fit */
        int two_fits = t->is_float || nranks < t->bits - 2;
        if (t->is_signed) {
            g->set[g->nset++] = -1;
        }
        g->set[g->nset++] = 1;
        if (two_fits) {
            g->set[g->nset++] = 2;
        }
        if (t->is_float) {
            g->set[g->nset++] = 0.5;
        }
        return;
    }
    if (coll_info[coll].reduces && (DEV_OP_MIN == op || DEV_OP_MAX == op)) {
        /* half the type's range: the 0xA5 poison of uint8 and uint16 stays out of it */
        int64_t r = tmax / 2 < 100000 ? tmax / 2 : 100000;
        g->lo = t->is_signed ? -r / 2 : 0;
        g->hi = t->is_signed ? r / 2 : r;
        return;
    }
    /* sum, and the data of bcast and allgather: |sum over ranks| stays far inside the type */
    {
        int64_t r = t->is_float ? 128 : tmax / nranks;
        if (r > 8 && !t->is_float) {
            r = 8;
        }
        if (r < 1) {
            r = 1;
        }
        g->lo = t->is_signed ? -r : 0;
        g->hi = r;
    }
}

static inline double gen_value(const gen_t *g, int r, size_t i)
{
    uint64_t h = mix64(g->seed ^ mix64(((uint64_t) (unsigned) r << 48) ^ (uint64_t) i));
    if (g->nset > 0) {
        return g->set[h % (uint64_t) g->nset];
    }
    return (double) (g->lo + (int64_t) (h % (uint64_t) (g->hi - g->lo + 1))) * g->scale;
}

static inline void store_elem(const type_info_t *t, void *buf, size_t i, double v)
{
    switch (t->dev) {
    case DEV_T_FLOAT: ((float *) buf)[i] = (float) v; break;
    case DEV_T_DOUBLE: ((double *) buf)[i] = v; break;
    case DEV_T_INT8: ((int8_t *) buf)[i] = (int8_t) v; break;
    case DEV_T_UINT8: ((uint8_t *) buf)[i] = (uint8_t) v; break;
    case DEV_T_INT16: ((int16_t *) buf)[i] = (int16_t) v; break;
    case DEV_T_UINT16: ((uint16_t *) buf)[i] = (uint16_t) v; break;
    case DEV_T_INT32: ((int32_t *) buf)[i] = (int32_t) v; break;
    case DEV_T_UINT32: ((uint32_t *) buf)[i] = (uint32_t) v; break;
    case DEV_T_INT64: ((int64_t *) buf)[i] = (int64_t) v; break;
    case DEV_T_UINT64: ((uint64_t *) buf)[i] = (uint64_t) v; break;
    default: break;
    }
}

static inline double load_elem(const type_info_t *t, const void *buf, size_t i)
{
    switch (t->dev) {
    case DEV_T_FLOAT: return ((const float *) buf)[i];
    case DEV_T_DOUBLE: return ((const double *) buf)[i];
    case DEV_T_INT8: return ((const int8_t *) buf)[i];
    case DEV_T_UINT8: return ((const uint8_t *) buf)[i];
    case DEV_T_INT16: return ((const int16_t *) buf)[i];
    case DEV_T_UINT16: return ((const uint16_t *) buf)[i];
    case DEV_T_INT32: return ((const int32_t *) buf)[i];
    case DEV_T_UINT32: return ((const uint32_t *) buf)[i];
    case DEV_T_INT64: return (double) ((const int64_t *) buf)[i];
    case DEV_T_UINT64: return (double) ((const uint64_t *) buf)[i];
    default: return 0;
    }
}

static double reduce2(dev_op_t op, double a, double b)
{
    switch (op) {
    case DEV_OP_SUM: return a + b;
    case DEV_OP_PROD: return a * b;
    case DEV_OP_MIN: return b < a ? b : a;
    default: return b > a ? b : a;
    }
}

/* Rank `rank`'s input elements [first, first + n) into host buffer buf. */
static void fill_input(const gen_t *g, const type_info_t *t, int rank, size_t first, void *buf,
                       size_t n)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        store_elem(t, buf, i, gen_value(g, rank, first + i));
    }
}

/* Reference of `n` output elements: element i is the op over all ranks of their input element
 * first + i. */
static void reduce_reference(const gen_t *g, const type_info_t *t, dev_op_t op, int nranks,
                             size_t first, void *ref, size_t n)
{
    size_t i;
    int r;
    for (i = 0; i < n; ++i) {
        double acc = gen_value(g, 0, first + i);
        for (r = 1; r < nranks; ++r) {
            acc = reduce2(op, acc, gen_value(g, r, first + i));
        }
        store_elem(t, ref, i, acc);
    }
}

/* ---- MPI_T control variables: forcing coll/gpu's algorithm ----------------------------- */

typedef struct {
    char name[64];
    int found;
    int borrowed; /* another collective's variable (coll_info_t.path_of) */
    int writable;
    MPI_T_cvar_handle handle;
    MPI_T_enum enumtype;
    int saved;
    char why[WHY_LEN];
} cvar_t;

static int mpit_ok;

static void cvar_open(const char *name, cvar_t *cv)
{
    int idx, count = 0, verbosity, bind, scope, nlen = 0, dlen = 0;
    MPI_Datatype dt;
    memset(cv, 0, sizeof(*cv));
    copy_str(cv->name, sizeof(cv->name), name);
    cv->enumtype = MPI_T_ENUM_NULL;
    if (!mpit_ok) {
        snprintf(cv->why, sizeof(cv->why), "MPI_T is not available");
        return;
    }
    if (MPI_SUCCESS != MPI_T_cvar_get_index(name, &idx)) {
        snprintf(cv->why, sizeof(cv->why), "control variable %s does not exist", name);
        return;
    }
    if (MPI_SUCCESS
        != MPI_T_cvar_get_info(idx, NULL, &nlen, &verbosity, &dt, &cv->enumtype, NULL, &dlen,
                               &bind, &scope)) {
        snprintf(cv->why, sizeof(cv->why), "MPI_T_cvar_get_info(%s) failed", name);
        return;
    }
    if (MPI_INT != dt) {
        snprintf(cv->why, sizeof(cv->why), "control variable %s is not an int", name);
        return;
    }
    if (MPI_SUCCESS != MPI_T_cvar_handle_alloc(idx, NULL, &cv->handle, &count) || 1 != count) {
        snprintf(cv->why, sizeof(cv->why), "MPI_T_cvar_handle_alloc(%s) failed", name);
        return;
    }
    cv->found = 1;
    cv->writable = MPI_T_SCOPE_CONSTANT != scope && MPI_T_SCOPE_READONLY != scope;
    if (!cv->writable) {
        snprintf(cv->why, sizeof(cv->why), "control variable %s is read-only", name);
    }
    MPI_T_cvar_read(cv->handle, &cv->saved);
}

static void cvar_close(cvar_t *cv)
{
    if (cv->found) {
        MPI_T_cvar_handle_free(&cv->handle);
        cv->found = 0;
    }
}

/* Value of algorithm `alg` for variable cv: from the variable's own enumerator when it has
 * one, else from the table agreed in the design (0 auto, 1 staged, then the algorithms). */
static int cvar_alg_value(const cvar_t *cv, const char *alg, int *value)
{
    static const char *const allreduce_algs[] = {"auto", "staged", "oneshot", "twoshot", "ring"};
    static const char *const bcast_algs[] = {"auto", "staged", "push", "chain", "tree"};
    const char *const *table = NULL;
    int k;
    if (MPI_T_ENUM_NULL != cv->enumtype) {
        int num = 0, nlen;
        char ename[256];
        nlen = sizeof(ename);
        if (MPI_SUCCESS == MPI_T_enum_get_info(cv->enumtype, &num, ename, &nlen)) {
            for (k = 0; k < num; ++k) {
                int v;
                nlen = sizeof(ename);
                if (MPI_SUCCESS == MPI_T_enum_get_item(cv->enumtype, k, &v, ename, &nlen)
                    && 0 == strcasecmp(ename, alg)) {
                    *value = v;
                    return 0;
                }
            }
            return -1;
        }
    }
    if (0 == strcmp(cv->name, "coll_gpu_allreduce_algorithm")) {
        table = allreduce_algs;
    } else if (0 == strcmp(cv->name, "coll_gpu_bcast_algorithm")) {
        table = bcast_algs;
    } else if (0 == strcmp(alg, "auto") || 0 == strcmp(alg, "staged")) {
        *value = 0 == strcmp(alg, "auto") ? 0 : 1;
        return 0;
    } else {
        return -1;
    }
    for (k = 0; k < 5; ++k) {
        if (0 == strcasecmp(table[k], alg)) {
            *value = k;
            return 0;
        }
    }
    return -1;
}

/* Read a string control variable (for the header); "" when there is none. */
static void cvar_read_string(const char *name, char *buf, size_t len)
{
    int idx, count = 0;
    MPI_T_cvar_handle h;
    char tmp[4096];
    buf[0] = '\0';
    if (!mpit_ok || MPI_SUCCESS != MPI_T_cvar_get_index(name, &idx)) {
        return;
    }
    if (MPI_SUCCESS != MPI_T_cvar_handle_alloc(idx, NULL, &h, &count)) {
        return;
    }
    memset(tmp, 0, sizeof(tmp));
    if (count <= (int) sizeof(tmp) && MPI_SUCCESS == MPI_T_cvar_read(h, tmp)) {
        copy_str(buf, len, tmp);
    }
    MPI_T_cvar_handle_free(&h);
}

/* ---- backends -------------------------------------------------------------------------- */

/* BK_COPY: the copy floor (-K), timed as a backend; not in -B */
typedef enum { BK_MPI, BK_NCCL, BK_NB, BK_COPY } backend_kind_t;

typedef struct {
    char name[48];
    backend_kind_t kind;
    char alg[32];                     /* forced coll/gpu algorithm, "" for none */
    int usable[BENCH_COLL_COUNT];     /* per collective */
    int alg_value[BENCH_COLL_COUNT];
    char why[BENCH_COLL_COUNT][WHY_LEN];
} backend_t;

typedef struct {
    double mean_us, median_us, min_us;
    double busbw, algbw;
    double comp_us, both_us; /* nb with -O: the compute phase alone, and call + phase */
    double pinned_per_call;  /* pinned host allocations per timed call, most on any rank */
    long long wrong;
    int iters;
    int done;
} result_t;

/* Everything one run works on. */
typedef struct {
    options_t opt;
    dev_backend_t device;
    int ordinal;
    int shared_gpu;   /* two ranks on one GPU: timings mean nothing */
    int gpu_loaded;   /* coll/gpu registered its parameters: Open MPI opened it */
    int cuda_aware;   /* Open MPI itself takes CUDA pointers */
    int nodes;
    backend_t backends[MAX_BACKENDS];
    int nbackends;
    backend_t copy; /* the copy floor (-K) */
    cvar_t cvars[BENCH_COLL_COUNT];
    void *dsend, *drecv;
    void *hin, *hout, *href;
    int *vcounts, *vdispls; /* the v forms' counts and displacements: count and r * count */
    size_t bufbytes;
    double floor_us;
    FILE *csv;
#ifdef COLL_GPU_BENCH_NCCL
    bench_nccl_t *nccl;
#endif
    char nccl_why[WHY_LEN];
} bench_t;

/* Does -I put collective c in place?  (The others have no in-place form here.) */
static bool in_place(const options_t *o, bench_coll_t c)
{
    return o->in_place && (BENCH_ALLREDUCE == c || BENCH_ALLGATHER == c || BENCH_ALLGATHERV == c);
}

/* The send buffer of collective c of count elements a rank: MPI_IN_PLACE in place (mpi), where
 * NCCL takes the receive buffer, or this rank's block of it for an allgather (nccl). */
static const void *send_buffer(const bench_t *B, bench_coll_t c, size_t count, bool nccl)
{
    if (!in_place(&B->opt, c)) {
        return B->dsend;
    }
    if (!nccl) {
        return MPI_IN_PLACE;
    }
    return BENCH_ALLREDUCE == c ? B->drecv
                                : (const char *) B->drecv
                                      + (size_t) g_rank * count
                                            * dev_dtype_size(B->opt.type->dev);
}

/* Start the nonblocking form of collective c on the benchmark's buffers. */
static int start_nb(bench_t *B, bench_coll_t c, size_t count, MPI_Request *req)
{
    MPI_Datatype t = type_mpi(B->opt.type->dev);
    MPI_Op op = op_mpi(B->opt.op);
    switch (c) {
    case BENCH_ALLREDUCE:
        return MPI_Iallreduce(send_buffer(B, c, count, false), B->drecv, (int) count, t, op,
                              MPI_COMM_WORLD, req);
    case BENCH_BCAST:
        return MPI_Ibcast(B->drecv, (int) count, t, B->opt.root, MPI_COMM_WORLD, req);
    case BENCH_ALLGATHER:
        return MPI_Iallgather(send_buffer(B, c, count, false), (int) count, t, B->drecv,
                              (int) count, t, MPI_COMM_WORLD, req);
    case BENCH_REDUCE_SCATTER_BLOCK:
        return MPI_Ireduce_scatter_block(B->dsend, B->drecv, (int) count, t, op,
                                         MPI_COMM_WORLD, req);
    case BENCH_ALLGATHERV:
        return MPI_Iallgatherv(send_buffer(B, c, count, false), (int) count, t, B->drecv,
                               B->vcounts, B->vdispls, t, MPI_COMM_WORLD, req);
    case BENCH_ALLTOALL:
        return MPI_Ialltoall(B->dsend, (int) count, t, B->drecv, (int) count, t, MPI_COMM_WORLD,
                             req);
    case BENCH_ALLTOALLV:
        return MPI_Ialltoallv(B->dsend, B->vcounts, B->vdispls, t, B->drecv, B->vcounts,
                              B->vdispls, t, MPI_COMM_WORLD, req);
    case BENCH_REDUCE_SCATTER:
        return MPI_Ireduce_scatter(B->dsend, B->drecv, B->vcounts, t, op, MPI_COMM_WORLD, req);
    default: return MPI_ERR_ARG;
    }
}

/* The compute phase of the overlap figure: a kernel of us microseconds on the cuda device,
 * a host spin as long on the emulated one (start spins, wait has nothing left to do). */
static int compute_start(const bench_t *B, double us, char *why, size_t len)
{
#ifdef COLL_GPU_BENCH_FLOOR
    if (DEV_BACKEND_CUDA == B->device) {
        return bench_compute_start(us, why, len);
    }
#endif
    (void) B;
    (void) why;
    (void) len;
    {
        double t0 = now_us();
        while (now_us() - t0 < us) {
        }
    }
    return 0;
}

static int compute_wait(const bench_t *B, char *why, size_t len)
{
#ifdef COLL_GPU_BENCH_FLOOR
    if (DEV_BACKEND_CUDA == B->device) {
        return bench_compute_wait(why, len);
    }
#endif
    (void) B;
    (void) why;
    (void) len;
    return 0;
}

/* One call of collective c on backend b; 0 or an error with its text in why. */
static int run_once(bench_t *B, const backend_t *b, bench_coll_t c, size_t count, char *why,
                    size_t len)
{
    MPI_Datatype t = type_mpi(B->opt.type->dev);
    MPI_Op op = op_mpi(B->opt.op);
    int rc = MPI_SUCCESS, n;
    if (BK_COPY == b->kind) {
        size_t ts = dev_dtype_size(B->opt.type->dev);
        size_t piece = copy_floor_piece(
            c, count * ts * (coll_info[c].blocks ? (size_t) g_size : 1), g_size);
        for (n = 0; n < coll_info[c].phases; ++n) {
            if (DEV_OK != dev_memcpy(B->drecv, B->dsend, piece)) {
                snprintf(why, len, "the copy floor's copy: %s", dev_error_string());
                return -1;
            }
        }
        return 0;
    }
    if (BK_NCCL == b->kind) {
#ifdef COLL_GPU_BENCH_NCCL
        return bench_nccl_run(B->nccl, c, send_buffer(B, c, count, true), B->drecv, count,
                              B->opt.type->dev, B->opt.op, B->opt.root, why, len);
#else
        snprintf(why, len, "nccl backend not built");
        return -1;
#endif
    }
    if (BK_NB == b->kind) {
        MPI_Request req;
        rc = start_nb(B, c, count, &req);
        if (MPI_SUCCESS == rc) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        goto done;
    }
    switch (c) {
    case BENCH_ALLREDUCE:
        rc = MPI_Allreduce(send_buffer(B, c, count, false), B->drecv, (int) count, t, op,
                           MPI_COMM_WORLD);
        break;
    case BENCH_BCAST:
        rc = MPI_Bcast(B->drecv, (int) count, t, B->opt.root, MPI_COMM_WORLD);
        break;
    case BENCH_ALLGATHER:
        rc = MPI_Allgather(send_buffer(B, c, count, false), (int) count, t, B->drecv,
                           (int) count, t, MPI_COMM_WORLD);
        break;
    case BENCH_REDUCE_SCATTER_BLOCK:
        rc = MPI_Reduce_scatter_block(B->dsend, B->drecv, (int) count, t, op, MPI_COMM_WORLD);
        break;
    case BENCH_ALLGATHERV:
        rc = MPI_Allgatherv(send_buffer(B, c, count, false), (int) count, t, B->drecv,
                            B->vcounts, B->vdispls, t, MPI_COMM_WORLD);
        break;
    case BENCH_ALLTOALL:
        rc = MPI_Alltoall(B->dsend, (int) count, t, B->drecv, (int) count, t, MPI_COMM_WORLD);
        break;
    case BENCH_ALLTOALLV:
        rc = MPI_Alltoallv(B->dsend, B->vcounts, B->vdispls, t, B->drecv, B->vcounts, B->vdispls,
                           t, MPI_COMM_WORLD);
        break;
    case BENCH_REDUCE_SCATTER:
        rc = MPI_Reduce_scatter(B->dsend, B->drecv, B->vcounts, t, op, MPI_COMM_WORLD);
        break;
    default: break;
    }
done:
    if (MPI_SUCCESS != rc) {
        char msg[MPI_MAX_ERROR_STRING];
        n = 0;
        MPI_Error_string(rc, msg, &n);
        snprintf(why, len, "%s", msg);
        return -1;
    }
    return 0;
}

/* Check mode: fresh input for this size and backend, poisoned output, and the reference.
 * count is the call's count (see bench.h).  Every rank's input is a pure function of (seed,
 * rank, index): this rank's goes to the device, the others' are regenerated here. */
static int prepare_check(bench_t *B, bench_coll_t c, const gen_t *g, size_t count, size_t *outn)
{
    const type_info_t *t = B->opt.type;
    const coll_info_t *ci = &coll_info[c];
    size_t ts = dev_dtype_size(t->dev), block = count * ts;
    size_t inn = ci->send_all ? count * (size_t) g_size : count;
    int r;

    *outn = ci->recv_all ? count * (size_t) g_size : count;
    fill_input(g, t, g_rank, 0, B->hin, inn);
    switch (c) {
    case BENCH_ALLREDUCE:
        reduce_reference(g, t, B->opt.op, g_size, 0, B->href, count);
        break;
    case BENCH_BCAST:
        fill_input(g, t, B->opt.root, 0, B->href, count);
        break;
    case BENCH_ALLGATHER:
    case BENCH_ALLGATHERV: /* block r: rank r's input */
        for (r = 0; r < g_size; ++r) {
            fill_input(g, t, r, 0, (char *) B->href + (size_t) r * block, count);
        }
        break;
    case BENCH_ALLTOALL:
    case BENCH_ALLTOALLV: /* block r: block g_rank of rank r's input */
        for (r = 0; r < g_size; ++r) {
            fill_input(g, t, r, (size_t) g_rank * count, (char *) B->href + (size_t) r * block,
                       count);
        }
        break;
    case BENCH_REDUCE_SCATTER_BLOCK:
    case BENCH_REDUCE_SCATTER: /* block g_rank of the reduction */
        reduce_reference(g, t, B->opt.op, g_size, (size_t) g_rank * count, B->href, count);
        break;
    default: break;
    }
    if (BENCH_BCAST == c) {
        if (g_rank == B->opt.root) {
            return dev_memcpy(B->drecv, B->href, block);
        }
    } else if (BENCH_ALLREDUCE == c && B->opt.in_place) {
        return dev_memcpy(B->drecv, B->hin, block); /* the input is the output's place */
    } else if (in_place(&B->opt, c)) { /* allgather(v): the poison around this rank's block */
        return DEV_OK == dev_memset(B->drecv, 0xA5, *outn * ts)
                   ? dev_memcpy((char *) B->drecv + (size_t) g_rank * block, B->hin, block)
                   : -1;
    } else if (DEV_OK != dev_memcpy(B->dsend, B->hin, inn * ts)) {
        return -1;
    }
    /* 0xA5 bytes: NaN-free but far outside every generated value, in every type */
    return dev_memset(B->drecv, 0xA5, *outn * ts);
}

/* Compare this rank's output with the reference; returns the number of wrong elements. */
static long long verify(bench_t *B, bench_coll_t c, const backend_t *b, size_t bytes, size_t outn)
{
    const type_info_t *t = B->opt.type;
    size_t i, ts = dev_dtype_size(t->dev);
    long long wrong = 0;
    if (DEV_OK != dev_memcpy(B->hout, B->drecv, outn * ts)) {
        fprintf(stderr, "rank %d: copying the result back failed: %s\n", g_rank,
                dev_error_string());
        return (long long) outn;
    }
    for (i = 0; i < outn; ++i) {
        double got = load_elem(t, B->hout, i), want = load_elem(t, B->href, i);
        if (!(got == want)) {
            if (wrong < MAX_SHOWN_MISMATCHES) {
                fprintf(stderr, "rank %d: %s %zu B %s: element %zu is %.17g, expected %.17g\n",
                        g_rank, coll_info[c].name, bytes, b->name, i, got, want);
            }
            ++wrong;
        }
    }
    return wrong;
}

/* One size on one backend: check, warm-up, timing, check again.  Collective over all ranks. */
static int run_segment(bench_t *B, backend_t *b, bench_coll_t c, size_t bytes, size_t count,
                       size_t total, result_t *res, char *why, size_t len)
{
    const options_t *o = &B->opt;
    double *times = NULL;
    double t0, first, est;
    int i, rc = 0, iters = o->iters, warm = o->warmup;
    long long wrong = 0;
    size_t outn = 0;
    gen_t g;
    cvar_t *cv = &B->cvars[c];
    /* setup_backends left a forced backend only to collectives with a variable */
    int forced = BK_NCCL != b->kind && '\0' != b->alg[0] && cv->found;
    double local[3], global[3], pinned;
    dev_host_stats_t hs0, hs1;

    memset(res, 0, sizeof(*res));
    why[0] = '\0';
    for (i = 0; i < g_size; ++i) { /* run_collective checked that n * count fits an int */
        B->vcounts[i] = (int) count;
        B->vdispls[i] = (int) ((size_t) i * count);
    }
    times = (double *) malloc(sizeof(double) * (size_t) (iters > 0 ? iters : 1));
    if (NULL == times) {
        snprintf(why, len, "out of memory");
        rc = -1;
    }
    if (0 == rc && forced && MPI_SUCCESS != MPI_T_cvar_write(cv->handle, &b->alg_value[c])) {
        snprintf(why, len, "MPI_T_cvar_write failed");
        rc = -1;
    }
    if (!all_min(0 == rc)) {
        goto fail;
    }

    if (o->check && BK_COPY != b->kind) {
        gen_setup(&g, mix64(o->seed ^ mix64(((uint64_t) c << 56) ^ ((uint64_t) bytes << 8)
                                            ^ (uint64_t) (b - B->backends))),
                  o->type, o->op, c, g_size);
        rc = prepare_check(B, c, &g, count, &outn);
        if (0 != rc) {
            snprintf(why, len, "filling the buffers failed: %s", dev_error_string());
        }
        if (!all_min(0 == rc)) {
            goto fail;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        rc = run_once(B, b, c, count, why, len);
        if (!all_min(0 == rc)) {
            goto fail;
        }
        wrong += verify(B, c, b, bytes, outn);
    }

    /* Warm-up.  The first call's time (max over ranks) sets how many calls fit the budget, so
     * that every rank makes the same number of calls. */
    MPI_Barrier(MPI_COMM_WORLD);
    first = 0;
    if (warm > 0) {
        t0 = now_us();
        rc = run_once(B, b, c, count, why, len);
        first = now_us() - t0;
        if (!all_min(0 == rc)) {
            goto fail;
        }
        MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        est = first;
        if (o->budget_s > 0 && warm > 2) {
            /* at least 2: a first call that sets things up (NCCL connections, IPC mappings)
             * must not be the only estimate of the rest */
            int fit = (int) (o->budget_s * 1e6 / 4 / (first > 1 ? first : 1));
            warm = fit < 2 ? 2 : fit < warm ? fit : warm;
        }
        if (warm > 1) {
            t0 = now_us();
            for (i = 1; i < warm && 0 == rc; ++i) {
                rc = run_once(B, b, c, count, why, len);
            }
            est = (now_us() - t0) / (warm - 1);
            if (!all_min(0 == rc)) {
                goto fail;
            }
            MPI_Allreduce(MPI_IN_PLACE, &est, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        }
        if (o->budget_s > 0) {
            double fit = o->budget_s * 1e6 / (est > 1e-3 ? est : 1e-3);
            if (fit < iters) {
                iters = fit < 3 ? 3 : (int) fit;
                if (iters > o->iters) {
                    iters = o->iters;
                }
            }
        }
    }

    MPI_Barrier(MPI_COMM_WORLD);
    dev_host_stats(&hs0);
    for (i = 0; i < iters && 0 == rc; ++i) {
        t0 = now_us();
        rc = run_once(B, b, c, count, why, len);
        times[i] = now_us() - t0;
    }
    dev_host_stats(&hs1);
    if (!all_min(0 == rc)) {
        goto fail;
    }
    pinned = (double) (hs1.allocs - hs0.allocs) / iters;
    MPI_Allreduce(MPI_IN_PLACE, &pinned, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    res->pinned_per_call = pinned;

    /* in place, every timed call reduced the previous result again: only the first call has a
     * reference */
    if (o->check && BK_COPY != b->kind && !(BENCH_ALLREDUCE == c && o->in_place)) {
        wrong += verify(B, c, b, bytes, outn);
    }

    /* the overlap figure: the compute phase alone, then with the call around it */
    if (BK_NB == b->kind && o->overlap_us > 0) {
        double both[2] = {0, 0};
        MPI_Request req;
        MPI_Barrier(MPI_COMM_WORLD);
        for (i = 0; i < iters && 0 == rc; ++i) {
            t0 = now_us();
            rc = compute_start(B, o->overlap_us, why, len);
            rc = 0 == rc ? compute_wait(B, why, len) : rc;
            both[0] += now_us() - t0;
        }
        if (!all_min(0 == rc)) {
            goto fail;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        for (i = 0; i < iters && 0 == rc; ++i) {
            t0 = now_us();
            if (MPI_SUCCESS != start_nb(B, c, count, &req)) {
                snprintf(why, len, "the nonblocking call failed to start");
                rc = -1;
                break;
            }
            rc = compute_start(B, o->overlap_us, why, len);
            rc = 0 == rc ? compute_wait(B, why, len) : rc;
            if (MPI_SUCCESS != MPI_Wait(&req, MPI_STATUS_IGNORE) && 0 == rc) {
                snprintf(why, len, "MPI_Wait failed");
                rc = -1;
            }
            both[1] += now_us() - t0;
        }
        if (!all_min(0 == rc)) {
            goto fail;
        }
        both[0] /= iters;
        both[1] /= iters;
        MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        res->comp_us = both[0];
        res->both_us = both[1];
    }

    local[0] = 0;
    for (i = 0; i < iters; ++i) {
        local[0] += times[i];
    }
    local[0] /= iters;
    local[1] = median(times, iters); /* sorts times */
    local[2] = times[0];
    MPI_Allreduce(local, global, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    res->mean_us = global[0];
    res->median_us = global[1];
    res->min_us = global[2];
    res->algbw = (double) total * dev_dtype_size(o->type->dev) / (res->mean_us * 1e-6) / 1e9;
    res->busbw = res->algbw * busbw_factor(c, g_size);
    res->wrong = wrong;
    res->iters = iters;
    res->done = 1;
    rc = 0;
    goto out;

fail:
    if ('\0' == why[0]) {
        snprintf(why, len, "failed on another rank");
    }
    rc = -1;
out:
    if (forced && cv->found) {
        MPI_T_cvar_write(cv->handle, &cv->saved);
    }
    free(times);
    return rc;
}

/* ---- setup ------------------------------------------------------------------------------ */

/* This process's rank among those of its node, before MPI_Init (from the launcher), so that
 * the device is chosen before Open MPI and coll/gpu first touch it; -1 when unknown. */
static int local_rank_from_env(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                       "SLURM_LOCALID", "PMI_LOCAL_RANK"};
    size_t k;
    for (k = 0; k < sizeof(vars) / sizeof(vars[0]); ++k) {
        const char *v = getenv(vars[k]);
        if (NULL != v && '\0' != *v) {
            return atoi(v);
        }
    }
    return -1;
}

/* Open the device layer before MPI_Init and tell coll/gpu (which shares the library, hence the
 * backend) to use the same one.  Returns 0 or -1 with the reason in why. */
static int open_device(bench_t *B, char *why, size_t len)
{
    const char *env = getenv("OMPI_MCA_coll_gpu_device");
    /* coll/gpu's parameter may also say "auto", which names no backend */
    dev_backend_t env_backend = NULL != env ? dev_backend_from_name(env) : DEV_BACKEND_NONE;
    dev_backend_t want = B->opt.device;
    int count = 0, lr;

    if (DEV_BACKEND_NONE == want) {
        want = env_backend;
    }
    if (DEV_BACKEND_NONE == want) {
        /* a GPU if one is there, else the emulated device (the header says which) */
        if (DEV_OK == dev_open(DEV_BACKEND_CUDA)) {
            if (DEV_OK == dev_device_count(&count) && count > 0) {
                want = DEV_BACKEND_CUDA;
            } else {
                dev_close();
            }
        }
        if (DEV_BACKEND_NONE == want) {
            want = DEV_BACKEND_EMULATED;
        }
    }
    if (DEV_BACKEND_NONE != env_backend && env_backend != want) {
        snprintf(why, len,
                 "OMPI_MCA_coll_gpu_device=%s but the benchmark was asked for the %s device: "
                 "they share one device layer, so they must agree (drop -d or change the "
                 "variable)",
                 env, dev_backend_name(want));
        return -1;
    }
    if (dev_backend() != want && DEV_OK != dev_open(want)) {
        snprintf(why, len, "cannot open the %s device: %s", dev_backend_name(want),
                 dev_error_string());
        return -1;
    }
    B->device = want;
    /* coll/gpu reads its parameters at MPI_Init: tell it the device the buffers live on */
    setenv("OMPI_MCA_coll_gpu_device", dev_backend_name(want), 1);

    if (DEV_OK != dev_device_count(&count) || count < 1) {
        snprintf(why, len, "the %s device layer sees no device: %s", dev_backend_name(want),
                 dev_error_string());
        return -1;
    }
    lr = local_rank_from_env();
    B->ordinal = (lr < 0 ? 0 : lr) % count;
    if (DEV_OK != dev_set_device(B->ordinal)) {
        snprintf(why, len, "dev_set_device(%d): %s", B->ordinal, dev_error_string());
        return -1;
    }
    return 0;
}

/* Who runs where: node count, device per rank, and whether ranks share a GPU. */
static void describe_ranks(bench_t *B)
{
    typedef struct {
        char host[64];
        char pci[32];
        dev_uuid_t uuid;
        int ordinal;
    } rank_info_t;
    rank_info_t me, *all = NULL;
    MPI_Comm node;
    int lrank = 0, lr_env = local_rank_from_env(), i, j, count = 1;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_free(&node);
    if (lr_env != lrank && DEV_OK == dev_device_count(&count) && count > 0) {
        /* the launcher told us nothing (or something else): follow MPI's view */
        B->ordinal = lrank % count;
        dev_set_device(B->ordinal);
    }
    i = 0 == lrank;
    MPI_Allreduce(&i, &B->nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    memset(&me, 0, sizeof(me));
    gethostname(me.host, sizeof(me.host) - 1);
    me.ordinal = B->ordinal;
    if (DEV_OK != dev_device_pci_bus_id(B->ordinal, me.pci, sizeof(me.pci))) {
        snprintf(me.pci, sizeof(me.pci), "?");
    }
    dev_device_uuid(B->ordinal, &me.uuid);
    if (0 == g_rank) {
        all = (rank_info_t *) calloc((size_t) g_size, sizeof(*all));
    }
    MPI_Gather(&me, (int) sizeof(me), MPI_BYTE, all, (int) sizeof(me), MPI_BYTE, 0,
               MPI_COMM_WORLD);
    if (0 == g_rank && NULL != all) {
        for (i = 0; i < g_size; ++i) {
            say("#   rank %d: host %s, %s device %d (%s)\n", i, all[i].host,
                dev_backend_name(B->device), all[i].ordinal, all[i].pci);
            for (j = 0; j < i; ++j) {
                if (DEV_BACKEND_CUDA == B->device && 0 == strcmp(all[i].host, all[j].host)
                    && 0 == memcmp(&all[i].uuid, &all[j].uuid, sizeof(dev_uuid_t))) {
                    B->shared_gpu = 1;
                }
            }
        }
        free(all);
    }
    MPI_Bcast(&B->shared_gpu, 1, MPI_INT, 0, MPI_COMM_WORLD);
}

/* Parse -B into backends and decide, per collective, which can run and why not. */
static void setup_backends(bench_t *B)
{
    char buf[512], *tok, *save = NULL;
    int k, ci;
    snprintf(buf, sizeof(buf), "%s", B->opt.backends);
    for (tok = strtok_r(buf, ",", &save); NULL != tok && B->nbackends < MAX_BACKENDS;
         tok = strtok_r(NULL, ",", &save)) {
        backend_t *b = &B->backends[B->nbackends];
        memset(b, 0, sizeof(*b));
        snprintf(b->name, sizeof(b->name), "%s", tok);
        if (0 == strcmp(tok, "nccl")) {
            b->kind = BK_NCCL;
        } else if (0 == strcmp(tok, "mpi")) {
            b->kind = BK_MPI;
        } else if (0 == strcmp(tok, "staged")) {
            b->kind = BK_MPI;
            snprintf(b->alg, sizeof(b->alg), "staged");
        } else if (0 == strncmp(tok, "mpi:", 4) && '\0' != tok[4]) {
            b->kind = BK_MPI;
            snprintf(b->alg, sizeof(b->alg), "%s", tok + 4);
        } else if (0 == strcmp(tok, "nb")) {
            b->kind = BK_NB;
        } else if (0 == strncmp(tok, "nb:", 3) && '\0' != tok[3]) {
            b->kind = BK_NB;
            snprintf(b->alg, sizeof(b->alg), "%s", tok + 3);
        } else {
            say("# backend %s: unknown (mpi, staged, nccl, mpi:ALGORITHM, nb, nb:ALGORITHM): "
                "skipped\n", tok);
            continue;
        }
        ++B->nbackends;
    }
    snprintf(B->copy.name, sizeof(B->copy.name), "copy");
    B->copy.kind = BK_COPY;
    for (k = 0; k < B->nbackends; ++k) {
        backend_t *b = &B->backends[k];
        for (ci = 0; ci < B->opt.ncolls; ++ci) {
            bench_coll_t c = (bench_coll_t) B->opt.colls[ci];
            cvar_t *cv = &B->cvars[c];
            b->usable[c] = 1;
            if (BK_NCCL == b->kind) {
                if ('\0' != B->nccl_why[0]) {
                    b->usable[c] = 0;
                    copy_str(b->why[c], WHY_LEN, B->nccl_why);
                }
            } else if (!B->gpu_loaded && (DEV_BACKEND_EMULATED == B->device || !B->cuda_aware)) {
                /* the call would hand device memory to host code: a crash, not a number */
                b->usable[c] = 0;
                snprintf(b->why[c], WHY_LEN, "coll/gpu is not loaded and Open MPI %s",
                         DEV_BACKEND_EMULATED == B->device
                             ? "cannot read emulated device memory"
                             : "is not CUDA-aware");
            } else if ('\0' != b->alg[0]) {
                /* Without a variable there is nothing to force, and running the call as it is
                 * would label coll/gpu's own choice (the GPU path, for some) as forced */
                if (!cv->found && B->gpu_loaded) {
                    b->usable[c] = 0;
                    if (0 == strcmp(b->alg, "staged")) {
                        snprintf(b->why[c], WHY_LEN, "coll/gpu has no switch that forces %s "
                                 "onto its host staging path (no coll_gpu_%s_algorithm, and no "
                                 "other parameter stages the whole call): the mpi backend's row "
                                 "is the path coll/gpu chooses", coll_info[c].name,
                                 coll_info[c].name);
                    } else {
                        snprintf(b->why[c], WHY_LEN, "coll/gpu has no algorithm to choose for "
                                 "%s (no coll_gpu_%s_algorithm)", coll_info[c].name,
                                 coll_info[c].name);
                    }
                } else if (!cv->found && mpit_ok) {
                    b->usable[c] = 0;
                    snprintf(b->why[c], WHY_LEN, "coll/gpu is not loaded: no algorithm to force");
                } else if (!cv->found || !cv->writable) {
                    b->usable[c] = 0;
                    copy_str(b->why[c], WHY_LEN, cv->why);
                } else if (0 != cvar_alg_value(cv, b->alg, &b->alg_value[c])) {
                    /* a copy: GCC's -Wrestrict cannot tell cv->name from b->why (both in *B) */
                    char var[sizeof(cv->name)];
                    copy_str(var, sizeof(var), cv->name);
                    b->usable[c] = 0;
                    snprintf(b->why[c], WHY_LEN, "%s has no value '%s'", var, b->alg);
                } else if (cv->borrowed) {
                    say("# backend %s for %s: forced through %s (%s)\n", b->name,
                        coll_info[c].name, cv->name, coll_info[c].path_why);
                }
            }
            if (!b->usable[c]) {
                say("# backend %s for %s: unavailable: %s\n", b->name, coll_info[c].name,
                    b->why[c]);
            }
        }
    }
}

/* ---- output ----------------------------------------------------------------------------- */

static void print_table_header(const bench_t *B, bench_coll_t c)
{
    int k;
    say("#\n# %s%s, %s %s, %d ranks on %d node(s), %s device%s\n", coll_info[c].name,
        in_place(&B->opt, c) ? " in place" : "", B->opt.type->name,
        coll_info[c].reduces ? B->opt.op_name : "-", g_size, B->nodes, dev_backend_name(B->device),
        B->opt.check ? ", check mode" : "");
    for (k = 0; k < B->nbackends; ++k) {
        if (BK_NCCL == B->backends[k].kind && B->backends[k].usable[c]) {
            say("#   %s calls %s\n", B->backends[k].name, coll_info[c].nccl);
        }
    }
    say("# %11s %11s %7s %5s %5s  %-12s %10s %12s %12s %8s", "size(B)", "count", "type", "op",
        "root", "backend", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    if (B->opt.copy_floor) {
        say(" %10s %7s", "copy(us)", "x copy");
    }
    say("\n");
}

/* One row; copy_us is the copy floor of this collective and size (-K), 0 for none. */
static void print_row(bench_t *B, bench_coll_t c, size_t bytes, size_t total,
                      const backend_t *b, const result_t *r, double copy_us)
{
    char wrong[32], root[16], copy[3][32] = {"", "", ""}; /* CSV: bytes, us, time / us */
    const char *op = coll_info[c].reduces ? B->opt.op_name : "-";
    if (B->opt.check) {
        snprintf(wrong, sizeof(wrong), "%lld", r->wrong);
    } else {
        snprintf(wrong, sizeof(wrong), "-");
    }
    if (BENCH_BCAST == c) {
        snprintf(root, sizeof(root), "%d", B->opt.root);
    } else {
        snprintf(root, sizeof(root), "-");
    }
    if (copy_us > 0) {
        snprintf(copy[0], sizeof(copy[0]), "%zu",
                 copy_floor_piece(c, bytes, g_size) * (size_t) coll_info[c].phases);
        /* significant digits, not decimals: an emulated copy may take well under 1 ns, and
         * time_over_copy must be recomputable from the row */
        snprintf(copy[1], sizeof(copy[1]), "%.6g", copy_us);
        snprintf(copy[2], sizeof(copy[2]), "%.4f", r->mean_us / copy_us);
    }
    say("  %11zu %11zu %7s %5s %5s  %-12s %10.2f %12.2f %12.2f %8s", bytes, total,
        B->opt.type->name, op, root, b->name, r->mean_us, r->algbw, r->busbw, wrong);
    if (B->opt.copy_floor && copy_us > 0) {
        say(" %10.2f %7.2f", copy_us, r->mean_us / copy_us);
    } else if (B->opt.copy_floor) {
        say(" %10s %7s", "-", "-");
    }
    say("\n");
    if (0 == g_rank && NULL != B->csv) {
        fprintf(B->csv, "%s,%zu,%zu,%s,%s,%s,%s,%d,%d,%s,%d,%.3f,%.3f,%.3f,%.4f,%.4f,%s,",
                coll_info[c].name, bytes, total, B->opt.type->name, op,
                BENCH_BCAST == c ? root : "", b->name, g_size, B->nodes,
                dev_backend_name(B->device), r->iters, r->mean_us, r->median_us, r->min_us,
                r->algbw, r->busbw, B->opt.check ? wrong : "");
        if (B->floor_us > 0) {
            fprintf(B->csv, "%.3f", B->floor_us);
        }
        /* the copy floor's columns come last, so that the earlier ones keep their places */
        fprintf(B->csv, ",%d,%s,%s,%s\n", B->shared_gpu, copy[0], copy[1], copy[2]);
        fflush(B->csv);
    }
}

/* Per size: each backend against the baseline, NCCL (time ratio below 1 and busbw ratio above
 * 1: faster than NCCL), or, in a run without NCCL, coll/gpu's own staging path; and coll/gpu's
 * time against the latency floor. */
static void print_closing(bench_t *B, bench_coll_t c, const size_t *sizes, int nsizes,
                          result_t (*res)[MAX_BACKENDS])
{
    int s, k, nccl = -1, staged = -1, mpi = -1, base, ncols = 0, floor_col;
    double logsum[MAX_BACKENDS];
    int logn[MAX_BACKENDS], ran[MAX_BACKENDS];
    char head[64];

    /* a backend takes part when it has results, even if an error stopped it later */
    for (k = 0; k < B->nbackends; ++k) {
        const backend_t *b = &B->backends[k];
        ran[k] = 0;
        logsum[k] = 0; /* also for a backend that did not run: the geometric means skip it */
        logn[k] = 0;
        for (s = 0; s < nsizes; ++s) {
            ran[k] |= res[s][k].done;
        }
        if (!ran[k]) {
            continue;
        }
        if (BK_NCCL == b->kind) {
            nccl = k;
        } else if (0 == strcmp(b->name, "staged")) {
            staged = k;
        } else if (0 == strcmp(b->name, "mpi")) {
            mpi = k;
        }
        logsum[k] = 0;
        logn[k] = 0;
    }
    base = nccl >= 0 ? nccl : staged;
    floor_col = B->floor_us > 0 && mpi >= 0;
    say("#\n# Closing table, %s: ", coll_info[c].name);
    if (nccl >= 0) {
        say("coll/gpu (backend mpi) against NCCL, same processes, same buffers.\n"
            "#   t = time ratio (below 1: faster than NCCL), bw = busbw ratio (above 1: more than "
            "NCCL).\n");
    } else {
        say("no NCCL in this run (it needs -d cuda, one GPU per rank, and a build with NCCL).\n");
        if (base >= 0 && mpi >= 0) {
            say("#   Against coll/gpu's own staging path instead: t = time ratio (below 1: faster "
                "than staged), bw = busbw ratio.\n");
        }
    }
    if (floor_col) {
        say("#   floor = time / latency floor (%.2f us); the small-message goal is <= 1.25.\n",
            B->floor_us);
    }
    for (k = 0; k < B->nbackends && base >= 0; ++k) {
        ncols += k != base && ran[k];
    }
    if (0 == ncols && !floor_col) {
        return;
    }

    say("# %11s", "size(B)");
    for (k = 0; k < B->nbackends && base >= 0; ++k) {
        if (k == base || !ran[k]) {
            continue;
        }
        snprintf(head, sizeof(head), "%s t", B->backends[k].name);
        say(" %12s", head);
        snprintf(head, sizeof(head), "%s bw", B->backends[k].name);
        say(" %12s", head);
    }
    if (floor_col) {
        say(" %10s", "mpi/floor");
        if (nccl >= 0) {
            say(" %10s", "nccl/floor");
        }
    }
    say("\n");
    for (s = 0; s < nsizes; ++s) {
        say("  %11zu", sizes[s]);
        for (k = 0; k < B->nbackends && base >= 0; ++k) {
            const result_t *r = &res[s][k], *n = &res[s][base];
            if (k == base || !ran[k]) {
                continue;
            }
            if (r->done && n->done && r->mean_us > 0 && n->mean_us > 0) {
                say(" %12.2f", r->mean_us / n->mean_us);
                logsum[k] += log(r->mean_us / n->mean_us);
                ++logn[k];
            } else {
                say(" %12s", "-");
            }
            /* busbw is 0 with one rank */
            if (r->done && n->done && n->busbw > 0) {
                say(" %12.2f", r->busbw / n->busbw);
            } else {
                say(" %12s", "-");
            }
        }
        if (floor_col) {
            if (res[s][mpi].done) {
                say(" %10.2f", res[s][mpi].mean_us / B->floor_us);
            } else {
                say(" %10s", "-");
            }
            if (nccl >= 0) {
                if (res[s][nccl].done) {
                    say(" %10.2f", res[s][nccl].mean_us / B->floor_us);
                } else {
                    say(" %10s", "-");
                }
            }
        }
        say("\n");
    }
    for (k = 0; k < B->nbackends && ncols > 0; ++k) {
        if (k != base && logn[k] > 0) {
            say("#   %s / %s time, geometric mean over %d sizes: %.3f\n", B->backends[k].name,
                B->backends[base].name, logn[k], exp(logsum[k] / logn[k]));
        }
    }
}

/* ---- main ------------------------------------------------------------------------------- */

/* Sizes of collective c: the -b/-e/-f ladder ending at -e, each rounded down to what the
 * collective can split evenly, without duplicates or zeros. */
static int size_ladder(const bench_t *B, bench_coll_t c, size_t *sizes)
{
    size_t ts = dev_dtype_size(B->opt.type->dev);
    size_t unit = ts * (coll_info[c].blocks ? (size_t) g_size : 1);
    double s;
    int n = 0;
    for (s = (double) B->opt.minbytes; s <= (double) B->opt.maxbytes * (1 + 1e-9) && n < MAX_SIZES;
         s = s * B->opt.factor < s + 1 ? s + 1 : s * B->opt.factor) {
        size_t v = (size_t) s / unit * unit;
        if (0 == v || (n > 0 && sizes[n - 1] == v)) {
            continue;
        }
        sizes[n++] = v;
    }
    /* -e is part of the range even when the factor steps over it */
    if (n < MAX_SIZES && B->opt.maxbytes / unit * unit > (n > 0 ? sizes[n - 1] : 0)) {
        sizes[n++] = B->opt.maxbytes / unit * unit;
    }
    return n;
}

/* The header: who runs where, with what, and how the numbers are made. */
static void print_header(bench_t *B)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING], colls[1024];
    int ci, n = 0, idx;
    time_t now = time(NULL);

    MPI_Get_library_version(lib, &n);
    lib[strcspn(lib, "\n,")] = '\0';
    say("# coll_gpu_bench: %s", ctime(&now));
    say("# MPI: %s\n", lib);
    cvar_read_string("coll", colls, sizeof(colls));
    B->gpu_loaded = mpit_ok && MPI_SUCCESS == MPI_T_cvar_get_index("coll_gpu_device", &idx);
    for (ci = 0; ci < B->opt.ncolls; ++ci) {
        char name[96];
        bench_coll_t c = (bench_coll_t) B->opt.colls[ci];
        snprintf(name, sizeof(name), "coll_gpu_%s_algorithm", coll_info[c].name);
        cvar_open(name, &B->cvars[c]);
        if (!B->cvars[c].found && B->gpu_loaded && NULL != coll_info[c].path_of) {
            snprintf(name, sizeof(name), "coll_gpu_%s_algorithm", coll_info[c].path_of);
            cvar_open(name, &B->cvars[c]);
            B->cvars[c].borrowed = 1;
        }
    }
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    B->cuda_aware = 1 == MPIX_Query_cuda_support();
#endif
    say("# coll components asked for (MCA coll): %s; coll/gpu: %s; Open MPI CUDA-aware: %s\n",
        '\0' != colls[0] ? colls : "(default)", B->gpu_loaded ? "loaded" : "NOT loaded",
        B->cuda_aware ? "yes" : "no");
    say("# ranks: %d; device: %s%s\n", g_size, dev_backend_name(B->device),
        DEV_BACKEND_EMULATED == B->device
            ? " (the CPU stands in for the GPU: times measure the emulation, not a GPU)"
            : "");
    describe_ranks(B);
    say("# nodes: %d\n", B->nodes);
    if (B->shared_gpu) {
        say("#\n# !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
            "# !!! SEVERAL RANKS SHARE ONE GPU: the GPU time-slices between processes, so\n"
            "# !!! every time below is NOT meaningful (correctness only).  One GPU per rank.\n"
            "# !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n#\n");
    }
}

/* The latency floor of this device, measured by every rank at once (cuda only). */
static void measure_floor(bench_t *B)
{
    B->floor_us = 0;
    if (DEV_BACKEND_CUDA != B->device) {
        say("# floor: n/a on the %s device\n", dev_backend_name(B->device));
        return;
    }
    if (!B->opt.floor) {
        return;
    }
#ifdef COLL_GPU_BENCH_FLOOR
    {
        char why[WHY_LEN];
        double f[2] = {0, 0}, fmax[2];
        int frc;
        MPI_Barrier(MPI_COMM_WORLD);
        frc = bench_floor_measure(B->ordinal, 1000, &f[0], &f[1], why, sizeof(why));
        if (!all_min(0 == frc)) {
            if (0 != frc) {
                fprintf(stderr, "rank %d: floor measurement failed: %s\n", g_rank, why);
            }
            say("# floor: measurement failed (see stderr)\n");
            return;
        }
        MPI_Allreduce(f, fmax, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        B->floor_us = fmax[0] < fmax[1] ? fmax[0] : fmax[1];
        say("# floor (median of 1000, max over ranks, all ranks at once): empty kernel writing a "
            "flag to mapped host memory + host spin: %.2f us; empty kernel + "
            "cudaStreamSynchronize: %.2f us\n", fmax[0], fmax[1]);
        say("# floor = %.2f us; small-message goal (1.25 x floor): %.2f us\n", B->floor_us,
            1.25 * B->floor_us);
    }
#else
    say("# floor: not built (no CUDA at configure time)\n");
#endif
}

/* NCCL on the same ranks, when asked for and possible; otherwise B->nccl_why says why not. */
static void setup_nccl(bench_t *B)
{
    B->nccl_why[0] = '\0';
    if (NULL == strstr(B->opt.backends, "nccl")) {
        return;
    }
#ifdef COLL_GPU_BENCH_NCCL
    {
        char ver[32], why[WHY_LEN];
        bench_nccl_version(ver, sizeof(ver));
        /* every condition is the same on all ranks, so all or none enter bench_nccl_init */
        if (DEV_BACKEND_CUDA != B->device) {
            snprintf(B->nccl_why, WHY_LEN, "needs the cuda device");
        } else if (B->shared_gpu) {
            snprintf(B->nccl_why, WHY_LEN, "NCCL refuses two ranks on one GPU");
        } else if (0 != bench_nccl_supports(B->opt.type->dev, B->opt.op, why, sizeof(why))) {
            snprintf(B->nccl_why, WHY_LEN, "%s", why);
        } else if (0 != bench_nccl_init(&B->nccl, MPI_COMM_WORLD, B->ordinal, why,
                                        sizeof(why))) {
            snprintf(B->nccl_why, WHY_LEN, "init failed: %.400s", why);
        }
        say("# NCCL %s%s%s\n", ver, '\0' != B->nccl_why[0] ? ": unavailable: " : "",
            B->nccl_why);
    }
#else
    snprintf(B->nccl_why, WHY_LEN, "not built (configure found no NCCL or no CUDA)");
#endif
}

static void print_method(const bench_t *B)
{
    say("# backends asked for: %s\n", B->opt.backends);
    say("# timing: barrier, then each rank times each of up to %d calls (after %d warm-up) with "
        "a monotonic clock;\n#   time = max over ranks of the per-rank mean; algbw = size / "
        "time; busbw = algbw x %s\n",
        B->opt.iters, B->opt.warmup,
        1 == B->opt.ncolls && BENCH_BCAST == B->opt.colls[0]
            ? "1 (bcast)"
            : "2(n-1)/n (allreduce), 1 (bcast), (n-1)/n (the others)");
    say("#   completion: an MPI call returns with the data final; each nccl call is followed by "
        "cudaStreamSynchronize, so it is timed to the same point\n");
    if (B->opt.check) {
        say("# check: per size and backend, fresh random data (seed 0x%llx), output poisoned, "
            "verified after the first call and after the timed calls\n#   against a host "
            "reference computed independently; #wrong = wrong elements summed over ranks\n",
            (unsigned long long) B->opt.seed);
    }
    if (B->opt.copy_floor) {
        say("# copy floor (-K): per collective and size, every rank copies within its own %s "
            "device memory (dev_memcpy) what it receives from the others: (n-1) blocks, the "
            "whole message (bcast), or two copies of (n-1)/n of it (allreduce: two-shot's "
            "steps, without the arithmetic); timed as the calls are (all ranks at once, max over "
            "ranks of the per-rank mean)%s\n#   copy(us) = that time, x copy = time / copy(us); "
            "issue 22's goal at >= 16 MiB: x copy <= 1.3\n",
            dev_backend_name(B->device),
            g_size > 1 ? "" : "; one rank receives nothing: no floor");
    }
}

/* Device buffers for the largest size, filled with random data (timing never runs on zeros),
 * and the host buffers of check mode.  Collective: 0 when every rank succeeded. */
static int alloc_buffers(bench_t *B)
{
    size_t sizes[MAX_SIZES], maxbuf = 0, ts = dev_dtype_size(B->opt.type->dev);
    int ci, n, ok;
    gen_t g;

    for (ci = 0; ci < B->opt.ncolls; ++ci) {
        n = size_ladder(B, (bench_coll_t) B->opt.colls[ci], sizes);
        if (n > 0 && sizes[n - 1] > maxbuf) {
            maxbuf = sizes[n - 1];
        }
    }
    B->bufbytes = maxbuf > 0 ? maxbuf : 8;
    ok = DEV_OK == dev_mem_alloc(&B->dsend, B->bufbytes)
         && DEV_OK == dev_mem_alloc(&B->drecv, B->bufbytes);
    B->hin = malloc(B->bufbytes);
    B->vcounts = (int *) malloc(2 * sizeof(int) * (size_t) g_size);
    B->vdispls = NULL != B->vcounts ? B->vcounts + g_size : NULL;
    ok = ok && NULL != B->hin && NULL != B->vcounts;
    if (B->opt.check) {
        B->hout = malloc(B->bufbytes);
        B->href = malloc(B->bufbytes);
        ok = ok && NULL != B->hout && NULL != B->href;
    }
    if (ok) {
        gen_setup(&g, B->opt.seed, B->opt.type, B->opt.op, BENCH_ALLREDUCE, g_size);
        fill_input(&g, B->opt.type, g_rank, 0, B->hin, B->bufbytes / ts);
        ok = DEV_OK == dev_memcpy(B->dsend, B->hin, B->bufbytes)
             && DEV_OK == dev_memcpy(B->drecv, B->hin, B->bufbytes);
    }
    if (!ok) {
        fprintf(stderr, "rank %d: cannot allocate or fill 2 x %zu bytes: %s\n", g_rank,
                B->bufbytes, dev_error_string());
    }
    return all_min(ok) ? 0 : -1;
}

static void open_csv(bench_t *B)
{
    if (0 != g_rank || NULL == B->opt.csv) {
        return;
    }
    B->csv = fopen(B->opt.csv, "w");
    if (NULL == B->csv) {
        fprintf(stderr, "coll_gpu_bench: cannot write %s: %s\n", B->opt.csv, strerror(errno));
        return;
    }
    fprintf(B->csv, "collective,size_bytes,count,type,op,root,backend,nranks,nodes,device,iters,"
                    "time_us,median_us,min_us,algbw_gbs,busbw_gbs,wrong,floor_us,shared_gpu,"
                    "copy_bytes,copy_us,time_over_copy\n");
}

/* Every size of collective c on every backend, then the closing table.  A backend that fails
 * is dropped for the rest of this collective.  Adds the wrong elements, the (size, backend)
 * pairs that ran and those that failed to the counters; returns 0, or 1 when something failed. */
static int run_collective(bench_t *B, bench_coll_t c, long long *total_wrong, int *segments,
                          int *failed)
{
    static result_t results[MAX_SIZES][MAX_BACKENDS];
    size_t sizes[MAX_SIZES], ts = dev_dtype_size(B->opt.type->dev);
    char why[WHY_LEN];
    int n, s, k, usable = 0, rc = 0;
    int copy_ok = B->opt.copy_floor && g_size > 1; /* one rank receives nothing */
    double copy_us;

    n = size_ladder(B, c, sizes);
    memset(results, 0, sizeof(results));
    print_table_header(B, c);
    for (k = 0; k < B->nbackends; ++k) {
        usable += B->backends[k].usable[c];
    }
    if (0 == usable) {
        say("#   (no backend can run %s here: see the lines above)\n", coll_info[c].name);
    }
    for (s = 0; s < n; ++s) {
        size_t total = sizes[s] / ts;
        size_t count = coll_info[c].blocks ? total / (size_t) g_size : total;
        /* the v forms' displacements reach (n - 1) * count */
        if (count > (size_t) INT_MAX || (coll_info[c].vector && total > (size_t) INT_MAX)) {
            say("# %zu B: %zu elements do not fit an int count or displacement: skipped\n",
                sizes[s], coll_info[c].vector ? total : count);
            continue;
        }
        copy_us = 0;
        if (copy_ok && 0 < usable) {
            result_t copy;
            if (0 != run_segment(B, &B->copy, c, sizes[s], count, total, &copy, why,
                                 sizeof(why))) {
                fprintf(stderr, "rank %d: %s %zu B copy floor: %s\n", g_rank, coll_info[c].name,
                        sizes[s], why);
                say("# %s %zu B, copy floor: error (%s); no copy floor for this collective\n",
                    coll_info[c].name, sizes[s], why);
                copy_ok = 0;
                ++*failed;
                rc = 1;
            } else {
                copy_us = copy.mean_us;
            }
        }
        for (k = 0; k < B->nbackends; ++k) {
            backend_t *b = &B->backends[k];
            if (!b->usable[c]) {
                continue;
            }
            if (0 != run_segment(B, b, c, sizes[s], count, total, &results[s][k], why,
                                 sizeof(why))) {
                fprintf(stderr, "rank %d: %s %zu B %s: %s\n", g_rank, coll_info[c].name, sizes[s],
                        b->name, why);
                say("# %s %zu B, backend %s: error (%s); backend stopped for this collective\n",
                    coll_info[c].name, sizes[s], b->name, why);
                b->usable[c] = 0;
                ++*failed;
                rc = 1;
                continue;
            }
            *total_wrong += results[s][k].wrong;
            ++*segments;
            print_row(B, c, sizes[s], total, b, &results[s][k], copy_us);
            if (BK_NB == b->kind) {
                /* the blocking twin (mpi for nb, mpi:ALG for nb:ALG) when it ran before */
                char twin[64];
                snprintf(twin, sizeof(twin), "mpi%s%s", '\0' != b->alg[0] ? ":" : "", b->alg);
                for (int j = 0; j < k; ++j) {
                    if (0 == strcmp(B->backends[j].name, twin) && results[s][j].done
                        && results[s][j].mean_us > 0) {
                        say("#   %s / %s time, %s %zu B: %.2f\n", b->name, twin, coll_info[c].name,
                            sizes[s], results[s][k].mean_us / results[s][j].mean_us);
                    }
                }
                say("#   %s pinned host allocations per call, %s %zu B: %.2f\n", b->name,
                    coll_info[c].name, sizes[s], results[s][k].pinned_per_call);
            }
            if (results[s][k].both_us > 0) {
                const result_t *r = &results[s][k];
                double shorter = r->mean_us < r->comp_us ? r->mean_us : r->comp_us;
                say("#   overlap %s %s %zu B: comm %.2f us, compute %.2f us, together %.2f us, "
                    "overlap %.2f\n",
                    b->name, coll_info[c].name, sizes[s], r->mean_us, r->comp_us, r->both_us,
                    shorter > 0 ? (r->mean_us + r->comp_us - r->both_us) / shorter : 0.0);
            }
        }
    }
    print_closing(B, c, sizes, n, results);
    return rc;
}

int main(int argc, char **argv)
{
    static bench_t bench;
    bench_t *B = &bench;
    char err[WHY_LEN] = "";
    int prc, provided, ci, exit_code = 0;
    long long total_wrong = 0;
    int segments = 0, failed = 0;

    /* the device is opened before MPI_Init, so that coll/gpu finds it chosen */
    prc = parse_options(argc, argv, &B->opt, err, sizeof(err));
    if (0 == prc && 0 != open_device(B, err, sizeof(err))) {
        prc = -2;
    }

    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    if (1 == prc) {
        if (0 == g_rank) {
            usage(stdout);
        }
        MPI_Finalize();
        return 0;
    }
    if (-1 == prc) {
        if (0 == g_rank) {
            fprintf(stderr, "coll_gpu_bench: %s\n", err);
            usage(stderr);
        }
        MPI_Finalize();
        return 2;
    }
    if (!all_min(-2 != prc)) {
        if (-2 == prc) {
            fprintf(stderr, "coll_gpu_bench: rank %d: %s\n", g_rank, err);
        }
        MPI_Finalize();
        return 1;
    }
    if (B->opt.root >= g_size) {
        say("coll_gpu_bench: root %d is not a rank of %d\n", B->opt.root, g_size);
        MPI_Finalize();
        return 2;
    }
    if (!B->opt.seed_given) {
        B->opt.seed = (uint64_t) time(NULL) ^ ((uint64_t) getpid() << 32);
        MPI_Bcast(&B->opt.seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    }
    mpit_ok = MPI_SUCCESS == MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);

    print_header(B);
    measure_floor(B);
    setup_nccl(B);
    setup_backends(B);
    print_method(B);
    if (0 != alloc_buffers(B)) {
        exit_code = 1;
        goto finish;
    }
    open_csv(B);

    for (ci = 0; ci < B->opt.ncolls; ++ci) {
        exit_code |= run_collective(B, (bench_coll_t) B->opt.colls[ci], &total_wrong, &segments,
                                    &failed);
    }
    if (0 == segments) {
        say("#\n# nothing ran: no backend could run here (see the lines above)\n");
        exit_code = 1;
    } else if (B->opt.check) {
        const char *verdict = 0 != total_wrong ? ""
                              : 0 == failed ? " (all results right)"
                                            : " in the calls that returned; some failed (above)";
        say("#\n# check: %lld wrong elements in total%s\n", total_wrong, verdict);
        if (total_wrong > 0) {
            exit_code = 1;
        }
    }
    if (B->shared_gpu) {
        say("# !!! SEVERAL RANKS SHARED ONE GPU: the times above are NOT meaningful.\n");
    }

finish:
    if (NULL != B->csv) {
        fclose(B->csv);
    }
#ifdef COLL_GPU_BENCH_NCCL
    bench_nccl_fini(B->nccl);
#endif
    if (NULL != B->dsend) {
        dev_mem_free(B->dsend);
    }
    if (NULL != B->drecv) {
        dev_mem_free(B->drecv);
    }
    free(B->hin);
    free(B->vcounts);
    free(B->hout);
    free(B->href);
    for (ci = 0; ci < BENCH_COLL_COUNT; ++ci) {
        cvar_close(&B->cvars[ci]);
    }
    if (mpit_ok) {
        MPI_T_finalize();
    }
    MPI_Finalize();
    dev_close();
    return exit_code;
}
