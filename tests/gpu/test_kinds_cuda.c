/*
 * test_kinds_cuda.c - every kind of memory a CUDA program allocates, on a real GPU, through
 * coll/gpu's cuda backend, with the addresses passing from one kind to another (issue 8).
 *
 * The program allocates as an application does, with its own CUDA runtime (and the driver API,
 * reached through cudaGetDriverEntryPointByVersion so that nothing links libcuda), and checks on
 * every buffer that dev_mem_classify says the right kind and that MPI_Allreduce (in place),
 * MPI_Bcast and MPI_Allgather on it give the right answer (random int32 data, poisoned outputs):
 *
 *   reuse     cudaMallocHost -> cudaFreeHost -> cudaMalloc of the same size, repeated until the
 *             driver has handed a pinned address to device memory on some rank (fails if it
 *             never does in the tries allowed), and malloc -> free -> cudaMalloc alike;
 *   register  malloc'd memory under cudaHostRegister;
 *   pool      cudaMallocAsync memory: device, not IPC-capable; every rank, then rank 0 alone
 *             (the others cudaMalloc), which needs coll_gpu_uniform_buffers=false;
 *   vmm       cuMemCreate + cuMemAddressReserve + cuMemMap (PyTorch's expandable segments):
 *             device, not IPC-capable;
 *   managed   cudaMallocManaged (small).
 *
 * Where nvidia-smi lists a GPU but CUDA cannot be used, the program FAILS (it does not skip):
 * kinds_cuda.sh runs it only on a machine with a GPU.  Run it with 2 ranks.
 */
#include "mpi/mpitest.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#define COUNT 4096
#define BYTES ((size_t) 2 << 20) /* holds COUNT and the allgather's ranks x COUNT */
#define POISON ((int32_t) 0x7f7f7f7f)
#define REUSE_TRIES 200

typedef CUresult (*fn_mem_create_t)(CUmemGenericAllocationHandle *, size_t,
                                    const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*fn_mem_address_reserve_t)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
                                             unsigned long long);
typedef CUresult (*fn_mem_map_t)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                                 unsigned long long);
typedef CUresult (*fn_mem_set_access_t)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*fn_mem_unmap_t)(CUdeviceptr, size_t);
typedef CUresult (*fn_mem_release_t)(CUmemGenericAllocationHandle);
typedef CUresult (*fn_mem_address_free_t)(CUdeviceptr, size_t);
typedef CUresult (*fn_mem_granularity_t)(size_t *, const CUmemAllocationProp *,
                                         CUmemAllocationGranularity_flags);

static int device = 0;
static uint64_t call_no = 0;
static int32_t host_in[BYTES / sizeof(int32_t)], host_out[BYTES / sizeof(int32_t)];

static int32_t value(int r, size_t i)
{
    uint64_t z = call_no * 0x9E3779B97F4A7C15ull + (uint64_t) r * 1000003u + i + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    int32_t x;
    z ^= z >> 31;
    x = (int32_t) (z % 20001) - 10000;
    return 0 == x ? 1 : x; /* never zero */
}

static int copy(void *dst, const void *src, size_t bytes)
{
    return cudaSuccess == cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) ? 0 : -1;
}

static int compare(const int32_t *got, size_t n, int32_t (*want)(size_t, void *), void *arg,
                   char *diag, const char *what)
{
    for (size_t i = 0; i < n; ++i) {
        int32_t w = want(i, arg);
        if (got[i] != w) {
            mt_diag_add(diag, "%s: element %zu is %d, expected %d; ", what, i, (int) got[i],
                        (int) w);
            return 0;
        }
    }
    return 1;
}

static int32_t want_sum(size_t i, void *arg)
{
    int32_t v = 0;
    (void) arg;
    for (int r = 0; r < mt_size; ++r) {
        v += value(r, i);
    }
    return v;
}

static int32_t want_root(size_t i, void *arg)
{
    return value(*(int *) arg, i);
}

static int32_t want_gather(size_t i, void *arg)
{
    (void) arg;
    return value((int) (i / COUNT), i % COUNT);
}

/*
 * The checks on one buffer of BYTES: its classification, then three collectives that every rank
 * calls (whatever its own buffer's kind).  Returns 1 when right on this rank.
 */
static int exercise(void *buf, dev_mem_kind_t want_kind, bool want_ipc, const char *what,
                    char *diag)
{
    int ok = 1, rc, root;
    char tag[128];
    int32_t *b = buf;
    dev_mem_kind_t kind = dev_mem_classify(buf);

    if (kind != want_kind || dev_mem_ipc_capable(buf) != want_ipc) {
        mt_diag_add(diag, "%s at %p: classified %s (ipc %d), expected %s (ipc %d); ", what, buf,
                    dev_mem_kind_name(kind), (int) dev_mem_ipc_capable(buf),
                    dev_mem_kind_name(want_kind), (int) want_ipc);
        ok = 0;
    }

    /* allreduce in place */
    ++call_no;
    snprintf(tag, sizeof(tag), "%s: MPI_Allreduce", what);
    for (size_t i = 0; i < COUNT; ++i) {
        host_in[i] = value(mt_rank, i);
    }
    ok &= 0 == copy(buf, host_in, COUNT * sizeof(int32_t));
    rc = MPI_Allreduce(MPI_IN_PLACE, buf, COUNT, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (MPI_SUCCESS != rc || 0 != copy(host_out, buf, COUNT * sizeof(int32_t))) {
        mt_diag_add(diag, "%s: %s; ", tag, mt_mpi_error(rc));
        ok = 0;
    } else {
        ok &= compare(host_out, COUNT, want_sum, NULL, diag, tag);
    }

    /* bcast */
    ++call_no;
    root = (int) (call_no % (uint64_t) mt_size);
    snprintf(tag, sizeof(tag), "%s: MPI_Bcast", what);
    for (size_t i = 0; i < COUNT; ++i) {
        host_in[i] = mt_rank == root ? value(root, i) : POISON;
    }
    ok &= 0 == copy(buf, host_in, COUNT * sizeof(int32_t));
    rc = MPI_Bcast(buf, COUNT, MPI_INT, root, MPI_COMM_WORLD);
    if (MPI_SUCCESS != rc || 0 != copy(host_out, buf, COUNT * sizeof(int32_t))) {
        mt_diag_add(diag, "%s: %s; ", tag, mt_mpi_error(rc));
        ok = 0;
    } else {
        ok &= compare(host_out, COUNT, want_root, &root, diag, tag);
    }

    /* allgather from the first block into the blocks after it */
    ++call_no;
    snprintf(tag, sizeof(tag), "%s: MPI_Allgather", what);
    for (size_t i = 0; i < COUNT; ++i) {
        host_in[i] = value(mt_rank, i);
    }
    for (size_t i = COUNT; i < (size_t) (mt_size + 1) * COUNT; ++i) {
        host_in[i] = POISON;
    }
    ok &= 0 == copy(buf, host_in, (size_t) (mt_size + 1) * COUNT * sizeof(int32_t));
    rc = MPI_Allgather(b, COUNT, MPI_INT, b + COUNT, COUNT, MPI_INT, MPI_COMM_WORLD);
    if (MPI_SUCCESS != rc
        || 0 != copy(host_out, b + COUNT, (size_t) mt_size * COUNT * sizeof(int32_t))) {
        mt_diag_add(diag, "%s: %s; ", tag, mt_mpi_error(rc));
        ok = 0;
    } else {
        ok &= compare(host_out, (size_t) mt_size * COUNT, want_gather, NULL, diag, tag);
    }
    return ok;
}

static long sum_over_ranks(long mine)
{
    long all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

/* Pinned (or plain) memory freed, then cudaMalloc of the same size, until an address passes
 * from the first kind to device memory on some rank. */
static void test_reuse(bool pinned)
{
    const char *name = pinned ? "cudaMallocHost" : "malloc";
    char diag[MT_DIAG_LEN] = "";
    long reused = 0, all = 0;
    int ok = 1, tries = 0;

    while (tries < REUSE_TRIES) {
        void *h = NULL, *d = NULL;
        ++tries;
        if (pinned ? cudaSuccess != cudaMallocHost(&h, BYTES) : NULL == (h = malloc(BYTES))) {
            mt_diag_add(diag, "%s(%zu) failed; ", name, BYTES);
            ok = 0;
            break;
        }
        ok &= exercise(h, DEV_MEM_HOST, false, name, diag);
        if (pinned) {
            cudaFreeHost(h);
        } else {
            free(h);
        }
        if (cudaSuccess != cudaMalloc(&d, BYTES)) {
            mt_diag_add(diag, "cudaMalloc(%zu) failed; ", BYTES);
            ok = 0;
            break;
        }
        reused += d == h;
        ok &= exercise(d, DEV_MEM_DEVICE, true, d == h ? "cudaMalloc at a reused address"
                                                       : "cudaMalloc", diag);
        cudaFree(d);
        all = sum_over_ranks(reused);
        if (all > 0 && tries >= 4) {
            break;
        }
    }
    mt_check(ok, diag, "%s -> free -> cudaMalloc, %d rounds: classification and collectives "
             "right on both kinds", name, tries);
    if (pinned) {
        mt_check(all > 0, NULL, "the driver handed a cudaMallocHost address to cudaMalloc (%ld "
                 "times over all ranks in %d rounds)", all, tries);
    } else {
        tap_diag("a malloc address passed to cudaMalloc %ld times over all ranks in %d rounds",
                 all, tries);
    }
}

static void test_registered(void)
{
    char diag[MT_DIAG_LEN] = "";
    int ok = 1;
    void *h = malloc(BYTES);

    if (NULL == h || cudaSuccess != cudaHostRegister(h, BYTES, cudaHostRegisterDefault)) {
        mt_diag_add(diag, "cudaHostRegister failed; ");
        ok = 0;
    }
    ok &= exercise(h, DEV_MEM_HOST, false, "cudaHostRegister", diag);
    cudaHostUnregister(h);
    ok &= exercise(h, DEV_MEM_HOST, false, "malloc after cudaHostUnregister", diag);
    free(h);
    mt_check(ok, diag, "cudaHostRegister'ed memory, and the same after unregistering");
}

static void test_pool(void)
{
    char diag[MT_DIAG_LEN] = "";
    int ok = 1;

    for (int round = 0; round < 2; ++round) {
        /* round 0: pool memory on every rank; round 1: on rank 0 only */
        bool pool = 0 == round || 0 == mt_rank;
        void *p = NULL;
        cudaError_t err = pool ? cudaMallocAsync(&p, BYTES, (cudaStream_t) 0)
                               : cudaMalloc(&p, BYTES);
        if (cudaSuccess != err || cudaSuccess != cudaStreamSynchronize((cudaStream_t) 0)) {
            mt_diag_add(diag, "%s failed: %s; ", pool ? "cudaMallocAsync" : "cudaMalloc",
                        cudaGetErrorString(err));
            ok = 0;
        }
        ok &= exercise(p, DEV_MEM_DEVICE, !pool, pool ? "cudaMallocAsync" : "cudaMalloc", diag);
        if (pool) {
            cudaFreeAsync(p, (cudaStream_t) 0);
            cudaStreamSynchronize((cudaStream_t) 0);
        } else {
            cudaFree(p);
        }
    }
    mt_check(ok, diag, "cudaMallocAsync pool memory on every rank, then on rank 0 alone: "
             "device, not IPC-capable, collectives right");
}

static int driver_fn(const char *name, void **fn)
{
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess == cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault,
                                                           &found)
                   && cudaDriverEntryPointSuccess == found && NULL != *fn
               ? 0
               : -1;
}

static void test_vmm(void)
{
    fn_mem_create_t create;
    fn_mem_address_reserve_t reserve;
    fn_mem_map_t map;
    fn_mem_set_access_t set_access;
    fn_mem_unmap_t unmap;
    fn_mem_release_t release;
    fn_mem_address_free_t address_free;
    fn_mem_granularity_t granularity;
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr ptr = 0;
    size_t gran = 0, size;
    char diag[MT_DIAG_LEN] = "";
    int ok = 1;

    if (0 != driver_fn("cuMemCreate", (void **) &create)
        || 0 != driver_fn("cuMemAddressReserve", (void **) &reserve)
        || 0 != driver_fn("cuMemMap", (void **) &map)
        || 0 != driver_fn("cuMemSetAccess", (void **) &set_access)
        || 0 != driver_fn("cuMemUnmap", (void **) &unmap)
        || 0 != driver_fn("cuMemRelease", (void **) &release)
        || 0 != driver_fn("cuMemAddressFree", (void **) &address_free)
        || 0 != driver_fn("cuMemGetAllocationGranularity", (void **) &granularity)) {
        mt_check(0, "the driver does not provide the VMM API", "VMM memory");
        return;
    }
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (CUDA_SUCCESS != granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) || 0 == gran) {
        gran = (size_t) 2 << 20;
    }
    size = (BYTES + gran - 1) / gran * gran;
    if (CUDA_SUCCESS != create(&handle, size, &prop, 0)
        || CUDA_SUCCESS != reserve(&ptr, size, 0, 0, 0)
        || CUDA_SUCCESS != map(ptr, size, 0, handle, 0)
        || CUDA_SUCCESS != set_access(ptr, size, &access, 1)) {
        mt_diag_add(diag, "cuMemCreate/cuMemAddressReserve/cuMemMap/cuMemSetAccess failed; ");
        ok = 0;
    }
    ok &= exercise((void *) (uintptr_t) ptr, DEV_MEM_DEVICE, false, "cuMemCreate+cuMemMap",
                   diag);
    unmap(ptr, size);
    release(handle);
    address_free(ptr, size);
    mt_check(ok, diag, "VMM memory (cuMemCreate + cuMemMap): device, not IPC-capable, "
             "collectives right");
}

static void test_managed(void)
{
    char diag[MT_DIAG_LEN] = "";
    void *m = NULL;
    int ok = cudaSuccess == cudaMallocManaged(&m, BYTES, cudaMemAttachGlobal);

    if (!ok) {
        mt_diag_add(diag, "cudaMallocManaged failed; ");
    }
    ok &= exercise(m, DEV_MEM_MANAGED, false, "cudaMallocManaged", diag);
    cudaFree(m);
    mt_check(ok, diag, "managed memory: managed, not IPC-capable, collectives right");
}

int main(int argc, char **argv)
{
    char diag[MT_DIAG_LEN] = "";
    int count = 0, local = 0, ok;
    cudaError_t err;
    MPI_Comm node;

    mt_init(&argc, &argv);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    /* this is a GPU machine (kinds_cuda.sh checked nvidia-smi): CUDA must work */
    err = cudaGetDeviceCount(&count);
    ok = cudaSuccess == err && count > 0;
    if (ok) {
        device = local % count;
        err = cudaSetDevice(device);
        ok = cudaSuccess == err && cudaSuccess == (err = cudaFree(NULL));
    }
    if (!ok) {
        mt_diag_add(diag, "CUDA runtime: %s", cudaGetErrorString(err));
    }
    if (ok && DEV_OK != dev_open(DEV_BACKEND_CUDA)) {
        mt_diag_add(diag, "dev_open(cuda): %s", dev_error_string());
        ok = 0;
    }
    if (!mt_check(ok, diag, "CUDA is usable on every rank (%d device(s))", count)) {
        return mt_finish(); /* fails: a GPU that CUDA cannot use is an error here, not a skip */
    }
    mt_device_is_open = 1;
    diag[0] = '\0';
    mt_diag_add(diag, "the cache is off: Open MPI's memory hooks cannot see munmap here?");
    mt_check(dev_mem_classify_cache_enabled(), diag,
             "coll/gpu turned the classification cache on (memory hooks present)");

    test_reuse(true);
    test_reuse(false);
    test_registered();
    test_pool();
    test_vmm();
    test_managed();
    return mt_finish();
}
