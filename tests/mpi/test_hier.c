/*
 * test_hier.c - MPI_Allreduce and MPI_Bcast on device buffers of communicators that span
 * (emulated) nodes: the hierarchical path of coll_gpu_hier.c (node team inside each node, UCX
 * between node leaders).  Run by tests/mpi/hier*.sh with coll_gpu_emulate_nodes set; the
 * scripts check from the verbose log that the path was taken.
 *
 * Cases, on MPI_COMM_WORLD and on a duplicate with the ranks reversed (other leaders, and a
 * second communicator whose tags must not mix with the first's):
 *   allreduce  int32 sum, int64 min, uint8 bor, double max, float sum (integer values: every
 *              order of the sum is exact), MPI_2INT minloc; counts 1, 1000 and several
 *              pipeline chunks plus a remainder; out of place and MPI_IN_PLACE
 *   bcast      bytes and doubles from every root, counts 1 and several chunks
 * and then communicators made, used and freed twelve times: results right, and no more file
 * descriptors open after the last than after the second (UCX endpoints over TCP hold sockets;
 * the endpoints are the process', one per peer, made before the cycles: a cycle that keeps one
 * leaks).
 * With a rail threshold (the run's coll_gpu_hier_rail_min_bytes, second argument), also:
 *   allreduce  every type and op above at counts 2, 3 and 1001 (shards of uneven length; with
 *              a threshold of 8 B, counts 1 and 2 above it are smaller than the rails)
 *   allreduce  float sum of fractional values (each order of the sum rounds differently),
 *              counts 1001 and several chunks: every rank's result is bit for bit rank 0's, and
 *              near the reference
 * and rank 0 prints how many allreduce calls were of the threshold or more ("rail-sized"),
 * which the script compares with the verbose log.
 * Inputs are fresh random data per case (every rank can regenerate every rank's input, so
 * each computes the reference itself); outputs are poisoned first.
 *
 * With "exchange" as the third argument, instead of all the above, on MPI_COMM_WORLD, the
 * reversed duplicate and a split that interleaves the nodes (ranks of even world rank first:
 * on 2 x 2 every node's ranks are 0 and 2, or 1 and 3, of the communicator):
 *   allgather             int32, double, uint8 and MPI_2INT blocks of 1 to several chunks and
 *                         odd sizes, out of place and MPI_IN_PLACE; and int32 blocks received
 *                         into a vector type with gaps, whose gap bytes must keep their poison
 *   allgatherv            int32, uint8 and double blocks whose counts differ by rank (one
 *                         empty; small, and of several chunks), in reverse rank order with
 *                         holes, which must keep their poison; out of place and MPI_IN_PLACE
 *   reduce_scatter_block  every type and op above, blocks of 1, 333 and several chunks, out
 *                         of place and MPI_IN_PLACE
 *   reduce_scatter        int32 sum and double max with counts that differ by rank (one empty)
 *   reduce                int32 sum, double max (several chunks) and MPI_2INT minloc to every
 *                         root, in place at the root or not, the other ranks passing NULL or a
 *                         poisoned receive buffer that must keep its poison
 * and rank 0 prints how many calls of each it made, which hier.sh compares with the log.
 *
 * Usage: test_hier [chunk_bytes [rail_min_bytes [exchange]]]  (the coll_gpu_ucx_chunk_bytes the
 * run uses, to size the "several chunks" cases, default 4096; the coll_gpu_hier_rail_min_bytes
 * it sets, default none, 0 for none)
 */
#include <dirent.h>
#include <math.h>

#include "mpitest.h"

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef enum { T_I32, T_I64, T_U8, T_F64, T_F32, T_2INT } ttype_t;

static const struct {
    const char *name;
    size_t width;
} tinfo[] = {{"int32", 4}, {"int64", 8}, {"uint8", 1}, {"double", 8}, {"float", 4}, {"2int", 8}};

static MPI_Datatype mpi_of(ttype_t t)
{
    switch (t) {
    case T_I32: return MPI_INT32_T;
    case T_I64: return MPI_INT64_T;
    case T_U8: return MPI_UINT8_T;
    case T_F64: return MPI_DOUBLE;
    case T_F32: return MPI_FLOAT;
    default: return MPI_2INT;
    }
}

/* rank's input of case seed: count elements of t */
static void input(uint64_t seed, int rank, ttype_t t, void *out, size_t count)
{
    uint64_t s = seed * 1000003u + (uint64_t) rank * 7919u + 1;
    for (size_t i = 0; i < count; ++i) {
        uint64_t v = mix(&s);
        switch (t) {
        case T_I32: ((int32_t *) out)[i] = (int32_t) (v % 200001) - 100000; break;
        case T_I64: ((int64_t *) out)[i] = (int64_t) v; break;
        case T_U8: ((uint8_t *) out)[i] = (uint8_t) (1u << (v % 8)); break;
        case T_F64: ((double *) out)[i] = (double) (int64_t) (v >> 11) / 1024.0; break;
        case T_F32: ((float *) out)[i] = (float) ((int) (v % 2001) - 1000); break;
        case T_2INT:
            ((int32_t *) out)[2 * i] = (int32_t) (v % 17);   /* ties: the lower index wins */
            ((int32_t *) out)[2 * i + 1] = rank;
            break;
        }
    }
}

/* acc = acc op in (the op of each type in this test) */
static void combine(ttype_t t, void *acc, const void *in, size_t count)
{
    for (size_t i = 0; i < count; ++i) {
        switch (t) {
        case T_I32: ((int32_t *) acc)[i] += ((const int32_t *) in)[i]; break;
        case T_I64: {
            int64_t a = ((int64_t *) acc)[i], b = ((const int64_t *) in)[i];
            ((int64_t *) acc)[i] = (b < a) ? b : a;
            break;
        }
        case T_U8: ((uint8_t *) acc)[i] |= ((const uint8_t *) in)[i]; break;
        case T_F64: {
            double a = ((double *) acc)[i], b = ((const double *) in)[i];
            ((double *) acc)[i] = (b > a) ? b : a;
            break;
        }
        case T_F32: ((float *) acc)[i] += ((const float *) in)[i]; break;
        case T_2INT: {
            int32_t *a = (int32_t *) acc + 2 * i;
            const int32_t *b = (const int32_t *) in + 2 * i;
            if (b[0] < a[0] || (b[0] == a[0] && b[1] < a[1])) {
                a[0] = b[0];
                a[1] = b[1];
            }
            break;
        }
        }
    }
}

static MPI_Op op_of(ttype_t t)
{
    switch (t) {
    case T_I32: return MPI_SUM;
    case T_I64: return MPI_MIN;
    case T_U8: return MPI_BOR;
    case T_F64: return MPI_MAX;
    case T_F32: return MPI_SUM;
    default: return MPI_MINLOC;
    }
}

static uint64_t case_seed;
/* the run's coll_gpu_hier_rail_min_bytes (0: not set), and the allreduce calls made: all of
 * them, and those of that many bytes or more */
static size_t rail_min;
static int calls_all, calls_rail;

static void count_call(size_t bytes)
{
    ++calls_all;
    calls_rail += (0 < rail_min && bytes >= rail_min);
}

/* The MPI_COMM_WORLD rank of every rank of comm (malloc'd). */
static int *world_ranks(MPI_Comm comm)
{
    int size, *ranks, *world;
    MPI_Group g, wg;

    MPI_Comm_size(comm, &size);
    ranks = malloc(sizeof(int) * (size_t) size);
    world = malloc(sizeof(int) * (size_t) size);
    for (int r = 0; r < size; ++r) {
        ranks[r] = r;
    }
    MPI_Comm_group(comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(g, size, ranks, wg, world);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    free(ranks);
    return world;
}

static void test_allreduce(MPI_Comm comm, const char *cname, ttype_t t, size_t count,
                           int in_place)
{
    size_t w = tinfo[t].width, bytes = count * w;
    int rank, size, ok = 1, rc;
    char diag[MT_DIAG_LEN] = "";
    char *mine = malloc(bytes), *exp = malloc(bytes), *other = malloc(bytes), *got = malloc(bytes);
    void *sbuf = NULL, *rbuf = NULL;
    int *world = NULL;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    mt_set_case("allreduce");
    ++case_seed;
    /* the reference: every rank's input, by its rank in MPI_COMM_WORLD */
    world = world_ranks(comm);
    input(case_seed, world[0], t, exp, count);
    for (int r = 1; r < size; ++r) {
        input(case_seed, world[r], t, other, count);
        combine(t, exp, other, count);
    }
    input(case_seed, mt_rank, t, mine, count);
    memset(got, 0xA5, bytes); /* poison */
    rbuf = mt_mem_alloc(MT_MEM_DEVICE, bytes);
    ok = NULL != rbuf;
    if (in_place) {
        ok = ok && 0 == mt_mem_put(MT_MEM_DEVICE, rbuf, mine, bytes);
    } else {
        sbuf = mt_mem_alloc(MT_MEM_DEVICE, bytes);
        ok = ok && NULL != sbuf && 0 == mt_mem_put(MT_MEM_DEVICE, sbuf, mine, bytes)
             && 0 == mt_mem_put(MT_MEM_DEVICE, rbuf, got, bytes);
    }
    if (!ok) {
        mt_diag_add(diag, "buffer setup failed");
    }
    count_call(bytes);
    rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : sbuf, rbuf, (int) count, mpi_of(t), op_of(t),
                       comm);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Allreduce: %s", mt_mpi_error(rc));
        ok = 0;
    }
    ok = ok && 0 == mt_mem_get(MT_MEM_DEVICE, got, rbuf, bytes);
    for (size_t i = 0; ok && i < count; ++i) {
        if (0 != memcmp(got + i * w, exp + i * w, w)) {
            mt_diag_add(diag, "element %zu of %zu differs from the reference", i, count);
            ok = 0;
        }
    }
    mt_check(ok, diag, "allreduce %s %s count=%zu%s on %s", tinfo[t].name,
             t == T_2INT ? "minloc" : t == T_I64 ? "min" : t == T_U8 ? "bor" : t == T_F64 ? "max"
                                                                                 : "sum",
             count, in_place ? " in place" : "", cname);
    mt_mem_free(MT_MEM_DEVICE, sbuf);
    mt_mem_free(MT_MEM_DEVICE, rbuf);
    free(world);
    free(mine);
    free(exp);
    free(other);
    free(got);
}

/* A float sum of fractional values: each order of the additions rounds differently, so ranks
 * that reduced in different orders would differ in the last bits.  Every rank's result must be
 * rank 0's bit for bit, and within rounding of the reference (summed in double). */
static void test_identical(MPI_Comm comm, const char *cname, size_t count)
{
    size_t bytes = count * sizeof(float);
    float *mine = malloc(bytes), *got = malloc(bytes), *first = malloc(bytes);
    double *exp = calloc(count, sizeof(double));
    char diag[MT_DIAG_LEN] = "";
    int rank, size, ok, rc, *world = world_ranks(comm);
    void *buf;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    mt_set_case("allreduce identical");
    ++case_seed;
    for (int r = 0; r < size; ++r) {
        uint64_t s = case_seed * 1000003u + (uint64_t) world[r] * 7919u + 1;
        for (size_t i = 0; i < count; ++i) {
            float v = (float) ((int64_t) (mix(&s) % 2000001) - 1000000) / 997.0f;
            exp[i] += v;
            if (r == rank) {
                mine[i] = v;
            }
        }
    }
    memset(got, 0xA5, bytes);
    buf = mt_mem_alloc(MT_MEM_DEVICE, bytes);
    ok = NULL != buf && 0 == mt_mem_put(MT_MEM_DEVICE, buf, mine, bytes);
    if (!ok) {
        mt_diag_add(diag, "buffer setup failed");
    }
    count_call(bytes);
    rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int) count, MPI_FLOAT, MPI_SUM, comm);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Allreduce: %s", mt_mpi_error(rc));
        ok = 0;
    }
    ok = ok && 0 == mt_mem_get(MT_MEM_DEVICE, got, buf, bytes);
    /* rank 0's result to every rank, through host memory */
    memcpy(first, got, bytes);
    MPI_Bcast(first, (int) count, MPI_FLOAT, 0, comm);
    for (size_t i = 0; ok && i < count; ++i) {
        if (0 != memcmp(&got[i], &first[i], sizeof(float))) {
            mt_diag_add(diag, "element %zu of %zu: %.9g here, %.9g on rank 0", i, count,
                        (double) got[i], (double) first[i]);
            ok = 0;
        } else if (fabs((double) got[i] - exp[i]) > 1e-3) {
            /* |v| < 1004, a few ranks: float rounding stays far below 1e-3 */
            mt_diag_add(diag, "element %zu of %zu: %.9g, the reference %.9g", i, count,
                        (double) got[i], exp[i]);
            ok = 0;
        }
    }
    mt_check(ok, diag, "allreduce float sum of fractions count=%zu on %s: every rank's result "
             "bitwise rank 0's", count, cname);
    mt_mem_free(MT_MEM_DEVICE, buf);
    free(world);
    free(mine);
    free(got);
    free(first);
    free(exp);
}

static void test_bcast(MPI_Comm comm, const char *cname, int root, MPI_Datatype dt, size_t width,
                       size_t count)
{
    size_t bytes = count * width;
    int rank, ok, rc;
    char diag[MT_DIAG_LEN] = "";
    unsigned char *exp = malloc(bytes), *got = malloc(bytes);
    uint64_t s;
    void *buf;

    MPI_Comm_rank(comm, &rank);
    mt_set_case("bcast");
    s = ++case_seed * 31337u;
    for (size_t i = 0; i < bytes; ++i) {
        exp[i] = (unsigned char) mix(&s);
    }
    memset(got, 0xA5, bytes);
    buf = mt_mem_alloc(MT_MEM_DEVICE, bytes);
    ok = NULL != buf && 0 == mt_mem_put(MT_MEM_DEVICE, buf, rank == root ? exp : got, bytes);
    if (!ok) {
        mt_diag_add(diag, "buffer setup failed");
    }
    rc = MPI_Bcast(buf, (int) count, dt, root, comm);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Bcast: %s", mt_mpi_error(rc));
        ok = 0;
    }
    ok = ok && 0 == mt_mem_get(MT_MEM_DEVICE, got, buf, bytes);
    for (size_t i = 0; ok && i < bytes; ++i) {
        if (got[i] != exp[i]) {
            mt_diag_add(diag, "byte %zu of %zu differs from the root's", i, bytes);
            ok = 0;
        }
    }
    mt_check(ok, diag, "bcast %zu x %zu B root=%d on %s", count, width, root, cname);
    mt_mem_free(MT_MEM_DEVICE, buf);
    free(exp);
    free(got);
}

static void run_all(MPI_Comm comm, const char *cname, size_t chunk)
{
    int size;

    MPI_Comm_size(comm, &size);
    for (int t = T_I32; t <= T_2INT; ++t) {
        size_t w = tinfo[t].width;
        /* with rails, shards of uneven length and shards empty */
        size_t counts[] = {1, 1000, (3 * chunk + 100) / w, 2, 3, 1001};
        size_t ncounts = (0 < rail_min) ? 6 : 3;
        for (size_t c = 0; c < ncounts; ++c) {
            for (int ip = 0; ip < 2; ++ip) {
                test_allreduce(comm, cname, (ttype_t) t, counts[c], ip);
            }
        }
    }
    if (0 < rail_min) {
        test_identical(comm, cname, 1001);
        test_identical(comm, cname, (3 * chunk + 100) / 4);
    }
    for (int root = 0; root < size; ++root) {
        test_bcast(comm, cname, root, MPI_BYTE, 1, 1);
        test_bcast(comm, cname, root, MPI_BYTE, 1, 2 * chunk + 3);
        test_bcast(comm, cname, root, MPI_DOUBLE, 8, (4 * chunk + 64) / 8);
    }
}

/* ---- allgather and the reduce-scatters (the "exchange" mode) ---------------------------- */

static int calls_allgather, calls_allgatherv, calls_rsb, calls_rs, calls_reduce;


/* Allgather of count elements of t per rank (gaps: received as int32 into a vector type whose
 * every other int is a gap, which must keep its poison). */
static void test_allgather(MPI_Comm comm, const char *cname, ttype_t t, size_t count,
                           int in_place, int gaps)
{
    size_t w = tinfo[t].width, bytes = count * w;
    int rank, size, ok, rc, *world = world_ranks(comm);
    char diag[MT_DIAG_LEN] = "";
    MPI_Datatype rtype = mpi_of(t), vec = MPI_DATATYPE_NULL;
    size_t span, rblock;
    unsigned char *exp, *got, *mine = malloc(bytes);
    void *sbuf = NULL, *rbuf;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    mt_set_case("allgather");
    ++case_seed;
    if (gaps) {
        MPI_Type_vector((int) count, 1, 2, MPI_INT32_T, &vec);
        MPI_Type_create_resized(vec, 0, (MPI_Aint) (2 * count * w), &rtype);
        MPI_Type_free(&vec);
        MPI_Type_commit(&rtype);
    }
    rblock = gaps ? 2 * bytes : bytes; /* a block's span in rbuf */
    span = rblock * (size_t) size;
    exp = malloc(span);
    got = malloc(span);
    memset(exp, 0xA5, span); /* poison, and the gaps' expected bytes */
    for (int r = 0; r < size; ++r) {
        input(case_seed, world[r], t, mine, count);
        for (size_t i = 0; i < count; ++i) {
            memcpy(exp + (size_t) r * rblock + i * (gaps ? 2 * w : w), mine + i * w, w);
        }
    }
    input(case_seed, world[rank], t, mine, count);
    memset(got, 0xA5, span);
    if (in_place) {
        memcpy(got + (size_t) rank * rblock, exp + (size_t) rank * rblock, rblock);
    }
    rbuf = mt_mem_alloc(MT_MEM_DEVICE, span);
    ok = NULL != rbuf && 0 == mt_mem_put(MT_MEM_DEVICE, rbuf, got, span);
    if (!in_place) {
        sbuf = mt_mem_alloc(MT_MEM_DEVICE, bytes);
        ok = ok && NULL != sbuf && 0 == mt_mem_put(MT_MEM_DEVICE, sbuf, mine, bytes);
    }
    if (!ok) {
        mt_diag_add(diag, "buffer setup failed");
    }
    ++calls_allgather;
    rc = MPI_Allgather(in_place ? MPI_IN_PLACE : sbuf, (int) count, mpi_of(t), rbuf,
                       gaps ? 1 : (int) count, rtype, comm);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Allgather: %s", mt_mpi_error(rc));
        ok = 0;
    }
    ok = ok && 0 == mt_mem_get(MT_MEM_DEVICE, got, rbuf, span);
    for (size_t i = 0; ok && i < span; ++i) {
        if (got[i] != exp[i]) {
            mt_diag_add(diag, "byte %zu of %zu (block %zu) differs from the reference", i, span,
                        i / rblock);
            ok = 0;
        }
    }
    mt_check(ok, diag, "allgather %s x %zu%s%s on %s", tinfo[t].name, count,
             gaps ? " into a vector with gaps" : "", in_place ? " in place" : "", cname);
    if (gaps) {
        MPI_Type_free(&rtype);
    }
    mt_mem_free(MT_MEM_DEVICE, sbuf);
    mt_mem_free(MT_MEM_DEVICE, rbuf);
    free(world);
    free(mine);
    free(exp);
    free(got);
}

/* Allgatherv of counts[r] elements of t from rank r (some empty), the blocks in reverse rank
 * order with a hole of 3 elements before each (which, and the tail, must keep their poison). */
static void test_allgatherv(MPI_Comm comm, const char *cname, ttype_t t, const int *counts,
                            int in_place)
{
    size_t w = tinfo[t].width, span = 0, mine_n;
    int rank, size, ok, rc, *world = world_ranks(comm), *displs;
    char diag[MT_DIAG_LEN] = "";
    unsigned char *exp, *got, *mine;
    void *sbuf = NULL, *rbuf;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    mt_set_case("allgatherv");
    ++case_seed;
    displs = malloc(sizeof(int) * (size_t) size);
    for (int r = size - 1; r >= 0; --r) {
        displs[r] = (int) span + 3;
        span += 3 + (size_t) counts[r];
    }
    span = (span + 2) * w; /* and a tail of 2 elements */
    mine_n = (size_t) counts[rank];
    exp = malloc(span);
    got = malloc(span);
    mine = malloc(mine_n * w + 1);
    memset(exp, 0xA5, span);
    for (int r = 0; r < size; ++r) {
        input(case_seed, world[r], t, exp + (size_t) displs[r] * w, (size_t) counts[r]);
    }
    input(case_seed, world[rank], t, mine, mine_n);
    memset(got, 0xA5, span);
    if (in_place) {
        memcpy(got + (size_t) displs[rank] * w, mine, mine_n * w);
    }
    rbuf = mt_mem_alloc(MT_MEM_DEVICE, span);
    ok = NULL != rbuf && 0 == mt_mem_put(MT_MEM_DEVICE, rbuf, got, span);
    if (!in_place) {
        sbuf = mt_mem_alloc(MT_MEM_DEVICE, mine_n * w + 1);
        ok = ok && NULL != sbuf && 0 == mt_mem_put(MT_MEM_DEVICE, sbuf, mine, mine_n * w);
    }
    if (!ok) {
        mt_diag_add(diag, "buffer setup failed");
    }
    ++calls_allgatherv;
    rc = MPI_Allgatherv(in_place ? MPI_IN_PLACE : sbuf, (int) mine_n, mpi_of(t), rbuf, counts,
                        displs, mpi_of(t), comm);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Allgatherv: %s", mt_mpi_error(rc));
        ok = 0;
    }
    ok = ok && 0 == mt_mem_get(MT_MEM_DEVICE, got, rbuf, span);
    for (size_t i = 0; ok && i < span; ++i) {
        if (got[i] != exp[i]) {
            mt_diag_add(diag, "byte %zu of %zu (element %zu) differs from the reference", i,
                        span, i / w);
            ok = 0;
        }
    }
    mt_check(ok, diag, "allgatherv %s, counts %d, %d, ...%s on %s", tinfo[t].name, counts[0],
             1 < size ? counts[1] : 0, in_place ? " in place" : "", cname);
    mt_mem_free(MT_MEM_DEVICE, sbuf);
    mt_mem_free(MT_MEM_DEVICE, rbuf);
    free(displs);
    free(world);
    free(mine);
    free(exp);
    free(got);
}

/* MPI_Reduce_scatter_block (NULL counts: count elements each) or MPI_Reduce_scatter (counts[r]
 * elements for rank r) of t with its op, checked on this rank's piece. */
static void test_reduce_scatter(MPI_Comm comm, const char *cname, ttype_t t, size_t count,
                                const int *counts, int in_place)
{
    size_t w = tinfo[t].width, total = 0, before = 0, mine_n;
    int rank, size, ok, rc, *world = world_ranks(comm);
    char diag[MT_DIAG_LEN] = "";
    char *exp, *other, *mine, *got;
    void *sbuf = NULL, *rbuf;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    mt_set_case(NULL == counts ? "reduce_scatter_block" : "reduce_scatter");
    ++case_seed;
    for (int r = 0; r < size; ++r) {
        size_t n = (NULL == counts) ? count : (size_t) counts[r];
        before += (r < rank) ? n : 0;
        total += n;
    }
    mine_n = (NULL == counts) ? count : (size_t) counts[rank];
    exp = malloc(total * w + 1);
    other = malloc(total * w + 1);
    mine = malloc(total * w + 1);
    got = malloc(total * w + 1);
    input(case_seed, world[0], t, exp, total);
    for (int r = 1; r < size; ++r) {
        input(case_seed, world[r], t, other, total);
        combine(t, exp, other, total);
    }
    input(case_seed, world[rank], t, mine, total);
    memset(got, 0xA5, total * w + 1);
    rbuf = mt_mem_alloc(MT_MEM_DEVICE, in_place ? total * w : mine_n * w + 1);
    ok = NULL != rbuf;
    if (in_place) {
        ok = ok && 0 == mt_mem_put(MT_MEM_DEVICE, rbuf, mine, total * w);
    } else {
        sbuf = mt_mem_alloc(MT_MEM_DEVICE, total * w);
        ok = ok && NULL != sbuf && 0 == mt_mem_put(MT_MEM_DEVICE, sbuf, mine, total * w)
             && 0 == mt_mem_put(MT_MEM_DEVICE, rbuf, got, mine_n * w + 1);
    }
    if (!ok) {
        mt_diag_add(diag, "buffer setup failed");
    }
    if (NULL == counts) {
        ++calls_rsb;
        rc = MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : sbuf, rbuf, (int) count,
                                      mpi_of(t), op_of(t), comm);
    } else {
        ++calls_rs;
        rc = MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : sbuf, rbuf, counts, mpi_of(t),
                                op_of(t), comm);
    }
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Reduce_scatter%s: %s", NULL == counts ? "_block" : "",
                    mt_mpi_error(rc));
        ok = 0;
    }
    /* the piece, and out of place the byte after it (poisoned: nothing written past it) */
    ok = ok && 0 == mt_mem_get(MT_MEM_DEVICE, got, rbuf, mine_n * w + (in_place ? 0 : 1));
    for (size_t i = 0; ok && i < mine_n; ++i) {
        if (0 != memcmp(got + i * w, exp + (before + i) * w, w)) {
            mt_diag_add(diag, "element %zu of %zu differs from the reference", i, mine_n);
            ok = 0;
        }
    }
    if (ok && !in_place && (unsigned char) got[mine_n * w] != 0xA5) {
        mt_diag_add(diag, "the byte after the piece was written");
        ok = 0;
    }
    mt_check(ok, diag, "%s %s %s count=%zu%s on %s",
             NULL == counts ? "reduce_scatter_block" : "reduce_scatter (counts by rank)",
             tinfo[t].name,
             t == T_2INT ? "minloc" : t == T_I64 ? "min" : t == T_U8 ? "bor" : t == T_F64 ? "max"
                                                                                 : "sum",
             mine_n, in_place ? " in place" : "", cname);
    mt_mem_free(MT_MEM_DEVICE, sbuf);
    mt_mem_free(MT_MEM_DEVICE, rbuf);
    free(world);
    free(exp);
    free(other);
    free(mine);
    free(got);
}

/* MPI_Reduce of count elements of t with its op to root, in place at the root or not; the
 * other ranks pass NULL (nullrecv) or a poisoned receive buffer that must keep its poison. */
static void test_reduce(MPI_Comm comm, const char *cname, ttype_t t, size_t count, int root,
                        int in_place, int nullrecv)
{
    size_t w = tinfo[t].width;
    int rank, size, ok, rc, *world = world_ranks(comm);
    char diag[MT_DIAG_LEN] = "";
    unsigned char *exp = malloc(count * w), *other = malloc(count * w), *mine = malloc(count * w);
    unsigned char *got = malloc(count * w);
    void *sbuf = NULL, *rbuf = NULL;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    mt_set_case("reduce");
    ++case_seed;
    input(case_seed, world[0], t, exp, count);
    for (int r = 1; r < size; ++r) {
        input(case_seed, world[r], t, other, count);
        combine(t, exp, other, count);
    }
    input(case_seed, world[rank], t, mine, count);
    memset(got, 0xA5, count * w);
    ok = 1;
    if (rank != root || !in_place) {
        sbuf = mt_mem_alloc(MT_MEM_DEVICE, count * w);
        ok = NULL != sbuf && 0 == mt_mem_put(MT_MEM_DEVICE, sbuf, mine, count * w);
    }
    if (rank == root || !nullrecv) {
        rbuf = mt_mem_alloc(MT_MEM_DEVICE, count * w);
        ok = ok && NULL != rbuf
             && 0 == mt_mem_put(MT_MEM_DEVICE, rbuf, rank == root && in_place ? mine : got,
                                count * w);
    }
    if (!ok) {
        mt_diag_add(diag, "buffer setup failed");
    }
    ++calls_reduce;
    rc = MPI_Reduce(rank == root && in_place ? MPI_IN_PLACE : sbuf, rbuf, (int) count, mpi_of(t),
                    op_of(t), root, comm);
    if (MPI_SUCCESS != rc) {
        mt_diag_add(diag, "MPI_Reduce: %s", mt_mpi_error(rc));
        ok = 0;
    }
    if (ok && NULL != rbuf) {
        unsigned char *want = (rank == root) ? exp : memset(other, 0xA5, count * w);
        ok = 0 == mt_mem_get(MT_MEM_DEVICE, got, rbuf, count * w);
        for (size_t i = 0; ok && i < count; ++i) {
            if (0 != memcmp(got + i * w, want + i * w, w)) {
                mt_diag_add(diag, "element %zu of %zu %s", i, count,
                            rank == root ? "differs from the reference"
                                         : "of a non-root's receive buffer was written");
                ok = 0;
            }
        }
    }
    mt_check(ok, diag, "reduce %s count=%zu to root %d%s%s on %s", tinfo[t].name, count, root,
             in_place ? " in place" : "", nullrecv ? " (NULL elsewhere)" : "", cname);
    mt_mem_free(MT_MEM_DEVICE, sbuf);
    mt_mem_free(MT_MEM_DEVICE, rbuf);
    free(world);
    free(exp);
    free(other);
    free(mine);
    free(got);
}

static void run_exchange(MPI_Comm comm, const char *cname, size_t chunk)
{
    static const struct {
        ttype_t t;
        size_t count; /* 0: several chunks and a remainder */
    } ag[] = {{T_I32, 1}, {T_I32, 1000}, {T_I32, 0}, {T_F64, 7}, {T_U8, 13}, {T_U8, 0},
              {T_2INT, 5}};
    int size, *counts;

    MPI_Comm_size(comm, &size);
    for (size_t c = 0; c < sizeof(ag) / sizeof(ag[0]); ++c) {
        size_t count = (0 < ag[c].count) ? ag[c].count : (3 * chunk + 100) / tinfo[ag[c].t].width;
        for (int ip = 0; ip < 2; ++ip) {
            test_allgather(comm, cname, ag[c].t, count, ip, 0);
        }
    }
    test_allgather(comm, cname, T_I32, 257, 0, 1);
    /* counts that differ by rank, rank 1's empty; then blocks of several chunks */
    counts = malloc(sizeof(int) * (size_t) size);
    for (int big = 0; big < 2; ++big) {
        for (int r = 0; r < size; ++r) {
            counts[r] = (1 == r) ? 0
                        : big    ? (int) ((2 * chunk + 100 * (size_t) r) / 8)
                                 : 5 + 37 * r;
        }
        for (int ip = 0; ip < 2; ++ip) {
            test_allgatherv(comm, cname, big ? T_F64 : T_I32, counts, ip);
        }
        test_allgatherv(comm, cname, T_U8, counts, 0);
    }
    free(counts);
    for (int t = T_I32; t <= T_2INT; ++t) {
        size_t counts_b[] = {1, 333};
        for (size_t c = 0; c < 2; ++c) {
            for (int ip = 0; ip < 2; ++ip) {
                test_reduce_scatter(comm, cname, (ttype_t) t, counts_b[c], NULL, ip);
            }
        }
    }
    for (int ip = 0; ip < 2; ++ip) {
        test_reduce_scatter(comm, cname, T_I32, (3 * chunk + 100) / 4, NULL, ip);
    }
    /* counts that differ by rank, rank 1's empty */
    counts = malloc(sizeof(int) * (size_t) size);
    for (int r = 0; r < size; ++r) {
        counts[r] = (1 == r) ? 0 : 100 + 37 * r;
    }
    for (int ip = 0; ip < 2; ++ip) {
        test_reduce_scatter(comm, cname, T_I32, 0, counts, ip);
        test_reduce_scatter(comm, cname, T_F64, 0, counts, ip);
    }
    free(counts);
    /* every root; in place at the root; NULL receive buffers elsewhere; several chunks */
    for (int root = 0; root < size; ++root) {
        test_reduce(comm, cname, T_I32, 333, root, root % 2, 0);
        test_reduce(comm, cname, T_F64, (3 * chunk + 100) / 8, root, 0, root % 2);
    }
    test_reduce(comm, cname, T_2INT, 5, size - 1, 1, 1);
}

/* Open file descriptors of this process (UCX's TCP endpoints each hold a socket). */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (NULL == d) {
        return -1;
    }
    while (NULL != (e = readdir(d))) {
        n += ('.' != e->d_name[0]);
    }
    closedir(d);
    return n;
}

/* Communicators made, used across nodes and freed, again and again: each must give back what
 * its first hierarchical call made (sub-communicators, its table of UCX endpoints): the process
 * holds no more file descriptors after the last cycle than after the second.  No slack: the UCX
 * endpoints to the other leaders outlive communicators, and they exist before the second cycle,
 * so a descriptor more is one kept by a communicator that is gone. */
static void test_cycles(size_t chunk)
{
    enum { CYCLES = 12 };
    size_t count = (2 * chunk + 8) / 4;
    int32_t *mine = malloc(count * 4), *exp = malloc(count * 4), *got = malloc(count * 4);
    char diag[MT_DIAG_LEN] = "";
    int ok = 1, fds_after2 = -1, fds_last = -1;

    mt_set_case("communicator cycles");
    for (int c = 0; c < CYCLES; ++c) {
        MPI_Comm comm;
        void *buf = mt_mem_alloc(MT_MEM_DEVICE, count * 4);
        int32_t v;

        for (size_t i = 0; i < count; ++i) {
            mine[i] = (int32_t) ((size_t) mt_rank * 131 + i * 7 + (size_t) c);
            v = 0;
            for (int r = 0; r < mt_size; ++r) {
                v += (int32_t) ((size_t) r * 131 + i * 7 + (size_t) c);
            }
            exp[i] = v;
        }
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        count_call(count * 4);
        if (NULL == buf || 0 != mt_mem_put(MT_MEM_DEVICE, buf, mine, count * 4)
            || MPI_SUCCESS != MPI_Allreduce(MPI_IN_PLACE, buf, (int) count, MPI_INT32_T,
                                            MPI_SUM, comm)
            || 0 != mt_mem_get(MT_MEM_DEVICE, got, buf, count * 4)
            || 0 != memcmp(got, exp, count * 4)) {
            mt_diag_add(diag, "cycle %d: allreduce wrong or failed; ", c);
            ok = 0;
        }
        MPI_Comm_free(&comm);
        mt_mem_free(MT_MEM_DEVICE, buf);
        if (1 == c) {
            fds_after2 = open_fds();
        }
    }
    fds_last = open_fds();
    if (fds_last > fds_after2) {
        mt_diag_add(diag, "%d file descriptors open after cycle 2, %d after cycle %d", fds_after2,
                    fds_last, CYCLES);
        ok = 0;
    }
    mt_check(ok, diag, "%d communicators made, used across nodes and freed: results right, no "
             "file descriptors kept (%d after cycle 2, %d after the last)",
             CYCLES, fds_after2, fds_last);
    free(mine);
    free(exp);
    free(got);
}

int main(int argc, char **argv)
{
    char why[300];
    size_t chunk = 4096;
    MPI_Comm rev;

    mt_init(&argc, &argv);
    if (argc > 1) {
        chunk = (size_t) strtoull(argv[1], NULL, 10);
    }
    if (argc > 2) {
        rail_min = (size_t) strtoull(argv[2], NULL, 10);
    }
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    if (argc > 3 && 0 == strcmp(argv[3], "exchange")) {
        MPI_Comm mixed;

        tap_diag("%d ranks, device buffers, chunk %zu B: allgather and reduce-scatters", mt_size,
                 chunk);
        run_exchange(MPI_COMM_WORLD, "world", chunk);
        MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &rev);
        MPI_Comm_set_errhandler(rev, MPI_ERRORS_RETURN);
        run_exchange(rev, "reversed", chunk);
        MPI_Comm_free(&rev);
        /* the nodes interleaved: even world ranks first */
        MPI_Comm_split(MPI_COMM_WORLD, 0, (mt_rank % 2) * mt_size + mt_rank, &mixed);
        MPI_Comm_set_errhandler(mixed, MPI_ERRORS_RETURN);
        run_exchange(mixed, "interleaved", chunk);
        MPI_Comm_free(&mixed);
        tap_diag("exchange calls: reduce %d, allgatherv %d, allgather %d, reduce_scatter_block "
                 "%d, reduce_scatter %d", calls_reduce, calls_allgatherv, calls_allgather,
                 calls_rsb, calls_rs);
        return mt_finish();
    }
    tap_diag("%d ranks, device buffers, chunk %zu B", mt_size, chunk);
    run_all(MPI_COMM_WORLD, "world", chunk);
    MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &rev);
    MPI_Comm_set_errhandler(rev, MPI_ERRORS_RETURN);
    run_all(rev, "reversed", chunk);
    MPI_Comm_free(&rev);
    test_cycles(chunk);
    if (0 < rail_min) {
        tap_diag("rail-sized allreduce calls: %d of %d (coll_gpu_hier_rail_min_bytes %zu)",
                 calls_rail, calls_all, rail_min);
    }
    return mt_finish();
}
