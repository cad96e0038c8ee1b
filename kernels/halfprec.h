/*
 * halfprec.h - conversions between float and the two 16-bit floating-point types of the device
 * layer (DEV_T_FLOAT16, DEV_T_BFLOAT16), for host code: the plain-C reference (reference.c,
 * hence the emulated backend and dev_reduce_host) and any C library above the device layer
 * that must produce the same bits as the GPU kernels.  Header-only, C99 and C++.
 *
 *   binary16   1 sign, 5 exponent (bias 15), 10 fraction bits: IEEE 754 half precision,
 *              largest finite 65504, smallest normal 2^-14, smallest subnormal 2^-24
 *   bfloat16   the top 16 bits of a binary32: 1 sign, 8 exponent (bias 127), 7 fraction
 *              bits, float's range with 8 bits of precision
 *
 * The values are carried as uint16_t bit patterns, never as a compiler's _Float16 or __bf16:
 * not every C compiler has them, and their conversions need not round as the GPU does.
 *
 * The rules are those of CUDA's __half2float, __float2half_rn, __bfloat162float and
 * __float2bfloat16_rn, bit for bit, so that a result reduced here and one reduced by a kernel
 * are the same bits:
 *   - to float is exact (every 16-bit value is a float), subnormals included;
 *   - to 16 bits rounds to nearest, ties to even, with IEEE overflow: a magnitude at or above
 *     the midpoint between the largest finite value and the next power of two becomes infinity
 *     (binary16: 65520 and above); results in the subnormal range are rounded there once,
 *     never flushed to zero; the sign of a zero is kept;
 *   - NaN stays NaN (quiet), but in CUDA's canonical form, sign and payload dropped: every NaN
 *     becomes 0x7fff as a 16-bit value, and a binary16 NaN becomes 0x7fffffff as a float
 *     (bfloat16 to float is a shift, so its NaNs keep their bits).  Keeping the sign would
 *     make host and GPU differ: the NaN that x86 makes for inf - inf or 0 * inf is negative
 *     (0xffc00000), the one a GPU makes is positive, and both must round to the same 16 bits.
 */
#ifndef COLL_GPU_HALFPREC_H
#define COLL_GPU_HALFPREC_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint32_t coll_gpu_hp_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u)); /* the one type pun that is defined in both C and C++ */
    return u;
}

static inline float coll_gpu_hp_bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Round the integer q + r / 2^shift (0 <= r < 2^shift, 1 <= shift <= 31) to nearest, ties to
 * the even q: the one rounding step both narrowing conversions share. */
static inline uint32_t coll_gpu_hp_round_even(uint32_t q, uint32_t r, unsigned shift)
{
    const uint32_t half = UINT32_C(1) << (shift - 1);

    return (r > half || (r == half && 0 != (q & 1))) ? q + 1 : q;
}

/* binary16 bits -> float, exactly (__half2float). */
static inline float coll_gpu_f16_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t) (h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t frac = h & 0x3ffu;
    uint32_t e;

    if (0x1fu == exp) {
        /* infinity keeps its sign; a NaN becomes CUDA's canonical float NaN */
        return coll_gpu_hp_bits_float((0 != frac) ? UINT32_C(0x7fffffff)
                                                  : sign | UINT32_C(0x7f800000));
    }
    if (0 == exp) {
        if (0 == frac) {
            return coll_gpu_hp_bits_float(sign);
        }
        /* subnormal frac * 2^-24: normalise so that the leading one sits on bit 10 (the
         * implicit bit); each shift lowers the exponent of 2^-14 by one */
        e = 127 - 14;
        while (0 == (frac & 0x400u)) {
            frac <<= 1;
            --e;
        }
        return coll_gpu_hp_bits_float(sign | e << 23 | (frac & 0x3ffu) << 13);
    }
    /* rebias 15 -> 127; the 10 fraction bits become the top of float's 23 */
    return coll_gpu_hp_bits_float(sign | (exp + 127 - 15) << 23 | frac << 13);
}

/* float -> binary16 bits, to nearest, ties to even (__float2half_rn).  Going by the float's
 * bits, magnitude ranges from the top: NaN, overflow, normal, zero, subnormal. */
static inline uint16_t coll_gpu_float_to_f16(float f)
{
    const uint32_t x = coll_gpu_hp_float_bits(f);
    const uint32_t u = x & UINT32_C(0x7fffffff);
    const uint16_t sign = (uint16_t) ((x >> 16) & 0x8000u);

    if (u > UINT32_C(0x7f800000)) {
        return 0x7fff;
    }
    if (u >= UINT32_C(0x477ff000)) {
        /* 65520 = 65504 + half an ulp, and up: 65504's fraction is odd, so even the tie goes
         * up, to infinity (float's infinity lands here too) */
        return (uint16_t) (sign | 0x7c00u);
    }
    if (u >= UINT32_C(0x38800000)) {
        /* normal (2^-14 and up): rebias, keep 10 of 23 fraction bits; a carry out of the
         * fraction moves into the exponent, which is the right next value (and stays below
         * infinity: that case is above) */
        const uint32_t m = u - ((uint32_t) (127 - 15) << 23);
        return (uint16_t) (sign | coll_gpu_hp_round_even(m >> 13, m & 0x1fffu, 13));
    }
    if (u <= UINT32_C(0x33000000)) {
        /* up to 2^-25, half the smallest subnormal: the tie goes to the even zero */
        return sign;
    }
    {
        /* subnormal result: the value in units of 2^-24 is the 24-bit significand shifted right
         * by 126 - e, which is 14..24 here (e = 102..112) */
        const uint32_t e = u >> 23;
        const uint32_t sig = (u & UINT32_C(0x7fffff)) | UINT32_C(0x800000);
        const unsigned shift = (unsigned) (126 - e);
        const uint32_t q = sig >> shift, r = sig & ((UINT32_C(1) << shift) - 1);
        /* rounding up from 0x3ff gives 0x400: the smallest normal, as it should */
        return (uint16_t) (sign | coll_gpu_hp_round_even(q, r, shift));
    }
}

/* bfloat16 bits -> float: they are its top half (__bfloat162float). */
static inline float coll_gpu_bf16_to_float(uint16_t b)
{
    return coll_gpu_hp_bits_float((uint32_t) b << 16);
}

/* float -> bfloat16 bits, to nearest, ties to even (__float2bfloat16_rn). */
static inline uint16_t coll_gpu_float_to_bf16(float f)
{
    const uint32_t x = coll_gpu_hp_float_bits(f);

    if ((x & UINT32_C(0x7fffffff)) > UINT32_C(0x7f800000)) {
        return 0x7fff;
    }
    /* same exponent field as float: drop 16 fraction bits.  The carry of a round-up runs into
     * the exponent, which is again the next value, up to infinity from the largest finite
     * floats; subnormal floats round to bfloat16 subnormals the same way. */
    return (uint16_t) coll_gpu_hp_round_even(x >> 16, x & 0xffffu, 16);
}

#ifdef __cplusplus
}
#endif

#endif /* COLL_GPU_HALFPREC_H */
