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
 * Usage: test_hier [chunk_bytes [rail_min_bytes]]  (the coll_gpu_ucx_chunk_bytes the run uses,
 * to size the "several chunks" cases, default 4096; the coll_gpu_hier_rail_min_bytes it sets,
 * default none)
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

static void test_allreduce(MPI_Comm comm, const char *cname, ttype_t t, size_t count,
                           int in_place)
{
    size_t w = tinfo[t].width, bytes = count * w;
    int rank, size, ok = 1, rc;
    char diag[MT_DIAG_LEN] = "";
    char *mine = malloc(bytes), *exp = malloc(bytes), *other = malloc(bytes), *got = malloc(bytes);
    void *sbuf = NULL, *rbuf = NULL;
    int *world = NULL;
    MPI_Group g, wg;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    mt_set_case("allreduce");
    ++case_seed;
    /* the reference: every rank's input, by its rank in MPI_COMM_WORLD */
    world = malloc(sizeof(int) * (size_t) size);
    {
        int *ranks = malloc(sizeof(int) * (size_t) size);
        for (int r = 0; r < size; ++r) {
            ranks[r] = r;
        }
        MPI_Comm_group(comm, &g);
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_translate_ranks(g, size, ranks, wg, world);
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
        free(ranks);
    }
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
    int rank, size, ok, rc, *world = malloc(sizeof(int) * (size_t) mt_size);
    MPI_Group g, wg;
    void *buf;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    mt_set_case("allreduce identical");
    ++case_seed;
    {
        int *ranks = malloc(sizeof(int) * (size_t) size);
        for (int r = 0; r < size; ++r) {
            ranks[r] = r;
        }
        MPI_Comm_group(comm, &g);
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_translate_ranks(g, size, ranks, wg, world);
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
        free(ranks);
    }
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
