/*
 * test_halfprec.c - libcollgpu's float16 and bfloat16 (api/collgpu.h) through MPI: the handles
 * and their errors, then MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init and MPI_Reduce with
 * every op on both formats, on device, host and mixed buffers, in place and not, at counts that
 * take every allreduce algorithm's edges (1 element, odd counts, more than one vector block).
 *
 * Inputs are fresh non-zero values per rank, element and case; the receive buffer is poisoned
 * first.  The expected answer is computed here from every rank's inputs: widen to float, fold,
 * round once (api/collgpu.h's rule).  With 2 ranks the inputs are arbitrary (one rounding: the
 * correctly rounded 16-bit result, whatever the algorithm); with more, SUM and PROD take values
 * whose every partial result is exact in the format (multiples of 1/8 below 16; powers of two),
 * so that no order of the fold can change the answer, and MIN and MAX stay arbitrary.
 *
 *   test_halfprec [--quick]     (tests/mpi/halfprec.sh runs it under each allreduce algorithm)
 */
#include "mpitest.h"

#include <math.h>

/* Open MPI 4.1 has MPI_Allreduce_init as MPIX_Allreduce_init (its pcollreq extension; 5.0 says
 * MPI_VERSION 3 too, but names it MPI_) */
#if OMPI_MAJOR_VERSION < 5
#    include <mpi-ext.h>
#    define MPI_Allreduce_init MPIX_Allreduce_init
#endif

#include "collgpu.h"
#include "halfprec.h"

enum { F16, BF16 };

static float widen(int fmt, uint16_t x)
{
    return BF16 == fmt ? coll_gpu_bf16_to_float(x) : coll_gpu_f16_to_float(x);
}

static uint16_t narrow(int fmt, float f)
{
    return BF16 == fmt ? coll_gpu_float_to_bf16(f) : coll_gpu_float_to_f16(f);
}

/* A deterministic pseudo-random value in [0, 1) of (seed, rank, element). */
static double unit(uint64_t seed, int r, size_t i)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + (uint64_t) r * 0xbf58476d1ce4e5b9ULL
                 + (uint64_t) i * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    x *= 0xd6e9f34e2a96a3a5ULL;
    x ^= x >> 29;
    return (double) (x >> 11) * (1.0 / 9007199254740992.0);
}

/* Rank r's element i of a case: never zero (a zero would hide an unreduced buffer). */
static uint16_t input(int fmt, int opi, int nranks, uint64_t seed, int r, size_t i)
{
    double u = unit(seed, r, i);
    float v;

    if (2 < nranks && 0 == opi) { /* SUM: k/8, 1 <= |k| <= 30 */
        int k = 1 + (int) (u * 30.0);
        v = (float) ((unit(seed ^ 1, r, i) < 0.5) ? -k : k) / 8.0f;
    } else if (2 < nranks && 1 == opi) { /* PROD: +-2^e, -2 <= e <= 2 */
        v = ldexpf(unit(seed ^ 1, r, i) < 0.5 ? -1.0f : 1.0f, (int) (u * 5.0) - 2);
    } else if (1 == opi) { /* PROD, 2 ranks: products of moderate values */
        v = (float) (u * 16.0 - 8.0);
    } else { /* arbitrary: up to 3000 (fp16 max 65504: sums of two stay finite) */
        v = (float) ((u - 0.5) * 6000.0);
    }
    if (0.0f == v) {
        v = 0.75f;
    }
    return narrow(fmt, v);
}

static uint16_t expected(int fmt, int opi, int nranks, uint64_t seed, size_t i)
{
    float acc = widen(fmt, input(fmt, opi, nranks, seed, 0, i));
    for (int r = 1; r < nranks; ++r) {
        float b = widen(fmt, input(fmt, opi, nranks, seed, r, i));
        switch (opi) {
        case 0: acc = acc + b; break;
        case 1: acc = acc * b; break;
        case 2: acc = (b < acc) ? b : acc; break;
        default: acc = (b > acc) ? b : acc; break;
        }
    }
    return narrow(fmt, acc);
}

static const char *const op_names[4] = {"sum", "prod", "min", "max"};
static const char *const fmt_names[2] = {"float16", "bfloat16"};
enum { MODE_BLOCKING, MODE_NONBLOCKING, MODE_PERSISTENT, MODE_REDUCE, NMODES };
static const char *const mode_names[NMODES] = {"MPI_Allreduce", "MPI_Iallreduce",
                                               "MPI_Allreduce_init", "MPI_Reduce"};

/* One case on every rank; the verdict through mt_check. */
static void run_case(int fmt, int opi, int mode, size_t count, mt_mem_t kind, const char *kinds,
                     int in_place, MPI_Datatype type, MPI_Op op, uint64_t seed)
{
    size_t bytes = count * 2;
    uint16_t *in = malloc(bytes), *out = malloc(bytes);
    void *sbuf = mt_mem_alloc(kind, bytes), *rbuf = mt_mem_alloc(kind, bytes);
    char diag[MT_DIAG_LEN] = "";
    int ok = NULL != in && NULL != out && NULL != sbuf && NULL != rbuf, rc = MPI_SUCCESS;
    int root = mt_size - 1, checks = (MODE_REDUCE != mode || mt_rank == root);
    MPI_Request req = MPI_REQUEST_NULL;
    char name[256];

    snprintf(name, sizeof(name), "%s %s %s, count %zu, %s buffers%s", mode_names[mode],
             fmt_names[fmt], op_names[opi], count, kinds,
             in_place ? ", in place" : "");
    mt_set_case(name);
    if (ok) {
        for (size_t i = 0; i < count; ++i) {
            in[i] = input(fmt, opi, mt_size, seed, mt_rank, i);
            out[i] = 0x7e01; /* poison: a NaN in both formats */
        }
        /* in place, the input is in the receive buffer (MPI_Reduce: at the root only) */
        int input_in_rbuf = in_place && (MODE_REDUCE != mode || mt_rank == root);
        ok = MPI_SUCCESS == mt_mem_put(kind, input_in_rbuf ? rbuf : sbuf, in, bytes)
             && (input_in_rbuf || MPI_SUCCESS == mt_mem_put(kind, rbuf, out, bytes));
        if (!ok) {
            mt_diag_add(diag, "rank %d: could not fill the buffers", mt_rank);
        }
    }
    if (mt_agree(ok)) {
        const void *s = in_place ? MPI_IN_PLACE : sbuf;
        switch (mode) {
        case MODE_BLOCKING: rc = MPI_Allreduce(s, rbuf, (int) count, type, op, MPI_COMM_WORLD); break;
        case MODE_NONBLOCKING:
            rc = MPI_Iallreduce(s, rbuf, (int) count, type, op, MPI_COMM_WORLD, &req);
            if (MPI_SUCCESS == rc) {
                rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
            break;
        case MODE_PERSISTENT:
            rc = MPI_Allreduce_init(s, rbuf, (int) count, type, op, MPI_COMM_WORLD, MPI_INFO_NULL,
                                    &req);
            if (MPI_SUCCESS == rc) {
                rc = MPI_Start(&req);
            }
            if (MPI_SUCCESS == rc) {
                rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
            if (MPI_REQUEST_NULL != req) {
                MPI_Request_free(&req);
            }
            break;
        default:
            rc = MPI_Reduce((in_place && mt_rank == root) ? MPI_IN_PLACE : sbuf, rbuf,
                            (int) count, type, op, root, MPI_COMM_WORLD);
            break;
        }
        if (MPI_SUCCESS != rc) {
            ok = 0;
            mt_diag_add(diag, "rank %d: %s", mt_rank, mt_mpi_error(rc));
        } else if (checks) {
            if (MPI_SUCCESS != mt_mem_get(kind, out, rbuf, bytes)) {
                ok = 0;
                mt_diag_add(diag, "rank %d: could not read the result", mt_rank);
            }
            for (size_t i = 0, bad = 0; ok && i < count; ++i) {
                uint16_t want = expected(fmt, opi, mt_size, seed, i);
                if (out[i] != want && bad++ < 3) {
                    mt_diag_add(diag, "rank %d: element %zu is 0x%04x (%g), expected 0x%04x (%g)",
                                mt_rank, i, out[i], (double) widen(fmt, out[i]), want,
                                (double) widen(fmt, want));
                }
                if (i + 1 == count && 0 < bad) {
                    ok = 0;
                }
            }
        }
    }
    mt_check(ok, diag, "%s", name);
    mt_mem_free(kind, sbuf);
    mt_mem_free(kind, rbuf);
    free(in);
    free(out);
}

/* The handles: made once, the errors of collgpu.h, the query. */
static void check_api(int before_init_rc)
{
    MPI_Datatype f16 = MPI_DATATYPE_NULL, bf16 = MPI_DATATYPE_NULL, again = MPI_DATATYPE_NULL;
    MPI_Op sum = MPI_OP_NULL, sum2 = MPI_OP_NULL, bmax = MPI_OP_NULL, base = MPI_OP_NULL;
    char diag[MT_DIAG_LEN] = "", name[MPI_MAX_OBJECT_NAME] = "";
    int ok = 1, len = 0, size = 0;

    mt_set_case("api");
    if (MPI_ERR_OTHER != before_init_rc) {
        ok = 0;
        mt_diag_add(diag, "before MPI_Init: %d, expected MPI_ERR_OTHER", before_init_rc);
    }
    ok = ok && MPI_SUCCESS == collgpu_type_float16(&f16) && MPI_SUCCESS == collgpu_type_bfloat16(&bf16)
         && MPI_SUCCESS == collgpu_type_bfloat16(&again) && bf16 == again && f16 != bf16
         && MPI_SUCCESS == MPI_Type_size(bf16, &size) && 2 == size
         && MPI_SUCCESS == MPI_Type_get_name(bf16, name, &len) && 0 == strcmp(name, "collgpu_bfloat16");
    if (!ok) {
        mt_diag_add(diag, "rank %d: the types (size %d, name '%s')", mt_rank, size, name);
    }
    ok = ok && MPI_SUCCESS == collgpu_op(MPI_SUM, f16, &sum) && MPI_SUCCESS == collgpu_op(MPI_SUM, f16, &sum2)
         && sum == sum2 && MPI_SUCCESS == collgpu_op(MPI_MAX, bf16, &bmax) && bmax != sum;
    if (!ok) {
        mt_diag_add(diag, "rank %d: the ops", mt_rank);
    }
    if (ok && (COLLGPU_FLOAT16 != collgpu_op_query(sum, &base) || MPI_SUM != base
               || COLLGPU_BFLOAT16 != collgpu_op_query(bmax, NULL)
               || 0 != collgpu_op_query(MPI_SUM, &base))) {
        ok = 0;
        mt_diag_add(diag, "rank %d: collgpu_op_query", mt_rank);
    }
    if (ok && (MPI_ERR_OP != collgpu_op(MPI_BAND, bf16, &sum2)
               || MPI_ERR_TYPE != collgpu_op(MPI_SUM, MPI_INT, &sum2)
               || MPI_ERR_ARG != collgpu_op(MPI_SUM, bf16, NULL)
               || MPI_ERR_ARG != collgpu_type_float16(NULL))) {
        ok = 0;
        mt_diag_add(diag, "rank %d: an error class is not the documented one", mt_rank);
    }
    mt_check(ok, diag, "libcollgpu: handles made once, named, 2 bytes; queries; error classes");
}

int main(int argc, char **argv)
{
    static const size_t counts[] = {1, 7, 1031, 70001};
    int quick = (1 < argc && 0 == strcmp(argv[1], "--quick"));
    int before_init_rc = collgpu_type_float16(&(MPI_Datatype){MPI_DATATYPE_NULL});
    char why[256];
    uint64_t seed = 12345;

    mt_init(&argc, &argv);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
        return 0;
    }
    check_api(before_init_rc);
    for (int fmt = F16; fmt <= BF16; ++fmt) {
        MPI_Datatype type;
        (BF16 == fmt ? collgpu_type_bfloat16 : collgpu_type_float16)(&type);
        for (int opi = 0; opi < 4; ++opi) {
            MPI_Op base = 0 == opi ? MPI_SUM : 1 == opi ? MPI_PROD : 2 == opi ? MPI_MIN : MPI_MAX, op;
            collgpu_op(base, type, &op);
            for (int mode = 0; mode < NMODES; ++mode) {
                for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
                    for (int k = 0; k < 3; ++k) {
                        /* device, host, and mixed: even ranks device, odd ranks host */
                        mt_mem_t kind = 0 == k ? MT_MEM_DEVICE : 1 == k ? MT_MEM_HOST
                                        : (0 == mt_rank % 2 ? MT_MEM_DEVICE : MT_MEM_HOST);
                        if (quick && 0 != k && 1 != c) {
                            continue;
                        }
                        for (int ip = 0; ip < 2; ++ip) {
                            run_case(fmt, opi, mode, counts[c], kind,
                                     0 == k ? "device" : 1 == k ? "host" : "mixed", ip, type, op,
                                     ++seed);
                        }
                    }
                }
            }
        }
    }
    return mt_finish();
}
