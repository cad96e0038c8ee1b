/*
 * dev_backend.h - what a backend of the device layer provides (internal to libcoll_gpu_dev).
 *
 * dev.c owns the lifecycle (reference count, which backend is open), the argument checks
 * common to every backend, the dtype/op tables and the thread-local error text; a backend
 * fills one table of functions.  Backends may assume:
 *   - open() is called once, under dev.c's lock, and close() once after the last dev_close();
 *   - sizes are non-zero where a zero would be a no-op (dev.c answers those itself);
 *   - dev_reduce() is only called with dev_op_valid(op, dtype);
 *   - reduce_multi() is only called with count > 0, 1 <= nsrc, ndst <= DEV_MULTI_MAX, non-NULL
 *     pointers, a valid dtype, dev_op_valid(op, dtype) unless nsrc == 1, and a launch shape
 *     whose fields are 0 (default) or in range (launch itself is never NULL).
 */
#ifndef COLL_GPU_DEV_BACKEND_H
#define COLL_GPU_DEV_BACKEND_H

#include "coll_gpu_config.h"

#include "dev.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dev_backend_ops {
    const char *name;

    int (*open)(void);
    void (*close)(void);

    int (*device_count)(int *count);
    int (*current_device)(int *ordinal);
    int (*set_device)(int ordinal);
    int (*device_enter)(int ordinal, dev_device_scope_t *scope);
    void (*device_leave)(dev_device_scope_t *scope);
    int (*device_uuid)(int ordinal, dev_uuid_t *uuid);
    int (*device_pci_bus_id)(int ordinal, char *buf, size_t len);
    int (*device_can_access_peer)(int ordinal, int peer_ordinal, bool *can);

    /* The driver's answer for ptr, uncached; *known: whether the driver knows the memory at
     * all (false only for plain host memory; pinned and registered host memory are known).
     * When the driver cannot answer, the kind is DEV_MEM_HOST and *known true (never cached). */
    dev_mem_kind_t (*mem_query)(const void *ptr, bool *known);
    int (*mem_range)(const void *ptr, void **base, size_t *size, uint64_t *buffer_id);
    int (*mem_device)(const void *ptr, int *ordinal);
    int (*mem_alloc)(void **ptr, size_t size);
    int (*mem_alloc_managed)(void **ptr, size_t size);
    int (*mem_alloc_pool)(void **ptr, size_t size);
    bool (*mem_ipc_capable)(const void *ptr);
    int (*mem_free)(void *ptr);
    int (*host_alloc)(void **ptr, size_t size);
    int (*host_free)(void *ptr);

    int (*stream_create)(dev_stream_t **stream);
    int (*stream_destroy)(dev_stream_t *stream);
    int (*stream_sync)(dev_stream_t *stream);
    int (*event_create)(dev_event_t **event);
    int (*event_destroy)(dev_event_t *event);
    int (*event_record)(dev_event_t *event, dev_stream_t *stream);
    int (*event_sync)(dev_event_t *event);
    int (*event_query)(dev_event_t *event);

    int (*memcpy_async)(void *dst, const void *src, size_t bytes, dev_stream_t *stream);
    int (*memcpy_sync)(void *dst, const void *src, size_t bytes);
    int (*memset_sync)(void *dst, int value, size_t bytes);

    int (*ipc_export)(void *base, dev_ipc_handle_t *handle);
    int (*ipc_import)(const dev_ipc_handle_t *handle, void **ptr);
    int (*ipc_close)(void *ptr);

    int (*reduce)(void *dst, const void *a, const void *b, size_t count, dev_dtype_t dtype,
                  dev_op_t op, dev_stream_t *stream);
    int (*reduce_multi)(void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                        size_t count, dev_dtype_t dtype, dev_op_t op,
                        const dev_launch_t *launch, dev_stream_t *stream);

    /* ---- fast-path additions (dev.h's block of the same name); dev.c checks the arguments */
    int (*stream_wait_event)(dev_stream_t *stream, dev_event_t *event);
    int (*stream_query)(dev_stream_t *stream);
    int (*host_alloc_mapped)(void **host, void **device, size_t size);
    int (*fused_allreduce)(const dev_fused_allreduce_t *args, const dev_launch_t *launch,
                           dev_stream_t *stream);
    /* ---- end of fast-path additions */
} dev_backend_ops_t;

extern const dev_backend_ops_t dev_emulated_ops;
#ifdef COLL_GPU_HAVE_CUDA
extern const dev_backend_ops_t dev_cuda_ops;
#endif

#ifndef __cplusplus /* C11 atomics; the CUDA sources need neither */
/* dev.c: the open backend (NULL when none).  Written under dev.c's lock, read without it. */
extern const dev_backend_ops_t *_Atomic dev_ops;
#endif
/* dev_classify.c: forget the classification cache (backend opened or closed). */
void dev_classify_reset(void);

/* Forget the failure text of this thread. */

#ifdef COLL_GPU_HAVE_CUDA
/* reduce_kernels.cu: multiprocessors of a device, asked of the runtime once (132 when it cannot
 * tell). */
int dev_cuda_multiprocessors(int device);
/* reduce_kernels.cu: enqueue dst[i] = a[i] op b[i] on a CUDA stream (a cudaStream_t, passed
 * as void * so that this header needs no CUDA header).  Returns a cudaError_t:
 * cudaErrorInvalidValue for a pair that dev_op_valid() rejects. */
int dev_cuda_reduce_launch(void *dst, const void *a, const void *b, size_t count,
                           dev_dtype_t dtype, dev_op_t op, void *stream);
/* allreduce_multi.cu: enqueue dev_reduce_multi on a CUDA stream, same conventions.  device is
 * the ordinal the launch runs on (sizes the default grid).  Arguments are those dev.c has
 * checked. */
int dev_cuda_reduce_multi_launch(void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                                 size_t count, dev_dtype_t dtype, dev_op_t op, int nblocks,
                                 int nthreads, int device, void *stream);
/* allreduce_fused.cu: enqueue dev_fused_allreduce (arguments as dev.c checked them) on a CUDA
 * stream; returns a cudaError_t. */
int dev_cuda_fused_allreduce_launch(const dev_fused_allreduce_t *args, int nblocks, int nthreads,
                                    void *stream);
#endif

#ifdef __cplusplus
}
#endif

#endif /* COLL_GPU_DEV_BACKEND_H */
