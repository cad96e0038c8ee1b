/*
 * reference.c - the plain-C reference reduce (see reference.h for the rules it implements).
 *
 * One function per element type, each a switch over the ops that MPI defines on that type, each
 * case one loop with the operation written out.  Macros only stamp out the same function for
 * types of one family.
 */
#include "reference.h"
#include "halfprec.h"

#include <float.h>
#include <stdbool.h>
#include <string.h>

/* The float results (DEV_T_FLOAT, and the 16-bit types computed in float) match the GPU's bit
 * for bit only if every float operation rounds to float, as SSE and every 64-bit target do;
 * x87 arithmetic in excess precision would round differently. */
#if !defined(FLT_EVAL_METHOD) || 0 != FLT_EVAL_METHOD
#error "reference.c needs float arithmetic evaluated in float (FLT_EVAL_METHOD 0)"
#endif

/* One loop: r = EXPR of the operands u = a[i] and v = b[i].  Both are read before dst[i] is
 * written, which makes dst == a or dst == b safe. */
#define REF_LOOP(T, EXPR)                                                                      \
    for (size_t i = 0; i < n; ++i) {                                                           \
        const T u = x[i];                                                                      \
        const T v = y[i];                                                                      \
        d[i] = (EXPR);                                                                         \
    }                                                                                          \
    return DEV_OK

/* Integers.  Sums and products go through uint64_t: that keeps them free of signed overflow
 * and of int-promotion overflow (uint16 * uint16 is an int multiply in C), and the low bits
 * are the same two's-complement result every GPU produces. */
#define REF_INTEGER(NAME, T)                                                                   \
    static int ref_##NAME(T *d, const T *x, const T *y, size_t n, dev_op_t op)                 \
    {                                                                                          \
        switch (op) {                                                                          \
        case DEV_OP_SUM: REF_LOOP(T, (T) ((uint64_t) u + (uint64_t) v));                       \
        case DEV_OP_PROD: REF_LOOP(T, (T) ((uint64_t) u * (uint64_t) v));                      \
        case DEV_OP_MIN: REF_LOOP(T, (v < u) ? v : u);                                         \
        case DEV_OP_MAX: REF_LOOP(T, (v > u) ? v : u);                                         \
        case DEV_OP_LAND: REF_LOOP(T, (T) ((0 != u) && (0 != v)));                             \
        case DEV_OP_LOR: REF_LOOP(T, (T) ((0 != u) || (0 != v)));                              \
        case DEV_OP_LXOR: REF_LOOP(T, (T) ((0 != u) != (0 != v)));                             \
        case DEV_OP_BAND: REF_LOOP(T, (T) (u & v));                                            \
        case DEV_OP_BOR: REF_LOOP(T, (T) (u | v));                                             \
        case DEV_OP_BXOR: REF_LOOP(T, (T) (u ^ v));                                            \
        default: return DEV_ERR_UNSUPPORTED;                                                   \
        }                                                                                      \
    }

REF_INTEGER(int8, int8_t)
REF_INTEGER(uint8, uint8_t)
REF_INTEGER(int16, int16_t)
REF_INTEGER(uint16, uint16_t)
REF_INTEGER(int32, int32_t)
REF_INTEGER(uint32, uint32_t)
REF_INTEGER(int64, int64_t)
REF_INTEGER(uint64, uint64_t)

/* Real floating point. */
#define REF_REAL(NAME, T)                                                                      \
    static int ref_##NAME(T *d, const T *x, const T *y, size_t n, dev_op_t op)                 \
    {                                                                                          \
        switch (op) {                                                                          \
        case DEV_OP_SUM: REF_LOOP(T, u + v);                                                   \
        case DEV_OP_PROD: REF_LOOP(T, u * v);                                                  \
        case DEV_OP_MIN: REF_LOOP(T, (v < u) ? v : u);                                         \
        case DEV_OP_MAX: REF_LOOP(T, (v > u) ? v : u);                                         \
        default: return DEV_ERR_UNSUPPORTED;                                                   \
        }                                                                                      \
    }

REF_REAL(float, float)
REF_REAL(double, double)

/* binary16 and bfloat16, carried as bits: each operand widened to float (exact), the op in
 * float, the result rounded to 16 bits once (reference.h).  MIN and MAX select in float and
 * round the winner too, which changes nothing but a NaN's bits (to 0x7fff, as on the GPU). */
#define REF_HALF(NAME, WIDEN, ROUND)                                                           \
    static int ref_##NAME(uint16_t *d, const uint16_t *x, const uint16_t *y, size_t n,         \
                          dev_op_t op)                                                         \
    {                                                                                          \
        switch (op) {                                                                          \
        case DEV_OP_SUM: REF_LOOP(uint16_t, ROUND(WIDEN(u) + WIDEN(v)));                       \
        case DEV_OP_PROD: REF_LOOP(uint16_t, ROUND(WIDEN(u) * WIDEN(v)));                      \
        case DEV_OP_MIN: REF_LOOP(uint16_t, ROUND((WIDEN(v) < WIDEN(u)) ? WIDEN(v) : WIDEN(u))); \
        case DEV_OP_MAX: REF_LOOP(uint16_t, ROUND((WIDEN(v) > WIDEN(u)) ? WIDEN(v) : WIDEN(u))); \
        default: return DEV_ERR_UNSUPPORTED;                                                   \
        }                                                                                      \
    }

REF_HALF(float16, coll_gpu_f16_to_float, coll_gpu_float_to_f16)
REF_HALF(bfloat16, coll_gpu_bf16_to_float, coll_gpu_float_to_bf16)

/* Complex: (re, im) pairs, the layout of float _Complex and double _Complex. */
typedef struct {
    float re, im;
} ref_cfloat_t;
typedef struct {
    double re, im;
} ref_cdouble_t;

#define REF_COMPLEX(NAME, T)                                                                   \
    static T NAME##_sum(T u, T v)                                                              \
    {                                                                                          \
        T r = {u.re + v.re, u.im + v.im};                                                      \
        return r;                                                                              \
    }                                                                                          \
    static T NAME##_prod(T u, T v)                                                             \
    {                                                                                          \
        T r = {u.re * v.re - u.im * v.im, u.re * v.im + u.im * v.re};                          \
        return r;                                                                              \
    }                                                                                          \
    static int ref_##NAME(T *d, const T *x, const T *y, size_t n, dev_op_t op)                 \
    {                                                                                          \
        switch (op) {                                                                          \
        case DEV_OP_SUM: REF_LOOP(T, NAME##_sum(u, v));                                        \
        case DEV_OP_PROD: REF_LOOP(T, NAME##_prod(u, v));                                      \
        default: return DEV_ERR_UNSUPPORTED;                                                   \
        }                                                                                      \
    }

REF_COMPLEX(cfloat, ref_cfloat_t)
REF_COMPLEX(cdouble, ref_cdouble_t)

/* C _Bool, read as a byte so that any non-zero byte counts as true. */
static int ref_bool(uint8_t *d, const uint8_t *x, const uint8_t *y, size_t n, dev_op_t op)
{
    switch (op) {
    case DEV_OP_LAND: REF_LOOP(uint8_t, (uint8_t) ((0 != u) && (0 != v)));
    case DEV_OP_LOR: REF_LOOP(uint8_t, (uint8_t) ((0 != u) || (0 != v)));
    case DEV_OP_LXOR: REF_LOOP(uint8_t, (uint8_t) ((0 != u) != (0 != v)));
    default: return DEV_ERR_UNSUPPORTED;
    }
}

/* (value, index) pairs.  MPI-3.1 5.9.4: the result value is the min (max); when both values
 * are equal the index is the smaller of the two. */
#define REF_PAIR(NAME, T)                                                                      \
    static T NAME##_minloc(T u, T v)                                                           \
    {                                                                                          \
        if (u.value < v.value) {                                                               \
            return u;                                                                          \
        }                                                                                      \
        if (v.value < u.value) {                                                               \
            return v;                                                                          \
        }                                                                                      \
        return (v.index < u.index) ? v : u;                                                    \
    }                                                                                          \
    static T NAME##_maxloc(T u, T v)                                                           \
    {                                                                                          \
        if (u.value > v.value) {                                                               \
            return u;                                                                          \
        }                                                                                      \
        if (v.value > u.value) {                                                               \
            return v;                                                                          \
        }                                                                                      \
        return (v.index < u.index) ? v : u;                                                    \
    }                                                                                          \
    static int ref_##NAME(T *d, const T *x, const T *y, size_t n, dev_op_t op)                 \
    {                                                                                          \
        switch (op) {                                                                          \
        case DEV_OP_MINLOC: REF_LOOP(T, NAME##_minloc(u, v));                                  \
        case DEV_OP_MAXLOC: REF_LOOP(T, NAME##_maxloc(u, v));                                  \
        default: return DEV_ERR_UNSUPPORTED;                                                   \
        }                                                                                      \
    }

REF_PAIR(float_int, dev_float_int_t)
REF_PAIR(double_int, dev_double_int_t)
REF_PAIR(long_int, dev_long_int_t)
REF_PAIR(int_int, dev_2int_t)
REF_PAIR(short_int, dev_short_int_t)

int dev_ref_reduce(void *dst, const void *a, const void *b, size_t count, dev_dtype_t dtype,
                   dev_op_t op)
{
    switch (dtype) {
    case DEV_T_INT8: return ref_int8(dst, a, b, count, op);
    case DEV_T_UINT8: return ref_uint8(dst, a, b, count, op);
    case DEV_T_INT16: return ref_int16(dst, a, b, count, op);
    case DEV_T_UINT16: return ref_uint16(dst, a, b, count, op);
    case DEV_T_INT32: return ref_int32(dst, a, b, count, op);
    case DEV_T_UINT32: return ref_uint32(dst, a, b, count, op);
    case DEV_T_INT64: return ref_int64(dst, a, b, count, op);
    case DEV_T_UINT64: return ref_uint64(dst, a, b, count, op);
    case DEV_T_FLOAT: return ref_float(dst, a, b, count, op);
    case DEV_T_DOUBLE: return ref_double(dst, a, b, count, op);
    case DEV_T_CFLOAT: return ref_cfloat(dst, a, b, count, op);
    case DEV_T_CDOUBLE: return ref_cdouble(dst, a, b, count, op);
    case DEV_T_BOOL: return ref_bool(dst, a, b, count, op);
    case DEV_T_FLOAT_INT: return ref_float_int(dst, a, b, count, op);
    case DEV_T_DOUBLE_INT: return ref_double_int(dst, a, b, count, op);
    case DEV_T_LONG_INT: return ref_long_int(dst, a, b, count, op);
    case DEV_T_2INT: return ref_int_int(dst, a, b, count, op);
    case DEV_T_SHORT_INT: return ref_short_int(dst, a, b, count, op);
    case DEV_T_FLOAT16: return ref_float16(dst, a, b, count, op);
    case DEV_T_BFLOAT16: return ref_bfloat16(dst, a, b, count, op);
    default: return DEV_ERR_UNSUPPORTED;
    }
}

/* The accumulator block: 4 KiB, aligned for every element type (16-byte pairs included). */
enum { REF_MULTI_BLOCK_BYTES = 4096 };

/* One source folded into the float accumulators of a 16-bit block: acc[i] = acc[i] op src[i]. */
#define REF_HALF_FOLD(EXPR)                                                                    \
    for (size_t i = 0; i < n; ++i) {                                                           \
        const float u = acc[i];                                                                \
        const float v = widen(s[i]);                                                           \
        acc[i] = (EXPR);                                                                       \
    }                                                                                          \
    break

/* dev_ref_reduce_multi of binary16 and bfloat16 (nsrc >= 2): the fold in float, one rounding
 * per element at the end (reference.h).  The block holds floats, not elements, so the sources
 * of a block are read in full before its destinations are written, as for the other types. */
static int ref_multi_half(void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                          size_t count, dev_dtype_t dtype, dev_op_t op)
{
    float acc[REF_MULTI_BLOCK_BYTES / sizeof(float)];
    const size_t per_block = sizeof(acc) / sizeof(acc[0]);
    const bool bf = DEV_T_BFLOAT16 == dtype;
    float (*const widen)(uint16_t) = bf ? coll_gpu_bf16_to_float : coll_gpu_f16_to_float;
    uint16_t (*const round16)(float) = bf ? coll_gpu_float_to_bf16 : coll_gpu_float_to_f16;

    if (DEV_OP_SUM != op && DEV_OP_PROD != op && DEV_OP_MIN != op && DEV_OP_MAX != op) {
        return DEV_ERR_UNSUPPORTED;
    }
    for (size_t first = 0; first < count; first += per_block) {
        const size_t n = (count - first < per_block) ? count - first : per_block;
        const uint16_t *s = (const uint16_t *) srcs[0] + first;

        for (size_t i = 0; i < n; ++i) {
            acc[i] = widen(s[i]);
        }
        for (int k = 1; k < nsrc; ++k) {
            s = (const uint16_t *) srcs[k] + first;
            switch (op) {
            case DEV_OP_SUM: REF_HALF_FOLD(u + v);
            case DEV_OP_PROD: REF_HALF_FOLD(u * v);
            case DEV_OP_MIN: REF_HALF_FOLD((v < u) ? v : u);
            default: REF_HALF_FOLD((v > u) ? v : u); /* DEV_OP_MAX, checked above */
            }
        }
        for (int k = 0; k < ndst; ++k) {
            uint16_t *d = (uint16_t *) dsts[k] + first;
            for (size_t i = 0; i < n; ++i) {
                d[i] = round16(acc[i]);
            }
        }
    }
    return DEV_OK;
}

int dev_ref_reduce_multi(void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                         size_t count, dev_dtype_t dtype, dev_op_t op)
{
    union {
        unsigned char bytes[REF_MULTI_BLOCK_BYTES];
        long double align_all;
    } acc;
    const size_t es = dev_dtype_size(dtype);
    const size_t per_block = REF_MULTI_BLOCK_BYTES / es;
    int rc;

    if (0 == es || nsrc < 1 || ndst < 1) {
        return DEV_ERR_ARG;
    }
    if (nsrc > 1 && (DEV_T_FLOAT16 == dtype || DEV_T_BFLOAT16 == dtype)) {
        return ref_multi_half(dsts, ndst, srcs, nsrc, count, dtype, op);
    }
    for (size_t first = 0; first < count; first += per_block) {
        const size_t n = (count - first < per_block) ? count - first : per_block;
        const size_t off = first * es;

        memcpy(acc.bytes, (const char *) srcs[0] + off, n * es);
        for (int k = 1; k < nsrc; ++k) {
            rc = dev_ref_reduce(acc.bytes, acc.bytes, (const char *) srcs[k] + off, n, dtype,
                                op);
            if (DEV_OK != rc) {
                return rc;
            }
        }
        for (int k = 0; k < ndst; ++k) {
            memcpy((char *) dsts[k] + off, acc.bytes, n * es);
        }
    }
    return DEV_OK;
}
