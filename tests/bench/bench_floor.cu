/*
 * bench_floor.cu - the latency floor that coll_gpu_bench prints in its header.
 *
 * Any collective that touches the GPU costs at least one kernel launch plus the host seeing it
 * finish.  The goal for small messages is stated against that floor ("≤ 1.25× one empty kernel
 * launch plus host-observed completion, measured in the same run"), so the benchmark measures it
 * on the same device, in the same processes, just before the collectives:
 *
 *   spin  launch a one-thread kernel that stores a flag into mapped pinned host memory, then
 *         spin on the flag from the host (the cheapest completion a host can observe);
 *   sync  launch an empty kernel, then cudaStreamSynchronize.
 *
 * Each figure is the median of `reps` individually timed launches, after a warm-up.
 */
#define COLL_GPU_BENCH_NO_MPI 1
#include "bench.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

#include <cuda_runtime.h>

__global__ void bench_floor_flag_kernel(volatile unsigned int *flag, unsigned int value)
{
    *flag = value;
    __threadfence_system();
}

__global__ void bench_floor_empty_kernel(void)
{
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec * 1e-3;
}

static double median_of(std::vector<double> &v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return 0 == n % 2 ? 0.5 * (v[n / 2 - 1] + v[n / 2]) : v[n / 2];
}

#define FLOOR_CHECK(call)                                                                   \
    do {                                                                                    \
        cudaError_t err_ = (call);                                                          \
        if (cudaSuccess != err_) {                                                          \
            snprintf(why, len, "%s: %s", #call, cudaGetErrorString(err_));                  \
            goto out;                                                                       \
        }                                                                                   \
    } while (0)

extern "C" int bench_floor_measure(int ordinal, int reps, double *spin_us, double *sync_us,
                                   char *why, size_t len)
{
    const int warmup = 50;
    int rc = -1;
    cudaStream_t stream = NULL;
    volatile unsigned int *hflag = NULL;
    unsigned int *dflag = NULL;
    unsigned int value = 0;
    std::vector<double> spin, sync;

    if (reps < 1) {
        reps = 1;
    }
    spin.reserve(reps);
    sync.reserve(reps);
    FLOOR_CHECK(cudaSetDevice(ordinal));
    FLOOR_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    FLOOR_CHECK(cudaHostAlloc((void **) &hflag, sizeof(*hflag), cudaHostAllocMapped));
    FLOOR_CHECK(cudaHostGetDevicePointer((void **) &dflag, (void *) hflag, 0));
    *hflag = 0;

    for (int i = 0; i < warmup + reps; ++i) {
        double t0 = now_us();
        ++value;
        bench_floor_flag_kernel<<<1, 1, 0, stream>>>(dflag, value);
        FLOOR_CHECK(cudaGetLastError());
        while (*hflag != value) {
            /* spin: the kernel's store reaches host memory over PCIe/C2C */
        }
        double t1 = now_us();
        if (i >= warmup) {
            spin.push_back(t1 - t0);
        }
    }
    FLOOR_CHECK(cudaStreamSynchronize(stream));

    for (int i = 0; i < warmup + reps; ++i) {
        double t0 = now_us();
        bench_floor_empty_kernel<<<1, 1, 0, stream>>>();
        FLOOR_CHECK(cudaGetLastError());
        FLOOR_CHECK(cudaStreamSynchronize(stream));
        double t1 = now_us();
        if (i >= warmup) {
            sync.push_back(t1 - t0);
        }
    }

    *spin_us = median_of(spin);
    *sync_us = median_of(sync);
    rc = 0;
out:
    if (NULL != stream) {
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
    }
    if (NULL != hflag) {
        cudaFreeHost((void *) hflag);
    }
    return rc;
}

/* ---- the compute phase of the overlap figure (coll_gpu_bench -O) ------------------------- */

/* One block of one warp spins until the global timer has advanced ns: a GPU phase of known
 * length that leaves every other SM to whatever runs beside it (the collective's kernels). */
__global__ void bench_compute_kernel(unsigned long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

static cudaStream_t compute_stream;

extern "C" int bench_compute_start(double us, char *why, size_t len)
{
    int rc = -1;
    if (NULL == compute_stream) {
        FLOOR_CHECK(cudaStreamCreateWithFlags(&compute_stream, cudaStreamNonBlocking));
    }
    bench_compute_kernel<<<1, 32, 0, compute_stream>>>((unsigned long long) (us * 1000.0));
    FLOOR_CHECK(cudaGetLastError());
    rc = 0;
out:
    return rc;
}

extern "C" int bench_compute_wait(char *why, size_t len)
{
    int rc = -1;
    FLOOR_CHECK(cudaStreamSynchronize(compute_stream));
    rc = 0;
out:
    return rc;
}
