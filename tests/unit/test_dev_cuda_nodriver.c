/*
 * test_dev_cuda_nodriver.c - the cuda backend where there may be no GPU.
 *
 * Without a driver or a device, dev_open(cuda) must fail cleanly (DEV_ERR_NO_DRIVER or
 * DEV_ERR_NO_DEVICE, a message, no crash, no state left behind).  With a GPU it runs the basic
 * checks instead: devices, allocation, classification (and its cache), ranges, copies, a
 * stream with an event, IPC refusal in-process, every reduce and every multi-source reduce
 * (dev_reduce_multi: vector and scalar paths, launch shapes, in place) against the oracle (the
 * 16-bit floats also for every encoding, their ties and the fold in float), and
 * that the current device follows the context the application made current.  Built
 * without the cuda backend, it checks that dev_open(cuda) says so (DEV_ERR_UNSUPPORTED).
 * Where nvidia-smi lists a GPU, the backend must open: a build without it, or a driver it cannot
 * use, fails here instead of passing as "no GPU".
 */
#include "coll_gpu_config.h"
#include "dev.h"
#include "tap.h"
#include "test_dev_oracle.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void without_gpu(int rc)
{
    tap_ok(DEV_ERR_NO_DRIVER == rc || DEV_ERR_NO_DEVICE == rc,
           "dev_open(cuda) fails with NO_DRIVER or NO_DEVICE (%s)", dev_status_name(rc));
    tap_ok('\0' != dev_error_string()[0], "with a message: %s", dev_error_string());
    tap_ok(DEV_BACKEND_NONE == dev_backend(), "no backend is left open");
    tap_ok(dev_open(DEV_BACKEND_CUDA) == rc, "a second attempt answers the same");
    tap_ok(DEV_MEM_HOST == dev_mem_classify(&rc), "classify still answers host");
    tap_ok(DEV_OK == dev_open(DEV_BACKEND_EMULATED), "the emulated backend opens afterwards");
    dev_close();
}

/* The driver calls an application's runtime makes in cudaSetDevice(n): retain device n's
 * primary context and make it current on the calling thread.  Types spelled out so that the
 * test needs no CUDA header. */
typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_primary_retain_fn)(void **, int);
typedef int (*cu_primary_release_fn)(int);
typedef int (*cu_ctx_set_current_fn)(void *);

typedef struct {
    void *lib;
    cu_init_fn init;
    cu_device_get_fn device_get;
    cu_primary_retain_fn retain;
    cu_primary_release_fn release;
    cu_ctx_set_current_fn set_current;
} app_driver_t;

static bool app_driver_open(app_driver_t *d)
{
    d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (NULL == d->lib) {
        return false;
    }
    d->init = (cu_init_fn) dlsym(d->lib, "cuInit");
    d->device_get = (cu_device_get_fn) dlsym(d->lib, "cuDeviceGet");
    d->retain = (cu_primary_retain_fn) dlsym(d->lib, "cuDevicePrimaryCtxRetain");
    d->release = (cu_primary_release_fn) dlsym(d->lib, "cuDevicePrimaryCtxRelease_v2");
    d->set_current = (cu_ctx_set_current_fn) dlsym(d->lib, "cuCtxSetCurrent");
    return NULL != d->init && NULL != d->device_get && NULL != d->retain && NULL != d->release
           && NULL != d->set_current && 0 == d->init(0);
}

/* As the application's cudaSetDevice(ordinal) does; returns the CUdevice, or -1. */
static int app_set_device(app_driver_t *d, int ordinal)
{
    int dev = -1;
    void *ctx = NULL;
    if (0 != d->device_get(&dev, ordinal) || 0 != d->retain(&ctx, dev)
        || 0 != d->set_current(ctx)) {
        return -1;
    }
    return dev;
}

static void *current_device_of_new_thread(void *arg)
{
    int *ordinal = arg;
    if (DEV_OK != dev_current_device(ordinal)) {
        *ordinal = -2;
    }
    return NULL;
}

/* dev_current_device and the calls after it follow the device whose context the application
 * made current, not our runtime's own current device. */
static void follows_application(int count)
{
    app_driver_t drv;
    int cur = -1, on = -1, last = count - 1, dev_last, dev0, other = -1;
    void *p = NULL;
    pthread_t th;

    if (!tap_ok(app_driver_open(&drv), "load the driver as an application's runtime would")) {
        return;
    }
    dev_last = app_set_device(&drv, last);
    tap_ok(dev_last >= 0 && DEV_OK == dev_current_device(&cur) && last == cur,
           "after the application's cudaSetDevice(%d), dev_current_device says %d", last, cur);
    tap_ok(DEV_OK == dev_mem_alloc(&p, 4096) && DEV_OK == dev_mem_device(p, &on) && last == on,
           "and dev_mem_alloc allocates on device %d (%d)", last, on);
    {
        float one[4] = {1, 2, 3, 4}, back[4] = {0};
        const void *srcs[2] = {p, p};
        void *dsts[1] = {(char *) p + 64};
        dev_stream_t *st = NULL;
        bool ok = DEV_OK == dev_stream_create(&st) && DEV_OK == dev_memcpy(p, one, sizeof(one))
                  && DEV_OK == dev_reduce_multi(dsts, 1, srcs, 2, 4, DEV_T_FLOAT, DEV_OP_SUM,
                                                NULL, st)
                  && DEV_OK == dev_stream_sync(st)
                  && DEV_OK == dev_memcpy(back, (char *) p + 64, sizeof(back));
        tap_ok(ok && 2 == back[0] && 8 == back[3],
               "a stream and a kernel there work on that device's memory (%s)",
               dev_error_string());
        dev_stream_destroy(st);
    }
    dev_mem_free(p);
    pthread_create(&th, NULL, current_device_of_new_thread, &other);
    pthread_join(th, NULL);
    tap_ok(other >= 0, "a thread with no context current gets our runtime's device (%d)", other);
    dev0 = app_set_device(&drv, 0);
    tap_ok(dev0 >= 0 && DEV_OK == dev_current_device(&cur) && 0 == cur,
           "after the application's cudaSetDevice(0), dev_current_device says 0 (%d)", cur);
    if (dev_last >= 0) {
        drv.release(dev_last);
    }
    if (dev0 >= 0) {
        drv.release(dev0);
    }
}

static void with_gpu(void)
{
    enum { N = 1 << 20 };
    int count = 0, stack = 0;
    void *d = NULL, *m = NULL, *h = NULL, *base = NULL;
    unsigned char *src = malloc(N), *back = malloc(N);
    char pci[32] = "";
    dev_uuid_t uuid;
    size_t size = 0;
    uint64_t id = 0, id2 = 0;
    dev_ipc_handle_t handle;
    void *self = NULL;
    bool ok;

    for (size_t i = 0; i < N; ++i) {
        src[i] = (unsigned char) (1 + i % 251);
    }
    tap_ok(DEV_OK == dev_device_count(&count) && count >= 1, "%d device(s)", count);
    tap_ok(DEV_OK == dev_device_uuid(0, &uuid), "uuid of device 0");
    tap_ok(DEV_OK == dev_device_pci_bus_id(0, pci, sizeof(pci)) && strlen(pci) >= 12,
           "pci bus id of device 0: %s", pci);
    tap_ok(DEV_OK == dev_mem_alloc(&d, N), "dev_mem_alloc (%s)", dev_error_string());
    tap_ok(DEV_OK == dev_mem_alloc_managed(&m, N), "dev_mem_alloc_managed");
    tap_ok(DEV_OK == dev_host_alloc(&h, N), "dev_host_alloc");
    /* the cache on (this program releases no host page while it runs): heap and stack pages
     * are answered from it in the second round, everything else by the driver */
    dev_mem_classify_cache_enable(true);
    for (int rep = 0; rep < 2; ++rep) {
        ok = DEV_MEM_DEVICE == dev_mem_classify(d)
             && DEV_MEM_DEVICE == dev_mem_classify((char *) d + N - 1)
             && DEV_MEM_MANAGED == dev_mem_classify((char *) m + 4096)
             && DEV_MEM_HOST == dev_mem_classify(h) && DEV_MEM_HOST == dev_mem_classify(src)
             && DEV_MEM_HOST == dev_mem_classify(&stack);
        tap_ok(ok, "classify device, managed, pinned, heap, stack (round %d)", rep + 1);
    }
    dev_mem_classify_flush();
    tap_ok(DEV_MEM_DEVICE == dev_mem_classify((char *) d + 12345), "classify after a flush");
    tap_ok(DEV_OK == dev_mem_range((char *) d + 100, &base, &size, &id) && base == d
               && size >= N && 0 != id,
           "dev_mem_range of an interior pointer");
    ok = DEV_OK == dev_memset(d, 0x5a, N) && DEV_OK == dev_memcpy((char *) d + 7, src, N - 7)
         && DEV_OK == dev_memcpy(back, d, N);
    tap_ok(ok && 0x5a == back[6] && 0 == memcmp(back + 7, src, N - 7),
           "memset, host to device at an offset, device to host");
    ok = DEV_OK == dev_memcpy(m, d, N) && DEV_OK == dev_memcpy(h, m, N)
         && 0 == memcmp((char *) h + 7, src, N - 7);
    tap_ok(ok, "device to managed to pinned");
    {
        /* a stream, an event, an async copy and a reduce ordered on it */
        dev_stream_t *st = NULL;
        dev_event_t *ev = NULL;
        int q;
        float two[2] = {1.5f, -2.0f}, sum[2] = {0, 0};
        ok = DEV_OK == dev_stream_create(&st) && DEV_OK == dev_event_create(&ev);
        ok = ok && DEV_OK == dev_memcpy_async(d, two, sizeof(two), st)
             && DEV_OK == dev_reduce((char *) d + 64, d, d, 2, DEV_T_FLOAT, DEV_OP_SUM, st)
             && DEV_OK == dev_memcpy_async(sum, (char *) d + 64, sizeof(sum), st)
             && DEV_OK == dev_event_record(ev, st);
        q = dev_event_query(ev);
        ok = ok && (DEV_OK == q || 1 == q) && DEV_OK == dev_event_sync(ev)
             && DEV_OK == dev_event_query(ev);
        tap_ok(ok && 3.0f == sum[0] && -4.0f == sum[1],
               "copy, reduce, copy back and an event on one stream (%s)", dev_error_string());
        tap_ok(DEV_OK == dev_event_destroy(ev) && DEV_OK == dev_stream_destroy(st),
               "destroy the event and the stream");
    }
    {
        /* pool memory: device memory that the legacy IPC cannot export, refused cleanly */
        void *pool = NULL;
        tap_ok(DEV_OK == dev_mem_alloc_pool(&pool, N) && DEV_MEM_DEVICE == dev_mem_classify(pool),
               "dev_mem_alloc_pool gives device memory (%s)", dev_error_string());
        tap_ok(dev_mem_ipc_capable(d) && !dev_mem_ipc_capable(pool) && !dev_mem_ipc_capable(m)
                   && !dev_mem_ipc_capable(h) && !dev_mem_ipc_capable(src),
               "only the cudaMalloc allocation is IPC-capable (not pool, managed, pinned, heap)");
        tap_ok(DEV_ERR_UNSUPPORTED == dev_ipc_export(pool, &handle)
                   && DEV_ERR_UNSUPPORTED == dev_ipc_export(m, &handle),
               "dev_ipc_export of pool and managed memory is refused (%s)", dev_error_string());
        ok = DEV_OK == dev_memcpy(pool, src, N) && DEV_OK == dev_memcpy(back, pool, N)
             && 0 == memcmp(back, src, N);
        tap_ok(ok && DEV_OK == dev_mem_free(pool), "copies through pool memory; dev_mem_free");
    }
    tap_ok(DEV_OK == dev_ipc_export(d, &handle), "dev_ipc_export");
    tap_ok(DEV_OK != dev_ipc_import(&handle, &self), "importing one's own export fails");
    tap_ok(DEV_OK == dev_mem_free(d), "dev_mem_free");
    tap_ok(DEV_MEM_DEVICE != dev_mem_classify(d),
           "a pointer freed through dev_mem_free is no longer device");
    tap_ok(DEV_OK == dev_mem_alloc(&d, N) && DEV_OK == dev_mem_range(d, &base, &size, &id2)
               && id2 != id,
           "a new allocation has a new buffer id");
    oracle_check_all_reduces("cuda", false);
    oracle_check_half("cuda", false);
    {
        int cur = -1, on = -1;
        tap_ok(DEV_OK == dev_current_device(&cur) && DEV_OK == dev_mem_device(d, &on) && on == cur,
               "dev_mem_device of device memory is the current device (%d, %d)", on, cur);
        tap_ok(DEV_OK == dev_mem_device((char *) m + 4096, &on) && on == cur,
               "dev_mem_device of managed memory is the device it was allocated on (%d)", on);
        tap_ok(DEV_ERR_ARG == dev_mem_device(h, &on) && DEV_ERR_ARG == dev_mem_device(src, &on),
               "pinned and pageable host memory have no device");
    }
    {
        /* three sources, two destinations, on a stream with an explicit launch shape */
        enum { C = 100000 };
        const size_t bytes = C * sizeof(float);
        dev_stream_t *st = NULL;
        dev_launch_t shape = {7, 96};
        float *hx = malloc(bytes), *hy = malloc(bytes);
        void *x = NULL, *y = NULL, *z = NULL;
        bool same = true;
        ok = NULL != hx && NULL != hy && DEV_OK == dev_stream_create(&st)
             && DEV_OK == dev_mem_alloc(&x, bytes) && DEV_OK == dev_mem_alloc(&y, bytes)
             && DEV_OK == dev_mem_alloc(&z, bytes);
        for (size_t i = 0; ok && i < C; ++i) {
            hx[i] = (float) (i % 1000) * 0.25f + 1.0f;
        }
        if (ok) {
            const void *srcs[3] = {x, d, x};
            void *dsts[2] = {y, z};
            ok = DEV_OK == dev_memcpy_async(x, hx, bytes, st)
                 && DEV_OK == dev_memcpy_async(d, hx, bytes, st)
                 && DEV_OK == dev_reduce_multi(dsts, 2, srcs, 3, C, DEV_T_FLOAT, DEV_OP_SUM,
                                               &shape, st)
                 && DEV_OK == dev_memcpy_async(hy, z, bytes, st) && DEV_OK == dev_stream_sync(st);
            for (size_t i = 0; ok && same && i < C; ++i) {
                same = hy[i] == (hx[i] + hx[i]) + hx[i];
            }
        }
        tap_ok(ok && same, "reduce_multi ordered on a stream between copies, 7 blocks of 96 (%s)",
               dev_error_string());
        dev_stream_destroy(st);
        dev_mem_free(x);
        dev_mem_free(y);
        dev_mem_free(z);
        free(hx);
        free(hy);
    }
    oracle_check_all_multi("cuda");
    oracle_check_multi_paths("cuda");
    oracle_check_half_fold("cuda");
    follows_application(count);
    dev_mem_free(d);
    dev_mem_free(m);
    dev_host_free(h);
    free(src);
    free(back);
}

/* The GPUs nvidia-smi lists ("GPU 0: NVIDIA H200 (UUID: GPU-...)"): 0 without nvidia-smi. */
static int gpus_listed(void)
{
    char line[512];
    int n = 0;
    FILE *p = popen("nvidia-smi -L 2>/dev/null", "r");

    if (NULL == p) {
        return 0;
    }
    while (NULL != fgets(line, sizeof(line), p)) {
        n += (0 == strncmp(line, "GPU ", 4));
    }
    pclose(p);
    return n;
}

int main(void)
{
#ifdef COLL_GPU_HAVE_CUDA
    const bool built = true;
#else
    const bool built = false;
#endif
    int listed = gpus_listed();
    int rc = dev_open(DEV_BACKEND_CUDA);

    tap_diag("cuda backend %s; nvidia-smi lists %d GPU(s); dev_open(cuda): %s",
             built ? "built" : "not built", listed, dev_status_name(rc));
    if (DEV_ERR_UNSUPPORTED == rc) {
        /* built --without-cuda: the refusal is what there is to check, and only there */
        tap_ok(!built, "dev_open(cuda) is DEV_ERR_UNSUPPORTED only where the backend was not "
                       "built (this build: %s)", built ? "built" : "not built");
        tap_ok(NULL != strstr(dev_error_string(), "not built"), "with a message: %s",
               dev_error_string());
        tap_ok(DEV_BACKEND_NONE == dev_backend(), "no backend is left open");
    } else if (DEV_OK == rc) {
        tap_diag("a GPU is present: running the basic cuda checks");
        with_gpu();
        dev_close();
    } else {
        without_gpu(rc);
    }
    if (DEV_OK != rc) {
        tap_ok(0 == listed, "no GPU is listed by nvidia-smi (%d), as the cuda backend that did "
                            "not open implies (a GPU machine needs configure --with-cuda and a "
                            "working driver)", listed);
    }
    printf("# %d passed, %d failed\n", tap_count_ - tap_failures(), tap_failures());
    return tap_done();
}
