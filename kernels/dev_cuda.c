/*
 * dev_cuda.c - the cuda backend: real GPUs through the CUDA runtime (linked statically) and a
 * few driver calls (pointer attributes, address ranges) looked up at run time with
 * cudaGetDriverEntryPointByVersion, so that the library neither links nor needs libcuda at
 * build time and loads on machines without a driver (dev_open then fails with
 * DEV_ERR_NO_DRIVER or DEV_ERR_NO_DEVICE).
 *
 * dev_open does not create a CUDA context (a host-only MPI job must not pay one per rank);
 * the runtime creates the primary context of the current device on the first call that needs
 * it (an allocation, a copy, a launch).
 *
 * Whose current device.  The application picks its GPU with its own CUDA runtime, typically
 * libcudart.so: cudaSetDevice(local_rank).  Our runtime is a separate, static instance with
 * its own per-thread "current device", which the application never set.  What the two share is
 * the driver: cudaSetDevice makes the device's primary context current on the calling thread.
 * So the device of the driver context current on the calling thread is the application's
 * choice, and it wins:
 *
 *   dev_current_device   that device (cuCtxGetCurrent, cuCtxGetDevice); with no context
 *                        current, our runtime's cudaGetDevice (0 unless dev_set_device said
 *                        otherwise);
 *   every call that allocates, maps, launches or uses the default stream (mem_alloc*,
 *   host_alloc, stream/event_create, memcpy/memset, stream_sync, reduce*, ipc_import/export)
 *                        first aligns our runtime with that device: cudaSetDevice(ordinal) in
 *                        our instance when its current device differs (once per thread and
 *                        device change; two cheap driver queries per call otherwise).
 *
 * cudaSetDevice makes the device's primary context current, which is what the application's
 * runtime uses too.  An application that made a context of its own (cuCtxCreate) current
 * would find the primary context current after our call; the runtime honours a current
 * context already, so in practice the devices agree and we never call cudaSetDevice then.
 *
 * Classification.  This file only answers the raw question (cuda_mem_query: one
 * cuPointerGetAttributes, the memory type and whether the driver knows the pointer at all);
 * dev_classify.c decides what may be remembered, the same for both backends.  The driver
 * answers memory type 0 ("not mine") for plain host memory, CU_MEMORYTYPE_HOST for pinned or
 * registered host memory, CU_MEMORYTYPE_DEVICE for cudaMalloc, stream-ordered pool
 * (cudaMallocAsync) and VMM (cuMemCreate + cuMemMap) memory, and IS_MANAGED for managed memory.
 * Pinned memory is driver-known and is never cached: the driver may give its virtual address to
 * a device allocation once it is freed, with no munmap() that a hook could see.
 */
#include "dev_backend.h"

#include <cuda.h> /* types and enums of the driver API only: libcuda is never linked */
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <ctype.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The driver ABI we ask for: the typedefs below are those of CUDA 12.0's entry points. */
#define CUDA_DRIVER_ABI 12000

static PFN_cuPointerGetAttributes_v7000 drv_pointer_get_attributes;
static PFN_cuMemGetAddressRange_v3020 drv_mem_get_address_range;
static PFN_cuCtxGetCurrent_v4000 drv_ctx_get_current;
static PFN_cuCtxGetDevice_v2000 drv_ctx_get_device;
static PFN_cuCtxSetCurrent_v4000 drv_ctx_set_current;
static PFN_cuDeviceGet_v2000 drv_device_get;

/* CUdevice of each ordinal (so far always the ordinal itself, which is not promised). */
#define DRV_MAX_DEVICES 64
static CUdevice drv_devices[DRV_MAX_DEVICES];
static int drv_ndevices;

/* ---- errors ------------------------------------------------------------------------------ */

static int status_of(cudaError_t err)
{
    switch (err) {
    case cudaErrorMemoryAllocation:
        return DEV_ERR_NOMEM;
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
        return DEV_ERR_NO_DRIVER;
    case cudaErrorNoDevice:
        return DEV_ERR_NO_DEVICE;
    case cudaErrorAlreadyMapped:
        return DEV_ERR_ALREADY_MAPPED;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidDevice:
        return DEV_ERR_ARG;
    default:
        return DEV_ERR;
    }
}

/* Record "what: cudaErrorName: text" and return the matching status.  A failed runtime call
 * also leaves its error in the runtime's per-thread "last error", where the next launch's
 * cudaGetLastError() would find it and blame the kernel: reset it here (sticky errors, which
 * poison the context, are reported again by every later call anyway). */
static int cuda_fail(cudaError_t err, const char *what)
{
    (void) cudaGetLastError();
    return dev_fail(status_of(err), "%s: %s: %s", what, cudaGetErrorName(err),
                    cudaGetErrorString(err));
}

/* Run a runtime call; on failure record it and jump to the function's `out` label with rc set.
 * Every function using it declares `int rc = DEV_OK` and has one `out:` label. */
#define CUDA_CALL(call_)                                                                       \
    do {                                                                                       \
        cudaError_t err_ = (call_);                                                            \
        if (cudaSuccess != err_) {                                                             \
            rc = cuda_fail(err_, #call_);                                                      \
            goto out;                                                                          \
        }                                                                                      \
    } while (0)

/* Ask the driver.  cuPointerGetAttributes does not fail on pointers it does not know (it
 * answers memory type 0); if it fails anyway, the pointer is treated as host but reported as
 * known, so that the answer is not cached: the next call asks again. */
static dev_mem_kind_t cuda_mem_query(const void *ptr, bool *known)
{
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    unsigned int memtype = 0;
    uint64_t managed = 0; /* a "boolean" of unstated width: zeroed, then tested for non-zero */
    void *data[2] = {&memtype, &managed};

    *known = true;
    if (CUDA_SUCCESS != drv_pointer_get_attributes(2, attrs, data, (CUdeviceptr) ptr)) {
        return DEV_MEM_HOST;
    }
    if (0 != managed) {
        return DEV_MEM_MANAGED;
    }
    if (CU_MEMORYTYPE_DEVICE == memtype || CU_MEMORYTYPE_ARRAY == memtype) {
        return DEV_MEM_DEVICE;
    }
    *known = 0 != memtype; /* CU_MEMORYTYPE_HOST: pinned or registered */
    return DEV_MEM_HOST;
}

/* ---- lifecycle and devices --------------------------------------------------------------- */

static int lookup_driver_symbol(const char *name, void **fn)
{
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t err = cudaGetDriverEntryPointByVersion(name, fn, CUDA_DRIVER_ABI,
                                                       cudaEnableDefault, &found);
    if (cudaSuccess != err) {
        return cuda_fail(err, "cudaGetDriverEntryPointByVersion");
    }
    if (cudaDriverEntryPointSuccess != found || NULL == *fn) {
        return dev_fail(DEV_ERR_NO_DRIVER,
                        "cudaGetDriverEntryPointByVersion(%s, %d): the driver does not provide "
                        "it (result %d): driver too old", name, CUDA_DRIVER_ABI, (int) found);
    }
    return DEV_OK;
}

static int cuda_open(void)
{
    int count = 0, rc;
    cudaError_t err;

    /* The first runtime call loads libcuda.so.1 and initializes the driver; without a driver
     * it reports cudaErrorInsufficientDriver (or the stub library's error), not a crash. */
    err = cudaGetDeviceCount(&count);
    if (cudaSuccess != err) {
        rc = status_of(err);
        if (DEV_ERR_NO_DRIVER != rc && DEV_ERR_NO_DEVICE != rc) {
            rc = DEV_ERR_NO_DRIVER; /* the runtime cannot start: for our callers, no driver */
        }
        return dev_fail(rc, "cudaGetDeviceCount: %s: %s (CUDA runtime %d)",
                        cudaGetErrorName(err), cudaGetErrorString(err), CUDART_VERSION);
    }
    if (count <= 0) {
        return dev_fail(DEV_ERR_NO_DEVICE, "cudaGetDeviceCount: no CUDA device is visible");
    }
    rc = lookup_driver_symbol("cuPointerGetAttributes", (void **) &drv_pointer_get_attributes);
    if (DEV_OK == rc) {
        rc = lookup_driver_symbol("cuMemGetAddressRange", (void **) &drv_mem_get_address_range);
    }
    if (DEV_OK == rc) {
        rc = lookup_driver_symbol("cuCtxGetCurrent", (void **) &drv_ctx_get_current);
    }
    if (DEV_OK == rc) {
        rc = lookup_driver_symbol("cuCtxGetDevice", (void **) &drv_ctx_get_device);
    }
    if (DEV_OK == rc) {
        rc = lookup_driver_symbol("cuCtxSetCurrent", (void **) &drv_ctx_set_current);
    }
    if (DEV_OK == rc) {
        rc = lookup_driver_symbol("cuDeviceGet", (void **) &drv_device_get);
    }
    if (DEV_OK != rc) {
        return rc;
    }
    drv_ndevices = (count < DRV_MAX_DEVICES) ? count : DRV_MAX_DEVICES;
    for (int i = 0; i < drv_ndevices; ++i) {
        if (CUDA_SUCCESS != drv_device_get(&drv_devices[i], i)) {
            drv_devices[i] = (CUdevice) i;
        }
    }
    return DEV_OK;
}

/* The last dev_close.  The primary contexts stay: the application may still be using CUDA,
 * and a reset would pull memory out from under it. */
static void cuda_close(void)
{
}

static int cuda_device_count(int *count)
{
    int rc = DEV_OK;
    CUDA_CALL(cudaGetDeviceCount(count));
out:
    return rc;
}

/* Our runtime's current device on this thread as last set or seen by follow_app (-1: not
 * known yet).  Only our own calls change it, so it saves a cudaGetDevice per call. */
static __thread int rt_device = -1;

/* The ordinal of the driver context current on this thread, or -1 when there is none. */
static int app_device(void)
{
    CUcontext ctx = NULL;
    CUdevice dev;

    if (CUDA_SUCCESS != drv_ctx_get_current(&ctx) || NULL == ctx
        || CUDA_SUCCESS != drv_ctx_get_device(&dev)) {
        return -1;
    }
    for (int i = 0; i < drv_ndevices; ++i) {
        if (drv_devices[i] == dev) {
            return i;
        }
    }
    return (int) dev;
}

/* Align our runtime with the device the application works on (see the file header) and
 * report that device in *ordinal (may be NULL). */
static int follow_app(int *ordinal)
{
    int want = app_device(), cur = -1, rc = DEV_OK;

    if (want < 0) {
        /* no context current: nothing to follow; our runtime's own choice */
        CUDA_CALL(cudaGetDevice(&want));
        rt_device = want;
    } else if (want != rt_device) {
        CUDA_CALL(cudaGetDevice(&cur));
        if (cur != want) {
            CUDA_CALL(cudaSetDevice(want));
        }
        rt_device = want;
    }
    if (NULL != ordinal) {
        *ordinal = want;
    }
out:
    return rc;
}

/* Every function that works on "the current device" starts with this. */
#define FOLLOW_APP()                                                                           \
    do {                                                                                       \
        int follow_rc_ = follow_app(NULL);                                                     \
        if (DEV_OK != follow_rc_) {                                                            \
            return follow_rc_;                                                                 \
        }                                                                                      \
    } while (0)

static int cuda_current_device(int *ordinal)
{
    return follow_app(ordinal);
}

static int cuda_set_device(int ordinal)
{
    int rc = DEV_OK;
    rt_device = -1; /* unknown if the call fails half-way */
    CUDA_CALL(cudaSetDevice(ordinal));
    rt_device = ordinal;
out:
    return rc;
}

/* The thread moves to ordinal's primary context (cuda_set_device) only when the driver context
 * current on it is not of that device; leave makes the context it had current again (NULL:
 * none), and forgets our runtime's device for this thread, which follow_app then asks again. */
static int cuda_device_enter(int ordinal, dev_device_scope_t *scope)
{
    CUcontext ctx = NULL;
    int rc;

    if (app_device() == ordinal) {
        return DEV_OK;
    }
    if (CUDA_SUCCESS != drv_ctx_get_current(&ctx)) {
        ctx = NULL;
    }
    rc = cuda_set_device(ordinal);
    if (DEV_OK == rc) {
        scope->saved = ctx;
        scope->changed = true;
    }
    return rc;
}

static void cuda_device_leave(dev_device_scope_t *scope)
{
    (void) drv_ctx_set_current((CUcontext) scope->saved);
    rt_device = -1;
}

static int cuda_device_uuid(int ordinal, dev_uuid_t *uuid)
{
    struct cudaDeviceProp prop;
    int rc = DEV_OK;

    CUDA_CALL(cudaGetDeviceProperties(&prop, ordinal));
    _Static_assert(sizeof(prop.uuid.bytes) == sizeof(uuid->bytes), "uuid sizes differ");
    memcpy(uuid->bytes, prop.uuid.bytes, sizeof(uuid->bytes));
out:
    return rc;
}

static int cuda_device_pci_bus_id(int ordinal, char *buf, size_t len)
{
    int rc = DEV_OK;

    CUDA_CALL(cudaDeviceGetPCIBusId(buf, (int) (len > 64 ? 64 : len), ordinal));
    for (char *c = buf; '\0' != *c; ++c) { /* the runtime writes hex digits upper case */
        *c = (char) tolower((unsigned char) *c);
    }
out:
    return rc;
}

static int cuda_device_can_access_peer(int ordinal, int peer_ordinal, bool *can)
{
    int answer = 0, rc = DEV_OK;

    if (ordinal == peer_ordinal) {
        *can = true;
        return DEV_OK;
    }
    CUDA_CALL(cudaDeviceCanAccessPeer(&answer, ordinal, peer_ordinal));
    *can = 0 != answer;
out:
    return rc;
}

/* ---- memory ------------------------------------------------------------------------------ */

/* Base and size of the allocation holding ptr: cuMemGetAddressRange (the mapped allocation),
 * else the pointer's RANGE attributes (e.g. for pinned host memory).  DEV_ERR_ARG when CUDA
 * does not know ptr. */
static int cuda_mem_range(const void *ptr, void **base, size_t *size, uint64_t *buffer_id)
{
    CUpointer_attribute attrs[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                    CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    unsigned int memtype = 0;
    unsigned long long id = 0;
    CUdeviceptr range_start = 0, b = 0;
    size_t range_size = 0, s = 0;
    void *data[4] = {&memtype, &id, &range_start, &range_size};
    CUresult res;

    res = drv_pointer_get_attributes(4, attrs, data, (CUdeviceptr) ptr);
    if (CUDA_SUCCESS != res) {
        return dev_fail(DEV_ERR, "cuPointerGetAttributes(%p): CUresult %d", ptr, (int) res);
    }
    if (0 == memtype) {
        return dev_fail(DEV_ERR_ARG, "dev_mem_range(%p): not memory that CUDA knows", ptr);
    }
    if (CUDA_SUCCESS == drv_mem_get_address_range(&b, &s, (CUdeviceptr) ptr)) {
        range_start = b;
        range_size = s;
    }
    *base = (void *) (uintptr_t) range_start;
    *size = range_size;
    *buffer_id = (uint64_t) id;
    return DEV_OK;
}

/* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: the device the memory was allocated on (for managed
 * memory too).  Driver ordinals are the runtime's: both number the devices that
 * CUDA_VISIBLE_DEVICES leaves visible, in the same order. */
static int cuda_mem_device(const void *ptr, int *ordinal)
{
    CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    unsigned int memtype = 0;
    uint64_t managed = 0; /* see cuda_mem_query */
    int device = -1;
    void *data[3] = {&memtype, &managed, &device};
    CUresult res;

    res = drv_pointer_get_attributes(3, attrs, data, (CUdeviceptr) ptr);
    if (CUDA_SUCCESS != res) {
        return dev_fail(DEV_ERR, "cuPointerGetAttributes(%p): CUresult %d", ptr, (int) res);
    }
    if ((0 == managed && CU_MEMORYTYPE_DEVICE != memtype && CU_MEMORYTYPE_ARRAY != memtype)
        || device < 0) {
        return dev_fail(DEV_ERR_ARG, "dev_mem_device(%p): not device or managed memory", ptr);
    }
    *ordinal = device;
    return DEV_OK;
}

static int cuda_mem_alloc(void **ptr, size_t size)
{
    int rc = DEV_OK;
    FOLLOW_APP();
    CUDA_CALL(cudaMalloc(ptr, size));
out:
    return rc;
}

static int cuda_mem_alloc_managed(void **ptr, size_t size)
{
    int rc = DEV_OK;
    FOLLOW_APP();
    CUDA_CALL(cudaMallocManaged(ptr, size, cudaMemAttachGlobal));
out:
    return rc;
}

/* Stream-ordered pool memory (dev.h): cudaMallocAsync on the legacy default stream, waited
 * for, so that the memory is usable on any stream when the call returns.  cudaFree releases
 * it (it synchronizes the device first). */
static int cuda_mem_alloc_pool(void **ptr, size_t size)
{
    int rc = DEV_OK;
    FOLLOW_APP();
    CUDA_CALL(cudaMallocAsync(ptr, size, (cudaStream_t) 0));
    CUDA_CALL(cudaStreamSynchronize((cudaStream_t) 0));
out:
    return rc;
}

/* The driver's own answer: CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE is false for
 * memory of stream-ordered pools and of the VMM API (cuMemCreate + cuMemMap), whose export
 * would need cuMemExportToShareableHandle instead, and for host memory; managed memory is
 * ruled out explicitly (cudaIpcGetMemHandle refuses it).  A failed query answers false: the
 * caller then copies through memory of its own, which is always correct. */
static bool cuda_mem_ipc_capable(const void *ptr)
{
    CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
    unsigned int memtype = 0;
    uint64_t managed = 0, capable = 0; /* "booleans" of unstated width: see cuda_mem_query */
    void *data[3] = {&memtype, &managed, &capable};

    if (CUDA_SUCCESS != drv_pointer_get_attributes(3, attrs, data, (CUdeviceptr) ptr)) {
        return false;
    }
    return CU_MEMORYTYPE_DEVICE == memtype && 0 == managed && 0 != capable;
}

static int cuda_mem_free(void *ptr)
{
    int rc = DEV_OK;
    CUDA_CALL(cudaFree(ptr));
out:
    return rc;
}

static int cuda_host_alloc(void **ptr, size_t size)
{
    int rc = DEV_OK;
    FOLLOW_APP();
    CUDA_CALL(cudaHostAlloc(ptr, size, cudaHostAllocPortable));
out:
    return rc;
}

static int cuda_host_free(void *ptr)
{
    int rc = DEV_OK;
    CUDA_CALL(cudaFreeHost(ptr));
out:
    return rc;
}

/* ---- streams and events ------------------------------------------------------------------ */

struct dev_stream {
    cudaStream_t s;
};

struct dev_event {
    cudaEvent_t e;
};

/* NULL is the legacy default stream. */
static inline cudaStream_t stream_of(dev_stream_t *stream)
{
    return (NULL == stream) ? (cudaStream_t) 0 : stream->s;
}

static int cuda_stream_create(dev_stream_t **stream)
{
    dev_stream_t *st;
    int rc = DEV_OK;

    FOLLOW_APP();
    st = calloc(1, sizeof(*st));
    if (NULL == st) {
        return dev_fail(DEV_ERR_NOMEM, "dev_stream_create: out of memory");
    }
    CUDA_CALL(cudaStreamCreateWithFlags(&st->s, cudaStreamNonBlocking));
    *stream = st;
    st = NULL;
out:
    free(st);
    return rc;
}

static int cuda_stream_destroy(dev_stream_t *stream)
{
    int rc = DEV_OK;
    CUDA_CALL(cudaStreamDestroy(stream->s));
out:
    free(stream);
    return rc;
}

static int cuda_stream_sync(dev_stream_t *stream)
{
    int rc = DEV_OK;
    if (NULL == stream) { /* the default stream is the current device's */
        FOLLOW_APP();
    }
    CUDA_CALL(cudaStreamSynchronize(stream_of(stream)));
out:
    return rc;
}

static int cuda_event_create(dev_event_t **event)
{
    dev_event_t *ev;
    int rc = DEV_OK;

    FOLLOW_APP();
    ev = calloc(1, sizeof(*ev));
    if (NULL == ev) {
        return dev_fail(DEV_ERR_NOMEM, "dev_event_create: out of memory");
    }
    CUDA_CALL(cudaEventCreateWithFlags(&ev->e, cudaEventDisableTiming));
    *event = ev;
    ev = NULL;
out:
    free(ev);
    return rc;
}

static int cuda_event_destroy(dev_event_t *event)
{
    int rc = DEV_OK;
    CUDA_CALL(cudaEventDestroy(event->e));
out:
    free(event);
    return rc;
}

static int cuda_event_record(dev_event_t *event, dev_stream_t *stream)
{
    int rc = DEV_OK;
    CUDA_CALL(cudaEventRecord(event->e, stream_of(stream)));
out:
    return rc;
}

static int cuda_event_sync(dev_event_t *event)
{
    int rc = DEV_OK;
    CUDA_CALL(cudaEventSynchronize(event->e));
out:
    return rc;
}

static int cuda_event_query(dev_event_t *event)
{
    cudaError_t err = cudaEventQuery(event->e);
    if (cudaErrorNotReady == err) {
        (void) cudaGetLastError(); /* "not ready" is an answer, not an error to keep */
        return 1;
    }
    return (cudaSuccess == err) ? DEV_OK : cuda_fail(err, "cudaEventQuery");
}

/* ---- copies and kernels ------------------------------------------------------------------ */

static int cuda_memcpy_async(void *dst, const void *src, size_t bytes, dev_stream_t *stream)
{
    int rc = DEV_OK;
    FOLLOW_APP();
    CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_of(stream)));
out:
    return rc;
}

/* Blocking in every direction (plain cudaMemcpy may return before a device-to-device copy
 * has finished). */
static int cuda_memcpy_sync(void *dst, const void *src, size_t bytes)
{
    int rc = DEV_OK;
    FOLLOW_APP();
    CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t) 0));
    CUDA_CALL(cudaStreamSynchronize((cudaStream_t) 0));
out:
    return rc;
}

static int cuda_memset_sync(void *dst, int value, size_t bytes)
{
    int rc = DEV_OK;
    FOLLOW_APP();
    CUDA_CALL(cudaMemsetAsync(dst, value, bytes, (cudaStream_t) 0));
    CUDA_CALL(cudaStreamSynchronize((cudaStream_t) 0));
out:
    return rc;
}

static int cuda_reduce(void *dst, const void *a, const void *b, size_t count, dev_dtype_t dtype,
                       dev_op_t op, dev_stream_t *stream)
{
    int rc = DEV_OK;
    FOLLOW_APP();
    CUDA_CALL((cudaError_t) dev_cuda_reduce_launch(dst, a, b, count, dtype, op,
                                                   (void *) stream_of(stream)));
out:
    return rc;
}

/* allreduce_multi.cu; the grid is sized for the device the application works on. */
static int cuda_reduce_multi(void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                             size_t count, dev_dtype_t dtype, dev_op_t op,
                             const dev_launch_t *launch, dev_stream_t *stream)
{
    int device = 0, rc = DEV_OK;

    rc = follow_app(&device);
    if (DEV_OK != rc) {
        return rc;
    }
    CUDA_CALL((cudaError_t) dev_cuda_reduce_multi_launch(dsts, ndst, srcs, nsrc, count, dtype,
                                                         op, launch->nblocks, launch->nthreads,
                                                         device, (void *) stream_of(stream)));
out:
    return rc;
}

/* ---- IPC --------------------------------------------------------------------------------- */

typedef struct {
    char magic[8];
    cudaIpcMemHandle_t handle;
    uint64_t size;
} cuda_ipc_wire_t;

_Static_assert(sizeof(cuda_ipc_wire_t) <= sizeof(dev_ipc_handle_t),
               "the cuda IPC handle must fit dev_ipc_handle_t");

static const char cuda_ipc_magic[8] = "CGPUCUD";

static int cuda_ipc_export(void *base, dev_ipc_handle_t *handle)
{
    cuda_ipc_wire_t wire;
    CUdeviceptr b = 0;
    size_t s = 0;
    int rc = DEV_OK;

    FOLLOW_APP();
    memset(&wire, 0, sizeof(wire));
    if (!cuda_mem_ipc_capable(base)) {
        /* pool, VMM, managed or host memory: cudaIpcGetMemHandle would fail (and leave its
         * error behind); say so without asking it */
        return dev_fail(DEV_ERR_UNSUPPORTED,
                        "dev_ipc_export(%p): the memory cannot be exported with CUDA IPC (not "
                        "device memory of cudaMalloc: a stream-ordered pool, VMM, managed or "
                        "host memory)", base);
    }
    if (CUDA_SUCCESS != drv_mem_get_address_range(&b, &s, (CUdeviceptr) base)
        || (uintptr_t) b != (uintptr_t) base) {
        return dev_fail(DEV_ERR_ARG, "dev_ipc_export(%p): not the base of a device allocation",
                        base);
    }
    CUDA_CALL(cudaIpcGetMemHandle(&wire.handle, base));
    memcpy(wire.magic, cuda_ipc_magic, sizeof(wire.magic));
    wire.size = s;
    memset(handle, 0, sizeof(*handle));
    memcpy(handle->bytes, &wire, sizeof(wire));
out:
    return rc;
}

static int cuda_ipc_import(const dev_ipc_handle_t *handle, void **ptr)
{
    cuda_ipc_wire_t wire;
    int rc = DEV_OK;

    memcpy(&wire, handle->bytes, sizeof(wire));
    if (0 != memcmp(wire.magic, cuda_ipc_magic, sizeof(wire.magic))) {
        return dev_fail(DEV_ERR_ARG, "dev_ipc_import: not a handle of the cuda backend");
    }
    FOLLOW_APP(); /* the mapping is made in, and peer access enabled from, this device */
    CUDA_CALL(cudaIpcOpenMemHandle(ptr, wire.handle, cudaIpcMemLazyEnablePeerAccess));
out:
    return rc;
}

static int cuda_ipc_close(void *ptr)
{
    int rc = DEV_OK;
    CUDA_CALL(cudaIpcCloseMemHandle(ptr));
out:
    return rc;
}

/* ---- fast-path additions (dev.h's block of the same name) -------------------------------- */

static int cuda_stream_wait_event(dev_stream_t *stream, dev_event_t *event)
{
    int rc = DEV_OK;
    if (NULL == stream) {
        FOLLOW_APP();
    }
    CUDA_CALL(cudaStreamWaitEvent(stream_of(stream), event->e, 0));
out:
    return rc;
}

static int cuda_stream_query(dev_stream_t *stream)
{
    cudaError_t err;
    if (NULL == stream) {
        FOLLOW_APP();
    }
    err = cudaStreamQuery(stream_of(stream));
    if (cudaErrorNotReady == err) {
        (void) cudaGetLastError(); /* an answer, not an error to keep */
        return 1;
    }
    return (cudaSuccess == err) ? DEV_OK : cuda_fail(err, "cudaStreamQuery");
}

/* Mapped (and portable) pinned memory: kernels of any device may write it. */
static int cuda_host_alloc_mapped(void **host, void **device, size_t size)
{
    int rc = DEV_OK;
    FOLLOW_APP();
    /* pinned memory is driver-known: classification asks the driver, nothing to remember */
    CUDA_CALL(cudaHostAlloc(host, size, cudaHostAllocPortable | cudaHostAllocMapped));
    {
        cudaError_t err = cudaHostGetDevicePointer(device, *host, 0);
        if (cudaSuccess != err) {
            rc = cuda_fail(err, "cudaHostGetDevicePointer");
            (void) cudaFreeHost(*host);
            *host = *device = NULL;
        }
    }
out:
    return rc;
}

static int cuda_fused_allreduce(const dev_fused_allreduce_t *args, const dev_launch_t *launch,
                                dev_stream_t *stream)
{
    int rc = DEV_OK;
    FOLLOW_APP();
    CUDA_CALL((cudaError_t) dev_cuda_fused_allreduce_launch(args, launch->nblocks,
                                                            launch->nthreads,
                                                            (void *) stream_of(stream)));
out:
    return rc;
}
/* ---- end of fast-path additions */

const dev_backend_ops_t dev_cuda_ops = {
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .device_count = cuda_device_count,
    .current_device = cuda_current_device,
    .set_device = cuda_set_device,
    .device_enter = cuda_device_enter,
    .device_leave = cuda_device_leave,
    .device_uuid = cuda_device_uuid,
    .device_pci_bus_id = cuda_device_pci_bus_id,
    .device_can_access_peer = cuda_device_can_access_peer,
    .mem_query = cuda_mem_query,
    .mem_range = cuda_mem_range,
    .mem_device = cuda_mem_device,
    .mem_alloc = cuda_mem_alloc,
    .mem_alloc_managed = cuda_mem_alloc_managed,
    .mem_alloc_pool = cuda_mem_alloc_pool,
    .mem_ipc_capable = cuda_mem_ipc_capable,
    .mem_free = cuda_mem_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_sync = cuda_stream_sync,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_sync = cuda_event_sync,
    .event_query = cuda_event_query,
    .memcpy_async = cuda_memcpy_async,
    .memcpy_sync = cuda_memcpy_sync,
    .memset_sync = cuda_memset_sync,
    .ipc_export = cuda_ipc_export,
    .ipc_import = cuda_ipc_import,
    .ipc_close = cuda_ipc_close,
    .reduce = cuda_reduce,
    .reduce_multi = cuda_reduce_multi,
    /* fast-path additions */
    .stream_wait_event = cuda_stream_wait_event,
    .stream_query = cuda_stream_query,
    .host_alloc_mapped = cuda_host_alloc_mapped,
    .fused_allreduce = cuda_fused_allreduce,
};
