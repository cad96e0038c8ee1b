/*
 * dev.c - the public face of the device layer: backend lifecycle, argument checks, the
 * dtype/op tables, the per-thread error text, and dispatch to the open backend.
 *
 * Every collective of the component reaches the GPU through these functions; the only hot one
 * is dev_mem_classify(), called on every MPI call's buffers, which lives with its cache in
 * dev_classify.c.
 */
#include "dev_backend.h"
#include "reference.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <strings.h>

/* ---- errors ------------------------------------------------------------------------------ */

static __thread char dev_error_text[512];

DEV_API int dev_fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dev_error_text, sizeof(dev_error_text), fmt, ap);
    va_end(ap);
    return status;
}

DEV_API const char *dev_error_string(void)
{
    return dev_error_text;
}

DEV_API const char *dev_status_name(int status)
{
    switch (status) {
    case DEV_OK: return "DEV_OK";
    case DEV_ERR: return "DEV_ERR";
    case DEV_ERR_NO_DRIVER: return "DEV_ERR_NO_DRIVER";
    case DEV_ERR_NO_DEVICE: return "DEV_ERR_NO_DEVICE";
    case DEV_ERR_NOMEM: return "DEV_ERR_NOMEM";
    case DEV_ERR_ARG: return "DEV_ERR_ARG";
    case DEV_ERR_UNSUPPORTED: return "DEV_ERR_UNSUPPORTED";
    case DEV_ERR_ALREADY_MAPPED: return "DEV_ERR_ALREADY_MAPPED";
    default: return (status > 0) ? "pending" : "unknown";
    }
}

/* ---- types and ops ----------------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dev_dtypes[DEV_T_COUNT] = {
    [DEV_T_INT8] = {"int8", sizeof(int8_t)},
    [DEV_T_UINT8] = {"uint8", sizeof(uint8_t)},
    [DEV_T_INT16] = {"int16", sizeof(int16_t)},
    [DEV_T_UINT16] = {"uint16", sizeof(uint16_t)},
    [DEV_T_INT32] = {"int32", sizeof(int32_t)},
    [DEV_T_UINT32] = {"uint32", sizeof(uint32_t)},
    [DEV_T_INT64] = {"int64", sizeof(int64_t)},
    [DEV_T_UINT64] = {"uint64", sizeof(uint64_t)},
    [DEV_T_FLOAT] = {"float", sizeof(float)},
    [DEV_T_DOUBLE] = {"double", sizeof(double)},
    [DEV_T_CFLOAT] = {"float_complex", 2 * sizeof(float)},
    [DEV_T_CDOUBLE] = {"double_complex", 2 * sizeof(double)},
    [DEV_T_BOOL] = {"bool", sizeof(_Bool)},
    [DEV_T_FLOAT_INT] = {"float_int", sizeof(dev_float_int_t)},
    [DEV_T_DOUBLE_INT] = {"double_int", sizeof(dev_double_int_t)},
    [DEV_T_LONG_INT] = {"long_int", sizeof(dev_long_int_t)},
    [DEV_T_2INT] = {"2int", sizeof(dev_2int_t)},
    [DEV_T_SHORT_INT] = {"short_int", sizeof(dev_short_int_t)},
    [DEV_T_FLOAT16] = {"float16", sizeof(uint16_t)},
    [DEV_T_BFLOAT16] = {"bfloat16", sizeof(uint16_t)},
};

static const char *const dev_op_names[DEV_OP_COUNT] = {
    [DEV_OP_SUM] = "sum",   [DEV_OP_PROD] = "prod", [DEV_OP_MIN] = "min",
    [DEV_OP_MAX] = "max",   [DEV_OP_LAND] = "land", [DEV_OP_LOR] = "lor",
    [DEV_OP_LXOR] = "lxor", [DEV_OP_BAND] = "band", [DEV_OP_BOR] = "bor",
    [DEV_OP_BXOR] = "bxor", [DEV_OP_MINLOC] = "minloc", [DEV_OP_MAXLOC] = "maxloc",
};

DEV_API size_t dev_dtype_size(dev_dtype_t dtype)
{
    return ((unsigned) dtype < DEV_T_COUNT) ? dev_dtypes[dtype].size : 0;
}

DEV_API const char *dev_dtype_name(dev_dtype_t dtype)
{
    return ((unsigned) dtype < DEV_T_COUNT) ? dev_dtypes[dtype].name : "invalid";
}

DEV_API const char *dev_op_name(dev_op_t op)
{
    return ((unsigned) op < DEV_OP_COUNT) ? dev_op_names[op] : "invalid";
}

/* The type groups of MPI-3.1 section 5.9.2 as far as a GPU sees them. */
static bool dtype_is_integer(dev_dtype_t t)
{
    return DEV_T_INT8 <= t && t <= DEV_T_UINT64;
}

static bool dtype_is_real(dev_dtype_t t)
{
    return DEV_T_FLOAT == t || DEV_T_DOUBLE == t || DEV_T_FLOAT16 == t || DEV_T_BFLOAT16 == t;
}

static bool dtype_is_complex(dev_dtype_t t)
{
    return DEV_T_CFLOAT == t || DEV_T_CDOUBLE == t;
}

static bool dtype_is_pair(dev_dtype_t t)
{
    return DEV_T_FLOAT_INT <= t && t <= DEV_T_SHORT_INT;
}

DEV_API bool dev_op_valid(dev_op_t op, dev_dtype_t dtype)
{
    if ((unsigned) dtype >= DEV_T_COUNT) {
        return false;
    }
    switch (op) {
    case DEV_OP_SUM:
    case DEV_OP_PROD:
        return dtype_is_integer(dtype) || dtype_is_real(dtype) || dtype_is_complex(dtype);
    case DEV_OP_MIN:
    case DEV_OP_MAX:
        return dtype_is_integer(dtype) || dtype_is_real(dtype);
    case DEV_OP_LAND:
    case DEV_OP_LOR:
    case DEV_OP_LXOR:
        return dtype_is_integer(dtype) || DEV_T_BOOL == dtype;
    case DEV_OP_BAND:
    case DEV_OP_BOR:
    case DEV_OP_BXOR:
        return dtype_is_integer(dtype);
    case DEV_OP_MINLOC:
    case DEV_OP_MAXLOC:
        return dtype_is_pair(dtype);
    default:
        return false;
    }
}

DEV_API const char *dev_mem_kind_name(dev_mem_kind_t kind)
{
    switch (kind) {
    case DEV_MEM_HOST: return "host";
    case DEV_MEM_DEVICE: return "device";
    case DEV_MEM_MANAGED: return "managed";
    default: return "invalid";
    }
}

/* ---- lifecycle --------------------------------------------------------------------------- */

/* The open backend.  Written under dev_lock; read without it (dev_mem_classify is hot).  A
 * caller racing its own dev_close() with other calls gets what CUDA gives after a reset. */
const dev_backend_ops_t *_Atomic dev_ops = NULL;
static dev_backend_t dev_open_backend = DEV_BACKEND_NONE;
static int dev_refcount = 0;
static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;

static const dev_backend_ops_t *backend_table(dev_backend_t backend)
{
    switch (backend) {
    case DEV_BACKEND_EMULATED:
        return &dev_emulated_ops;
#ifdef COLL_GPU_HAVE_CUDA
    case DEV_BACKEND_CUDA:
        return &dev_cuda_ops;
#endif
    default:
        return NULL;
    }
}

DEV_API int dev_open(dev_backend_t backend)
{
    const dev_backend_ops_t *ops;
    int rc = DEV_OK;

    if (DEV_BACKEND_CUDA != backend && DEV_BACKEND_EMULATED != backend) {
        return dev_fail(DEV_ERR_ARG, "dev_open: invalid backend %d", (int) backend);
    }
    ops = backend_table(backend);
    if (NULL == ops) {
        return dev_fail(DEV_ERR_UNSUPPORTED,
                        "dev_open: the %s backend was not built into this library",
                        dev_backend_name(backend));
    }

    pthread_mutex_lock(&dev_lock);
    if (dev_refcount > 0) {
        if (dev_open_backend != backend) {
            rc = dev_fail(DEV_ERR_ARG, "dev_open(%s): the %s backend is already open",
                          dev_backend_name(backend), dev_backend_name(dev_open_backend));
        } else {
            ++dev_refcount;
        }
        goto out;
    }
    rc = ops->open();
    if (DEV_OK == rc) {
        dev_classify_reset();
        dev_open_backend = backend;
        dev_refcount = 1;
        atomic_store_explicit(&dev_ops, ops, memory_order_release);
    }
out:
    pthread_mutex_unlock(&dev_lock);
    return rc;
}

DEV_API void dev_close(void)
{
    const dev_backend_ops_t *ops;

    pthread_mutex_lock(&dev_lock);
    if (dev_refcount > 0 && 0 == --dev_refcount) {
        ops = atomic_load_explicit(&dev_ops, memory_order_relaxed);
        atomic_store_explicit(&dev_ops, NULL, memory_order_release);
        dev_open_backend = DEV_BACKEND_NONE;
        ops->close();
        dev_classify_reset();
    }
    pthread_mutex_unlock(&dev_lock);
}

DEV_API dev_backend_t dev_backend(void)
{
    dev_backend_t b;
    pthread_mutex_lock(&dev_lock);
    b = dev_open_backend;
    pthread_mutex_unlock(&dev_lock);
    return b;
}

DEV_API const char *dev_backend_name(dev_backend_t backend)
{
    switch (backend) {
    case DEV_BACKEND_CUDA: return "cuda";
    case DEV_BACKEND_EMULATED: return "emulated";
    case DEV_BACKEND_NONE: return "none";
    default: return "invalid";
    }
}

DEV_API dev_backend_t dev_backend_from_name(const char *name)
{
    if (NULL == name) {
        return DEV_BACKEND_NONE;
    }
    if (0 == strcasecmp(name, "cuda")) {
        return DEV_BACKEND_CUDA;
    }
    if (0 == strcasecmp(name, "emulated")) {
        return DEV_BACKEND_EMULATED;
    }
    return DEV_BACKEND_NONE;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

/* Fetch the open backend or fail the calling function with DEV_ERR_ARG. */
#define DEV_OPS(ops_, fn_)                                                                     \
    do {                                                                                       \
        (ops_) = atomic_load_explicit(&dev_ops, memory_order_acquire);                         \
        if (NULL == (ops_)) {                                                                  \
            return dev_fail(DEV_ERR_ARG, "%s: no device backend is open", fn_);                \
        }                                                                                      \
    } while (0)

#define DEV_CHECK_ARG(cond_, fn_)                                                              \
    do {                                                                                       \
        if (!(cond_)) {                                                                        \
            return dev_fail(DEV_ERR_ARG, "%s: invalid argument (%s)", fn_, #cond_);            \
        }                                                                                      \
    } while (0)

DEV_API int dev_device_count(int *count)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != count, __func__);
    return ops->device_count(count);
}

DEV_API int dev_current_device(int *ordinal)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != ordinal, __func__);
    return ops->current_device(ordinal);
}

DEV_API int dev_set_device(int ordinal)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(ordinal >= 0, __func__);
    return ops->set_device(ordinal);
}

DEV_API int dev_device_enter(int ordinal, dev_device_scope_t *scope)
{
    const dev_backend_ops_t *ops;
    DEV_CHECK_ARG(NULL != scope, __func__);
    scope->changed = false;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(ordinal >= 0, __func__);
    return ops->device_enter(ordinal, scope);
}

DEV_API void dev_device_leave(dev_device_scope_t *scope)
{
    const dev_backend_ops_t *ops = atomic_load_explicit(&dev_ops, memory_order_acquire);

    if (NULL != scope && scope->changed && NULL != ops) {
        ops->device_leave(scope);
        scope->changed = false;
    }
}

DEV_API int dev_device_uuid(int ordinal, dev_uuid_t *uuid)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(ordinal >= 0 && NULL != uuid, __func__);
    return ops->device_uuid(ordinal, uuid);
}

DEV_API int dev_device_pci_bus_id(int ordinal, char *buf, size_t len)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(ordinal >= 0 && NULL != buf && len > 0, __func__);
    return ops->device_pci_bus_id(ordinal, buf, len);
}

DEV_API int dev_device_can_access_peer(int ordinal, int peer_ordinal, bool *can)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(ordinal >= 0 && peer_ordinal >= 0 && NULL != can, __func__);
    return ops->device_can_access_peer(ordinal, peer_ordinal, can);
}

/* dev_mem_classify and its cache: dev_classify.c. */

DEV_API int dev_mem_range(const void *ptr, void **base, size_t *size, uint64_t *buffer_id)
{
    const dev_backend_ops_t *ops;
    void *b;
    size_t s;
    uint64_t id;
    int rc;

    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != ptr, __func__);
    rc = ops->mem_range(ptr, &b, &s, &id);
    if (DEV_OK == rc) {
        if (NULL != base) {
            *base = b;
        }
        if (NULL != size) {
            *size = s;
        }
        if (NULL != buffer_id) {
            *buffer_id = id;
        }
    }
    return rc;
}

DEV_API int dev_mem_device(const void *ptr, int *ordinal)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != ptr && NULL != ordinal, __func__);
    return ops->mem_device(ptr, ordinal);
}

DEV_API int dev_mem_alloc(void **ptr, size_t size)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != ptr, __func__);
    *ptr = NULL;
    if (0 == size) {
        return DEV_OK; /* as cudaMalloc(0) */
    }
    return ops->mem_alloc(ptr, size);
}

DEV_API int dev_mem_alloc_managed(void **ptr, size_t size)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != ptr, __func__);
    *ptr = NULL;
    if (0 == size) {
        return DEV_OK;
    }
    return ops->mem_alloc_managed(ptr, size);
}

DEV_API int dev_mem_alloc_pool(void **ptr, size_t size)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != ptr, __func__);
    *ptr = NULL;
    if (0 == size) {
        return DEV_OK;
    }
    return ops->mem_alloc_pool(ptr, size);
}

DEV_API bool dev_mem_ipc_capable(const void *ptr)
{
    const dev_backend_ops_t *ops = atomic_load_explicit(&dev_ops, memory_order_acquire);
    if (NULL == ops || NULL == ptr) {
        return false;
    }
    return ops->mem_ipc_capable(ptr);
}

DEV_API int dev_mem_free(void *ptr)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    if (NULL == ptr) {
        return DEV_OK;
    }
    return ops->mem_free(ptr);
}

/* dev_host_stats: relaxed counters, read by tests between calls */
static atomic_uint_fast64_t dev_host_allocs = 0;
static atomic_uint_fast64_t dev_host_frees = 0;

DEV_API int dev_host_alloc(void **ptr, size_t size)
{
    const dev_backend_ops_t *ops;
    int rc;

    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != ptr, __func__);
    *ptr = NULL;
    if (0 == size) {
        return DEV_OK;
    }
    rc = ops->host_alloc(ptr, size);
    if (DEV_OK == rc) {
        atomic_fetch_add_explicit(&dev_host_allocs, 1, memory_order_relaxed);
    }
    return rc;
}

DEV_API int dev_host_free(void *ptr)
{
    const dev_backend_ops_t *ops;
    int rc;

    DEV_OPS(ops, __func__);
    if (NULL == ptr) {
        return DEV_OK;
    }
    rc = ops->host_free(ptr);
    if (DEV_OK == rc) {
        atomic_fetch_add_explicit(&dev_host_frees, 1, memory_order_relaxed);
    }
    return rc;
}

DEV_API void dev_host_stats(dev_host_stats_t *stats)
{
    stats->allocs = atomic_load_explicit(&dev_host_allocs, memory_order_relaxed);
    stats->frees = atomic_load_explicit(&dev_host_frees, memory_order_relaxed);
}

DEV_API int dev_stream_create(dev_stream_t **stream)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != stream, __func__);
    return ops->stream_create(stream);
}

DEV_API int dev_stream_destroy(dev_stream_t *stream)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    if (NULL == stream) {
        return DEV_OK;
    }
    return ops->stream_destroy(stream);
}

DEV_API int dev_stream_sync(dev_stream_t *stream)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    return ops->stream_sync(stream);
}

DEV_API int dev_event_create(dev_event_t **event)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != event, __func__);
    return ops->event_create(event);
}

DEV_API int dev_event_destroy(dev_event_t *event)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    if (NULL == event) {
        return DEV_OK;
    }
    return ops->event_destroy(event);
}

DEV_API int dev_event_record(dev_event_t *event, dev_stream_t *stream)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != event, __func__);
    return ops->event_record(event, stream);
}

DEV_API int dev_event_sync(dev_event_t *event)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != event, __func__);
    return ops->event_sync(event);
}

DEV_API int dev_event_query(dev_event_t *event)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != event, __func__);
    return ops->event_query(event);
}

DEV_API int dev_memcpy_async(void *dst, const void *src, size_t bytes, dev_stream_t *stream)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    if (0 == bytes) {
        return DEV_OK;
    }
    DEV_CHECK_ARG(NULL != dst && NULL != src, __func__);
    return ops->memcpy_async(dst, src, bytes, stream);
}

DEV_API int dev_memcpy(void *dst, const void *src, size_t bytes)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    if (0 == bytes) {
        return DEV_OK;
    }
    DEV_CHECK_ARG(NULL != dst && NULL != src, __func__);
    return ops->memcpy_sync(dst, src, bytes);
}

DEV_API int dev_memset(void *dst, int value, size_t bytes)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    if (0 == bytes) {
        return DEV_OK;
    }
    DEV_CHECK_ARG(NULL != dst, __func__);
    return ops->memset_sync(dst, value, bytes);
}

DEV_API int dev_ipc_export(void *base, dev_ipc_handle_t *handle)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != base && NULL != handle, __func__);
    return ops->ipc_export(base, handle);
}

DEV_API int dev_ipc_import(const dev_ipc_handle_t *handle, void **ptr)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != handle && NULL != ptr, __func__);
    *ptr = NULL;
    return ops->ipc_import(handle, ptr);
}

DEV_API int dev_ipc_close(void *ptr)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != ptr, __func__);
    return ops->ipc_close(ptr);
}

DEV_API int dev_reduce(void *dst, const void *a, const void *b, size_t count,
                       dev_dtype_t dtype, dev_op_t op, dev_stream_t *stream)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    if (!dev_op_valid(op, dtype)) {
        return dev_fail(DEV_ERR_UNSUPPORTED, "dev_reduce: op %s is not defined on %s",
                        dev_op_name(op), dev_dtype_name(dtype));
    }
    if (0 == count) {
        return DEV_OK;
    }
    DEV_CHECK_ARG(NULL != dst && NULL != a && NULL != b, __func__);
    return ops->reduce(dst, a, b, count, dtype, op, stream);
}

/* Checks every argument so that backends see only well-formed calls (dev_backend.h). */
DEV_API int dev_reduce_multi(void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                             size_t count, dev_dtype_t dtype, dev_op_t op,
                             const dev_launch_t *launch, dev_stream_t *stream)
{
    static const dev_launch_t defaults = {0, 0};
    const dev_backend_ops_t *ops;

    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(ndst >= 1 && ndst <= DEV_MULTI_MAX, __func__);
    DEV_CHECK_ARG(nsrc >= 1 && nsrc <= DEV_MULTI_MAX, __func__);
    DEV_CHECK_ARG(NULL != dsts && NULL != srcs, __func__);
    if (0 == dev_dtype_size(dtype)) {
        return dev_fail(DEV_ERR_ARG, "dev_reduce_multi: invalid dtype %d", (int) dtype);
    }
    /* one source is a copy: any type, the op does not matter */
    if (nsrc > 1 && !dev_op_valid(op, dtype)) {
        return dev_fail(DEV_ERR_UNSUPPORTED, "dev_reduce_multi: op %s is not defined on %s",
                        dev_op_name(op), dev_dtype_name(dtype));
    }
    if (NULL != launch) {
        DEV_CHECK_ARG(launch->nblocks >= 0, __func__);
        DEV_CHECK_ARG(launch->nthreads >= 0 && launch->nthreads <= 1024, __func__);
    } else {
        launch = &defaults;
    }
    if (0 == count) {
        return DEV_OK;
    }
    if (count > SIZE_MAX / dev_dtype_size(dtype)) {
        return dev_fail(DEV_ERR_ARG, "dev_reduce_multi: count %zu of %s overflows", count,
                        dev_dtype_name(dtype));
    }
    for (int k = 0; k < nsrc; ++k) {
        if (NULL == srcs[k]) {
            return dev_fail(DEV_ERR_ARG, "dev_reduce_multi: source %d of %d is NULL", k, nsrc);
        }
    }
    for (int k = 0; k < ndst; ++k) {
        if (NULL == dsts[k]) {
            return dev_fail(DEV_ERR_ARG, "dev_reduce_multi: destination %d of %d is NULL", k,
                            ndst);
        }
    }
    return ops->reduce_multi(dsts, ndst, srcs, nsrc, count, dtype, op, launch, stream);
}

DEV_API int dev_reduce_host(void *dst, const void *a, const void *b, size_t count,
                            dev_dtype_t dtype, dev_op_t op)
{
    if (!dev_op_valid(op, dtype)) {
        return dev_fail(DEV_ERR_UNSUPPORTED, "dev_reduce_host: op %s is not defined on %s",
                        dev_op_name(op), dev_dtype_name(dtype));
    }
    if (0 == count) {
        return DEV_OK;
    }
    DEV_CHECK_ARG(NULL != dst && NULL != a && NULL != b, __func__);
    return dev_ref_reduce(dst, a, b, count, dtype, op);
}

/* ---- fast-path additions (dev.h's block of the same name) -------------------------------- */

DEV_API int dev_stream_wait_event(dev_stream_t *stream, dev_event_t *event)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != event, __func__);
    return ops->stream_wait_event(stream, event);
}

DEV_API int dev_stream_query(dev_stream_t *stream)
{
    const dev_backend_ops_t *ops;
    DEV_OPS(ops, __func__);
    return ops->stream_query(stream);
}

DEV_API int dev_default_stream_settle(void)
{
    const dev_backend_ops_t *ops;
    int q;
    DEV_OPS(ops, __func__);
    q = ops->stream_query(NULL);
    return (1 == q) ? ops->stream_sync(NULL) : q;
}

DEV_API int dev_host_alloc_mapped(void **host, void **device, size_t size)
{
    const dev_backend_ops_t *ops;
    int rc;

    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != host && NULL != device && size > 0, __func__);
    *host = *device = NULL;
    rc = ops->host_alloc_mapped(host, device, size);
    if (DEV_OK == rc) {
        atomic_fetch_add_explicit(&dev_host_allocs, 1, memory_order_relaxed);
    }
    return rc;
}

DEV_API int dev_fused_allreduce(const dev_fused_allreduce_t *a, const dev_launch_t *launch,
                                dev_stream_t *stream)
{
    static const dev_launch_t defaults = {0, 0};
    const dev_backend_ops_t *ops;
    size_t esize;

    DEV_OPS(ops, __func__);
    DEV_CHECK_ARG(NULL != a && NULL != a->done, __func__);
    DEV_CHECK_ARG(a->nranks >= 1 && a->nranks <= DEV_MULTI_MAX, __func__);
    DEV_CHECK_ARG(a->rank >= 0 && a->rank < a->nranks, __func__);
    DEV_CHECK_ARG(a->seq >= 1 && a->seq < DEV_FUSED_ABANDON, __func__);
    DEV_CHECK_ARG(0 != a->cap && 0 == a->cap % 256, __func__);
    esize = dev_dtype_size(a->dtype);
    if (0 == esize) {
        return dev_fail(DEV_ERR_ARG, "%s: invalid dtype %d", __func__, (int) a->dtype);
    }
    if (a->nranks > 1 && !dev_op_valid(a->op, a->dtype)) {
        return dev_fail(DEV_ERR_UNSUPPORTED, "%s: op %s is not defined on %s", __func__,
                        dev_op_name(a->op), dev_dtype_name(a->dtype));
    }
    if (a->count > a->cap / esize) {
        return dev_fail(DEV_ERR_ARG, "%s: %zu elements of %s do not fit a %zu-byte slot",
                        __func__, a->count, dev_dtype_name(a->dtype), a->cap);
    }
    DEV_CHECK_ARG(0 == a->count || (NULL != a->sbuf && NULL != a->rbuf), __func__);
    for (int r = 0; r < a->nranks; ++r) {
        DEV_CHECK_ARG(NULL != a->slot[r], __func__);
    }
    if (NULL != launch) {
        DEV_CHECK_ARG(launch->nblocks >= 0, __func__);
        DEV_CHECK_ARG(launch->nthreads >= 0 && launch->nthreads <= 1024, __func__);
    } else {
        launch = &defaults;
    }
    return ops->fused_allreduce(a, launch, stream);
}
