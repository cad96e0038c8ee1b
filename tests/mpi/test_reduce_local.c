/*
 * test_reduce_local.c - MPI_Reduce_local (inoutbuf = inbuf op inoutbuf) on every memory kind a
 * CUDA program has, as MPICH's suite runs it with -memtype=device.  Open MPI routes the call
 * through MPI_COMM_SELF's collective table, and its own function reads both buffers on the host:
 * on device memory that is a segfault (on the emulated device as on a GPU, whose device memory
 * the host cannot read either).
 *
 * Every rank on its own (the call is local; the verdicts are gathered by mt_check):
 *   - each pair of kinds (device, host, pinned, managed, pool) for inbuf and inoutbuf;
 *   - int32 MPI_SUM, double MPI_MAX, int32 with a user-defined op that does not commute
 *     (inout = 2 in - inout: the order of the operands shows), and the same op on a vector of
 *     int32 with gaps (blocks of 2 every 3), whose gap elements must come back as they were;
 *   - counts 1, 4099 and 300007;
 *   - then 4 threads at once (MPI_THREAD_MULTIPLE), each 40 calls on device buffers of its own.
 * Inputs are fresh random numbers, never zero; the output buffer is the other input.
 */
#include <pthread.h>
#include <stdbool.h>

#include "mpitest.h"

/* What each case reduces. */
typedef enum { OPC_SUM_INT, OPC_MAX_DOUBLE, OPC_USER_INT, OPC_USER_VECTOR, OPC_COUNT } opcase_t;

static const char *const opcase_names[OPC_COUNT] = {
    "int32 MPI_SUM", "double MPI_MAX", "int32 user op (2 in - inout)",
    "vector(2 of every 3 int32), the user op"};

static MPI_Op user_op;
static MPI_Datatype vector_type; /* 2 int32, a gap of 1: extent 3 int32 (resized) */

/* inout = 2 in - inout: not commutative, so the operands' order shows in the result; on
 * vector_type it walks the two elements of each block and leaves the gap alone (Open MPI
 * refuses predefined ops on derived types, so a user op is how programs reduce them) */
static void twice_minus(void *in, void *inout, int *len, MPI_Datatype *type)
{
    const int32_t *a = in;
    int32_t *b = inout;
    bool vec = (*type == vector_type);
    int n = vec ? 3 * *len : *len;

    for (int i = 0; i < n; ++i) {
        if (!vec || 2 != i % 3) {
            b[i] = 2 * a[i] - b[i];
        }
    }
}

/* a random value, never zero, small enough that sums and 2a - b stay exact */
static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static int32_t value(uint32_t seed, size_t i)
{
    int32_t v = (int32_t) (mix(seed ^ (uint32_t) i * 2654435761u) % 20000u) - 10000;
    return 0 <= v ? v + 1 : v;
}

/* One call: elements per count unit, the bytes that unit spans, and the reference. */
static size_t elems_of(opcase_t oc, int count)
{
    return OPC_USER_VECTOR == oc ? 3 * (size_t) count : (size_t) count;
}

static size_t esize_of(opcase_t oc)
{
    return OPC_MAX_DOUBLE == oc ? sizeof(double) : sizeof(int32_t);
}

static void fill(opcase_t oc, void *h, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; ++i) {
        if (OPC_MAX_DOUBLE == oc) {
            ((double *) h)[i] = value(seed, i) / 8.0;
        } else {
            ((int32_t *) h)[i] = value(seed, i);
        }
    }
}

/* expected inout after the call, from the host images of in and inout */
static void reference(opcase_t oc, const void *in, const void *inout, void *out, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        if (OPC_MAX_DOUBLE == oc) {
            double a = ((const double *) in)[i], b = ((const double *) inout)[i];
            ((double *) out)[i] = a > b ? a : b;
        } else {
            int32_t a = ((const int32_t *) in)[i], b = ((const int32_t *) inout)[i];
            int32_t r;
            if (OPC_USER_VECTOR == oc && 2 == i % 3) {
                r = b; /* the gap: untouched */
            } else if (OPC_SUM_INT == oc) {
                r = a + b;
            } else {
                r = 2 * a - b;
            }
            ((int32_t *) out)[i] = r;
        }
    }
}

/* Run one case; returns 1 when right, else writes why into diag. */
static int one_call(mt_kind_t kin, mt_kind_t kout, opcase_t oc, int count, uint32_t seed,
                    char *diag, size_t diag_len)
{
    size_t n = elems_of(oc, count), bytes = n * esize_of(oc);
    MPI_Datatype type = OPC_MAX_DOUBLE == oc   ? MPI_DOUBLE
                        : OPC_USER_VECTOR == oc ? vector_type
                                               : MPI_INT32_T;
    MPI_Op op = OPC_MAX_DOUBLE == oc ? MPI_MAX : OPC_SUM_INT == oc ? MPI_SUM : user_op;
    char *hin = malloc(bytes), *hio = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
    void *in = mt_kind_alloc(kin, bytes), *io = mt_kind_alloc(kout, bytes);
    int ok = NULL != hin && NULL != hio && NULL != want && NULL != got && NULL != in && NULL != io;
    int rc = MPI_SUCCESS;

    if (!ok) {
        snprintf(diag, diag_len, "cannot allocate %zu B", bytes);
    } else {
        fill(oc, hin, n, seed);
        fill(oc, hio, n, seed ^ 0x5bd1e995u);
        reference(oc, hin, hio, want, n);
        ok = DEV_OK == dev_memcpy(in, hin, bytes) && DEV_OK == dev_memcpy(io, hio, bytes);
        if (ok) {
            rc = MPI_Reduce_local(in, io, count, type, op);
            ok = MPI_SUCCESS == rc && DEV_OK == dev_memcpy(got, io, bytes);
        }
        if (!ok) {
            snprintf(diag, diag_len, "MPI_Reduce_local returned %d (or a copy failed)", rc);
        } else {
            for (size_t i = 0; ok && i < bytes; i += esize_of(oc)) {
                if (0 != memcmp(got + i, want + i, esize_of(oc))) {
                    ok = 0;
                    snprintf(diag, diag_len, "element %zu wrong (%s)", i / esize_of(oc),
                             OPC_MAX_DOUBLE == oc ? "double" : "int32");
                }
            }
            /* the input stays as it was */
            if (ok && (DEV_OK != dev_memcpy(got, in, bytes) || 0 != memcmp(got, hin, bytes))) {
                ok = 0;
                snprintf(diag, diag_len, "inbuf changed");
            }
        }
    }
    mt_kind_free(kin, in);
    mt_kind_free(kout, io);
    free(hin);
    free(hio);
    free(want);
    free(got);
    return ok;
}

/* ---- threads -------------------------------------------------------------------------------- */

#define NTHREADS 4
#define THREAD_CALLS 40

typedef struct {
    int id;
    int ok;
    char diag[256];
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    static const int counts[] = {1, 1023, 65537, 4099};

    w->ok = 1;
    for (int k = 0; w->ok && k < THREAD_CALLS; ++k) {
        opcase_t oc = (opcase_t) ((w->id + k) % OPC_COUNT);
        w->ok = one_call(MT_KIND_DEVICE, MT_KIND_DEVICE, oc, counts[(w->id + k) % 4],
                         (uint32_t) (mt_rank * 1000003 + w->id * 7919 + k), w->diag,
                         sizeof(w->diag));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static const int counts[] = {1, 4099, 300007};
    char why[256];
    int provided;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    tap_set_quiet(0 != mt_rank);
    snprintf(mt_rank_prefix, sizeof(mt_rank_prefix), "coll/gpu test rank %d: ", mt_rank);
    if (!mt_device_open(why, sizeof(why))) {
        mt_skip_all(why);
    }
    MPI_Op_create(twice_minus, 0, &user_op);
    {
        MPI_Datatype v;
        MPI_Type_vector(1, 2, 3, MPI_INT32_T, &v);
        MPI_Type_create_resized(v, 0, 3 * sizeof(int32_t), &vector_type);
        MPI_Type_free(&v);
        MPI_Type_commit(&vector_type);
    }

    for (int oc = 0; oc < OPC_COUNT; ++oc) {
        for (int kin = 0; kin < MT_KIND_COUNT; ++kin) {
            for (int kout = 0; kout < MT_KIND_COUNT; ++kout) {
                char diag[MT_DIAG_LEN] = "";
                int ok = 1;
                for (size_t c = 0; ok && c < sizeof(counts) / sizeof(counts[0]); ++c) {
                    char d[256] = "";
                    ok = one_call((mt_kind_t) kin, (mt_kind_t) kout, (opcase_t) oc, counts[c],
                                  (uint32_t) (mt_rank * 7 + oc * 131 + kin * 17 + kout + c * 3),
                                  d, sizeof(d));
                    if (!ok) {
                        mt_diag_add(diag, "count %d: %s; ", counts[c], d);
                    }
                }
                mt_check(ok, diag, "MPI_Reduce_local %s, inbuf %s, inoutbuf %s: right",
                         opcase_names[oc], mt_kind_names[kin], mt_kind_names[kout]);
            }
        }
    }

    if (MPI_THREAD_MULTIPLE == provided) {
        pthread_t th[NTHREADS];
        worker_t w[NTHREADS];
        char diag[MT_DIAG_LEN] = "";
        int ok = 1;
        for (int i = 0; i < NTHREADS; ++i) {
            w[i].id = i;
            w[i].ok = 0;
            w[i].diag[0] = '\0';
            if (0 != pthread_create(&th[i], NULL, worker, &w[i])) {
                w[i].id = -1;
                mt_diag_add(diag, "thread %d not started; ", i);
            }
        }
        for (int i = 0; i < NTHREADS; ++i) {
            if (0 <= w[i].id) {
                pthread_join(th[i], NULL);
            }
            if (!w[i].ok) {
                ok = 0;
                mt_diag_add(diag, "thread %d: %s; ", i, w[i].diag);
            }
        }
        mt_check(ok, diag, "MPI_Reduce_local from %d threads at once, %d calls each, device "
                           "buffers: right", NTHREADS, THREAD_CALLS);
    }

    MPI_Type_free(&vector_type);
    MPI_Op_free(&user_op);
    MPI_Finalize();
    return tap_done();
}
