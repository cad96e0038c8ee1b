/*
 * test_dev_halfprec.c - kernels/halfprec.h, the float <-> binary16 / bfloat16 conversions that
 * the host reference (and C code above the device layer) share with the GPU kernels, against
 * slow methods written here from the definitions of the formats:
 *
 *   to float     each of the 65536 encodings of each type, bit for bit, against the value
 *                computed with ldexp from the fields; a NaN as CUDA gives it (binary16:
 *                0x7fffffff; bfloat16: the bits shifted up, payload and sign kept)
 *   round trip   16 bits -> float -> 16 bits is the identity for every non-NaN encoding, and
 *                every NaN comes back as 0x7fff (quiet, CUDA's canonical NaN)
 *   to 16 bits   against a rounding that brackets |f| between two neighbouring encodings by
 *                bisection and takes the nearer (the even one on a tie; infinity once past the
 *                largest finite value by half an ulp or more): on every midpoint between
 *                neighbours and the floats just below and above it, random bit patterns (every
 *                exponent), random floats inside the 16-bit range, and a table of edges with
 *                their answers written out (overflow, the subnormal range, zeros, NaNs)
 *
 * halfprec.h itself was also compared, once and outside this suite, with the host versions of
 * __float2half_rn and __float2bfloat16_rn in CUDA 13's cuda_fp16.hpp / cuda_bf16.hpp over all
 * 2^32 floats: no difference.  The GPU side of the same rules is checked through the kernels
 * (test_dev_oracle.h's oracle_check_half, run by test_dev_cuda_nodriver on a GPU).
 */
#include "halfprec.h"
#include "tap.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A 16-bit format: fraction bits, bias, largest finite exponent field, and whether its NaNs
 * widen to float's canonical 0x7fffffff (CUDA's __half2float) or keep their bits (bfloat16 is
 * float's top half: __bfloat162float shifts). */
typedef struct {
    const char *name;
    int fb, bias, emax;
    bool canonical_nan;
    float (*to_float)(uint16_t);
    uint16_t (*from_float)(float);
} format_t;

static const format_t formats[] = {
    {"binary16", 10, 15, 30, true, coll_gpu_f16_to_float, coll_gpu_float_to_f16},
    {"bfloat16", 7, 127, 254, false, coll_gpu_bf16_to_float, coll_gpu_float_to_bf16},
};

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint16_t infinity_of(const format_t *fm)
{
    return (uint16_t) ((fm->emax + 1) << fm->fb);
}

/* The magnitude that encoding mag (sign bit clear) stands for, from the definition; the
 * infinity encoding stands for 2^(emax + 1 - bias), the first value past the largest finite
 * one, which is what rounding compares with. */
static double magnitude(const format_t *fm, uint16_t mag)
{
    const int exp = mag >> fm->fb;
    const int frac = mag & ((1 << fm->fb) - 1);

    if (0 == exp) {
        return ldexp((double) frac, 1 - fm->bias - fm->fb);
    }
    return ldexp((double) ((1 << fm->fb) + frac), exp - fm->bias - fm->fb);
}

static bool is_nan16(const format_t *fm, uint16_t h)
{
    return (h & 0x7fff) > infinity_of(fm);
}

/* f rounded to the format, slowly: bisect for the largest encoding not above |f|, then take
 * the nearer of it and the next one, the even one on a tie. */
static uint16_t slow_round(const format_t *fm, float f)
{
    const uint16_t sign = (uint16_t) ((bits_of(f) >> 16) & 0x8000);
    const uint16_t inf = infinity_of(fm);
    const double x = fabs((double) f);
    uint16_t lo = 0, hi = inf;
    double below, above;

    if (isnan(f)) {
        return 0x7fff;
    }
    if (x >= magnitude(fm, inf)) {
        return sign | inf;
    }
    while (hi - lo > 1) { /* magnitude(lo) <= x < magnitude(hi) */
        const uint16_t mid = (uint16_t) ((lo + hi) / 2);
        if (magnitude(fm, mid) <= x) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    /* both differences are exact in double: 24 bits of x against at most 11 of the encodings */
    below = x - magnitude(fm, lo);
    above = magnitude(fm, hi) - x;
    if (below < above) {
        return sign | lo;
    }
    if (above < below) {
        return sign | hi;
    }
    return sign | ((lo & 1) ? hi : lo);
}

static void test_to_float(const format_t *fm)
{
    unsigned long wrong = 0, trip = 0;
    char why[160] = "";
    char twhy[160] = "";

    for (uint32_t h = 0; h < 65536; ++h) {
        const uint16_t e = (uint16_t) h;
        const uint16_t mag = e & 0x7fff;
        const float got = fm->to_float(e);
        uint32_t want;

        if (is_nan16(fm, e)) {
            want = fm->canonical_nan ? 0x7fffffffu : h << 16;
        } else if (mag == infinity_of(fm)) {
            want = bits_of((e & 0x8000) ? -INFINITY : INFINITY);
        } else {
            /* every value of both formats is a float, so this conversion is exact */
            const double v = magnitude(fm, mag);
            want = bits_of((float) ((e & 0x8000) ? -v : v));
        }
        if (bits_of(got) != want && 0 == wrong++) {
            snprintf(why, sizeof(why), "0x%04x gave 0x%08x, want 0x%08x", h, bits_of(got), want);
        }
        {
            const uint16_t back = fm->from_float(got);
            const uint16_t expect = is_nan16(fm, e) ? 0x7fff : e;
            if (back != expect && 0 == trip++) {
                snprintf(twhy, sizeof(twhy), "0x%04x came back as 0x%04x, want 0x%04x", h,
                         back, expect);
            }
        }
    }
    if (!tap_ok(0 == wrong, "%s to float: all 65536 encodings match their definition (%lu wrong)",
                fm->name, wrong)) {
        tap_diag("%s", why);
    }
    if (!tap_ok(0 == trip, "%s to float and back: the identity, every NaN as 0x7fff (%lu wrong)",
                fm->name, trip)) {
        tap_diag("%s", twhy);
    }
}

/* Compare the conversion with slow_round on one float; count and describe the first miss. */
static void check_round(const format_t *fm, float f, unsigned long *wrong, char *why,
                        size_t whylen)
{
    const uint16_t got = fm->from_float(f), want = slow_round(fm, f);

    if (got != want && 0 == (*wrong)++) {
        snprintf(why, whylen, "%.9g (0x%08x) gave 0x%04x, want 0x%04x", (double) f, bits_of(f),
                 got, want);
    }
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

enum { RANDOM_FLOATS = 1 << 22 };

static void test_from_float(const format_t *fm)
{
    const uint16_t inf = infinity_of(fm);
    unsigned long wrong = 0, n = 0;
    char why[160] = "";

    /* the midpoint between every two neighbours (the last pair: the largest finite value and
     * infinity's 2^(emax + 1 - bias)), and the floats on either side; midpoints have one bit
     * more than the format, so they are floats */
    for (uint16_t mag = 0; mag < inf; ++mag) {
        const float mid = (float) ((magnitude(fm, mag) + magnitude(fm, (uint16_t) (mag + 1))) / 2);
        const float probes[3] = {nextafterf(mid, 0.0f), mid, nextafterf(mid, INFINITY)};
        for (int p = 0; p < 3; ++p) {
            check_round(fm, probes[p], &wrong, why, sizeof(why));
            check_round(fm, -probes[p], &wrong, why, sizeof(why));
            n += 2;
        }
    }
    if (!tap_ok(0 == wrong, "%s from float: every midpoint and its neighbours, both signs "
                            "(%lu floats, %lu wrong)", fm->name, n, wrong)) {
        tap_diag("%s", why);
    }

    /* random bit patterns: every exponent, NaNs and infinities included */
    wrong = 0;
    for (unsigned long i = 0; i < RANDOM_FLOATS; ++i) {
        check_round(fm, float_of((uint32_t) (rnd() >> 32)), &wrong, why, sizeof(why));
    }
    if (!tap_ok(0 == wrong, "%s from float: %d random bit patterns (%lu wrong)", fm->name,
                RANDOM_FLOATS, wrong)) {
        tap_diag("%s", why);
    }

    /* random floats whose exponent lies within the format's range, from below half the
     * smallest subnormal to past the overflow threshold: float exponent fields
     * 127 - bias - fb - 2 up to 127 + emax + 2 - bias, within float's own 0 .. 254 */
    wrong = 0;
    for (unsigned long i = 0; i < RANDOM_FLOATS; ++i) {
        const uint64_t r = rnd();
        const int lo = 127 - fm->bias - fm->fb - 2, hi = 127 + fm->emax + 2 - fm->bias;
        const int elo = (lo < 0) ? 0 : lo, ehi = (hi > 254) ? 254 : hi;
        const int e = elo + (int) ((r >> 32) % (uint64_t) (ehi - elo + 1));
        const uint32_t u = (uint32_t) (r & 0x807fffffu) | (uint32_t) e << 23;
        check_round(fm, float_of(u), &wrong, why, sizeof(why));
    }
    if (!tap_ok(0 == wrong, "%s from float: %d random floats of its range (%lu wrong)",
                fm->name, RANDOM_FLOATS, wrong)) {
        tap_diag("%s", why);
    }
}

/* Edges with their answers written out, so that the slow method is not their only witness. */
static void test_edges(void)
{
    static const struct {
        int format; /* index in formats[] */
        uint32_t f;
        uint16_t want;
        const char *what;
    } edges[] = {
        {0, 0x00000000, 0x0000, "+0"},
        {0, 0x80000000, 0x8000, "-0"},
        {0, 0x7f800000, 0x7c00, "+infinity"},
        {0, 0xff800000, 0xfc00, "-infinity"},
        {0, 0x7fc00000, 0x7fff, "quiet NaN"},
        {0, 0xffc00000, 0x7fff, "negative NaN (x86's default NaN)"},
        {0, 0x7f800001, 0x7fff, "signalling NaN"},
        {0, 0x477fe000, 0x7bff, "65504, the largest finite"},
        {0, 0x477fefff, 0x7bff, "65519.998, just below the overflow threshold"},
        {0, 0x477ff000, 0x7c00, "65520: a tie, 65504 is odd, so infinity"},
        {0, 0xc77ff000, 0xfc00, "-65520: -infinity"},
        {0, 0x47800000, 0x7c00, "65536"},
        {0, 0x7f7fffff, 0x7c00, "FLT_MAX"},
        {0, 0x476a6000, 0x7b53, "60000"},
        {0, 0x38800000, 0x0400, "2^-14, the smallest normal"},
        {0, 0x387fe000, 0x0400, "2^-14 - 2^-25: a tie between 0x3ff and 0x400, to even"},
        {0, 0x387fc000, 0x03ff, "2^-14 - 2^-24, the largest subnormal"},
        {0, 0x33800000, 0x0001, "2^-24, the smallest subnormal"},
        {0, 0x33000000, 0x0000, "2^-25: a tie between 0 and 2^-24, to even 0"},
        {0, 0x33000001, 0x0001, "just above 2^-25"},
        {0, 0xb3000000, 0x8000, "-2^-25: -0"},
        {0, 0x33c00000, 0x0002, "3 * 2^-25: a tie between 1 and 2 (units of 2^-24), to 2"},
        {0, 0x34200000, 0x0002, "5 * 2^-25: a tie between 2 and 3, to 2"},
        {0, 0x00000001, 0x0000, "the smallest float subnormal"},
        {0, 0x3f800000, 0x3c00, "1"},
        {0, 0x3f801000, 0x3c00, "1 + 2^-11: a tie, to even 1"},
        {0, 0x3f803000, 0x3c02, "1 + 3 * 2^-11: a tie between 0x3c01 and 0x3c02, to even"},
        {0, 0x3f801001, 0x3c01, "just above 1 + 2^-11"},
        {0, 0xbdcccccd, 0xae66, "-0.1"},
        {1, 0x00000000, 0x0000, "+0"},
        {1, 0x80000000, 0x8000, "-0"},
        {1, 0x7f800000, 0x7f80, "+infinity"},
        {1, 0xff800000, 0xff80, "-infinity"},
        {1, 0xffc00000, 0x7fff, "negative NaN"},
        {1, 0x7f800001, 0x7fff, "signalling NaN whose top bits would read as infinity"},
        {1, 0x7f7f7fff, 0x7f7f, "just below the overflow threshold"},
        {1, 0x7f7f8000, 0x7f80, "the overflow threshold: a tie, 0x7f7f is odd, so infinity"},
        {1, 0x7f7fffff, 0x7f80, "FLT_MAX"},
        {1, 0x3f808000, 0x3f80, "1 + 2^-8: a tie, to even 1"},
        {1, 0x3f818000, 0x3f82, "1 + 3 * 2^-8: a tie, to even 0x3f82"},
        {1, 0x3f808001, 0x3f81, "just above 1 + 2^-8"},
        {1, 0x00008000, 0x0000, "2^-134: a tie between 0 and the smallest subnormal, to 0"},
        {1, 0x00018000, 0x0002, "3 * 2^-134: a tie between 1 and 2, to 2"},
        {1, 0x00010000, 0x0001, "2^-133, the smallest subnormal"},
        {1, 0x007fffff, 0x0080, "the largest float subnormal: up to 2^-126"},
        {1, 0x3dcccccd, 0x3dcd, "0.1"},
    };
    unsigned long wrong = 0;
    char why[200] = "";

    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); ++i) {
        const format_t *fm = &formats[edges[i].format];
        const uint16_t got = fm->from_float(float_of(edges[i].f));
        if (got != edges[i].want && 0 == wrong++) {
            snprintf(why, sizeof(why), "%s %s (0x%08x) gave 0x%04x, want 0x%04x", fm->name,
                     edges[i].what, edges[i].f, got, edges[i].want);
        }
    }
    if (!tap_ok(0 == wrong, "%zu edges (overflow, subnormals, ties, zeros, NaNs) give the "
                            "answers written out (%lu wrong)",
                sizeof(edges) / sizeof(edges[0]), wrong)) {
        tap_diag("%s", why);
    }
}

int main(void)
{
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); ++i) {
        test_to_float(&formats[i]);
        test_from_float(&formats[i]);
    }
    test_edges();
    printf("# %d passed, %d failed\n", tap_count_ - tap_failures(), tap_failures());
    return tap_done();
}
