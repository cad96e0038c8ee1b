/*
 * test_dev_classify.c - the classification cache of the device layer (kernels/dev_classify.c)
 * on the emulated backend in address-reuse mode (COLL_GPU_EMULATED_REUSE=1: a freed allocation's
 * addresses go to the next allocation of any kind, without an munmap, as the CUDA driver does).
 *
 * What must hold: an answer is always the driver's answer of now.  Plain host pages are served
 * from the cache (checked through the query counter), and stop being served once
 * dev_mem_forget() says they left the address space; pinned (driver-known) host memory, device,
 * pool and managed memory, and unreadable pages are never cached, so an address that passes
 * from pinned to device memory, or from a reservation to device memory, is classified right at
 * once; a release during a lookup wins; the cache stays off unless it is turned on.
 */
#define _GNU_SOURCE
#include "dev.h"
#include "tap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIZE (64 * 1024) /* page-rounded size shared by every allocation of the reuse checks */
#define TRIES 64
/* Sizes that no earlier free left a reservation for (reuse mode would hand that reservation to
 * the device allocation first): the kernel's mmap chooses, and takes the hole just unmapped. */
#define FRESH_SIZE(i) ((size_t) (128 + 4 * (i)) * 1024)

static uint64_t queries(void)
{
    dev_classify_stats_t st;
    dev_mem_classify_stats(&st);
    return st.queries;
}

static uint64_t stores(void)
{
    dev_classify_stats_t st;
    dev_mem_classify_stats(&st);
    return st.stores;
}

/* Classify ptr twice: how many driver queries did the second call make (0: a cache hit)? */
static uint64_t second_call_queries(const void *ptr, dev_mem_kind_t *kind)
{
    uint64_t before;
    *kind = dev_mem_classify(ptr);
    before = queries();
    *kind = dev_mem_classify(ptr);
    return queries() - before;
}

static void test_off_by_default(void)
{
    char *heap = malloc(100);
    dev_mem_kind_t kind;

    tap_ok(!dev_mem_classify_cache_enabled(), "the cache starts off");
    tap_ok(1 == second_call_queries(heap, &kind) && DEV_MEM_HOST == kind,
           "with the cache off every classification asks the driver");
    setenv("COLL_GPU_CLASSIFY_CACHE", "0", 1);
    tap_ok(!dev_mem_classify_cache_enable(true) && !dev_mem_classify_cache_enabled(),
           "COLL_GPU_CLASSIFY_CACHE=0 keeps it off (%s)", dev_error_string());
    tap_ok(1 == second_call_queries(heap, &kind), "and classification still asks every time");
    unsetenv("COLL_GPU_CLASSIFY_CACHE");
    tap_ok(dev_mem_classify_cache_enable(true) && dev_mem_classify_cache_enabled(),
           "turned on (%s)", dev_error_string());
    free(heap);
}

static void test_what_is_cached(void)
{
    char *heap = malloc(100);
    int stack = 0;
    void *d = NULL, *m = NULL, *pool = NULL, *pinned = NULL;
    dev_mem_kind_t kind;
    uint64_t before;

    tap_ok(0 == second_call_queries(heap, &kind) && DEV_MEM_HOST == kind,
           "a plain heap page is served from the cache");
    tap_ok(0 == second_call_queries(&stack, &kind) && DEV_MEM_HOST == kind,
           "a stack page is served from the cache");
    dev_mem_alloc(&d, SIZE);
    dev_mem_alloc_managed(&m, SIZE);
    dev_mem_alloc_pool(&pool, SIZE);
    dev_host_alloc(&pinned, SIZE);
    tap_ok(1 == second_call_queries(d, &kind) && DEV_MEM_DEVICE == kind,
           "device memory is asked of the driver every time");
    tap_ok(1 == second_call_queries(pool, &kind) && DEV_MEM_DEVICE == kind,
           "pool memory is asked of the driver every time");
    tap_ok(1 == second_call_queries((char *) m + 5, &kind) && DEV_MEM_MANAGED == kind,
           "managed memory is asked of the driver every time");
    tap_ok(1 == second_call_queries(pinned, &kind) && DEV_MEM_HOST == kind,
           "pinned (driver-known) host memory is asked of the driver every time");
    dev_mem_classify_flush();
    before = queries();
    kind = dev_mem_classify(heap);
    tap_ok(1 == queries() - before && DEV_MEM_HOST == kind,
           "after a flush the page is asked of the driver again");
    tap_ok(0 == second_call_queries(heap, &kind), "and then served from the cache again");
    dev_mem_free(d);
    dev_mem_free(m);
    dev_mem_free(pool);
    dev_host_free(pinned);
    free(heap);
}

/* Pinned memory freed and its address handed to a device allocation, with no munmap and no
 * dev_mem_forget (the CUDA driver's way): classification must say device at once. */
static void test_pinned_then_device(void)
{
    int reused = 0, wrong = 0;

    for (int i = 0; i < TRIES; ++i) {
        void *h = NULL, *d = NULL;
        if (DEV_OK != dev_host_alloc(&h, SIZE)) {
            break;
        }
        wrong += DEV_MEM_HOST != dev_mem_classify(h);
        wrong += DEV_MEM_HOST != dev_mem_classify((char *) h + SIZE - 1);
        dev_host_free(h);
        if (DEV_OK != dev_mem_alloc(&d, SIZE)) {
            break;
        }
        if (d == h) {
            ++reused;
            wrong += DEV_MEM_DEVICE != dev_mem_classify(d);
            wrong += DEV_MEM_DEVICE != dev_mem_classify((char *) d + SIZE - 1);
        }
        dev_mem_free(d);
    }
    tap_ok(reused > 0, "pinned memory's address was reused by a device allocation (%d of %d)",
           reused, TRIES);
    tap_ok(0 == wrong, "pinned -> device at one address: classified host, then device "
           "(%d wrong answers)", wrong);
}

/* Device memory freed, the address reused by pinned memory: host again. */
static void test_device_then_pinned(void)
{
    int reused = 0, wrong = 0;

    for (int i = 0; i < TRIES; ++i) {
        void *h = NULL, *d = NULL;
        dev_mem_alloc(&d, SIZE);
        wrong += DEV_MEM_DEVICE != dev_mem_classify(d);
        dev_mem_free(d);
        dev_host_alloc(&h, SIZE);
        if (d == h) {
            ++reused;
            wrong += DEV_MEM_HOST != dev_mem_classify(h);
        }
        dev_host_free(h);
    }
    tap_ok(reused > 0 && 0 == wrong,
           "device -> pinned at one address: device, then host (%d reuses, %d wrong)", reused,
           wrong);
}

/* A plain host mapping, cached, unmapped (dev_mem_forget first, as Open MPI's hooks do), and
 * its address taken by a device allocation: device. */
static void test_host_then_device(void)
{
    int reused = 0, wrong = 0, hits = 0;

    for (int i = 0; i < TRIES && reused < 8; ++i) {
        void *d = NULL;
        dev_mem_kind_t kind;
        size_t size = FRESH_SIZE(i);
        char *h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (MAP_FAILED == h) {
            break;
        }
        h[0] = 1;
        hits += 0 == second_call_queries(h, &kind);
        wrong += DEV_MEM_HOST != kind;
        dev_mem_forget(h, size);
        munmap(h, size);
        dev_mem_alloc(&d, size);
        if ((char *) d == h) {
            ++reused;
            wrong += DEV_MEM_DEVICE != dev_mem_classify(d);
        }
        dev_mem_free(d);
    }
    tap_ok(hits > 0, "the host page was served from the cache before the unmap (%d)", hits);
    tap_ok(reused > 0, "an unmapped host address was reused by a device allocation (%d)",
           reused);
    tap_ok(0 == wrong, "host (cached) -> munmap -> device at one address: device (%d wrong)",
           wrong);
}

/* A page host code cannot read (a PROT_NONE reservation, as the driver keeps its address
 * space) is never cached: a device allocation can appear there without a release. */
static void test_reservation_then_device(void)
{
    int reused = 0, wrong = 0, cached = 0;

    for (int i = 0; i < TRIES && reused < 4; ++i) {
        void *d = NULL;
        dev_mem_kind_t kind;
        size_t size = FRESH_SIZE(TRIES + i);
        char *r = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (MAP_FAILED == r) {
            break;
        }
        cached += 0 == second_call_queries(r, &kind);
        wrong += DEV_MEM_HOST != kind;
        munmap(r, size); /* no dev_mem_forget: the driver's reservation changes silently */
        dev_mem_alloc(&d, size);
        if ((char *) d == r) {
            ++reused;
            wrong += DEV_MEM_DEVICE != dev_mem_classify(d);
        }
        dev_mem_free(d);
    }
    tap_ok(0 == cached, "an unreadable page is never cached (%d cached)", cached);
    tap_ok(reused > 0 && 0 == wrong,
           "reservation -> device at one address: device (%d reuses, %d wrong)", reused, wrong);
}

/* A release that lands between the driver's answer and the store must win. */
static void forget_during_query(const void *ptr, void *arg)
{
    const void *which = (NULL != arg) ? arg : ptr;
    dev_mem_forget(which, 1);
}

static void test_release_race(void)
{
    char *a = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *other = a + 4 * 4096;
    dev_mem_kind_t kind;
    uint64_t s0, s1;

    a[0] = other[0] = 1;
    dev_mem_forget(a, SIZE);
    dev_mem_classify_test_hook(forget_during_query, NULL);
    s0 = stores();
    kind = dev_mem_classify(a);
    dev_mem_classify_test_hook(NULL, NULL);
    s1 = queries();
    tap_ok(DEV_MEM_HOST == kind && stores() == s0 && DEV_MEM_HOST == dev_mem_classify(a)
               && 1 == queries() - s1,
           "a release of the page during the query: the answer is not kept");
    dev_mem_forget(a, SIZE);
    dev_mem_classify_test_hook(forget_during_query, a); /* a release of another page */
    s0 = stores();
    kind = dev_mem_classify(other);
    dev_mem_classify_test_hook(NULL, NULL);
    tap_ok(DEV_MEM_HOST == kind && stores() == s0,
           "a release of another page during the query: the answer is not kept either "
           "(the generation changed)");
    tap_ok(0 == second_call_queries(other, &kind), "and the next call learns the page");
    dev_mem_classify_cache_enable(false);
    tap_ok(!dev_mem_classify_cache_enabled() && 1 == second_call_queries(other, &kind),
           "turned off: the cached page is forgotten and asked every time");
    tap_ok(dev_mem_classify_cache_enable(true) && 0 == second_call_queries(other, &kind),
           "turned on again: cached again");
    munmap(a, SIZE);
}

/* Threads classify heap, device and pinned pointers while others unmap and reallocate. */
typedef struct {
    int id;
    int wrong;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    for (int i = 0; i < 200; ++i) {
        void *d = NULL, *h = NULL;
        char *m = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        m[0] = 1;
        w->wrong += DEV_MEM_HOST != dev_mem_classify(m);
        dev_mem_forget(m, SIZE);
        munmap(m, SIZE);
        dev_mem_alloc(&d, SIZE);
        w->wrong += DEV_MEM_DEVICE != dev_mem_classify(d);
        dev_mem_free(d);
        dev_host_alloc(&h, SIZE);
        w->wrong += DEV_MEM_HOST != dev_mem_classify(h);
        dev_host_free(h);
    }
    return NULL;
}

static void test_threads(void)
{
    enum { NT = 4 };
    pthread_t th[NT];
    worker_t w[NT];
    int wrong = 0;

    for (int i = 0; i < NT; ++i) {
        w[i].id = i;
        w[i].wrong = 0;
        pthread_create(&th[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < NT; ++i) {
        pthread_join(th[i], NULL);
        wrong += w[i].wrong;
    }
    tap_ok(0 == wrong, "%d threads allocating, unmapping and classifying: %d wrong answers", NT,
           wrong);
}

int main(void)
{
    setenv("COLL_GPU_EMULATED_REUSE", "1", 1);
    if (DEV_OK != dev_open(DEV_BACKEND_EMULATED)) {
        tap_skip_all("the emulated backend cannot be opened");
    }
    test_off_by_default();
    test_what_is_cached();
    test_pinned_then_device();
    test_device_then_pinned();
    test_host_then_device();
    test_reservation_then_device();
    test_release_race();
    test_threads();
    dev_close();
    printf("# %d passed, %d failed\n", tap_count_ - tap_failures(), tap_failures());
    return tap_done();
}
