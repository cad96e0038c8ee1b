/*
 * test_dev_oracle.h - an independent oracle for dev_reduce, and the driver that checks every
 * valid (op, dtype) pair against it (header-only, like tap.h, so that the TAP numbering of the
 * including test stays one sequence).
 *
 * The oracle is written independently of kernels/reference.c (different structure: integers
 * are widened to 64 bits and truncated back, complex numbers use C99 _Complex, MINLOC/MAXLOC
 * pick the smallest index among the winners, the 16-bit floats are computed here in float
 * from the rule and rounded with halfprec.h, which test_dev_halfprec checks on its own), so
 * that a mistake in the reference is not mirrored by its own test.
 *
 *   oracle_op_valid(op, dtype)        what MPI allows, spelled out as a table
 *   oracle_check_all_reduces(l, host) every valid pair through dev_reduce on the open backend
 *                                     (operands and result in device memory), or through
 *                                     dev_reduce_host when host; random data, odd counts,
 *                                     poisoned results, in-place and misaligned variants; one
 *                                     TAP line per pair; returns the number of failed lines
 *   oracle_check_half(l, host)        binary16 and bfloat16 through dev_reduce (or
 *                                     dev_reduce_host): every encoding, and the rounding of
 *                                     sums just below, at and above each midpoint
 *   oracle_check_half_fold(l)         their dev_reduce_multi folds in float, rounding once:
 *                                     cases whose 16-bit steps would give another answer
 */
#ifndef TEST_DEV_ORACLE_H
#define TEST_DEV_ORACLE_H

#include "dev.h"
#include "halfprec.h"
#include "tap.h"

#include <complex.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what MPI allows --------------------------------------------------------------------- */

static inline bool oracle_op_valid(dev_op_t op, dev_dtype_t t)
{
    /* rows: ops; columns: the dtype enum in order
     *  i8 u8 i16 u16 i32 u32 i64 u64 flt dbl cflt cdbl bool fi di li 2i si f16 bf16 */
    static const char table[DEV_OP_COUNT][DEV_T_COUNT + 1] = {
        [DEV_OP_SUM] = "11111111111100000011",
        [DEV_OP_PROD] = "11111111111100000011",
        [DEV_OP_MIN] = "11111111110000000011",
        [DEV_OP_MAX] = "11111111110000000011",
        [DEV_OP_LAND] = "11111111000010000000",
        [DEV_OP_LOR] = "11111111000010000000",
        [DEV_OP_LXOR] = "11111111000010000000",
        [DEV_OP_BAND] = "11111111000000000000",
        [DEV_OP_BOR] = "11111111000000000000",
        [DEV_OP_BXOR] = "11111111000000000000",
        [DEV_OP_MINLOC] = "00000000000001111100",
        [DEV_OP_MAXLOC] = "00000000000001111100",
    };
    if ((unsigned) op >= DEV_OP_COUNT || (unsigned) t >= DEV_T_COUNT) {
        return false;
    }
    return '1' == table[op][t];
}

/* ---- element access ---------------------------------------------------------------------- */

typedef struct {
    int bits;
    bool is_signed;
} int_info_t;

static int_info_t int_info(dev_dtype_t t)
{
    switch (t) {
    case DEV_T_INT8: return (int_info_t){8, true};
    case DEV_T_UINT8: return (int_info_t){8, false};
    case DEV_T_INT16: return (int_info_t){16, true};
    case DEV_T_UINT16: return (int_info_t){16, false};
    case DEV_T_INT32: return (int_info_t){32, true};
    case DEV_T_UINT32: return (int_info_t){32, false};
    case DEV_T_INT64: return (int_info_t){64, true};
    case DEV_T_UINT64: return (int_info_t){64, false};
    case DEV_T_BOOL: return (int_info_t){8, false};
    default: return (int_info_t){0, false};
    }
}

/* Raw little-endian bits of integer element i, zero-extended. */
static uint64_t load_bits(const void *buf, size_t i, int bits)
{
    uint64_t v = 0;
    memcpy(&v, (const char *) buf + i * (size_t) (bits / 8), (size_t) (bits / 8));
    return v;
}

static void store_bits(void *buf, size_t i, int bits, uint64_t v)
{
    memcpy((char *) buf + i * (size_t) (bits / 8), &v, (size_t) (bits / 8));
}

static int64_t sign_extend(uint64_t v, int bits)
{
    if (64 == bits) {
        return (int64_t) v;
    }
    uint64_t sign = 1ull << (bits - 1);
    uint64_t mask = (1ull << bits) - 1;
    v &= mask;
    return (int64_t) ((v ^ sign) - sign);
}

static uint64_t oracle_integer(dev_op_t op, int_info_t ti, uint64_t u, uint64_t v)
{
    bool less, greater;
    if (ti.is_signed) {
        less = sign_extend(v, ti.bits) < sign_extend(u, ti.bits);
        greater = sign_extend(v, ti.bits) > sign_extend(u, ti.bits);
    } else {
        less = v < u;
        greater = v > u;
    }
    switch (op) {
    case DEV_OP_SUM: return u + v; /* truncated to the width on store */
    case DEV_OP_PROD: return u * v;
    case DEV_OP_MIN: return less ? v : u;
    case DEV_OP_MAX: return greater ? v : u;
    case DEV_OP_LAND: return (u != 0) & (v != 0);
    case DEV_OP_LOR: return (u != 0) | (v != 0);
    case DEV_OP_LXOR: return (u != 0) ^ (v != 0);
    case DEV_OP_BAND: return u & v;
    case DEV_OP_BOR: return u | v;
    case DEV_OP_BXOR: return u ^ v;
    default: abort();
    }
}

/* Results of pair ops: (value as double, index). */
typedef struct {
    double value;
    int index;
} pair_t;

static pair_t load_pair(dev_dtype_t t, const void *buf, size_t i)
{
    pair_t p;
    switch (t) {
    case DEV_T_FLOAT_INT: {
        const struct { float v; int i; } *e = (const void *) buf;
        p.value = e[i].v, p.index = e[i].i;
        break;
    }
    case DEV_T_DOUBLE_INT: {
        const struct { double v; int i; } *e = (const void *) buf;
        p.value = e[i].v, p.index = e[i].i;
        break;
    }
    case DEV_T_LONG_INT: {
        const struct { long v; int i; } *e = (const void *) buf;
        p.value = (double) e[i].v, p.index = e[i].i;
        break;
    }
    case DEV_T_2INT: {
        const struct { int v; int i; } *e = (const void *) buf;
        p.value = e[i].v, p.index = e[i].i;
        break;
    }
    case DEV_T_SHORT_INT: {
        const struct { short v; int i; } *e = (const void *) buf;
        p.value = e[i].v, p.index = e[i].i;
        break;
    }
    default: abort();
    }
    return p;
}

/* ---- the 16-bit floats -------------------------------------------------------------------
 *
 * Carried as bits; the rule of reference.h is written out here once more: widen both operands
 * to float, apply the op in float, round to 16 bits once.  MIN and MAX select by < and >, as
 * for float, so a NaN first operand wins and a NaN second operand loses. */

static inline float half_widen(dev_dtype_t t, uint16_t h)
{
    return (DEV_T_FLOAT16 == t) ? coll_gpu_f16_to_float(h) : coll_gpu_bf16_to_float(h);
}

static inline uint16_t half_round(dev_dtype_t t, float f)
{
    return (DEV_T_FLOAT16 == t) ? coll_gpu_float_to_f16(f) : coll_gpu_float_to_bf16(f);
}

static inline float half_op(dev_op_t op, float u, float v)
{
    switch (op) {
    case DEV_OP_SUM: return u + v;
    case DEV_OP_PROD: return u * v;
    case DEV_OP_MIN: return (v < u) ? v : u;
    case DEV_OP_MAX: return (v > u) ? v : u;
    default: abort();
    }
}

/* Fields of the two encodings: fraction bits, the largest finite exponent field, the bias. */
static inline int half_frac_bits(dev_dtype_t t)
{
    return (DEV_T_FLOAT16 == t) ? 10 : 7;
}

static inline int half_exp_max(dev_dtype_t t)
{
    return (DEV_T_FLOAT16 == t) ? 30 : 254;
}

static inline bool half_is_nan(dev_dtype_t t, uint16_t h)
{
    const int fb = half_frac_bits(t);
    const int exp = (h & 0x7fff) >> fb;
    return exp == half_exp_max(t) + 1 && 0 != (h & ((1u << fb) - 1));
}

/* ---- random operands --------------------------------------------------------------------- */

static uint64_t oracle_rng_state = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
    /* xorshift64* */
    oracle_rng_state ^= oracle_rng_state >> 12;
    oracle_rng_state ^= oracle_rng_state << 25;
    oracle_rng_state ^= oracle_rng_state >> 27;
    return oracle_rng_state * 0x2545f4914f6cdd1dull;
}

/* A random 16-bit float, built from its fields (not converted from a float, so that the
 * operands do not lean on the conversions under test): mostly non-integers of either sign,
 * 2^-4 up to 2^7 (for PROD 0.5 up to 2, so that a product of 16 sources often stays finite
 * and normal); one in eight subnormal and one in eight in the top binade (binary16: 32768 up
 * to 65504, where two of them overflow; bfloat16: 2^127 and up), one in eighteen each for PROD;
 * one in 256 each a signed zero, an infinity, or a NaN with a random payload and sign. */
static inline uint16_t random_half(dev_dtype_t t, dev_op_t op, uint64_t r)
{
    const int fb = half_frac_bits(t), emax = half_exp_max(t), bias = (1 << (14 - fb)) - 1;
    const uint16_t sign = (uint16_t) ((r >> 63) << 15);
    const uint16_t frac = (uint16_t) ((r >> 8) & ((1u << fb) - 1));
    const unsigned kind = (unsigned) (r % 256), pick = (unsigned) ((r >> 24) % 64);
    int exp;

    if (0 == kind) {
        return sign;
    }
    if (1 == kind) {
        return (uint16_t) (sign | (emax + 1) << fb);
    }
    if (2 == kind) {
        return (uint16_t) (sign | (emax + 1) << fb | frac | 1);
    }
    if (kind < 32 + (DEV_OP_PROD == op ? 0 : 32)) {
        /* subnormal, or the top binade: a quarter each of these */
        return (kind % 2) ? (uint16_t) (sign | (0 == frac ? 1 : frac))
                          : (uint16_t) (sign | emax << fb | frac);
    }
    exp = (DEV_OP_PROD == op) ? bias - 1 + (int) (pick % 2) : bias - 4 + (int) (pick % 11);
    return (uint16_t) (sign | exp << fb | frac);
}

/* Fill n elements: never all zeros.  Logical ops get about one zero in four (so that both
 * truth values occur); MINLOC/MAXLOC get values from a small set (so that ties occur). */
static void fill(dev_dtype_t t, dev_op_t op, void *buf, size_t n)
{
    bool logical = DEV_OP_LAND == op || DEV_OP_LOR == op || DEV_OP_LXOR == op;
    for (size_t i = 0; i < n; ++i) {
        uint64_t r = rnd();
        switch (t) {
        case DEV_T_FLOAT: {
            float f = (float) ((int64_t) (r % 20001) - 10000) / 100.0f;
            ((float *) buf)[i] = (0.0f == f) ? 1.5f : f;
            break;
        }
        case DEV_T_DOUBLE: {
            double f = (double) ((int64_t) (r % 2000001) - 1000000) / 1000.0;
            ((double *) buf)[i] = (0.0 == f) ? 2.25 : f;
            break;
        }
        case DEV_T_CFLOAT: {
            float *c = (float *) buf + 2 * i;
            c[0] = (float) ((int) (r % 2001) - 1000) / 100.0f + 0.125f;
            c[1] = (float) ((int) ((r >> 20) % 2001) - 1000) / 100.0f - 0.375f;
            break;
        }
        case DEV_T_CDOUBLE: {
            double *c = (double *) buf + 2 * i;
            c[0] = (double) ((int) (r % 20001) - 10000) / 1000.0 + 0.0625;
            c[1] = (double) ((int) ((r >> 20) % 20001) - 10000) / 1000.0 - 0.3125;
            break;
        }
        case DEV_T_BOOL:
            ((unsigned char *) buf)[i] = (unsigned char) (r & 1);
            break;
        case DEV_T_FLOAT16:
        case DEV_T_BFLOAT16:
            ((uint16_t *) buf)[i] = random_half(t, op, r);
            break;
        case DEV_T_FLOAT_INT:
        case DEV_T_DOUBLE_INT:
        case DEV_T_LONG_INT:
        case DEV_T_2INT:
        case DEV_T_SHORT_INT: {
            int value = (int) (r % 4) - 1; /* -1..2: many ties */
            int index = (int) ((r >> 8) % 1000);
            value = (0 == value) ? 3 : value;
            switch (t) {
            case DEV_T_FLOAT_INT: {
                struct { float v; int i; } *e = buf;
                e[i].v = (float) value + 0.5f, e[i].i = index;
                break;
            }
            case DEV_T_DOUBLE_INT: {
                struct { double v; int i; } *e = buf;
                e[i].v = (double) value - 0.25, e[i].i = index;
                break;
            }
            case DEV_T_LONG_INT: {
                struct { long v; int i; } *e = buf;
                e[i].v = (long) value * 1000000007L, e[i].i = index;
                break;
            }
            case DEV_T_2INT: {
                struct { int v; int i; } *e = buf;
                e[i].v = value, e[i].i = index;
                break;
            }
            default: {
                struct { short v; int i; } *e = buf;
                e[i].v = (short) value, e[i].i = index;
                break;
            }
            }
            break;
        }
        default: {
            int bits = int_info(t).bits;
            if (logical && 0 == (r >> 60) % 4) {
                r = 0;
            } else if (0 == (r & ((bits < 64) ? ((1ull << bits) - 1) : ~0ull))) {
                r = 7;
            }
            store_bits(buf, i, bits, r);
            break;
        }
        }
    }
}

/* ---- comparing one result ---------------------------------------------------------------- */

static bool close_enough(double got, double want, double rel)
{
    double scale = fabs(want) > 1.0 ? fabs(want) : 1.0;
    return fabs(got - want) <= rel * scale;
}

/* Check got[i] == a[i] op b[i] for all i; on a mismatch describe the first one in why. */
static bool check_result(dev_dtype_t t, dev_op_t op, const void *a, const void *b,
                         const void *got, size_t n, char *why, size_t whylen)
{
    for (size_t i = 0; i < n; ++i) {
        switch (t) {
        case DEV_T_FLOAT: {
            float u = ((const float *) a)[i], v = ((const float *) b)[i];
            float g = ((const float *) got)[i];
            float w = (DEV_OP_SUM == op) ? u + v
                    : (DEV_OP_PROD == op) ? u * v
                    : (DEV_OP_MIN == op) ? fminf(u, v) : fmaxf(u, v);
            if (!close_enough(g, w, 1e-6)) {
                snprintf(why, whylen, "element %zu: %g %s %g gave %g, want %g", i, u,
                         dev_op_name(op), v, g, w);
                return false;
            }
            break;
        }
        case DEV_T_DOUBLE: {
            double u = ((const double *) a)[i], v = ((const double *) b)[i];
            double g = ((const double *) got)[i];
            double w = (DEV_OP_SUM == op) ? u + v
                     : (DEV_OP_PROD == op) ? u * v
                     : (DEV_OP_MIN == op) ? fmin(u, v) : fmax(u, v);
            if (!close_enough(g, w, 1e-14)) {
                snprintf(why, whylen, "element %zu: %g %s %g gave %g, want %g", i, u,
                         dev_op_name(op), v, g, w);
                return false;
            }
            break;
        }
        case DEV_T_CFLOAT: {
            float complex u = ((const float complex *) a)[i];
            float complex v = ((const float complex *) b)[i];
            float complex g = ((const float complex *) got)[i];
            float complex w = (DEV_OP_SUM == op) ? u + v : u * v;
            if (!close_enough(crealf(g), crealf(w), 1e-5)
                || !close_enough(cimagf(g), cimagf(w), 1e-5)) {
                snprintf(why, whylen, "element %zu: gave (%g,%g), want (%g,%g)", i, crealf(g),
                         cimagf(g), crealf(w), cimagf(w));
                return false;
            }
            break;
        }
        case DEV_T_CDOUBLE: {
            double complex u = ((const double complex *) a)[i];
            double complex v = ((const double complex *) b)[i];
            double complex g = ((const double complex *) got)[i];
            double complex w = (DEV_OP_SUM == op) ? u + v : u * v;
            if (!close_enough(creal(g), creal(w), 1e-13)
                || !close_enough(cimag(g), cimag(w), 1e-13)) {
                snprintf(why, whylen, "element %zu: gave (%g,%g), want (%g,%g)", i, creal(g),
                         cimag(g), creal(w), cimag(w));
                return false;
            }
            break;
        }
        case DEV_T_FLOAT16:
        case DEV_T_BFLOAT16: {
            uint16_t u = ((const uint16_t *) a)[i], v = ((const uint16_t *) b)[i];
            uint16_t g = ((const uint16_t *) got)[i];
            uint16_t w = half_round(t, half_op(op, half_widen(t, u), half_widen(t, v)));
            if (g != w) {
                snprintf(why, whylen, "element %zu: 0x%04x %s 0x%04x (%g, %g) gave 0x%04x, want "
                         "0x%04x (%g)", i, u, dev_op_name(op), v, half_widen(t, u),
                         half_widen(t, v), g, w, half_widen(t, w));
                return false;
            }
            break;
        }
        case DEV_T_FLOAT_INT:
        case DEV_T_DOUBLE_INT:
        case DEV_T_LONG_INT:
        case DEV_T_2INT:
        case DEV_T_SHORT_INT: {
            pair_t u = load_pair(t, a, i), v = load_pair(t, b, i), g = load_pair(t, got, i);
            pair_t w;
            w.value = (DEV_OP_MINLOC == op) ? fmin(u.value, v.value) : fmax(u.value, v.value);
            /* the smallest index among the operands holding the winning value */
            w.index = 0x7fffffff;
            if (u.value == w.value && u.index < w.index) {
                w.index = u.index;
            }
            if (v.value == w.value && v.index < w.index) {
                w.index = v.index;
            }
            if (g.value != w.value || g.index != w.index) {
                snprintf(why, whylen, "element %zu: (%g,%d) %s (%g,%d) gave (%g,%d), want (%g,%d)",
                         i, u.value, u.index, dev_op_name(op), v.value, v.index, g.value,
                         g.index, w.value, w.index);
                return false;
            }
            break;
        }
        default: {
            int_info_t ti = int_info(t);
            uint64_t u = load_bits(a, i, ti.bits), v = load_bits(b, i, ti.bits);
            uint64_t g = load_bits(got, i, ti.bits);
            uint64_t mask = (64 == ti.bits) ? ~0ull : (1ull << ti.bits) - 1;
            uint64_t w = oracle_integer(op, ti, u, v) & mask;
            if (g != w) {
                snprintf(why, whylen, "element %zu: 0x%llx %s 0x%llx gave 0x%llx, want 0x%llx", i,
                         (unsigned long long) u, dev_op_name(op), (unsigned long long) v,
                         (unsigned long long) g, (unsigned long long) w);
                return false;
            }
            break;
        }
        }
    }
    return true;
}

/* ---- the driver -------------------------------------------------------------------------- */

enum { MAX_COUNT = 4099, POISON = 0xa7 };

/* Reduce n elements at element offset off: out = a op b, then in place a = a op b.
 * Operands live in device memory unless on_host. */
static bool run_one(dev_dtype_t t, dev_op_t op, size_t n, size_t off, bool on_host,
                    char *why, size_t whylen)
{
    size_t es = dev_dtype_size(t), bytes = (n + off) * es;
    unsigned char *ha = malloc(bytes), *hb = malloc(bytes), *hout = malloc(bytes);
    void *da = NULL, *db = NULL, *dout = NULL;
    bool ok = false;
    int rc;

    if (NULL == ha || NULL == hb || NULL == hout) {
        snprintf(why, whylen, "out of host memory");
        goto out;
    }
    fill(t, op, ha, n + off);
    fill(t, op, hb, n + off);
    if (on_host) {
        da = ha, db = hb, dout = hout;
        memset(hout, POISON, bytes);
    } else {
        if (DEV_OK != dev_mem_alloc(&da, bytes) || DEV_OK != dev_mem_alloc(&db, bytes)
            || DEV_OK != dev_mem_alloc(&dout, bytes)) {
            snprintf(why, whylen, "dev_mem_alloc: %s", dev_error_string());
            goto out;
        }
        if (DEV_OK != dev_memcpy(da, ha, bytes) || DEV_OK != dev_memcpy(db, hb, bytes)
            || DEV_OK != dev_memset(dout, POISON, bytes)) {
            snprintf(why, whylen, "upload: %s", dev_error_string());
            goto out;
        }
    }

    /* out of place */
    rc = on_host ? dev_reduce_host(hout + off * es, ha + off * es, hb + off * es, n, t, op)
                 : dev_reduce((char *) dout + off * es, (char *) da + off * es,
                              (char *) db + off * es, n, t, op, NULL);
    if (DEV_OK == rc && !on_host) {
        rc = dev_memcpy(hout, dout, bytes);
    }
    if (DEV_OK != rc) {
        snprintf(why, whylen, "reduce: %s: %s", dev_status_name(rc), dev_error_string());
        goto out;
    }
    for (size_t i = 0; i < off * es; ++i) {
        if (POISON != hout[i]) {
            snprintf(why, whylen, "byte %zu before the result was overwritten", i);
            goto out;
        }
    }
    if (!check_result(t, op, ha + off * es, hb + off * es, hout + off * es, n, why, whylen)) {
        goto out;
    }

    /* in place: a = a op b (what a reduce step of an allreduce does) */
    if (on_host) {
        unsigned char *copy = malloc(bytes);
        if (NULL == copy) {
            snprintf(why, whylen, "out of host memory");
            goto out;
        }
        memcpy(copy, ha, bytes);
        rc = dev_reduce_host(copy + off * es, copy + off * es, hb + off * es, n, t, op);
        memcpy(hout, copy, bytes);
        free(copy);
    } else {
        rc = dev_reduce((char *) da + off * es, (char *) da + off * es, (char *) db + off * es,
                        n, t, op, NULL);
        if (DEV_OK == rc) {
            rc = dev_memcpy(hout, da, bytes);
        }
    }
    if (DEV_OK != rc) {
        snprintf(why, whylen, "in-place reduce: %s: %s", dev_status_name(rc), dev_error_string());
        goto out;
    }
    if (!check_result(t, op, ha + off * es, hb + off * es, hout + off * es, n, why, whylen)) {
        size_t l = strlen(why);
        snprintf(why + l, whylen - l, " (in place)");
        goto out;
    }
    ok = true;
out:
    if (!on_host) {
        dev_mem_free(da);
        dev_mem_free(db);
        dev_mem_free(dout);
    }
    free(ha);
    free(hb);
    free(hout);
    return ok;
}

static inline int oracle_check_all_reduces(const char *label, bool on_host)
{
    /* odd counts, from one element to more than one 16-byte vector loop of a block */
    static const size_t counts[] = {1, 3, 17, 255, MAX_COUNT};
    int failed = 0;

    for (int op = 0; op < DEV_OP_COUNT; ++op) {
        for (int t = 0; t < DEV_T_COUNT; ++t) {
            char why[256] = "";
            bool ok = true;
            if (!oracle_op_valid((dev_op_t) op, (dev_dtype_t) t)) {
                continue;
            }
            for (size_t c = 0; ok && c < sizeof(counts) / sizeof(counts[0]); ++c) {
                /* aligned start, then one element off (the vector path's scalar fallback) */
                ok = run_one((dev_dtype_t) t, (dev_op_t) op, counts[c], 0, on_host, why,
                             sizeof(why))
                     && run_one((dev_dtype_t) t, (dev_op_t) op, counts[c], 1, on_host, why,
                                sizeof(why));
                if (!ok) {
                    size_t l = strlen(why);
                    snprintf(why + l, sizeof(why) - l, " [count %zu]", counts[c]);
                }
            }
            if (!tap_ok(ok, "%s: reduce %s on %s matches the oracle", label,
                        dev_op_name((dev_op_t) op), dev_dtype_name((dev_dtype_t) t))) {
                tap_diag("%s", why);
                ++failed;
            }
        }
    }
    return failed;
}

/* ---- dev_reduce_multi ----------------------------------------------------------------------
 *
 *   oracle_multi_check(t, op, srcs, nsrc, got, n, ...)  got[i] == srcs[0][i] op ... op
 *                                      srcs[nsrc-1][i], folded left to right (host buffers)
 *   oracle_check_all_multi(label)      every valid pair (and a copy of every type) through
 *                                      dev_reduce_multi on the open backend: nsrc 1..5 and 16,
 *                                      ndst 1..4, counts 1..4103, aligned and misaligned,
 *                                      in place; poisoned destinations with guard bytes, sources
 *                                      checked unchanged; one TAP line per pair
 *   oracle_check_multi_paths(label)    the same sources into an aligned and a misaligned
 *                                      destination give bitwise-identical results
 *
 * Results must be bit for bit those of the fold in source order, computed here in the element
 * type itself, except binary16 and bfloat16, folded in float and rounded once at the end (the
 * multi-source rule of reference.h); the one exception to bit for bit is complex PROD, whose
 * rounding depends on contraction (FMA), held to a relative tolerance.  Pair types compare
 * value and index, never the padding. */

enum { MULTI_MAX_COUNT = 4103, MULTI_GUARD = 64, MULTI_MAX_DST = 4 };

/* The fold of element i over nsrc host buffers, for the types compared bit for bit; the
 * result (one element) goes to out. */
static inline void multi_expect(dev_dtype_t t, dev_op_t op, const void *const *srcs, int nsrc,
                                size_t i, void *out)
{
    switch (t) {
    case DEV_T_FLOAT: {
        float w = ((const float *) srcs[0])[i];
        for (int k = 1; k < nsrc; ++k) {
            float v = ((const float *) srcs[k])[i];
            w = (DEV_OP_SUM == op) ? w + v : (DEV_OP_PROD == op) ? w * v
              : (DEV_OP_MIN == op) ? fminf(w, v) : fmaxf(w, v);
        }
        memcpy(out, &w, sizeof(w));
        break;
    }
    case DEV_T_DOUBLE: {
        double w = ((const double *) srcs[0])[i];
        for (int k = 1; k < nsrc; ++k) {
            double v = ((const double *) srcs[k])[i];
            w = (DEV_OP_SUM == op) ? w + v : (DEV_OP_PROD == op) ? w * v
              : (DEV_OP_MIN == op) ? fmin(w, v) : fmax(w, v);
        }
        memcpy(out, &w, sizeof(w));
        break;
    }
    case DEV_T_FLOAT16:
    case DEV_T_BFLOAT16: {
        /* the accumulator stays a float from the first source to the last */
        float acc = half_widen(t, ((const uint16_t *) srcs[0])[i]);
        uint16_t w;
        for (int k = 1; k < nsrc; ++k) {
            acc = half_op(op, acc, half_widen(t, ((const uint16_t *) srcs[k])[i]));
        }
        w = half_round(t, acc);
        memcpy(out, &w, sizeof(w));
        break;
    }
    case DEV_T_CFLOAT: {
        float complex w = ((const float complex *) srcs[0])[i];
        for (int k = 1; k < nsrc; ++k) {
            float complex v = ((const float complex *) srcs[k])[i];
            w = (DEV_OP_SUM == op) ? w + v : w * v;
        }
        memcpy(out, &w, sizeof(w));
        break;
    }
    case DEV_T_CDOUBLE: {
        double complex w = ((const double complex *) srcs[0])[i];
        for (int k = 1; k < nsrc; ++k) {
            double complex v = ((const double complex *) srcs[k])[i];
            w = (DEV_OP_SUM == op) ? w + v : w * v;
        }
        memcpy(out, &w, sizeof(w));
        break;
    }
    case DEV_T_FLOAT_INT:
    case DEV_T_DOUBLE_INT:
    case DEV_T_LONG_INT:
    case DEV_T_2INT:
    case DEV_T_SHORT_INT: {
        /* not a fold: the extreme value, then the smallest index among those that hold it */
        pair_t w = load_pair(t, srcs[0], i);
        for (int k = 1; k < nsrc; ++k) {
            pair_t v = load_pair(t, srcs[k], i);
            w.value = (DEV_OP_MINLOC == op) ? fmin(w.value, v.value) : fmax(w.value, v.value);
        }
        w.index = 0x7fffffff;
        for (int k = 0; k < nsrc; ++k) {
            pair_t v = load_pair(t, srcs[k], i);
            if (v.value == w.value && v.index < w.index) {
                w.index = v.index;
            }
        }
        memcpy(out, &w, sizeof(w));
        break;
    }
    default: {
        int_info_t ti = int_info(t);
        uint64_t mask = (64 == ti.bits) ? ~0ull : (1ull << ti.bits) - 1;
        uint64_t w = load_bits(srcs[0], i, ti.bits);
        for (int k = 1; k < nsrc; ++k) {
            w = oracle_integer(op, ti, w, load_bits(srcs[k], i, ti.bits)) & mask;
        }
        memcpy(out, &w, sizeof(w));
        break;
    }
    }
}

/* Check got[i] for i < n against the fold of the host sources; nsrc == 1 is a byte copy. */
static inline bool oracle_multi_check(dev_dtype_t t, dev_op_t op, const void *const *srcs,
                                      int nsrc, const void *got, size_t n, char *why,
                                      size_t whylen)
{
    size_t es = dev_dtype_size(t);

    if (1 == nsrc) {
        for (size_t i = 0; i < n * es; ++i) {
            if (((const unsigned char *) got)[i] != ((const unsigned char *) srcs[0])[i]) {
                snprintf(why, whylen, "copy: byte %zu differs from the source", i);
                return false;
            }
        }
        return true;
    }
    for (size_t i = 0; i < n; ++i) {
        union {
            unsigned char bytes[16];
            uint64_t bits;
            pair_t pair;
            float complex cf;
            double complex cd;
        } w;
        memset(&w, 0, sizeof(w));
        multi_expect(t, op, srcs, nsrc, i, &w);
        switch (t) {
        case DEV_T_CFLOAT:
        case DEV_T_CDOUBLE: {
            double complex g = (DEV_T_CFLOAT == t) ? ((const float complex *) got)[i]
                                                   : ((const double complex *) got)[i];
            double complex want = (DEV_T_CFLOAT == t) ? w.cf : w.cd;
            double tol = (DEV_OP_PROD != op) ? 0.0
                       : (DEV_T_CFLOAT == t) ? 4e-6 * nsrc * cabs(want)
                                             : 1e-14 * nsrc * cabs(want);
            bool ok = (DEV_OP_PROD == op) ? cabs(g - want) <= tol
                                          : 0 == memcmp((const char *) got + i * es, &w, es);
            if (!ok) {
                snprintf(why, whylen, "element %zu: gave (%.9g,%.9g), want (%.9g,%.9g)", i,
                         creal(g), cimag(g), creal(want), cimag(want));
                return false;
            }
            break;
        }
        case DEV_T_FLOAT_INT:
        case DEV_T_DOUBLE_INT:
        case DEV_T_LONG_INT:
        case DEV_T_2INT:
        case DEV_T_SHORT_INT: {
            pair_t g = load_pair(t, got, i);
            if (g.value != w.pair.value || g.index != w.pair.index) {
                snprintf(why, whylen, "element %zu: gave (%g,%d), want (%g,%d)", i, g.value,
                         g.index, w.pair.value, w.pair.index);
                return false;
            }
            break;
        }
        default:
            if (0 != memcmp((const char *) got + i * es, &w, es)) {
                uint64_t g = 0;
                memcpy(&g, (const char *) got + i * es, es);
                snprintf(why, whylen, "element %zu: gave bits 0x%llx, want 0x%llx", i,
                         (unsigned long long) g, (unsigned long long) w.bits);
                return false;
            }
            break;
        }
    }
    return true;
}

/* Device buffers for the matrix: one allocation per source and destination. */
typedef struct {
    void *src[DEV_MULTI_MAX];
    void *dst[MULTI_MAX_DST];
    unsigned char *hsrc[DEV_MULTI_MAX]; /* what each source holds */
    unsigned char *back;                /* a download */
    size_t bytes;
} multi_pool_t;

static inline bool multi_pool_open(multi_pool_t *p)
{
    memset(p, 0, sizeof(*p));
    p->bytes = (MULTI_MAX_COUNT + 1) * 16 + MULTI_GUARD;
    p->back = malloc(p->bytes);
    for (int k = 0; k < DEV_MULTI_MAX; ++k) {
        p->hsrc[k] = calloc(1, p->bytes); /* zeroed: the padding of pair types is compared */
        if (NULL == p->hsrc[k] || DEV_OK != dev_mem_alloc(&p->src[k], p->bytes)) {
            return false;
        }
    }
    for (int k = 0; k < MULTI_MAX_DST; ++k) {
        if (DEV_OK != dev_mem_alloc(&p->dst[k], p->bytes)) {
            return false;
        }
    }
    return NULL != p->back;
}

static inline void multi_pool_close(multi_pool_t *p)
{
    for (int k = 0; k < DEV_MULTI_MAX; ++k) {
        dev_mem_free(p->src[k]);
        free(p->hsrc[k]);
    }
    for (int k = 0; k < MULTI_MAX_DST; ++k) {
        dev_mem_free(p->dst[k]);
    }
    free(p->back);
}

/* Layouts of one run.  Offsets are in elements; a misaligned pointer sends the GPU kernel to
 * its scalar path. */
enum {
    MULTI_ALIGNED,      /* every pointer at offset 0 */
    MULTI_ALL_OFFSET,   /* every pointer at offset 1 */
    MULTI_ONE_OFFSET,   /* the last source at offset 1, everything else at 0 */
    MULTI_IN_PLACE_ONE, /* the last destination is source ndst % nsrc */
    MULTI_IN_PLACE_ALL, /* destination k is source k (two-shot with MPI_IN_PLACE); ndst <= nsrc */
    MULTI_LAYOUTS
};

static inline const char *multi_layout_name(int layout)
{
    static const char *const names[MULTI_LAYOUTS] = {"aligned", "all offset", "one offset",
                                                     "one dst in place", "all in place"};
    return names[layout];
}

/* One dev_reduce_multi of n elements; checks the result in every destination, the guard bytes
 * around it, and that sources which are not destinations are unchanged. */
static inline bool run_multi(multi_pool_t *p, dev_dtype_t t, dev_op_t op, int nsrc, int ndst,
                             size_t n, int layout, char *why, size_t whylen)
{
    const size_t es = dev_dtype_size(t);
    const size_t span = (n + 1) * es + MULTI_GUARD; /* bytes of a buffer we fill and check */
    size_t soff[DEV_MULTI_MAX], doff[MULTI_MAX_DST];
    const void *srcs[DEV_MULTI_MAX], *hsrcs[DEV_MULTI_MAX];
    void *dsts[MULTI_MAX_DST];
    int dst_is_src[MULTI_MAX_DST]; /* the source a destination is, or -1 */
    dev_launch_t launch = {0, 0};
    int rc;

    for (int k = 0; k < nsrc; ++k) {
        soff[k] = (MULTI_ALL_OFFSET == layout || (MULTI_ONE_OFFSET == layout && k == nsrc - 1))
                      ? 1 : 0;
        fill(t, op, p->hsrc[k], span / es);
        if (DEV_OK != dev_memcpy(p->src[k], p->hsrc[k], span)) {
            snprintf(why, whylen, "upload: %s", dev_error_string());
            return false;
        }
        srcs[k] = (const char *) p->src[k] + soff[k] * es;
        hsrcs[k] = p->hsrc[k] + soff[k] * es;
    }
    for (int k = 0; k < ndst; ++k) {
        int s = -1;
        if (MULTI_IN_PLACE_ONE == layout && k == ndst - 1) {
            s = ndst % nsrc;
        } else if (MULTI_IN_PLACE_ALL == layout) {
            s = k;
        }
        dst_is_src[k] = s;
        if (s >= 0) {
            dsts[k] = (void *) srcs[s];
            doff[k] = soff[s];
            continue;
        }
        doff[k] = (MULTI_ALL_OFFSET == layout) ? 1 : 0;
        dsts[k] = (char *) p->dst[k] + doff[k] * es;
        if (DEV_OK != dev_memset(p->dst[k], POISON, span)) {
            snprintf(why, whylen, "poison: %s", dev_error_string());
            return false;
        }
    }

    /* a launch shape now and then: the kernels must not depend on the default one */
    if (0 == (n + (size_t) nsrc) % 3) {
        launch.nblocks = 1 + (int) (n % 5);
        launch.nthreads = 64 * (1 + (int) (n % 4));
    }
    rc = dev_reduce_multi(dsts, ndst, srcs, nsrc, n, t, op, (n & 1) ? &launch : NULL, NULL);
    if (DEV_OK == rc) {
        rc = dev_stream_sync(NULL);
    }
    if (DEV_OK != rc) {
        snprintf(why, whylen, "dev_reduce_multi: %s: %s", dev_status_name(rc),
                 dev_error_string());
        return false;
    }

    for (int k = 0; k < ndst; ++k) {
        int s = dst_is_src[k];
        const unsigned char *around = (s >= 0) ? p->hsrc[s] : NULL; /* else: poison */
        size_t l;
        if (DEV_OK != dev_memcpy(p->back, (s >= 0) ? p->src[s] : p->dst[k], span)) {
            snprintf(why, whylen, "download: %s", dev_error_string());
            return false;
        }
        for (size_t b = 0; b < span; ++b) {
            if (b >= doff[k] * es && b < (doff[k] + n) * es) {
                continue;
            }
            if (p->back[b] != (around ? around[b] : POISON)) {
                snprintf(why, whylen, "destination %d: byte %zu outside the result changed", k,
                         b);
                return false;
            }
        }
        if (!oracle_multi_check(t, op, hsrcs, nsrc, p->back + doff[k] * es, n, why, whylen)) {
            l = strlen(why);
            snprintf(why + l, whylen - l, " (destination %d)", k);
            return false;
        }
    }
    for (int k = 0; k < nsrc; ++k) {
        bool written = false;
        for (int d = 0; d < ndst; ++d) {
            written = written || dst_is_src[d] == k;
        }
        if (written) {
            continue;
        }
        if (DEV_OK != dev_memcpy(p->back, p->src[k], span)
            || 0 != memcmp(p->back, p->hsrc[k], span)) {
            snprintf(why, whylen, "source %d changed", k);
            return false;
        }
    }
    return true;
}

/* Every (nsrc, ndst) of the matrix for one (op, dtype); why names the first failure. */
static inline bool multi_matrix(multi_pool_t *p, dev_dtype_t t, dev_op_t op, char *why,
                                size_t whylen)
{
    static const int nsrcs[] = {1, 2, 3, 4, 5, 16};
    static const size_t counts[] = {1, 7, 1029, MULTI_MAX_COUNT};

    for (size_t a = 0; a < sizeof(nsrcs) / sizeof(nsrcs[0]); ++a) {
        for (int ndst = 1; ndst <= MULTI_MAX_DST; ++ndst) {
            int nsrc = nsrcs[a];
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
                int layout = (int) ((c + a + (size_t) ndst) % 3); /* the three out of place */
                if (!run_multi(p, t, op, nsrc, ndst, counts[c], layout, why, whylen)) {
                    size_t l = strlen(why);
                    snprintf(why + l, whylen - l, " [nsrc %d, ndst %d, count %zu, %s]", nsrc,
                             ndst, counts[c], multi_layout_name(layout));
                    return false;
                }
            }
            for (int layout = MULTI_IN_PLACE_ONE; layout <= MULTI_IN_PLACE_ALL; ++layout) {
                if (MULTI_IN_PLACE_ALL == layout && ndst > nsrc) {
                    continue;
                }
                if (!run_multi(p, t, op, nsrc, ndst, 1029, layout, why, whylen)) {
                    size_t l = strlen(why);
                    snprintf(why + l, whylen - l, " [nsrc %d, ndst %d, count 1029, %s]", nsrc,
                             ndst, multi_layout_name(layout));
                    return false;
                }
            }
        }
    }
    return true;
}

static inline int oracle_check_all_multi(const char *label)
{
    multi_pool_t pool;
    int failed = 0;

    if (!tap_ok(multi_pool_open(&pool), "%s: %d source and %d destination buffers", label,
                DEV_MULTI_MAX, MULTI_MAX_DST)) {
        tap_diag("%s", dev_error_string());
        multi_pool_close(&pool);
        return 1;
    }
    for (int op = 0; op < DEV_OP_COUNT; ++op) {
        for (int t = 0; t < DEV_T_COUNT; ++t) {
            char why[256] = "";
            if (!oracle_op_valid((dev_op_t) op, (dev_dtype_t) t)) {
                continue;
            }
            if (!tap_ok(multi_matrix(&pool, (dev_dtype_t) t, (dev_op_t) op, why, sizeof(why)),
                        "%s: reduce_multi %s on %s matches the fold in source order", label,
                        dev_op_name((dev_op_t) op), dev_dtype_name((dev_dtype_t) t))) {
                tap_diag("%s", why);
                ++failed;
            }
        }
    }
    /* one source is a copy of any type, whatever the op says */
    for (int t = 0; t < DEV_T_COUNT; ++t) {
        char why[256] = "";
        bool ok = true;
        for (int ndst = 1; ok && ndst <= MULTI_MAX_DST; ++ndst) {
            ok = run_multi(&pool, (dev_dtype_t) t, DEV_OP_MAXLOC, 1, ndst, 1029, ndst % 3, why,
                           sizeof(why))
                 && run_multi(&pool, (dev_dtype_t) t, DEV_OP_MAXLOC, 1, ndst, 1,
                              (1 == ndst) ? MULTI_IN_PLACE_ALL : MULTI_ALL_OFFSET, why,
                              sizeof(why));
        }
        if (!tap_ok(ok, "%s: reduce_multi with one source copies %s (op ignored)", label,
                    dev_dtype_name((dev_dtype_t) t))) {
            tap_diag("%s", why);
            ++failed;
        }
    }
    multi_pool_close(&pool);
    return failed;
}

/* The same sources reduced into an aligned destination (the GPU's vector path) and into one
 * an element off (its scalar path) must agree bit for bit: in a one-shot allreduce every rank
 * computes the whole result, each into its own receive buffer, aligned as the user's is. */
static inline int oracle_check_multi_paths(const char *label)
{
    static const struct {
        dev_dtype_t t;
        dev_op_t op;
    } cases[] = {{DEV_T_FLOAT, DEV_OP_SUM},     {DEV_T_DOUBLE, DEV_OP_SUM},
                 {DEV_T_FLOAT, DEV_OP_PROD},    {DEV_T_CFLOAT, DEV_OP_PROD},
                 {DEV_T_CDOUBLE, DEV_OP_PROD},  {DEV_T_FLOAT_INT, DEV_OP_MINLOC},
                 {DEV_T_INT16, DEV_OP_SUM},     {DEV_T_FLOAT16, DEV_OP_SUM},
                 {DEV_T_BFLOAT16, DEV_OP_PROD}};
    enum { N = 3001, NSRC = 7 };
    int failed = 0;

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        dev_dtype_t t = cases[c].t;
        size_t es = dev_dtype_size(t), bytes = (N + 1) * es;
        void *src[NSRC] = {NULL}, *da = NULL, *db = NULL;
        const void *srcs[NSRC];
        unsigned char *h = malloc(bytes), *ra = malloc(bytes), *rb = malloc(bytes);
        bool ok = NULL != h && NULL != ra && NULL != rb;

        for (int k = 0; ok && k < NSRC; ++k) {
            fill(t, cases[c].op, h, N + 1);
            ok = DEV_OK == dev_mem_alloc(&src[k], bytes) && DEV_OK == dev_memcpy(src[k], h, bytes);
            srcs[k] = src[k];
        }
        ok = ok && DEV_OK == dev_mem_alloc(&da, bytes) && DEV_OK == dev_mem_alloc(&db, bytes);
        if (ok) {
            void *dsta = da, *dstb = (char *) db + es;
            ok = DEV_OK == dev_reduce_multi(&dsta, 1, srcs, NSRC, N, t, cases[c].op, NULL, NULL)
                 && DEV_OK == dev_reduce_multi(&dstb, 1, srcs, NSRC, N, t, cases[c].op, NULL,
                                               NULL)
                 && DEV_OK == dev_stream_sync(NULL) && DEV_OK == dev_memcpy(ra, da, N * es)
                 && DEV_OK == dev_memcpy(rb, (char *) db + es, N * es);
        }
        if (ok && (DEV_T_FLOAT_INT == t)) { /* compare value and index, not the padding */
            for (size_t i = 0; ok && i < N; ++i) {
                pair_t x = load_pair(t, ra, i), y = load_pair(t, rb, i);
                ok = x.value == y.value && x.index == y.index;
            }
        } else {
            ok = ok && 0 == memcmp(ra, rb, N * es);
        }
        if (!tap_ok(ok, "%s: reduce_multi %s on %s, aligned and misaligned destination agree "
                        "bit for bit", label, dev_op_name(cases[c].op), dev_dtype_name(t))) {
            tap_diag("%s", dev_error_string());
            ++failed;
        }
        for (int k = 0; k < NSRC; ++k) {
            dev_mem_free(src[k]);
        }
        dev_mem_free(da);
        dev_mem_free(db);
        free(h);
        free(ra);
        free(rb);
    }
    return failed;
}

/* ---- the 16-bit floats, case by case -------------------------------------------------------
 *
 *   oracle_check_half(label, on_host)  through dev_reduce on the open backend (device memory)
 *       or dev_reduce_host, for each 16-bit type: every encoding e gives e back from e + -0,
 *       e * 1, min(e, e) and max(e, e) (a NaN gives 0x7fff, CUDA's canonical NaN); and for
 *       every normal e of either sign (exponent field 3 and up), e + 1/4, 1/2 and 3/4 of its
 *       ulp, exact in float, rounds to e, to the even one of e and its successor (the tie),
 *       and to the successor, infinity after the largest finite value
 *   oracle_check_half_fold(label)       dev_reduce_multi keeps the accumulator in float: sums
 *       and products of three sources whose 16-bit partial results would round, overflow or
 *       underflow differently, and NaN sources in first and later place; hard-coded answers
 */

/* dst = a op b on n 16-bit elements (device memory unless on_host), compared bit for bit with
 * want; why names the first difference. */
static inline bool half_run(dev_dtype_t t, dev_op_t op, const uint16_t *a, const uint16_t *b,
                            const uint16_t *want, size_t n, bool on_host, char *why,
                            size_t whylen)
{
    const size_t bytes = n * sizeof(uint16_t);
    uint16_t *got = malloc(bytes);
    void *da = NULL, *db = NULL, *dd = NULL;
    bool ok = false;
    int rc;

    if (NULL == got) {
        snprintf(why, whylen, "out of host memory");
        return false;
    }
    memset(got, POISON, bytes);
    if (on_host) {
        rc = dev_reduce_host(got, a, b, n, t, op);
    } else {
        rc = dev_mem_alloc(&da, bytes);
        rc = (DEV_OK == rc) ? dev_mem_alloc(&db, bytes) : rc;
        rc = (DEV_OK == rc) ? dev_mem_alloc(&dd, bytes) : rc;
        rc = (DEV_OK == rc) ? dev_memcpy(da, a, bytes) : rc;
        rc = (DEV_OK == rc) ? dev_memcpy(db, b, bytes) : rc;
        rc = (DEV_OK == rc) ? dev_memset(dd, POISON, bytes) : rc;
        rc = (DEV_OK == rc) ? dev_reduce(dd, da, db, n, t, op, NULL) : rc;
        rc = (DEV_OK == rc) ? dev_memcpy(got, dd, bytes) : rc;
    }
    if (DEV_OK != rc) {
        snprintf(why, whylen, "%s %s: %s: %s", dev_op_name(op), dev_dtype_name(t),
                 dev_status_name(rc), dev_error_string());
        goto out;
    }
    for (size_t i = 0; i < n; ++i) {
        if (got[i] != want[i]) {
            snprintf(why, whylen, "element %zu: 0x%04x %s 0x%04x gave 0x%04x, want 0x%04x", i,
                     a[i], dev_op_name(op), b[i], got[i], want[i]);
            goto out;
        }
    }
    ok = true;
out:
    if (!on_host) {
        dev_mem_free(da);
        dev_mem_free(db);
        dev_mem_free(dd);
    }
    free(got);
    return ok;
}

/* The encoding of c * 2^k (c 1 or 3), built from the fields; the caller keeps it in range. */
static inline uint16_t half_scaled(dev_dtype_t t, int c, int k)
{
    const int fb = half_frac_bits(t), bias = (1 << (14 - fb)) - 1;
    const int kmin = 1 - bias - fb; /* the smallest subnormal is 2^kmin */

    if (k < (1 == c ? 1 - bias : -bias)) {
        return (uint16_t) (c << (k - kmin)); /* below 2^(1 - bias): subnormal */
    }
    return (1 == c) ? (uint16_t) ((k + bias) << fb)
                    : (uint16_t) ((k + 1 + bias) << fb | 1 << (fb - 1)); /* 1.5 * 2^(k+1) */
}

static inline int oracle_check_half(const char *label, bool on_host)
{
    static const dev_dtype_t types[] = {DEV_T_FLOAT16, DEV_T_BFLOAT16};
    enum { ALL = 65536 };
    int failed = 0;

    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ++ti) {
        const dev_dtype_t t = types[ti];
        const int fb = half_frac_bits(t), emax = half_exp_max(t);
        const int bias = (1 << (14 - fb)) - 1;
        const size_t nties = 2 * (size_t) (emax - 2) * ((size_t) 1 << fb) * 3;
        uint16_t *a = malloc(ALL * sizeof(uint16_t)), *b = malloc(ALL * sizeof(uint16_t));
        uint16_t *want = malloc(ALL * sizeof(uint16_t));
        uint16_t *ta = malloc(nties * sizeof(uint16_t)), *tb = malloc(nties * sizeof(uint16_t));
        uint16_t *tw = malloc(nties * sizeof(uint16_t));
        char why[256] = "out of host memory";
        const bool have = NULL != a && NULL != b && NULL != want && NULL != ta && NULL != tb
                          && NULL != tw;
        bool ok = have;
        size_t n = 0;

        for (size_t i = 0; ok && i < ALL; ++i) {
            a[i] = (uint16_t) i;
            want[i] = half_is_nan(t, (uint16_t) i) ? 0x7fff : (uint16_t) i;
        }
        for (size_t i = 0; ok && i < ALL; ++i) {
            b[i] = 0x8000; /* -0: x + -0 is x for every x, -0 and +0 included */
        }
        ok = ok && half_run(t, DEV_OP_SUM, a, b, want, ALL, on_host, why, sizeof(why));
        for (size_t i = 0; ok && i < ALL; ++i) {
            b[i] = (uint16_t) (bias << fb); /* 1 */
        }
        ok = ok && half_run(t, DEV_OP_PROD, a, b, want, ALL, on_host, why, sizeof(why))
             && half_run(t, DEV_OP_MIN, a, a, want, ALL, on_host, why, sizeof(why))
             && half_run(t, DEV_OP_MAX, a, a, want, ALL, on_host, why, sizeof(why));
        if (!tap_ok(ok, "%s: every %s encoding e: e + -0, e * 1, min(e, e), max(e, e) give e "
                        "(NaN: 0x7fff)", label, dev_dtype_name(t))) {
            tap_diag("%s", why);
            ++failed;
        }

        /* e + q/4 ulp(e): its ulp is 2^(exp - bias - fb), so q/4 of it is q * 2^k below */
        for (int sign = 0; have && sign < 2; ++sign) {
            for (int exp = 3; exp <= emax; ++exp) {
                for (unsigned frac = 0; frac < (1u << fb); ++frac) {
                    const uint16_t e = (uint16_t) (sign << 15 | exp << fb | (int) frac);
                    const int k = exp - bias - fb - 2;
                    for (int q = 1; q <= 3; ++q) {
                        ta[n] = e;
                        tb[n] = (uint16_t) (sign << 15 | half_scaled(t, (2 == q) ? 1 : q,
                                                                     (2 == q) ? k + 1 : k));
                        /* below, at and above the midpoint between e and e + 1 (encodings);
                         * e + 1 of the largest finite value is infinity, as IEEE says */
                        tw[n++] = (1 == q) ? e : (3 == q || 0 != (frac & 1)) ? e + 1 : e;
                    }
                }
            }
        }
        ok = have && n == nties
             && half_run(t, DEV_OP_SUM, ta, tb, tw, n, on_host, why, sizeof(why));
        if (!tap_ok(ok, "%s: %s: e + 1/4, 1/2, 3/4 ulp(e) rounds down, to even, up (%zu sums)",
                    label, dev_dtype_name(t), n)) {
            tap_diag("%s", why);
            ++failed;
        }
        free(a);
        free(b);
        free(want);
        free(ta);
        free(tb);
        free(tw);
    }
    return failed;
}

static inline int oracle_check_half_fold(const char *label)
{
    /* three sources, the answer of the fold in float rounded once, and what rounding after
     * every step would give instead (so that the case is known to tell the two apart) */
    static const struct {
        dev_dtype_t t;
        dev_op_t op;
        uint16_t src[3];
        uint16_t want;
        const char *what;
    } cases[] = {
        {DEV_T_FLOAT16, DEV_OP_SUM, {0x7bff, 0x7bff, 0xfbff}, 0x7bff,
         "65504 + 65504 - 65504 = 65504 (16-bit steps: infinity)"},
        {DEV_T_FLOAT16, DEV_OP_SUM, {0x6800, 0x3c00, 0x3c00}, 0x6801,
         "2048 + 1 + 1 = 2050 (16-bit steps: 2048, twice a tie to even)"},
        {DEV_T_FLOAT16, DEV_OP_PROD, {0x5c00, 0x5c00, 0x1c00}, 0x5c00,
         "256 * 256 / 256 = 256 (16-bit steps: infinity)"},
        {DEV_T_FLOAT16, DEV_OP_MIN, {0x7e00, 0x3c00, 0x4000}, 0x7fff,
         "min(NaN, 1, 2) = NaN, as 0x7fff (a first NaN wins)"},
        {DEV_T_FLOAT16, DEV_OP_MAX, {0x3c00, 0xfe01, 0x4000}, 0x4000,
         "max(1, -NaN, 2) = 2 (a later NaN loses)"},
        {DEV_T_BFLOAT16, DEV_OP_SUM, {0x4380, 0x3f80, 0x3f80}, 0x4381,
         "256 + 1 + 1 = 258 (16-bit steps: 256)"},
        {DEV_T_BFLOAT16, DEV_OP_PROD, {0x0380, 0x3580, 0x4980}, 0x0380,
         "2^-120 * 2^-20 * 2^20 = 2^-120 (16-bit steps: 0, 2^-140 is below bfloat16)"},
        {DEV_T_BFLOAT16, DEV_OP_MIN, {0x3f80, 0x7fc1, 0xbf80}, 0xbf80,
         "min(1, NaN, -1) = -1 (a later NaN loses)"},
    };
    enum { N = 37 }; /* four 16-byte vectors and a scalar tail */
    int failed = 0;

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        uint16_t h[N + 1], back[N + 1];
        void *src[3] = {NULL, NULL, NULL}, *dst = NULL;
        bool ok = true;
        char why[160] = "";

        for (int k = 0; ok && k < 3; ++k) {
            for (size_t i = 0; i <= N; ++i) {
                h[i] = cases[c].src[k];
            }
            ok = DEV_OK == dev_mem_alloc(&src[k], sizeof(h))
                 && DEV_OK == dev_memcpy(src[k], h, sizeof(h));
        }
        ok = ok && DEV_OK == dev_mem_alloc(&dst, sizeof(back));
        /* aligned (vector path), then every pointer one element on (scalar head first) */
        for (size_t off = 0; ok && off < 2; ++off) {
            const void *srcs[3] = {(uint16_t *) src[0] + off, (uint16_t *) src[1] + off,
                                   (uint16_t *) src[2] + off};
            void *dsts[1] = {(uint16_t *) dst + off};
            ok = DEV_OK == dev_memset(dst, POISON, sizeof(back))
                 && DEV_OK == dev_reduce_multi(dsts, 1, srcs, 3, N, cases[c].t, cases[c].op,
                                               NULL, NULL)
                 && DEV_OK == dev_stream_sync(NULL)
                 && DEV_OK == dev_memcpy(back, dst, sizeof(back));
            if (!ok) {
                snprintf(why, sizeof(why), "%s", dev_error_string());
            }
            for (size_t i = 0; ok && i < N; ++i) {
                if (back[off + i] != cases[c].want) {
                    snprintf(why, sizeof(why), "offset %zu, element %zu: 0x%04x, want 0x%04x",
                             off, i, back[off + i], cases[c].want);
                    ok = false;
                }
            }
        }
        if (!tap_ok(ok, "%s: reduce_multi %s on %s folds in float: %s", label,
                    dev_op_name(cases[c].op), dev_dtype_name(cases[c].t), cases[c].what)) {
            tap_diag("%s", why);
            ++failed;
        }
        for (int k = 0; k < 3; ++k) {
            dev_mem_free(src[k]);
        }
        dev_mem_free(dst);
    }
    return failed;
}

#endif /* TEST_DEV_ORACLE_H */
