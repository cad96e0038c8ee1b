/*
 * dev.h - the device layer of coll/gpu.
 *
 * One C interface over two backends:
 *   cuda      real GPUs through the CUDA runtime (linked statically) and the driver, which is
 *             loaded at run time, so the library builds and loads on machines without a driver;
 *   emulated  the CPU pretends to be a GPU: "device memory" is a POSIX shared-memory segment
 *             mapped twice, once PROT_NONE at the address handed out (host code that touches it
 *             faults, exactly as host code touching a real device pointer does) and once
 *             read-write at a private alias that only this layer uses; IPC is the shared-memory
 *             segment itself; kernels are the plain-C references of reference.c; streams run
 *             each operation in order at the time it is enqueued (copies on a stream may be
 *             held back for tests: COLL_GPU_EMULATED_ASYNC, dev_emulated.c).
 *
 * The library knows nothing of MPI.  It is a shared library (libcoll_gpu_dev) so that the
 * component, the tests and the benchmark in one process share one backend and one registry of
 * emulated allocations.
 *
 * Every function returning int returns DEV_OK (0) or a negative dev_status_t; the text of the
 * last failure on the calling thread is in dev_error_string().
 */
#ifndef COLL_GPU_DEV_H
#define COLL_GPU_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with -fvisibility=hidden; DEV_API marks what it exports. */
#if defined(__GNUC__)
#define DEV_API __attribute__((visibility("default")))
#else
#define DEV_API
#endif

typedef enum {
    DEV_OK = 0,
    DEV_ERR = -1,            /* a backend call failed; see dev_error_string() */
    DEV_ERR_NO_DRIVER = -2,  /* cuda: no driver library, or it is too old */
    DEV_ERR_NO_DEVICE = -3,  /* cuda: driver present but no device visible */
    DEV_ERR_NOMEM = -4,
    DEV_ERR_ARG = -5,        /* bad argument, or a pointer this layer does not know */
    DEV_ERR_UNSUPPORTED = -6, /* backend not built, or operation not available for this type */
    DEV_ERR_ALREADY_MAPPED = -7 /* dev_ipc_import: this process still maps an allocation of the
                                 * exporter that the new one overlaps (freed there since) */
} dev_status_t;

typedef enum {
    DEV_BACKEND_NONE = 0,
    DEV_BACKEND_CUDA = 1,
    DEV_BACKEND_EMULATED = 2
} dev_backend_t;

typedef enum {
    DEV_MEM_HOST = 0,    /* plain or pinned host memory: host code may touch it */
    DEV_MEM_DEVICE = 1,  /* device memory: only this layer may touch it */
    DEV_MEM_MANAGED = 2  /* managed (unified) memory */
} dev_mem_kind_t;

/* Element types the kernels understand.  The pair types are MPI's MINLOC/MAXLOC types with
 * their C layout (value, then int index; long double is not supported on a GPU).  The 16-bit
 * floats are carried as their bits (uint16_t) and computed in float, rounded to 16 bits once
 * per result (reference.h has the rules; halfprec.h the conversions). */
typedef enum {
    DEV_T_INT8,
    DEV_T_UINT8,
    DEV_T_INT16,
    DEV_T_UINT16,
    DEV_T_INT32,
    DEV_T_UINT32,
    DEV_T_INT64,
    DEV_T_UINT64,
    DEV_T_FLOAT,
    DEV_T_DOUBLE,
    DEV_T_CFLOAT,   /* float _Complex */
    DEV_T_CDOUBLE,  /* double _Complex */
    DEV_T_BOOL,     /* C _Bool, one byte */
    DEV_T_FLOAT_INT,
    DEV_T_DOUBLE_INT,
    DEV_T_LONG_INT,
    DEV_T_2INT,
    DEV_T_SHORT_INT,
    DEV_T_FLOAT16,  /* IEEE 754 binary16 */
    DEV_T_BFLOAT16, /* bfloat16: the top 16 bits of a binary32 */
    DEV_T_COUNT
} dev_dtype_t;

typedef enum {
    DEV_OP_SUM,
    DEV_OP_PROD,
    DEV_OP_MIN,
    DEV_OP_MAX,
    DEV_OP_LAND,
    DEV_OP_LOR,
    DEV_OP_LXOR,
    DEV_OP_BAND,
    DEV_OP_BOR,
    DEV_OP_BXOR,
    DEV_OP_MINLOC,
    DEV_OP_MAXLOC,
    DEV_OP_COUNT
} dev_op_t;

/* The C layouts of the pair types (what MPI_FLOAT_INT etc. describe in C). */
typedef struct { float value; int index; } dev_float_int_t;
typedef struct { double value; int index; } dev_double_int_t;
typedef struct { long value; int index; } dev_long_int_t;
typedef struct { int value; int index; } dev_2int_t;
typedef struct { short value; int index; } dev_short_int_t;

/* Size in bytes of one element (pair types include their padding, as sizeof does in C). */
DEV_API size_t dev_dtype_size(dev_dtype_t dtype);
DEV_API const char *dev_dtype_name(dev_dtype_t dtype);
DEV_API const char *dev_op_name(dev_op_t op);
/* The pairs MPI defines: arithmetic ops on numbers, logical ops on integers and bool, bitwise
 * ops on integers (MPI_BYTE maps to DEV_T_UINT8), MINLOC/MAXLOC on the pair types only.  The
 * 16-bit floats are reals: SUM, PROD, MIN and MAX. */
DEV_API bool dev_op_valid(dev_op_t op, dev_dtype_t dtype);

typedef struct dev_stream dev_stream_t;
typedef struct dev_event dev_event_t;

/* An exported allocation: opaque bytes that a peer process passes to dev_ipc_import(). */
typedef struct {
    uint8_t bytes[128];
} dev_ipc_handle_t;

typedef struct {
    uint8_t bytes[16];
} dev_uuid_t;

/* ---- lifecycle ------------------------------------------------------------------------- */

/* Open a backend.  Reference counted: a second open of the same backend only counts; an open
 * of a different backend while one is open fails with DEV_ERR_ARG. */
DEV_API int dev_open(dev_backend_t backend);
/* Drop one reference; the last one releases everything the backend holds. */
DEV_API void dev_close(void);
/* The backend now open, or DEV_BACKEND_NONE. */
DEV_API dev_backend_t dev_backend(void);
DEV_API const char *dev_backend_name(dev_backend_t backend);
/* Parse "cuda" / "emulated" (case-insensitive); DEV_BACKEND_NONE otherwise. */
DEV_API dev_backend_t dev_backend_from_name(const char *name);
/* Text of the last failure on the calling thread ("" when none). */
DEV_API const char *dev_error_string(void);
/* Record the failure text for this thread and return status (so: return dev_fail(...)); for
 * the layers above too, when a failure of theirs reads like the device's. */
DEV_API int dev_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "DEV_OK", "DEV_ERR_NO_DRIVER", ... for logs. */
DEV_API const char *dev_status_name(int status);
/* "host", "device", "managed". */
DEV_API const char *dev_mem_kind_name(dev_mem_kind_t kind);

/* ---- devices --------------------------------------------------------------------------- */

DEV_API int dev_device_count(int *count);
/* The device the calling thread works on.  cuda: the device of the driver context current on
 * the calling thread when there is one (the application selected it, e.g. cudaSetDevice in its
 * own CUDA runtime), else the runtime's current device; every later dev_* call of this thread
 * then works on that device (see dev_cuda.c). */
DEV_API int dev_current_device(int *ordinal);
DEV_API int dev_set_device(int ordinal);
/* Work on device ordinal for a while, from a thread that may be on another device or on none:
 * the progress of a team's requests runs on whichever thread calls MPI_Test or MPI_Wait (a
 * communication thread that never touched CUDA; one process driving two GPUs), and its streams
 * belong to the team's device.  dev_device_enter makes ordinal the calling thread's device when
 * it is not already (cuda: its primary context current) and fills *scope; dev_device_leave
 * gives the thread back what it had (cuda: the context current before, or none), so that the
 * application never sees its thread moved.  Cheap when the thread is on ordinal already. */
typedef struct {
    bool changed; /* enter moved the thread; leave moves it back */
    void *saved;  /* cuda: the context current before (may be NULL: none) */
    int ordinal;  /* emulated: the device before */
} dev_device_scope_t;
DEV_API int dev_device_enter(int ordinal, dev_device_scope_t *scope);
DEV_API void dev_device_leave(dev_device_scope_t *scope);
DEV_API int dev_device_uuid(int ordinal, dev_uuid_t *uuid);
/* PCI bus id as "0000:3b:00.0" */
DEV_API int dev_device_pci_bus_id(int ordinal, char *buf, size_t len);
DEV_API int dev_device_can_access_peer(int ordinal, int peer_ordinal, bool *can);

/* ---- memory ---------------------------------------------------------------------------- */

/* Classify a pointer.  Never fails: anything this layer cannot place is DEV_MEM_HOST (pinned
 * and registered host memory are DEV_MEM_HOST too).  Always the driver's answer of now: with
 * the cache on, plain host pages are answered from it in a few nanoseconds, everything else
 * is asked of the driver (dev_classify.c says why that is never stale). */
DEV_API dev_mem_kind_t dev_mem_classify(const void *ptr);
#ifndef __cplusplus
/* The cache's table, for dev_mem_cached_host: 256 direct-mapped slots of one word,
 * (page << 1) | 1 for a remembered plain host page (dev_classify.c). */
#define DEV_CLS_PAGE_SHIFT 12
#define DEV_CLS_SLOTS 256 /* power of two */
DEV_API extern _Atomic uint64_t dev_cls_pages[DEV_CLS_SLOTS];
static inline unsigned dev_cls_slot(uint64_t page)
{
    return (unsigned) ((page * 0x9e3779b97f4a7c15ull) >> 56) & (DEV_CLS_SLOTS - 1);
}
/* Is ptr on a plain host page the cache remembers?  dev_mem_classify's hit, inline: a caller
 * on a hot path (every MPI call on host memory) pays a load and a compare and no call into
 * the library; false means "ask dev_mem_classify", never "not host". */
static inline bool dev_mem_cached_host(const void *ptr)
{
    uint64_t page = (uint64_t) (uintptr_t) ptr >> DEV_CLS_PAGE_SHIFT;
    return ((page << 1) | 1)
           == __atomic_load_n(&dev_cls_pages[dev_cls_slot(page)], __ATOMIC_RELAXED);
}
#endif
/* Forget every cached classification. */
DEV_API void dev_mem_classify_flush(void);
/* [base, base + len) is about to leave the address space (munmap, mremap, brk shrinking,
 * shmdt, a free() that unmaps): forget what is cached about it.  Lock-free, allocates nothing,
 * makes no system call: callable from inside a memory hook that runs within free(). */
DEV_API void dev_mem_forget(const void *base, size_t len);
/* Turn the classification cache on or off (it starts off).  Turning it on is a promise: from
 * now on dev_mem_forget() is called for every release of host memory, before the release
 * (coll/gpu keeps it through Open MPI's memory hooks).  Returns whether the cache is on after
 * the call: false for on when COLL_GPU_CLASSIFY_CACHE=0 is in the environment or when this
 * process cannot probe its own pages (the reason is in dev_error_string()).  Independent of
 * dev_open/dev_close. */
DEV_API bool dev_mem_classify_cache_enable(bool on);
DEV_API bool dev_mem_classify_cache_enabled(void);
/* Counters since the process started, for tests and the benchmark: driver queries made by
 * dev_mem_classify (its misses), pages stored in the cache, dev_mem_forget calls. */
typedef struct {
    uint64_t queries;
    uint64_t stores;
    uint64_t forgets;
} dev_classify_stats_t;
DEV_API void dev_mem_classify_stats(dev_classify_stats_t *stats);
/* Tests only: call fn(ptr, arg) inside every cache miss, after the driver answered and before
 * the answer is stored (a release that lands exactly there must win).  NULL removes it. */
DEV_API void dev_mem_classify_test_hook(void (*fn)(const void *ptr, void *arg), void *arg);
/* The allocation that contains ptr: its base, size and a buffer id that changes when the
 * address range is freed and allocated again (CU_POINTER_ATTRIBUTE_BUFFER_ID). */
DEV_API int dev_mem_range(const void *ptr, void **base, size_t *size, uint64_t *buffer_id);
/* The device that holds ptr (device memory, or managed memory: the device it was allocated
 * on).  DEV_ERR_ARG for host memory, pinned included. */
DEV_API int dev_mem_device(const void *ptr, int *ordinal);

DEV_API int dev_mem_alloc(void **ptr, size_t size);
DEV_API int dev_mem_alloc_managed(void **ptr, size_t size);
/* Device memory from a stream-ordered pool, as applications get it from cudaMallocAsync or
 * their framework's caching allocator: classified DEV_MEM_DEVICE but not exportable with the
 * legacy IPC (dev_mem_ipc_capable() is false).  cuda: cudaMallocAsync on the legacy default
 * stream, complete when the call returns; emulated: device memory that dev_ipc_export refuses.
 * Freed with dev_mem_free().  For tests and for code that needs such memory on purpose. */
DEV_API int dev_mem_alloc_pool(void **ptr, size_t size);
DEV_API int dev_mem_free(void *ptr);
/* Can the allocation holding ptr be exported with dev_ipc_export() (cuda: the legacy
 * cudaIpcGetMemHandle, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE)?  true only for device
 * memory of a plain device allocation (cudaMalloc, dev_mem_alloc).  false for host memory
 * (pinned included), managed memory, stream-ordered pool memory (cudaMallocAsync), VMM memory
 * (cuMemCreate + cuMemMap, e.g. PyTorch's expandable segments), memory mapped from a peer
 * (dev_ipc_import), a pointer this layer cannot place, and when no backend is open.  One
 * driver query, never cached, never fails noisily (no error text is recorded).  A path that
 * exports user buffers asks this first and copies through memory of its own when it is false;
 * dev_ipc_export() of such memory fails with DEV_ERR_UNSUPPORTED without calling the driver's
 * export. */
DEV_API bool dev_mem_ipc_capable(const void *ptr);
/* Page-locked host memory for staging. */
DEV_API int dev_host_alloc(void **ptr, size_t size);
DEV_API int dev_host_free(void *ptr);
/* Counters since the process started, for tests and the benchmark: page-locked allocations
 * made (dev_host_alloc and dev_host_alloc_mapped that succeeded) and freed (dev_host_free that
 * succeeded).  Each one is a driver call of milliseconds on a GPU, so a path that should reuse
 * its memory shows here when it does not. */
typedef struct {
    uint64_t allocs;
    uint64_t frees;
} dev_host_stats_t;
DEV_API void dev_host_stats(dev_host_stats_t *stats);

/* ---- streams, events, copies ----------------------------------------------------------- */

/* A NULL stream is the backend's default stream (cuda: the legacy default stream). */

DEV_API int dev_stream_create(dev_stream_t **stream);
DEV_API int dev_stream_destroy(dev_stream_t *stream);
DEV_API int dev_stream_sync(dev_stream_t *stream);
DEV_API int dev_event_create(dev_event_t **event);
DEV_API int dev_event_destroy(dev_event_t *event);
DEV_API int dev_event_record(dev_event_t *event, dev_stream_t *stream);
DEV_API int dev_event_sync(dev_event_t *event);
/* DEV_OK when complete, 1 when still pending, < 0 on error. */
DEV_API int dev_event_query(dev_event_t *event);

/* Copies in any direction between host and device memory (including the emulated kind). */
DEV_API int dev_memcpy_async(void *dst, const void *src, size_t bytes, dev_stream_t *stream);
DEV_API int dev_memcpy(void *dst, const void *src, size_t bytes);
DEV_API int dev_memset(void *dst, int value, size_t bytes);

/* ---- IPC ------------------------------------------------------------------------------- */

/* Export the allocation whose base is ptr (as given by dev_mem_range).  DEV_ERR_UNSUPPORTED,
 * before any export is attempted, when dev_mem_ipc_capable(base) is false. */
DEV_API int dev_ipc_export(void *base, dev_ipc_handle_t *handle);
/* Map a peer's allocation; *ptr is its base in this process.  A handle cannot be imported by
 * the process that exported it (CUDA refuses; the emulated backend does too).  While this
 * process still maps an allocation the exporter has freed, an allocation the exporter made
 * since at an overlapping address cannot be mapped: DEV_ERR_ALREADY_MAPPED (CUDA's
 * cudaErrorAlreadyMapped; the emulated backend refuses the same way).  Close the stale
 * mapping first. */
DEV_API int dev_ipc_import(const dev_ipc_handle_t *handle, void **ptr);
DEV_API int dev_ipc_close(void *ptr);

/* ---- kernels --------------------------------------------------------------------------- */

/* dst[i] = a[i] op b[i] for i < count, on the stream (dst may alias a or b). */
DEV_API int dev_reduce(void *dst, const void *a, const void *b, size_t count,
                       dev_dtype_t dtype, dev_op_t op, dev_stream_t *stream);

/* Launch shape for the collective kernels; a zero field means the backend's default.
 * nthreads above 1024 is DEV_ERR_ARG; the cuda backend runs requests above 512 with 512 (its
 * kernels' launch bound); the emulated backend ignores the shape. */
typedef struct {
    int nblocks;
    int nthreads;
} dev_launch_t;

#define DEV_MULTI_MAX 16

/* For every i < count: v = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i], combined in
 * exactly that order, left to right (callers that pass the same sources in the same order get
 * bitwise-identical results, which the allreduce relies on: every rank must end with the same
 * floats), then dsts[k][i] = v for every k < ndst.  1 <= nsrc, ndst <= DEV_MULTI_MAX.
 * nsrc == 1 is a copy (valid for any dtype, op ignored).  Pointers may be this process' device
 * memory or peer memory mapped by dev_ipc_import (NVLink/PCIe peer access); a dst may be
 * identical to a src (in place: each element is read from every source before any destination
 * element i is written); distinct destinations must not overlap.  Enqueued on stream; launch
 * may be NULL.  count 0 is a no-op; DEV_ERR_UNSUPPORTED when nsrc > 1 and
 * dev_op_valid(op, dtype) is false. */
DEV_API int dev_reduce_multi(void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                             size_t count, dev_dtype_t dtype, dev_op_t op,
                             const dev_launch_t *launch, dev_stream_t *stream);

/* The same operation on host memory, now, with the plain-C reference (no backend needed):
 * for host-side reductions and as the emulated backend's kernel.  DEV_ERR_UNSUPPORTED when
 * dev_op_valid(op, dtype) is false. */
DEV_API int dev_reduce_host(void *dst, const void *a, const void *b, size_t count,
                            dev_dtype_t dtype, dev_op_t op);

/* ==== fast-path additions (coll_gpu_nvl.c): stream ordering, mapped host words, the fused
 * one-kernel allreduce.  Kept in one block; the rest of this header is the device layer's
 * general interface. ======================================================================= */

/* Make work enqueued on stream after this call wait for the work event's last record covers
 * (the record that preceded this call; a never-recorded event is complete).  The host does not
 * wait.  NULL stream: the default stream. */
DEV_API int dev_stream_wait_event(dev_stream_t *stream, dev_event_t *event);
/* DEV_OK when everything enqueued on stream has completed, 1 while work is pending, < 0 when
 * the stream (or the device) hit an error. */
DEV_API int dev_stream_query(dev_stream_t *stream);
/* Return once the work the program enqueued on the default stream before this call has ended
 * (one query when that stream is idle, a wait when not).  A collective calls it before its
 * team reads a buffer of this rank on a stream of its own or from a peer: a cudaMemcpy from
 * pageable host memory returns before its copy to the device has ended, and the team's streams
 * do not wait for the default stream. */
DEV_API int dev_default_stream_settle(void);
/* Page-locked host memory that kernels may write: *host is its address for host code,
 * *device the address kernels use for it (the same on the emulated backend).  Released with
 * dev_host_free(*host). */
DEV_API int dev_host_alloc_mapped(void **host, void **device, size_t size);

/* The fused allreduce: one kernel that exchanges, synchronises and reduces, for small
 * messages on a team whose ranks map each other's scratch (coll_gpu_nvl.c).
 *
 * Every rank's scratch has a slot per call parity (seq & 1); within a slot of an n-rank team:
 *
 *     [0, DEV_FUSED_FLAG_BYTES)                 flags[b][r]: uint64, block b of rank r wrote its
 *                                               data (seq; DEV_FUSED_ABANDON | seq: released by
 *                                               the host because a peer failed); the counter
 *     DEV_FUSED_FLAG_BYTES                      rank r's low-latency area: only ever written
 *       + r * DEV_FUSED_LL_BYTES(n)             with 8-byte words (seq32 << 32 | 4 data bytes)
 *     DEV_FUSED_HEAD_BYTES(n) + r * cap         rank r's data area, cap bytes
 *
 * The head (flags and low-latency areas) is zeroed when the scratch is made and never written
 * with anything else; other algorithms may use the data areas of the slot.
 *
 * Flag protocol (any size): block b of rank me copies bytes [lo_b, hi_b) of sbuf into the data
 * area `me` of every peer's slot, makes them visible system-wide, then sets flags[b][me] = seq
 * in every peer's slot; it waits until flags[b][p] of its own slot holds seq (low 63 bits) for
 * every peer p, then folds rank 0 .. n-1 in that order (its own data read from sbuf, the
 * others' from its slot) into rbuf.
 * Low-latency protocol (cuda backend, n <= 4, count * size <= DEV_FUSED_LL_MAX, which fits
 * DEV_FUSED_LL_BYTES(n) / 2): the
 * data travel in 8-byte words that carry their own flag, seq32 = 1 + (seq - 1) mod (2^32 - 1)
 * (never 0, the value of a word never written); a word is stored and loaded whole, so no fence
 * and no separate flag are needed; the receiver unpacks them into its data areas, then folds
 * as above.
 * Either way the last block to finish sets *done = seq.  Nothing is reset: seq grows by one per
 * team call, so what an earlier call left never matches (the low-latency words could only be
 * mistaken after 2^33 calls in which no call of the same parity rewrote that word).  The block
 * partition is a function of count, dtype and nblocks, which every rank passes the same.
 * sbuf may equal rbuf (in place).  count * size must fit in cap. */
#define DEV_FUSED_MAX_BLOCKS 32
#define DEV_FUSED_FLAG_BYTES 8192
#define DEV_FUSED_LL_BYTES(n) ((n) <= 4 ? (size_t) 65536 : (size_t) 0)
/* The low-latency words double the bytes on the wire: on 2xH200 NV18 a 32 KiB call took
 * 24.5 us that way against 20.0 us for 64 KiB by flags (1.14 x NCCL's time); 16 KiB took
 * 19.9 us.  So the words stop at 16 KiB. */
#define DEV_FUSED_LL_MAX ((size_t) 16384)
#define DEV_FUSED_HEAD_BYTES(n)                                                                \
    ((size_t) DEV_FUSED_FLAG_BYTES + (size_t) (n) * DEV_FUSED_LL_BYTES(n))
#define DEV_FUSED_ABANDON (UINT64_C(1) << 63)
typedef struct {
    const void *sbuf;
    void *rbuf;
    size_t count;
    dev_dtype_t dtype;
    dev_op_t op;
    int nranks, rank;
    void *slot[DEV_MULTI_MAX]; /* every rank's slot of this call's parity, mapped here */
    size_t cap;                /* bytes of one rank's contribution area (a multiple of 256) */
    uint64_t seq;              /* >= 1, below DEV_FUSED_ABANDON */
    uint64_t *done;            /* a word of dev_host_alloc_mapped memory (its device address) */
    /* Emulated backend only (its kernel runs on the calling thread): asked while it waits for
     * peers; true makes it stop waiting (the host gave the call up).  May be NULL. */
    bool (*abandon)(void *ctx);
    void *abandon_ctx;
} dev_fused_allreduce_t;
/* Enqueue the fused allreduce on stream.  DEV_ERR_ARG for malformed arguments,
 * DEV_ERR_UNSUPPORTED for an op the type does not have.  The cuda backend returns after the
 * launch; the emulated one after the whole exchange (it waits for its peers). */
DEV_API int dev_fused_allreduce(const dev_fused_allreduce_t *args, const dev_launch_t *launch,
                                dev_stream_t *stream);
/* An identity of this process that is unique on the host, also between processes of separate
 * PID namespaces that share IPC and /dev/shm (containers): a hash of the boot id, the PID
 * namespace's device and inode and the pid, never 0.  Computed at the first call and kept
 * (a forked child keeps its parent's).  dev_process_identity_of is the hash itself, for
 * tests. */
DEV_API uint64_t dev_process_identity(void);
DEV_API uint64_t dev_process_identity_of(const char *boot_id, uint64_t ns_dev, uint64_t ns_ino,
                                         uint64_t pid);
/* ==== end of fast-path additions ========================================================== */

#ifdef __cplusplus
}
#endif

#endif /* COLL_GPU_DEV_H */
