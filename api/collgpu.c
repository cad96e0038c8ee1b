/*
 * collgpu.c - the float16 and bfloat16 datatypes and ops of collgpu.h.
 *
 * One copy of the handles per process: programs link this library, and so does coll/gpu's
 * component, which asks collgpu_op_query whether a call's op is one of these (the dynamic
 * loader maps the library once however many objects depend on it, so the handles the program
 * got are the ones the component compares against).
 *
 * The op functions are the host fallback: they run wherever MPI reduces on the host (a call
 * that coll/gpu stages through host memory, a program without coll/gpu) and follow the
 * pairwise rule of the GPU kernels (kernels/reference.h): widen to float, apply, round once.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "collgpu.h"
#include "halfprec.h"

enum { FMT_F16, FMT_BF16, NFMT };
enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX, NOPS };

static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
/* 1 while the handles exist (set after they are made, with release: collgpu_op_query reads
 * them without the lock), 2 once MPI_Finalize freed them. */
static atomic_int handles_state;
static MPI_Datatype types[NFMT];
static MPI_Op ops[NFMT][NOPS];
static int finalize_keyval;

static const char *const type_names[NFMT] = {"collgpu_float16", "collgpu_bfloat16"};

static inline float widen(int fmt, uint16_t x)
{
    return FMT_BF16 == fmt ? coll_gpu_bf16_to_float(x) : coll_gpu_f16_to_float(x);
}

static inline uint16_t narrow(int fmt, float f)
{
    return FMT_BF16 == fmt ? coll_gpu_float_to_bf16(f) : coll_gpu_float_to_f16(f);
}

/* inout[i] = in[i] op inout[i]: in is the first operand (a), inout the second (b). */
static void reduce16(int fmt, int op, const void *in, void *inout, const int *len,
                     const MPI_Datatype *type)
{
    const uint16_t *a = in;
    uint16_t *b = inout;
    int size = 2;
    size_t n;

    /* any dense type of 16-bit elements carries the values: count its elements */
    if (*type != types[fmt] && MPI_SUCCESS != MPI_Type_size(*type, &size)) {
        size = 2;
    }
    n = (size_t) *len * (size_t) (size / 2);
    for (size_t i = 0; i < n; ++i) {
        float x = widen(fmt, a[i]), y = widen(fmt, b[i]), r;
        switch (op) {
        case OP_SUM: r = x + y; break;
        case OP_PROD: r = x * y; break;
        case OP_MIN: r = (y < x) ? y : x; break;
        default: r = (y > x) ? y : x; break;
        }
        b[i] = narrow(fmt, r);
    }
}

#define COLLGPU_OP_FN(fmt, op)                                                                 \
    static void fn_##fmt##_##op(void *in, void *inout, int *len, MPI_Datatype *type)         \
    {                                                                                          \
        reduce16(fmt, op, in, inout, len, type);                                               \
    }
COLLGPU_OP_FN(FMT_F16, OP_SUM)
COLLGPU_OP_FN(FMT_F16, OP_PROD)
COLLGPU_OP_FN(FMT_F16, OP_MIN)
COLLGPU_OP_FN(FMT_F16, OP_MAX)
COLLGPU_OP_FN(FMT_BF16, OP_SUM)
COLLGPU_OP_FN(FMT_BF16, OP_PROD)
COLLGPU_OP_FN(FMT_BF16, OP_MIN)
COLLGPU_OP_FN(FMT_BF16, OP_MAX)

static MPI_User_function *const op_fns[NFMT][NOPS] = {
    {fn_FMT_F16_OP_SUM, fn_FMT_F16_OP_PROD, fn_FMT_F16_OP_MIN, fn_FMT_F16_OP_MAX},
    {fn_FMT_BF16_OP_SUM, fn_FMT_BF16_OP_PROD, fn_FMT_BF16_OP_MIN, fn_FMT_BF16_OP_MAX},
};

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first, while MPI still works: free here. */
static int free_handles(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void) comm, (void) value, (void) extra;
    pthread_mutex_lock(&handles_lock);
    atomic_store_explicit(&handles_state, 2, memory_order_release);
    for (int f = 0; f < NFMT; ++f) {
        for (int o = 0; o < NOPS; ++o) {
            MPI_Op_free(&ops[f][o]);
        }
        MPI_Type_free(&types[f]);
    }
    pthread_mutex_unlock(&handles_lock);
    MPI_Comm_free_keyval(&keyval);
    return MPI_SUCCESS;
}

static int make_handles_locked(void)
{
    int rc = MPI_SUCCESS;

    for (int f = 0; f < NFMT; ++f) {
        types[f] = MPI_DATATYPE_NULL;
        for (int o = 0; o < NOPS; ++o) {
            ops[f][o] = MPI_OP_NULL;
        }
    }
    for (int f = 0; MPI_SUCCESS == rc && f < NFMT; ++f) {
        rc = MPI_Type_contiguous(1, MPI_UINT16_T, &types[f]);
        if (MPI_SUCCESS == rc) {
            rc = MPI_Type_set_name(types[f], type_names[f]);
        }
        if (MPI_SUCCESS == rc) {
            rc = MPI_Type_commit(&types[f]);
        }
        for (int o = 0; MPI_SUCCESS == rc && o < NOPS; ++o) {
            rc = MPI_Op_create(op_fns[f][o], 1, &ops[f][o]);
        }
    }
    if (MPI_SUCCESS == rc) {
        rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_handles, &finalize_keyval, NULL);
    }
    if (MPI_SUCCESS == rc) {
        rc = MPI_Comm_set_attr(MPI_COMM_SELF, finalize_keyval, NULL);
    }
    if (MPI_SUCCESS != rc) {
        for (int f = 0; f < NFMT; ++f) {
            for (int o = 0; o < NOPS; ++o) {
                if (MPI_OP_NULL != ops[f][o]) {
                    MPI_Op_free(&ops[f][o]);
                }
            }
            if (MPI_DATATYPE_NULL != types[f]) {
                MPI_Type_free(&types[f]);
            }
        }
        return MPI_ERR_OTHER;
    }
    atomic_store_explicit(&handles_state, 1, memory_order_release);
    return MPI_SUCCESS;
}

/* The handles, made at the first call after MPI_Init. */
static int handles(void)
{
    int initialized = 0, finalized = 0, rc = MPI_SUCCESS;

    if (1 == atomic_load_explicit(&handles_state, memory_order_acquire)) {
        return MPI_SUCCESS;
    }
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
        return MPI_ERR_OTHER;
    }
    pthread_mutex_lock(&handles_lock);
    switch (atomic_load_explicit(&handles_state, memory_order_relaxed)) {
    case 0: rc = make_handles_locked(); break;
    case 1: break;
    default: rc = MPI_ERR_OTHER; break; /* freed by MPI_Finalize */
    }
    pthread_mutex_unlock(&handles_lock);
    return rc;
}

static int type_of(int fmt, MPI_Datatype *type)
{
    int rc;

    if (NULL == type) {
        return MPI_ERR_ARG;
    }
    rc = handles();
    if (MPI_SUCCESS == rc) {
        *type = types[fmt];
    }
    return rc;
}

int collgpu_type_float16(MPI_Datatype *type)
{
    return type_of(FMT_F16, type);
}

int collgpu_type_bfloat16(MPI_Datatype *type)
{
    return type_of(FMT_BF16, type);
}

int collgpu_op(MPI_Op op, MPI_Datatype type, MPI_Op *out)
{
    int rc, f, o;

    if (NULL == out) {
        return MPI_ERR_ARG;
    }
    rc = handles();
    if (MPI_SUCCESS != rc) {
        return rc;
    }
    for (f = 0; f < NFMT && type != types[f]; ++f) {
    }
    if (NFMT == f) {
        return MPI_ERR_TYPE;
    }
    if (MPI_SUM == op) {
        o = OP_SUM;
    } else if (MPI_PROD == op) {
        o = OP_PROD;
    } else if (MPI_MIN == op) {
        o = OP_MIN;
    } else if (MPI_MAX == op) {
        o = OP_MAX;
    } else {
        return MPI_ERR_OP;
    }
    *out = ops[f][o];
    return MPI_SUCCESS;
}

int collgpu_op_query(MPI_Op op, MPI_Op *base)
{
    if (1 != atomic_load_explicit(&handles_state, memory_order_acquire)) {
        return 0;
    }
    for (int f = 0; f < NFMT; ++f) {
        for (int o = 0; o < NOPS; ++o) {
            if (op != ops[f][o]) {
                continue;
            }
            if (NULL != base) {
                *base = OP_SUM == o ? MPI_SUM : OP_PROD == o ? MPI_PROD : OP_MIN == o ? MPI_MIN
                                                                                     : MPI_MAX;
            }
            return FMT_BF16 == f ? COLLGPU_BFLOAT16 : COLLGPU_FLOAT16;
        }
    }
    return 0;
}
