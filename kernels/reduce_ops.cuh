/*
 * reduce_ops.cuh - the reduction operators of the GPU kernels, apart from any data movement, so
 * that every kernel (elementwise reduce, allreduce, reduce-scatter) applies the same rules.
 *
 * The rules are those of reference.h, which the tests hold the kernels to:
 *   - integer SUM and PROD wrap modulo 2^bits; they are instantiated on unsigned types only
 *     (two's complement makes signed and unsigned bit-identical), which also keeps them free of
 *     signed-overflow UB; 8- and 16-bit operands are widened to unsigned int first (uint16 *
 *     uint16 would otherwise be a signed int multiply);
 *   - MIN is (b < a ? b : a), MAX is (b > a ? b : a);
 *   - LAND, LOR, LXOR store 0 or 1;
 *   - complex PROD is (ar*br - ai*bi, ar*bi + ai*br), each product and sum rounded on its own
 *     (the _rn intrinsics, which nvcc never contracts into an FMA): the result is then the
 *     same whichever kernel and code path computes it, and the same as the host reference's;
 *   - MINLOC/MAXLOC: the smaller (larger) value, on a tie the smaller index;
 *   - binary16 and bfloat16 (f16, bf16 below) are computed in float: every operand is widened
 *     exactly (__half2float, __bfloat162float), the op is the float one (MIN and MAX compare
 *     the float values, as for float), and the result is rounded to 16 bits once, to nearest,
 *     ties to even (__float2half_rn, __float2bfloat16_rn).  A pairwise reduce rounds each
 *     result; a fold of several sources (allreduce_multi.cu, allreduce_fused.cu) keeps its
 *     accumulator in float from the first source to the last, acc = acc op src[k], and rounds
 *     once at the store, so that n sources cost one 16-bit rounding, not n - 1 (and partial
 *     sums may pass 65504 without becoming infinite).  A single SUM or PROD is rounded twice,
 *     to float by the op and to 16 bits by the store, and is still the correctly rounded
 *     16-bit result: float's 24 bits are at least 2p + 2 for p = 11 (binary16) and p = 8
 *     (bfloat16), and with that margin the double rounding of +, -, * and / of p-bit operands
 *     never differs from rounding once.  kernels/halfprec.h does the same conversions on the
 *     host, bit for bit (every NaN becomes CUDA's canonical 0x7fff).
 */
#ifndef COLL_GPU_REDUCE_OPS_CUH
#define COLL_GPU_REDUCE_OPS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace coll_gpu {

/* C layouts of the element types that are not plain scalars (see dev.h). */
struct cfloat {
    float re, im;
};
struct cdouble {
    double re, im;
};
template <typename V> struct pair {
    V value;
    int index;
};

/* The 16-bit floating-point elements, as their bits.  CUDA's __half and __nv_bfloat16 have
 * constructors, which the kernels' uint4 unions cannot hold; these are plain. */
struct f16 {
    uint16_t bits;
};
struct bf16 {
    uint16_t bits;
};

/* The type an element is computed in, and the way there and back: itself for every type but
 * the 16-bit floats, which are accumulated in float (the rules above).  The identity for the
 * others compiles away, so one kernel body serves every type. */
template <typename T> struct accum {
    typedef T type;
    static __device__ __forceinline__ T load(T x)
    {
        return x;
    }
    static __device__ __forceinline__ T store(T x)
    {
        return x;
    }
};
template <> struct accum<f16> {
    typedef float type;
    static __device__ __forceinline__ float load(f16 x)
    {
        return __half2float(__ushort_as_half(x.bits));
    }
    static __device__ __forceinline__ f16 store(float x)
    {
        return f16{__half_as_ushort(__float2half_rn(x))};
    }
};
template <> struct accum<bf16> {
    typedef float type;
    static __device__ __forceinline__ float load(bf16 x)
    {
        return __bfloat162float(__ushort_as_bfloat16(x.bits));
    }
    static __device__ __forceinline__ bf16 store(float x)
    {
        return bf16{__bfloat16_as_ushort(__float2bfloat16_rn(x))};
    }
};

/* The pairwise reduce of two elements: computed in the accumulator type, stored back at once
 * (one rounding for the 16-bit floats). */
template <typename Op, typename T> __device__ __forceinline__ T combine(T a, T b)
{
    return accum<T>::store(Op::apply(accum<T>::load(a), accum<T>::load(b)));
}

/* 16 bytes of elements, the unit the kernels load and store. */
template <typename T> union vec16 {
    uint4 v;
    T e[16 / sizeof(T)];
};

/* A vector being folded over several sources: start from the 16 bytes of the first source,
 * fold each next source in, return the 16 bytes to store.  For every type but the 16-bit
 * floats the accumulator is the vector itself, handled exactly as the kernels did before those
 * types came (their machine code is unchanged); the 16-bit floats accumulate 8 floats
 * (registers: every index is a constant once unrolled). */
template <typename T> struct vec_accum {
    typedef vec16<T> type;
    static __device__ __forceinline__ void start(type &acc, const uint4 &first)
    {
        acc.v = first;
    }
    template <typename Op> static __device__ __forceinline__ void fold(type &acc,
                                                                       const vec16<T> &x)
    {
#pragma unroll
        for (int e = 0; e < (int) (16 / sizeof(T)); ++e) {
            acc.e[e] = Op::apply(acc.e[e], x.e[e]);
        }
    }
    static __device__ __forceinline__ uint4 finish(const type &acc)
    {
        return acc.v;
    }
};

template <typename T> struct vec_accum_float {
    struct type {
        float e[16 / sizeof(T)];
    };
    static __device__ __forceinline__ void start(type &acc, const uint4 &first)
    {
        vec16<T> x;
        x.v = first;
#pragma unroll
        for (int e = 0; e < (int) (16 / sizeof(T)); ++e) {
            acc.e[e] = accum<T>::load(x.e[e]);
        }
    }
    template <typename Op> static __device__ __forceinline__ void fold(type &acc,
                                                                       const vec16<T> &x)
    {
#pragma unroll
        for (int e = 0; e < (int) (16 / sizeof(T)); ++e) {
            acc.e[e] = Op::apply(acc.e[e], accum<T>::load(x.e[e]));
        }
    }
    static __device__ __forceinline__ uint4 finish(const type &acc)
    {
        vec16<T> x;
#pragma unroll
        for (int e = 0; e < (int) (16 / sizeof(T)); ++e) {
            x.e[e] = accum<T>::store(acc.e[e]);
        }
        return x.v;
    }
};
template <> struct vec_accum<f16> : vec_accum_float<f16> {};
template <> struct vec_accum<bf16> : vec_accum_float<bf16> {};

/* Operand type for integer arithmetic: at least unsigned int, so no promotion to int. */
template <typename T> struct arith { typedef T type; };
template <> struct arith<uint8_t> { typedef unsigned int type; };
template <> struct arith<uint16_t> { typedef unsigned int type; };

struct OpSum {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b)
    {
        typedef typename arith<T>::type W;
        return (T) ((W) a + (W) b);
    }
    static __device__ __forceinline__ cfloat apply(cfloat a, cfloat b)
    {
        return cfloat{a.re + b.re, a.im + b.im};
    }
    static __device__ __forceinline__ cdouble apply(cdouble a, cdouble b)
    {
        return cdouble{a.re + b.re, a.im + b.im};
    }
};

struct OpProd {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b)
    {
        typedef typename arith<T>::type W;
        return (T) ((W) a * (W) b);
    }
    static __device__ __forceinline__ cfloat apply(cfloat a, cfloat b)
    {
        return cfloat{__fsub_rn(__fmul_rn(a.re, b.re), __fmul_rn(a.im, b.im)),
                      __fadd_rn(__fmul_rn(a.re, b.im), __fmul_rn(a.im, b.re))};
    }
    static __device__ __forceinline__ cdouble apply(cdouble a, cdouble b)
    {
        return cdouble{__dsub_rn(__dmul_rn(a.re, b.re), __dmul_rn(a.im, b.im)),
                       __dadd_rn(__dmul_rn(a.re, b.im), __dmul_rn(a.im, b.re))};
    }
};

struct OpMin {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b)
    {
        return (b < a) ? b : a;
    }
};

struct OpMax {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b)
    {
        return (b > a) ? b : a;
    }
};

struct OpLand {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b)
    {
        return (T) ((0 != a) && (0 != b));
    }
};

struct OpLor {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b)
    {
        return (T) ((0 != a) || (0 != b));
    }
};

struct OpLxor {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b)
    {
        return (T) ((0 != a) != (0 != b));
    }
};

struct OpBand {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b)
    {
        return (T) (a & b);
    }
};

struct OpBor {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b)
    {
        return (T) (a | b);
    }
};

struct OpBxor {
    template <typename T> static __device__ __forceinline__ T apply(T a, T b)
    {
        return (T) (a ^ b);
    }
};

struct OpMinloc {
    template <typename V> static __device__ __forceinline__ pair<V> apply(pair<V> a, pair<V> b)
    {
        if (a.value < b.value) {
            return a;
        }
        if (b.value < a.value) {
            return b;
        }
        return (b.index < a.index) ? b : a;
    }
};

struct OpMaxloc {
    template <typename V> static __device__ __forceinline__ pair<V> apply(pair<V> a, pair<V> b)
    {
        if (a.value > b.value) {
            return a;
        }
        if (b.value > a.value) {
            return b;
        }
        return (b.index < a.index) ? b : a;
    }
};

} /* namespace coll_gpu */

#endif /* COLL_GPU_REDUCE_OPS_CUH */
