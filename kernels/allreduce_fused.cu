/*
 * allreduce_fused.cu - dev_fused_allreduce on the GPU: the whole small MPI_Allreduce of the
 * node team (coll_gpu_nvl.c, algorithm "fused") in one kernel, with no host round trip between
 * its phases.  Slot layout and the two protocols: dev.h.
 *
 * Block b of rank me, on its byte range [lo_b, hi_b) of the message (the same partition on every
 * rank: 256-byte multiples, so every range is element- and 16-byte aligned):
 *
 *   flag protocol (larger messages, or more than 4 ranks)
 *   1 push     load sbuf[lo_b, hi_b) once, store it to the data area `me` of every peer's slot
 *              (NVLink / PCIe peer stores into memory the peer reads locally)
 *   2 signal   every thread: fence.sc.sys (its own stores are visible system-wide);
 *              __syncthreads; thread p: flags(p)[b][me] = seq, release at system scope
 *   3 wait     thread p: spin until flags(me)[b][p] == seq (low 63 bits; acquire, system
 *              scope); __syncthreads; every thread then acquires each flag itself, so its own
 *              loads of the peers' data are ordered after their stores
 *
 *   low-latency protocol (up to DEV_FUSED_LL_MAX = 16 KiB on 2-4 ranks): the fence of step 2
 *   costs a round trip over NVLink; instead every 4 bytes travel with the flag in one 8-byte word
 *   1 push     word w = seq32 << 32 | sbuf bytes [4w, 4w + 4), one relaxed system-scope 8-byte
 *              store into the low-latency area `me` of every peer (no fence, no flag)
 *   3 wait     for every word of the range and every peer p: load the word (relaxed, system
 *              scope, whole) until its top half is seq32, store its data half into data area p
 *              of our own slot; __syncthreads (the block reads only what it unpacked)
 *
 *   then, either way:
 *   4 reduce   rbuf[j] = x_0[j] op x_1[j] op ... op x_{n-1}[j], ranks in order (x_me = sbuf,
 *              the others from our own slot's data areas): the same floats on every rank;
 *              binary16 and bfloat16 fold in float and round once (reduce_ops.cuh)
 *   5 done     fence.sc.sys; __syncthreads; thread 0 counts the block done; the last block
 *              resets the counter and stores seq to the host's mapped word (release, system)
 *
 * Nothing is reset between calls: seq grows by one per team call, so a flag or a word left by
 * call seq-2 in the same parity's slot never matches.  Call seq+1 uses the other parity; a peer
 * cannot be at seq+2 before our seq+1 kernel wrote to it, which it does after this kernel ended
 * (one stream), so data we still read is never overwritten.  A flag with DEV_FUSED_ABANDON set
 * was written by our own host after a peer failed: the block stops waiting (low-latency waits
 * look at the flags now and then) and skips its reduce (the call fails).
 *
 * Blocks wait only on the same block of their peers, never on each other, so any number of
 * them may be resident at once.  Instantiations follow allreduce_multi.cu (signed integers on
 * the unsigned kernels for SUM, PROD and the logical ops; bitwise ops on bytes).
 */
#include "dev_backend.h"
#include "reduce_ops.cuh"

#include <cuda/atomic>
#include <cuda_runtime.h>

namespace coll_gpu {

enum {
    FUSED_DEFAULT_THREADS = 512,
    FUSED_MAX_THREADS = 512,
    FUSED_BLOCK_BYTES = 16384, /* default: one block per 16 KiB */
    FUSED_ALIGN = 256,         /* block ranges are multiples of this */
    FUSED_LL_POLL = 1024       /* low-latency waits look at the abandon flags this often */
};

typedef unsigned long long u64;
typedef cuda::atomic_ref<u64, cuda::thread_scope_system> sys_word;
typedef cuda::atomic_ref<u64, cuda::thread_scope_device> dev_word;

struct fused_params_t {
    const char *sbuf;
    char *rbuf;
    size_t bytes;     /* of the message */
    size_t per_block; /* bytes of each block's range */
    char *slot[DEV_MULTI_MAX];
    size_t cap;
    size_t head;      /* dev.h: DEV_FUSED_HEAD_BYTES(nranks), where the data areas begin */
    size_t ll_bytes;  /* DEV_FUSED_LL_BYTES(nranks): each rank's low-latency area */
    u64 seq;
    u64 *done;
    unsigned seq32;   /* the low-latency words' flag */
    int ll;           /* 1: the low-latency protocol */
    int nranks, rank;
};

__device__ __forceinline__ u64 *fused_flag(char *slot, int block, int rank)
{
    return reinterpret_cast<u64 *>(slot) + (size_t) block * DEV_MULTI_MAX + rank;
}

__device__ __forceinline__ u64 *fused_counter(char *slot)
{
    return reinterpret_cast<u64 *>(slot) + (size_t) DEV_FUSED_MAX_BLOCKS * DEV_MULTI_MAX;
}

static_assert((DEV_FUSED_MAX_BLOCKS * DEV_MULTI_MAX + 1) * sizeof(u64) <= DEV_FUSED_FLAG_BYTES,
              "flags and counter fit the slot's flag area");
static_assert(DEV_MULTI_MAX <= FUSED_MAX_THREADS, "one thread per rank signals and waits");

/* Phase 1: our range to every peer, 16 bytes at a time when sbuf allows (the slots always do),
 * else byte by byte (a user buffer at an odd offset: correct, slower). */
__device__ __forceinline__ void fused_push(const fused_params_t &p, size_t lo, size_t len)
{
    const char *src = p.sbuf + lo;
    const size_t area = p.head + (size_t) p.rank * p.cap + lo;

    if (0 == ((uintptr_t) src & 15)) {
        const size_t nvec = len / 16;
        for (size_t i = threadIdx.x; i < nvec; i += blockDim.x) {
            const uint4 v = reinterpret_cast<const uint4 *>(src)[i];
            for (int q = 0; q < p.nranks; ++q) {
                if (q != p.rank) {
                    reinterpret_cast<uint4 *>(p.slot[q] + area)[i] = v;
                }
            }
        }
        for (size_t i = nvec * 16 + threadIdx.x; i < len; i += blockDim.x) {
            const char c = src[i];
            for (int q = 0; q < p.nranks; ++q) {
                if (q != p.rank) {
                    p.slot[q][area + i] = c;
                }
            }
        }
        return;
    }
    for (size_t i = threadIdx.x; i < len; i += blockDim.x) {
        const char c = src[i];
        for (int q = 0; q < p.nranks; ++q) {
            if (q != p.rank) {
                p.slot[q][area + i] = c;
            }
        }
    }
}

/* Low-latency step 1: words [lo/4, (hi+3)/4) of the message, each with seq32, to every peer. */
__device__ __forceinline__ void fused_ll_push(const fused_params_t &p, size_t lo, size_t hi)
{
    const size_t w0 = lo / 4, w1 = (hi + 3) / 4;
    const bool aligned = 0 == ((uintptr_t) p.sbuf & 3);

    for (size_t w = w0 + threadIdx.x; w < w1; w += blockDim.x) {
        unsigned d = 0;
        if (aligned && 4 * w + 4 <= p.bytes) {
            d = reinterpret_cast<const unsigned *>(p.sbuf)[w];
        } else {
            for (size_t k = 4 * w; k < 4 * w + 4 && k < p.bytes; ++k) {
                d |= (unsigned) (unsigned char) p.sbuf[k] << (8 * (k - 4 * w));
            }
        }
        const u64 word = ((u64) p.seq32 << 32) | d;
        for (int q = 0; q < p.nranks; ++q) {
            if (q != p.rank) {
                u64 *to = reinterpret_cast<u64 *>(p.slot[q] + DEV_FUSED_FLAG_BYTES
                                                  + (size_t) p.rank * p.ll_bytes)
                          + w;
                sys_word(*to).store(word, cuda::memory_order_relaxed);
            }
        }
    }
}

/* Low-latency step 3: wait for every peer's words of our range and unpack them into the data
 * areas of our own slot.  Returns with *abandoned set when the host released the block. */
__device__ __forceinline__ void fused_ll_wait(const fused_params_t &p, int b, size_t lo,
                                              size_t hi, volatile int *abandoned)
{
    const size_t w0 = lo / 4, w1 = (hi + 3) / 4;
    char *mine = p.slot[p.rank];

    for (int q = 0; q < p.nranks; ++q) {
        if (q == p.rank) {
            continue;
        }
        u64 *from = reinterpret_cast<u64 *>(mine + DEV_FUSED_FLAG_BYTES
                                            + (size_t) q * p.ll_bytes);
        unsigned *to = reinterpret_cast<unsigned *>(mine + p.head + (size_t) q * p.cap);
        for (size_t w = w0 + threadIdx.x; w < w1; w += blockDim.x) {
            unsigned spins = 0;
            u64 v;
            while ((unsigned) ((v = sys_word(from[w]).load(cuda::memory_order_relaxed)) >> 32)
                   != p.seq32) {
                if (0 == (++spins % FUSED_LL_POLL)) {
                    if (*abandoned) {
                        return;
                    }
                    const u64 f =
                        sys_word(*fused_flag(mine, b, q)).load(cuda::memory_order_acquire);
                    if (f == (p.seq | DEV_FUSED_ABANDON)) {
                        *abandoned = 1;
                        return;
                    }
                }
            }
            to[w] = (unsigned) v;
        }
    }
}

/* Phase 4 on elements [lo, lo + n) (lo 16-byte aligned in bytes). */
template <typename T, typename Op>
__device__ __forceinline__ void fused_reduce(const fused_params_t &p, size_t lo, size_t n)
{
    const char *mine = p.slot[p.rank] + p.head;
    const T *x[DEV_MULTI_MAX];
    T *dst = reinterpret_cast<T *>(p.rbuf) + lo;
    size_t head = 0;

    for (int r = 0; r < p.nranks; ++r) {
        x[r] = (r == p.rank) ? reinterpret_cast<const T *>(p.sbuf) + lo
                             : reinterpret_cast<const T *>(mine + (size_t) r * p.cap) + lo;
    }
    if (0 == (((uintptr_t) p.sbuf | (uintptr_t) p.rbuf) & 15)) {
        constexpr size_t V = 16 / sizeof(T);
        const size_t nvec = n / V;
        for (size_t i = threadIdx.x; i < nvec; i += blockDim.x) {
            typename vec_accum<T>::type acc;
            vec16<T> y;
            vec_accum<T>::start(acc, reinterpret_cast<const uint4 *>(x[0])[i]);
            for (int r = 1; r < p.nranks; ++r) {
                y.v = reinterpret_cast<const uint4 *>(x[r])[i];
                vec_accum<T>::template fold<Op>(acc, y);
            }
            reinterpret_cast<uint4 *>(dst)[i] = vec_accum<T>::finish(acc);
        }
        head = nvec * V;
    }
    for (size_t j = head + threadIdx.x; j < n; j += blockDim.x) {
        typename accum<T>::type acc = accum<T>::load(x[0][j]);
        for (int r = 1; r < p.nranks; ++r) {
            acc = Op::apply(acc, accum<T>::load(x[r][j]));
        }
        dst[j] = accum<T>::store(acc);
    }
}

template <typename T, typename Op>
__global__ void __launch_bounds__(FUSED_MAX_THREADS) fused_kernel(const fused_params_t p)
{
    __shared__ int abandoned;
    const int b = blockIdx.x;
    const size_t lo = ((size_t) b * p.per_block < p.bytes) ? (size_t) b * p.per_block : p.bytes;
    const size_t hi = (lo + p.per_block < p.bytes) ? lo + p.per_block : p.bytes;
    const int t = (int) threadIdx.x;

    if (0 == t) {
        abandoned = 0;
    }
    if (p.ll) {
        /* 1 push (words carry their flag), 3 wait and unpack */
        fused_ll_push(p, lo, hi);
        __syncthreads(); /* abandoned = 0 is seen before anyone sets it */
        fused_ll_wait(p, b, lo, hi, &abandoned);
        __syncthreads();
    } else {
        /* 1 push, 2 signal */
        fused_push(p, lo, hi - lo);
        __threadfence_system();
        __syncthreads();
        if (t < p.nranks && t != p.rank) {
            sys_word(*fused_flag(p.slot[t], b, p.rank)).store(p.seq, cuda::memory_order_release);
        }

        /* 3 wait: one thread per peer spins, then every thread acquires the flags itself */
        if (t < p.nranks && t != p.rank) {
            sys_word f(*fused_flag(p.slot[p.rank], b, t));
            u64 v;
            while (((v = f.load(cuda::memory_order_acquire)) & ~DEV_FUSED_ABANDON) != p.seq) {
            }
            if (0 != (v & DEV_FUSED_ABANDON)) {
                atomicExch(&abandoned, 1);
            }
        }
        __syncthreads();
        for (int r = 0; r < p.nranks; ++r) {
            if (r != p.rank) {
                (void) sys_word(*fused_flag(p.slot[p.rank], b, r))
                    .load(cuda::memory_order_acquire);
            }
        }
    }

    /* 4 reduce */
    if (0 == abandoned && hi > lo) {
        fused_reduce<T, Op>(p, lo / sizeof(T), (hi - lo) / sizeof(T));
    }

    /* 5 done: the last block tells the host */
    __threadfence_system();
    __syncthreads();
    if (0 == t) {
        dev_word counter(*fused_counter(p.slot[p.rank]));
        if (counter.fetch_add(1, cuda::memory_order_acq_rel) == (u64) gridDim.x - 1) {
            counter.store(0, cuda::memory_order_relaxed);
            sys_word(*p.done).store(p.seq, cuda::memory_order_release);
        }
    }
}

struct fused_launch_t {
    fused_params_t params;
    unsigned blocks, threads;
    cudaStream_t stream;
};

template <typename T, typename Op> static cudaError_t launch(const fused_launch_t &l)
{
    fused_params_t p = l.params;
    void *args[] = {&p};
    return cudaLaunchKernel((const void *) fused_kernel<T, Op>, dim3(l.blocks), dim3(l.threads),
                            args, 0, l.stream);
}

template <typename U> static cudaError_t launch_unsigned(const fused_launch_t &l, dev_op_t op)
{
    switch (op) {
    case DEV_OP_SUM: return launch<U, OpSum>(l);
    case DEV_OP_PROD: return launch<U, OpProd>(l);
    case DEV_OP_LAND: return launch<U, OpLand>(l);
    case DEV_OP_LOR: return launch<U, OpLor>(l);
    case DEV_OP_LXOR: return launch<U, OpLxor>(l);
    default: return cudaErrorInvalidValue;
    }
}

template <typename T> static cudaError_t launch_ordered(const fused_launch_t &l, dev_op_t op)
{
    switch (op) {
    case DEV_OP_MIN: return launch<T, OpMin>(l);
    case DEV_OP_MAX: return launch<T, OpMax>(l);
    default: return cudaErrorInvalidValue;
    }
}

template <typename T> static cudaError_t launch_arith(const fused_launch_t &l, dev_op_t op)
{
    switch (op) {
    case DEV_OP_SUM: return launch<T, OpSum>(l);
    case DEV_OP_PROD: return launch<T, OpProd>(l);
    default: return cudaErrorInvalidValue;
    }
}

template <typename V> static cudaError_t launch_loc(const fused_launch_t &l, dev_op_t op)
{
    switch (op) {
    case DEV_OP_MINLOC: return launch<pair<V>, OpMinloc>(l);
    case DEV_OP_MAXLOC: return launch<pair<V>, OpMaxloc>(l);
    default: return cudaErrorInvalidValue;
    }
}

static cudaError_t launch_integer(const fused_launch_t &l, dev_dtype_t t, dev_op_t op)
{
    switch (op) {
    case DEV_OP_BAND: return launch<uint8_t, OpBand>(l);
    case DEV_OP_BOR: return launch<uint8_t, OpBor>(l);
    case DEV_OP_BXOR: return launch<uint8_t, OpBxor>(l);
    case DEV_OP_MIN:
    case DEV_OP_MAX:
        switch (t) {
        case DEV_T_INT8: return launch_ordered<int8_t>(l, op);
        case DEV_T_UINT8: return launch_ordered<uint8_t>(l, op);
        case DEV_T_INT16: return launch_ordered<int16_t>(l, op);
        case DEV_T_UINT16: return launch_ordered<uint16_t>(l, op);
        case DEV_T_INT32: return launch_ordered<int32_t>(l, op);
        case DEV_T_UINT32: return launch_ordered<uint32_t>(l, op);
        case DEV_T_INT64: return launch_ordered<int64_t>(l, op);
        case DEV_T_UINT64: return launch_ordered<uint64_t>(l, op);
        default: return cudaErrorInvalidValue;
        }
    default:
        switch (dev_dtype_size(t)) {
        case 1: return launch_unsigned<uint8_t>(l, op);
        case 2: return launch_unsigned<uint16_t>(l, op);
        case 4: return launch_unsigned<uint32_t>(l, op);
        case 8: return launch_unsigned<uint64_t>(l, op);
        default: return cudaErrorInvalidValue;
        }
    }
}

} /* namespace coll_gpu */

using namespace coll_gpu;

/* The block partition: nblocks (default one per 16 KiB, at most DEV_FUSED_MAX_BLOCKS) ranges of
 * per_block bytes, a multiple of 256.  Every rank computes it from the same bytes and shape. */
extern "C" int dev_cuda_fused_allreduce_launch(const dev_fused_allreduce_t *a, int nblocks,
                                               int nthreads, void *stream)
{
    fused_launch_t l;
    size_t bytes = a->count * dev_dtype_size(a->dtype), blocks, per;

    blocks = (nblocks > 0) ? (size_t) nblocks : (bytes + FUSED_BLOCK_BYTES - 1) / FUSED_BLOCK_BYTES;
    blocks = (blocks < 1) ? 1 : (blocks > DEV_FUSED_MAX_BLOCKS) ? DEV_FUSED_MAX_BLOCKS : blocks;
    per = (bytes + blocks - 1) / blocks;
    per = (per + FUSED_ALIGN - 1) / FUSED_ALIGN * FUSED_ALIGN;
    l.blocks = (unsigned) blocks;
    l.threads = (nthreads > 0) ? (unsigned) nthreads : (unsigned) FUSED_DEFAULT_THREADS;
    l.threads = (l.threads > FUSED_MAX_THREADS) ? (unsigned) FUSED_MAX_THREADS : l.threads;
    l.threads = (l.threads < DEV_MULTI_MAX) ? (unsigned) DEV_MULTI_MAX : l.threads;
    l.stream = (cudaStream_t) stream;
    l.params.sbuf = (const char *) a->sbuf;
    l.params.rbuf = (char *) a->rbuf;
    l.params.bytes = bytes;
    l.params.per_block = (0 == per) ? (size_t) FUSED_ALIGN : per;
    for (int r = 0; r < DEV_MULTI_MAX; ++r) {
        l.params.slot[r] = (r < a->nranks) ? (char *) a->slot[r] : nullptr;
    }
    l.params.cap = a->cap;
    l.params.head = DEV_FUSED_HEAD_BYTES(a->nranks);
    l.params.ll_bytes = DEV_FUSED_LL_BYTES(a->nranks);
    /* every rank decides alike: from nranks and bytes */
    l.params.ll = (a->nranks > 1 && bytes <= DEV_FUSED_LL_MAX
                   && 8 * ((bytes + 3) / 4) <= l.params.ll_bytes) ? 1 : 0;
    l.params.seq32 = (unsigned) ((a->seq - 1) % 0xffffffffull) + 1;
    l.params.seq = (u64) a->seq;
    l.params.done = (u64 *) a->done;
    l.params.nranks = a->nranks;
    l.params.rank = a->rank;

    if (1 == a->nranks) {
        /* nobody to wait for: still one kernel, a copy into rbuf and the done word */
        return (int) launch<uint8_t, OpBor>(l);
    }
    switch (a->dtype) {
    case DEV_T_INT8:
    case DEV_T_UINT8:
    case DEV_T_INT16:
    case DEV_T_UINT16:
    case DEV_T_INT32:
    case DEV_T_UINT32:
    case DEV_T_INT64:
    case DEV_T_UINT64:
        return (int) launch_integer(l, a->dtype, a->op);
    case DEV_T_BOOL: return (int) launch_unsigned<uint8_t>(l, a->op);
    case DEV_T_FLOAT:
        return (int) ((DEV_OP_MIN == a->op || DEV_OP_MAX == a->op) ? launch_ordered<float>(l, a->op)
                                                                   : launch_arith<float>(l, a->op));
    case DEV_T_DOUBLE:
        return (int) ((DEV_OP_MIN == a->op || DEV_OP_MAX == a->op)
                          ? launch_ordered<double>(l, a->op)
                          : launch_arith<double>(l, a->op));
    case DEV_T_FLOAT16:
        return (int) ((DEV_OP_MIN == a->op || DEV_OP_MAX == a->op) ? launch_ordered<f16>(l, a->op)
                                                                   : launch_arith<f16>(l, a->op));
    case DEV_T_BFLOAT16:
        return (int) ((DEV_OP_MIN == a->op || DEV_OP_MAX == a->op)
                          ? launch_ordered<bf16>(l, a->op)
                          : launch_arith<bf16>(l, a->op));
    case DEV_T_CFLOAT: return (int) launch_arith<cfloat>(l, a->op);
    case DEV_T_CDOUBLE: return (int) launch_arith<cdouble>(l, a->op);
    case DEV_T_FLOAT_INT: return (int) launch_loc<float>(l, a->op);
    case DEV_T_DOUBLE_INT: return (int) launch_loc<double>(l, a->op);
    case DEV_T_LONG_INT: return (int) launch_loc<long>(l, a->op);
    case DEV_T_2INT: return (int) launch_loc<int>(l, a->op);
    case DEV_T_SHORT_INT: return (int) launch_loc<short>(l, a->op);
    default: return (int) cudaErrorInvalidValue;
    }
}
