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
 *   - MINLOC/MAXLOC: the smaller (larger) value, on a tie the smaller index.
 */
#ifndef COLL_GPU_REDUCE_OPS_CUH
#define COLL_GPU_REDUCE_OPS_CUH

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
