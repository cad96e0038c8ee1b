/*
 * allreduce_multi.cu - dev_reduce_multi on the GPU: for every element, v = the fold of nsrc
 * sources in source order, stored to ndst destinations.  It is the whole data path of the
 * intra-node MPI_Allreduce (mca-coll-gpu/coll_gpu_nvl.c):
 *
 *   one-shot   rbuf[i]             = scratch_0[i] op ... op scratch_{n-1}[i]   (ndst 1)
 *   two-shot   rbuf_q[c] for all q = sbuf_0[c] op ... op sbuf_{n-1}[c]        (ndst n)
 *
 * where scratch_p, sbuf_p and rbuf_q of peers are IPC mappings: the loads and stores cross
 * NVLink (or PCIe P2P) directly, with no copy-engine stage.
 *
 * One grid-stride kernel per (element type, op), with nsrc and ndst as run-time values; the
 * pointers travel by value in the kernel parameters (multi_args_t, 272 bytes, read through the
 * constant cache, uniform across a warp).  When every pointer has the same offset modulo 16
 * bytes (the usual case: allocator-aligned buffers and one chunk offset for all), the body
 * moves 16-byte vectors and only a head and a tail go element by element; otherwise every
 * element goes alone, which is correct and slower.
 *
 *     elements   [0, head)        [head, head + nvec * V)          [.., count)
 *     access     scalar           uint4 loads/stores, V = 16/size   scalar
 *
 * Per element (vector) a thread loads every source before it stores any destination, and it
 * is the only thread that touches that element, so a destination may be one of the sources.
 * Sources are folded left to right, acc = acc op src[k], with the same Op::apply on the vector
 * and the scalar path: results are bit for bit those of any other call with the same sources
 * in the same order, whatever the alignment of the destinations (every rank of a one-shot
 * allreduce computes the full result and must end with the same floats).  Loads are issued four
 * sources at a time so that four peer reads are in flight per thread before the first add.
 * binary16 and bfloat16 are folded in float, from the first source to the last, and rounded
 * once, at the store (vec_accum and accum, reduce_ops.cuh).
 *
 * Instantiations follow reduce_kernels.cu (signed integers share the unsigned kernels for SUM,
 * PROD and the logical ops, bitwise ops run on bytes); a copy (nsrc 1) runs on the widest
 * unsigned type that the pointers' common alignment allows, through a kernel whose op is never
 * applied.
 */
#include "dev_backend.h"
#include "reduce_ops.cuh"

#include <cuda_runtime.h>

namespace coll_gpu {

enum {
    MULTI_DEFAULT_THREADS = 512,
    /* the launch bound: a larger request (dev.c accepts up to 1024) runs with this many; at
     * 1024 ptxas caps the kernels at 32 registers and some spill */
    MULTI_MAX_THREADS = 512,
    MULTI_THREADS_PER_SM = 2048,
    MULTI_GROUP = 4 /* sources loaded together */
};

struct multi_args_t {
    const void *src[DEV_MULTI_MAX];
    void *dst[DEV_MULTI_MAX];
    int nsrc;
    int ndst;
};

template <typename T, typename Op>
__global__ void __launch_bounds__(MULTI_MAX_THREADS)
    reduce_multi_kernel(const multi_args_t a, size_t head, size_t nvec, size_t count)
{
    constexpr size_t V = 16 / sizeof(T);
    const size_t tid = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t) gridDim.x * blockDim.x;
    const int nsrc = a.nsrc, ndst = a.ndst;

    /* plain (coherent) loads: a destination may be a source, and peers' memory is read */
    for (size_t i = tid; i < nvec; i += stride) {
        typename vec_accum<T>::type acc;
        int k = 1;
        vec_accum<T>::start(acc, reinterpret_cast<const uint4 *>((const T *) a.src[0] + head)[i]);
        for (; k + MULTI_GROUP <= nsrc; k += MULTI_GROUP) {
            vec16<T> x[MULTI_GROUP];
#pragma unroll
            for (int u = 0; u < MULTI_GROUP; ++u) {
                x[u].v = reinterpret_cast<const uint4 *>((const T *) a.src[k + u] + head)[i];
            }
#pragma unroll
            for (int u = 0; u < MULTI_GROUP; ++u) {
                vec_accum<T>::template fold<Op>(acc, x[u]);
            }
        }
        for (; k < nsrc; ++k) {
            vec16<T> x;
            x.v = reinterpret_cast<const uint4 *>((const T *) a.src[k] + head)[i];
            vec_accum<T>::template fold<Op>(acc, x);
        }
        const uint4 out = vec_accum<T>::finish(acc);
        for (int d = 0; d < ndst; ++d) {
            reinterpret_cast<uint4 *>((T *) a.dst[d] + head)[i] = out;
        }
    }

    const size_t tail = head + nvec * V;
    const size_t nscalar = head + (count - tail);
    for (size_t i = tid; i < nscalar; i += stride) {
        const size_t j = (i < head) ? i : tail + (i - head);
        typename accum<T>::type acc = accum<T>::load(((const T *) a.src[0])[j]);
        for (int k = 1; k < nsrc; ++k) {
            acc = Op::apply(acc, accum<T>::load(((const T *) a.src[k])[j]));
        }
        const T v = accum<T>::store(acc);
        for (int d = 0; d < ndst; ++d) {
            ((T *) a.dst[d])[j] = v;
        }
    }
}


/* Blocks of `threads` threads of this kernel that one SM holds at once (registers decide: at
 * 40 registers a 512-thread block fits 3 times, not 4).  Asked once per kernel and block size;
 * a grid larger than SMs x this runs in a second, partial wave and takes up to twice as long. */
template <typename T, typename Op> static size_t resident_blocks(size_t threads)
{
    static uint64_t cache; /* threads << 32 | blocks */
    uint64_t c = __atomic_load_n(&cache, __ATOMIC_RELAXED);
    int n = 0;

    if (0 != c && (c >> 32) == threads) {
        return (size_t) (c & 0xffffffffu);
    }
    if (cudaSuccess != cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                           &n, reduce_multi_kernel<T, Op>, (int) threads, 0)
        || n <= 0) {
        (void) cudaGetLastError();
        n = (int) (MULTI_THREADS_PER_SM / threads);
        n = (n < 1) ? 1 : n;
    }
    __atomic_store_n(&cache, ((uint64_t) threads << 32) | (uint64_t) n, __ATOMIC_RELAXED);
    return (size_t) n;
}

/* What one launch needs besides the kernel: the pointers and the shape. */
struct multi_launch_t {
    multi_args_t args;
    int nblocks;  /* 0: default */
    int nthreads; /* 0: default */
    int device;
    cudaStream_t stream;
};

template <typename T, typename Op> static cudaError_t launch(const multi_launch_t &l, size_t count)
{
    constexpr size_t V = 16 / sizeof(T);
    const uintptr_t mis = (uintptr_t) l.args.dst[0] & 15;
    size_t head = count, nvec = 0, work, blocks;
    size_t threads = (l.nthreads > 0) ? (size_t) l.nthreads : (size_t) MULTI_DEFAULT_THREADS;
    bool same = 0 == mis % sizeof(T);

    threads = (threads > MULTI_MAX_THREADS) ? (size_t) MULTI_MAX_THREADS : threads;
    for (int k = 0; same && k < l.args.nsrc; ++k) {
        same = ((uintptr_t) l.args.src[k] & 15) == mis;
    }
    for (int k = 1; same && k < l.args.ndst; ++k) {
        same = ((uintptr_t) l.args.dst[k] & 15) == mis;
    }
    if (same) {
        head = ((16 - mis) & 15) / sizeof(T);
        head = (head < count) ? head : count;
        nvec = (count - head) / V;
    }
    work = (nvec > count - nvec * V) ? nvec : count - nvec * V;
    if (l.nblocks > 0) {
        blocks = (size_t) l.nblocks;
    } else {
        /* enough blocks to cover the work once, at most one full wave of the GPU */
        size_t sms = (size_t) dev_cuda_multiprocessors(l.device);
        blocks = (work + threads - 1) / threads;
        blocks = (blocks < 1) ? 1 : blocks;
        if (blocks > sms) { /* only then can the wave be the limit: skip the query otherwise */
            size_t wave = sms * resident_blocks<T, Op>(threads);
            blocks = (blocks > wave) ? wave : blocks;
        }
    }
    if (blocks > 0x7fffffffu) {
        blocks = 0x7fffffffu;
    }
    /* cudaLaunchKernel returns this launch's own error (see reduce_kernels.cu) */
    multi_args_t a = l.args;
    void *args[] = {&a, &head, &nvec, &count};
    return cudaLaunchKernel((const void *) reduce_multi_kernel<T, Op>, dim3((unsigned) blocks),
                            dim3((unsigned) threads), args, 0, l.stream);
}

/* A copy of bytes: the kernel of the widest unsigned type that divides every pointer and the
 * length.  With one source Op::apply is never called; the kernels are ones the integer SUM and
 * the bitwise ops instantiate anyway. */
static cudaError_t launch_copy(const multi_launch_t &l, size_t bytes)
{
    uintptr_t bits = (uintptr_t) bytes | (uintptr_t) l.args.src[0];

    for (int k = 0; k < l.args.ndst; ++k) {
        bits |= (uintptr_t) l.args.dst[k];
    }
    if (0 == bits % 8) {
        return launch<uint64_t, OpSum>(l, bytes / 8);
    }
    if (0 == bits % 4) {
        return launch<uint32_t, OpSum>(l, bytes / 4);
    }
    if (0 == bits % 2) {
        return launch<uint16_t, OpSum>(l, bytes / 2);
    }
    return launch<uint8_t, OpBor>(l, bytes);
}

template <typename U>
static cudaError_t launch_unsigned(const multi_launch_t &l, size_t n, dev_op_t op)
{
    switch (op) {
    case DEV_OP_SUM: return launch<U, OpSum>(l, n);
    case DEV_OP_PROD: return launch<U, OpProd>(l, n);
    case DEV_OP_LAND: return launch<U, OpLand>(l, n);
    case DEV_OP_LOR: return launch<U, OpLor>(l, n);
    case DEV_OP_LXOR: return launch<U, OpLxor>(l, n);
    default: return cudaErrorInvalidValue;
    }
}

template <typename T>
static cudaError_t launch_ordered(const multi_launch_t &l, size_t n, dev_op_t op)
{
    switch (op) {
    case DEV_OP_MIN: return launch<T, OpMin>(l, n);
    case DEV_OP_MAX: return launch<T, OpMax>(l, n);
    default: return cudaErrorInvalidValue;
    }
}

template <typename T>
static cudaError_t launch_arith(const multi_launch_t &l, size_t n, dev_op_t op)
{
    switch (op) {
    case DEV_OP_SUM: return launch<T, OpSum>(l, n);
    case DEV_OP_PROD: return launch<T, OpProd>(l, n);
    default: return cudaErrorInvalidValue;
    }
}

template <typename V>
static cudaError_t launch_loc(const multi_launch_t &l, size_t n, dev_op_t op)
{
    switch (op) {
    case DEV_OP_MINLOC: return launch<pair<V>, OpMinloc>(l, n);
    case DEV_OP_MAXLOC: return launch<pair<V>, OpMaxloc>(l, n);
    default: return cudaErrorInvalidValue;
    }
}

static cudaError_t launch_integer(const multi_launch_t &l, size_t n, dev_dtype_t t, dev_op_t op)
{
    size_t width = dev_dtype_size(t);

    switch (op) {
    case DEV_OP_BAND: return launch<uint8_t, OpBand>(l, n * width);
    case DEV_OP_BOR: return launch<uint8_t, OpBor>(l, n * width);
    case DEV_OP_BXOR: return launch<uint8_t, OpBxor>(l, n * width);
    case DEV_OP_MIN:
    case DEV_OP_MAX:
        switch (t) {
        case DEV_T_INT8: return launch_ordered<int8_t>(l, n, op);
        case DEV_T_UINT8: return launch_ordered<uint8_t>(l, n, op);
        case DEV_T_INT16: return launch_ordered<int16_t>(l, n, op);
        case DEV_T_UINT16: return launch_ordered<uint16_t>(l, n, op);
        case DEV_T_INT32: return launch_ordered<int32_t>(l, n, op);
        case DEV_T_UINT32: return launch_ordered<uint32_t>(l, n, op);
        case DEV_T_INT64: return launch_ordered<int64_t>(l, n, op);
        case DEV_T_UINT64: return launch_ordered<uint64_t>(l, n, op);
        default: return cudaErrorInvalidValue;
        }
    default:
        switch (width) {
        case 1: return launch_unsigned<uint8_t>(l, n, op);
        case 2: return launch_unsigned<uint16_t>(l, n, op);
        case 4: return launch_unsigned<uint32_t>(l, n, op);
        case 8: return launch_unsigned<uint64_t>(l, n, op);
        default: return cudaErrorInvalidValue;
        }
    }
}

} /* namespace coll_gpu */

using namespace coll_gpu;

extern "C" int dev_cuda_reduce_multi_launch(void *const *dsts, int ndst,
                                            const void *const *srcs, int nsrc, size_t count,
                                            dev_dtype_t dtype, dev_op_t op, int nblocks,
                                            int nthreads, int device, void *stream)
{
    multi_launch_t l;

    if (ndst < 1 || ndst > DEV_MULTI_MAX || nsrc < 1 || nsrc > DEV_MULTI_MAX
        || 0 == dev_dtype_size(dtype) || (nsrc > 1 && !dev_op_valid(op, dtype))
        || nblocks < 0 || nthreads < 0 || nthreads > 1024) {
        return (int) cudaErrorInvalidValue;
    }
    if (0 == count) {
        return (int) cudaSuccess;
    }
    for (int k = 0; k < DEV_MULTI_MAX; ++k) {
        l.args.src[k] = (k < nsrc) ? srcs[k] : nullptr;
        l.args.dst[k] = (k < ndst) ? dsts[k] : nullptr;
    }
    l.args.nsrc = nsrc;
    l.args.ndst = ndst;
    l.nblocks = nblocks;
    l.nthreads = nthreads;
    l.device = device;
    l.stream = (cudaStream_t) stream;

    if (1 == nsrc) {
        return (int) launch_copy(l, count * dev_dtype_size(dtype));
    }
    switch (dtype) {
    case DEV_T_INT8:
    case DEV_T_UINT8:
    case DEV_T_INT16:
    case DEV_T_UINT16:
    case DEV_T_INT32:
    case DEV_T_UINT32:
    case DEV_T_INT64:
    case DEV_T_UINT64:
        return (int) launch_integer(l, count, dtype, op);
    case DEV_T_BOOL: /* one byte, logical ops only: the uint8 kernels */
        return (int) launch_unsigned<uint8_t>(l, count, op);
    case DEV_T_FLOAT:
        return (int) ((DEV_OP_MIN == op || DEV_OP_MAX == op) ? launch_ordered<float>(l, count, op)
                                                             : launch_arith<float>(l, count, op));
    case DEV_T_DOUBLE:
        return (int) ((DEV_OP_MIN == op || DEV_OP_MAX == op)
                          ? launch_ordered<double>(l, count, op)
                          : launch_arith<double>(l, count, op));
    case DEV_T_FLOAT16:
        return (int) ((DEV_OP_MIN == op || DEV_OP_MAX == op) ? launch_ordered<f16>(l, count, op)
                                                             : launch_arith<f16>(l, count, op));
    case DEV_T_BFLOAT16:
        return (int) ((DEV_OP_MIN == op || DEV_OP_MAX == op) ? launch_ordered<bf16>(l, count, op)
                                                             : launch_arith<bf16>(l, count, op));
    case DEV_T_CFLOAT: return (int) launch_arith<cfloat>(l, count, op);
    case DEV_T_CDOUBLE: return (int) launch_arith<cdouble>(l, count, op);
    case DEV_T_FLOAT_INT: return (int) launch_loc<float>(l, count, op);
    case DEV_T_DOUBLE_INT: return (int) launch_loc<double>(l, count, op);
    case DEV_T_LONG_INT: return (int) launch_loc<long>(l, count, op);
    case DEV_T_2INT: return (int) launch_loc<int>(l, count, op);
    case DEV_T_SHORT_INT: return (int) launch_loc<short>(l, count, op);
    default: return (int) cudaErrorInvalidValue;
    }
}
