/*
 * reduce_kernels.cu - the elementwise reduce dst[i] = a[i] op b[i] on the GPU: dev_reduce() of
 * the cuda backend, the local step of every reducing collective (MPI_Allreduce, MPI_Reduce,
 * MPI_Reduce_scatter) that combines two buffers already on the device.
 *
 * One grid-stride kernel per (element type, op).  Where dst, a and b share their offset modulo
 * 16 bytes (the usual case: same allocator, same displacement), the body moves 16-byte vectors
 * and only a head (up to the first 16-byte boundary) and a tail go element by element; with
 * differing offsets every element goes alone, which is correct and slower.
 *
 *     elements   [0, head)        [head, head + nvec * V)          [.., count)
 *     access     scalar           uint4 loads/stores, V = 16/size   scalar
 *
 * Instantiations are kept to what differs in machine code (69 kernels, not 20 x 12): signed
 * integers share the unsigned kernels for SUM, PROD and the logical ops (identical bits in
 * two's complement), and the bitwise ops of every width run on bytes.  binary16 and bfloat16
 * move as 8 elements per vector like any 2-byte type and are computed in float, each result
 * rounded once (combine, reduce_ops.cuh).
 */
#include "dev_backend.h"
#include "reduce_ops.cuh"

#include <cuda_runtime.h>

namespace coll_gpu {

enum { REDUCE_THREADS = 512, REDUCE_BLOCKS_PER_SM = 2048 / REDUCE_THREADS };

template <typename T, typename Op>
__global__ void __launch_bounds__(REDUCE_THREADS)
    reduce_kernel(T *dst, const T *a, const T *b, size_t head, size_t nvec, size_t count)
{
    constexpr int V = 16 / sizeof(T);
    const size_t tid = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t) gridDim.x * blockDim.x;

    /* dst may be a or b: every element is read and written by one thread, reads first, so the
     * plain (coherent) loads are enough and no __restrict__ is claimed */
    uint4 *d4 = reinterpret_cast<uint4 *>(dst + head);
    const uint4 *a4 = reinterpret_cast<const uint4 *>(a + head);
    const uint4 *b4 = reinterpret_cast<const uint4 *>(b + head);
    for (size_t i = tid; i < nvec; i += stride) {
        vec16<T> x, y;
        x.v = a4[i];
        y.v = b4[i];
#pragma unroll
        for (int k = 0; k < V; ++k) {
            x.e[k] = combine<Op>(x.e[k], y.e[k]);
        }
        d4[i] = x.v;
    }

    const size_t tail = head + nvec * V;
    const size_t nscalar = head + (count - tail);
    for (size_t i = tid; i < nscalar; i += stride) {
        const size_t j = (i < head) ? i : tail + (i - head);
        dst[j] = combine<Op>(a[j], b[j]);
    }
}

/* Multiprocessors of each device, asked once: grids are sized to fill them once (shared with
 * allreduce_multi.cu through dev_backend.h). */
extern "C" int dev_cuda_multiprocessors(int device)
{
    static int cache[64];
    int n = 0;

    if (device >= 0 && device < 64) {
        n = __atomic_load_n(&cache[device], __ATOMIC_RELAXED);
    }
    if (0 == n) {
        if (cudaSuccess != cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device)
            || n <= 0) {
            (void) cudaGetLastError();
            n = 132;
        }
        if (device >= 0 && device < 64) {
            __atomic_store_n(&cache[device], n, __ATOMIC_RELAXED);
        }
    }
    return n;
}

template <typename T, typename Op>
static cudaError_t launch(void *dst, const void *a, const void *b, size_t count,
                          cudaStream_t stream)
{
    constexpr size_t V = 16 / sizeof(T);
    const uintptr_t mis = (uintptr_t) dst & 15;
    size_t head = count, nvec = 0, work, blocks;
    int device = 0;
    cudaError_t err;

    if (((uintptr_t) a & 15) == mis && ((uintptr_t) b & 15) == mis && 0 == mis % sizeof(T)) {
        head = ((16 - mis) & 15) / sizeof(T);
        head = (head < count) ? head : count;
        nvec = (count - head) / V;
    }
    work = (nvec > count - nvec * V) ? nvec : count - nvec * V;
    err = cudaGetDevice(&device);
    if (cudaSuccess != err) {
        return err;
    }
    blocks = (work + REDUCE_THREADS - 1) / REDUCE_THREADS;
    if (blocks > (size_t) dev_cuda_multiprocessors(device) * REDUCE_BLOCKS_PER_SM) {
        blocks = (size_t) dev_cuda_multiprocessors(device) * REDUCE_BLOCKS_PER_SM;
    }
    /* cudaLaunchKernel returns this launch's own error; <<<>>> would leave us to read the
     * thread's last error, which may hold an unrelated failure of an earlier runtime call */
    T *d_arg = (T *) dst;
    const T *a_arg = (const T *) a, *b_arg = (const T *) b;
    void *args[] = {&d_arg, &a_arg, &b_arg, &head, &nvec, &count};
    return cudaLaunchKernel((const void *) reduce_kernel<T, Op>, dim3((unsigned) blocks),
                            dim3(REDUCE_THREADS), args, 0, stream);
}

/* The ops every integer width takes, on the unsigned type of that width. */
template <typename U>
static cudaError_t launch_unsigned(void *d, const void *a, const void *b, size_t n, dev_op_t op,
                                   cudaStream_t s)
{
    switch (op) {
    case DEV_OP_SUM: return launch<U, OpSum>(d, a, b, n, s);
    case DEV_OP_PROD: return launch<U, OpProd>(d, a, b, n, s);
    case DEV_OP_LAND: return launch<U, OpLand>(d, a, b, n, s);
    case DEV_OP_LOR: return launch<U, OpLor>(d, a, b, n, s);
    case DEV_OP_LXOR: return launch<U, OpLxor>(d, a, b, n, s);
    default: return cudaErrorInvalidValue;
    }
}

/* MIN and MAX, which depend on the signedness. */
template <typename T>
static cudaError_t launch_ordered(void *d, const void *a, const void *b, size_t n, dev_op_t op,
                                  cudaStream_t s)
{
    switch (op) {
    case DEV_OP_MIN: return launch<T, OpMin>(d, a, b, n, s);
    case DEV_OP_MAX: return launch<T, OpMax>(d, a, b, n, s);
    default: return cudaErrorInvalidValue;
    }
}

/* SUM and PROD of floating-point and complex types. */
template <typename T>
static cudaError_t launch_arith(void *d, const void *a, const void *b, size_t n, dev_op_t op,
                                cudaStream_t s)
{
    switch (op) {
    case DEV_OP_SUM: return launch<T, OpSum>(d, a, b, n, s);
    case DEV_OP_PROD: return launch<T, OpProd>(d, a, b, n, s);
    default: return cudaErrorInvalidValue;
    }
}

template <typename V>
static cudaError_t launch_loc(void *d, const void *a, const void *b, size_t n, dev_op_t op,
                              cudaStream_t s)
{
    switch (op) {
    case DEV_OP_MINLOC: return launch<pair<V>, OpMinloc>(d, a, b, n, s);
    case DEV_OP_MAXLOC: return launch<pair<V>, OpMaxloc>(d, a, b, n, s);
    default: return cudaErrorInvalidValue;
    }
}

static cudaError_t launch_integer(void *d, const void *a, const void *b, size_t n,
                                  dev_dtype_t t, dev_op_t op, cudaStream_t s)
{
    size_t width = dev_dtype_size(t);

    switch (op) {
    case DEV_OP_BAND: return launch<uint8_t, OpBand>(d, a, b, n * width, s);
    case DEV_OP_BOR: return launch<uint8_t, OpBor>(d, a, b, n * width, s);
    case DEV_OP_BXOR: return launch<uint8_t, OpBxor>(d, a, b, n * width, s);
    case DEV_OP_MIN:
    case DEV_OP_MAX:
        switch (t) {
        case DEV_T_INT8: return launch_ordered<int8_t>(d, a, b, n, op, s);
        case DEV_T_UINT8: return launch_ordered<uint8_t>(d, a, b, n, op, s);
        case DEV_T_INT16: return launch_ordered<int16_t>(d, a, b, n, op, s);
        case DEV_T_UINT16: return launch_ordered<uint16_t>(d, a, b, n, op, s);
        case DEV_T_INT32: return launch_ordered<int32_t>(d, a, b, n, op, s);
        case DEV_T_UINT32: return launch_ordered<uint32_t>(d, a, b, n, op, s);
        case DEV_T_INT64: return launch_ordered<int64_t>(d, a, b, n, op, s);
        case DEV_T_UINT64: return launch_ordered<uint64_t>(d, a, b, n, op, s);
        default: return cudaErrorInvalidValue;
        }
    default:
        switch (width) {
        case 1: return launch_unsigned<uint8_t>(d, a, b, n, op, s);
        case 2: return launch_unsigned<uint16_t>(d, a, b, n, op, s);
        case 4: return launch_unsigned<uint32_t>(d, a, b, n, op, s);
        case 8: return launch_unsigned<uint64_t>(d, a, b, n, op, s);
        default: return cudaErrorInvalidValue;
        }
    }
}

} /* namespace coll_gpu */

using namespace coll_gpu;

extern "C" int dev_cuda_reduce_launch(void *dst, const void *a, const void *b, size_t count,
                                      dev_dtype_t dtype, dev_op_t op, void *stream)
{
    cudaStream_t s = (cudaStream_t) stream;

    if (!dev_op_valid(op, dtype)) {
        return (int) cudaErrorInvalidValue;
    }
    if (0 == count) {
        return (int) cudaSuccess;
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
        return (int) launch_integer(dst, a, b, count, dtype, op, s);
    case DEV_T_BOOL: /* one byte, logical ops only: the uint8 kernels */
        return (int) launch_unsigned<uint8_t>(dst, a, b, count, op, s);
    case DEV_T_FLOAT:
        return (int) ((DEV_OP_MIN == op || DEV_OP_MAX == op)
                          ? launch_ordered<float>(dst, a, b, count, op, s)
                          : launch_arith<float>(dst, a, b, count, op, s));
    case DEV_T_DOUBLE:
        return (int) ((DEV_OP_MIN == op || DEV_OP_MAX == op)
                          ? launch_ordered<double>(dst, a, b, count, op, s)
                          : launch_arith<double>(dst, a, b, count, op, s));
    case DEV_T_FLOAT16:
        return (int) ((DEV_OP_MIN == op || DEV_OP_MAX == op)
                          ? launch_ordered<f16>(dst, a, b, count, op, s)
                          : launch_arith<f16>(dst, a, b, count, op, s));
    case DEV_T_BFLOAT16:
        return (int) ((DEV_OP_MIN == op || DEV_OP_MAX == op)
                          ? launch_ordered<bf16>(dst, a, b, count, op, s)
                          : launch_arith<bf16>(dst, a, b, count, op, s));
    case DEV_T_CFLOAT: return (int) launch_arith<cfloat>(dst, a, b, count, op, s);
    case DEV_T_CDOUBLE: return (int) launch_arith<cdouble>(dst, a, b, count, op, s);
    case DEV_T_FLOAT_INT: return (int) launch_loc<float>(dst, a, b, count, op, s);
    case DEV_T_DOUBLE_INT: return (int) launch_loc<double>(dst, a, b, count, op, s);
    case DEV_T_LONG_INT: return (int) launch_loc<long>(dst, a, b, count, op, s);
    case DEV_T_2INT: return (int) launch_loc<int>(dst, a, b, count, op, s);
    case DEV_T_SHORT_INT: return (int) launch_loc<short>(dst, a, b, count, op, s);
    default: return (int) cudaErrorInvalidValue;
    }
}
