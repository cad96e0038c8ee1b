/*
 * dev_classify.c - dev_mem_classify(): which kind of memory a pointer is, for every backend.
 *
 * The question is asked on every MPI call, for host buffers too, where coll/gpu may add at
 * most ~50 ns; a driver query (cuPointerGetAttributes) costs 50-150 ns.  So some answers are
 * remembered, and the backends only provide the raw query (dev_backend_ops_t.mem_query): the
 * kind, and whether the driver knows the memory at all.  Both backends run this same cache, so
 * the emulated backend in CI exercises exactly what runs on a GPU.
 *
 * What is cached: only "plain host memory that the driver does not know", per 4 KiB page, in
 * 256 direct-mapped slots of one 64-bit word (page << 1 | 1), read with one relaxed load: a hit
 * is a load and a compare, no lock.  Never cached:
 *   - device and managed memory: their calls cost microseconds anyway, a query is noise;
 *   - host memory the driver knows (cudaMallocHost, cudaHostAlloc, cudaHostRegister): the
 *     driver can hand that virtual address to a device allocation after the pinned memory is
 *     freed, without any munmap() the process could see (the bug this design fixes: a cached
 *     "host" answer for a pinned page that had become device memory sent a device pointer to
 *     host code);
 *   - a page that host code cannot read (not mapped, or mapped PROT_NONE, as the driver's own
 *     address reservations are): only a mapped, readable page has an unmap to wait for.
 *
 * Why a cached answer is right.  A page that is mapped, readable and unknown to the driver is
 * ordinary memory of the process (heap, stack, mmap).  Before that virtual address can become
 * anything else (device memory, pinned memory, another mapping), the page must leave the
 * process's address space: munmap, mremap, brk shrinking, shmdt, or an mmap over it.  Whoever
 * turns the cache on (dev_mem_classify_cache_enable) promises to call dev_mem_forget() for
 * every such release, before it happens: coll/gpu does it through Open MPI's memory hooks
 * (mca-coll-gpu/coll_gpu_memhooks.c), and leaves the cache off where the hooks cannot see
 * munmap.  The cache is off by default: a process with no such promise asks the driver every
 * time.  COLL_GPU_CLASSIFY_CACHE=0 in the environment keeps it off whatever is asked.
 *
 * A release that races a lookup.  dev_mem_forget() first bumps a generation counter, then
 * clears the slots of the released pages.  A lookup that missed reads the generation before
 * asking the driver, stores its answer, then reads the generation again and takes the answer
 * back if it changed.  Every access is sequentially consistent, so either the second read sees
 * the bump (the answer is taken back), or the bump comes after it, hence after the store, and
 * the release's clearing finds and removes the answer.  An answer that was true before the
 * release is therefore never left behind.  (A lookup of a pointer whose own page is being
 * released at that moment is a program that frees a buffer it is passing to MPI.)
 *
 * The hot path is dev_mem_classify(): one acquire load of the open backend, one relaxed load of
 * a slot.  Everything else lives on the miss path.
 */
#define _GNU_SOURCE
#include "dev_backend.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define CLS_PAGE_SHIFT DEV_CLS_PAGE_SHIFT
#define CLS_SLOTS DEV_CLS_SLOTS

/* (page << 1) | 1 for a cached plain-host page; 0 for an empty slot.  Exported: the hit is
 * read inline by callers too (dev_mem_cached_host in dev.h). */
DEV_API _Atomic uint64_t dev_cls_pages[CLS_SLOTS];
/* Bumped by every release and by turning the cache off. */
static _Atomic uint64_t cls_generation;
static atomic_bool cls_enabled;

static _Atomic uint64_t cls_stat_queries;
static _Atomic uint64_t cls_stat_stores;
static _Atomic uint64_t cls_stat_forgets;

static void (*_Atomic cls_test_hook)(const void *ptr, void *arg);
static void *_Atomic cls_test_hook_arg;

/* Can host code read the byte at p?  process_vm_readv on our own process reports EFAULT for
 * an address that is not mapped or not readable, without a signal.  Our own pid each time:
 * after a fork the child is another process. */
static bool host_readable(const void *p)
{
    char byte;
    struct iovec local = {&byte, 1};
    struct iovec remote = {(void *) p, 1};
    return 1 == process_vm_readv((pid_t) syscall(SYS_getpid), &local, 1, &remote, 1, 0);
}

/* The miss path: ask the backend; remember plain host pages while the cache is on. */
static dev_mem_kind_t classify_miss(const dev_backend_ops_t *ops, const void *ptr)
{
    uintptr_t p = (uintptr_t) ptr;
    uint64_t page = (uint64_t) p >> CLS_PAGE_SHIFT;
    uint64_t word = (page << 1) | 1;
    uint64_t gen = atomic_load(&cls_generation);
    void (*hook)(const void *, void *);
    bool known = true;
    dev_mem_kind_t kind;
    unsigned slot;

    kind = ops->mem_query(ptr, &known);
    atomic_fetch_add_explicit(&cls_stat_queries, 1, memory_order_relaxed);
    hook = atomic_load(&cls_test_hook);
    if (NULL != hook) {
        hook(ptr, atomic_load(&cls_test_hook_arg));
    }
    if (DEV_MEM_HOST != kind || known || !atomic_load_explicit(&cls_enabled, memory_order_relaxed)
        || !host_readable(ptr)) {
        return kind;
    }
    slot = dev_cls_slot(page);
    atomic_store(&dev_cls_pages[slot], word);
    if (gen != atomic_load(&cls_generation)) {
        /* a release (or the cache turned off) came in between: take the answer back */
        uint64_t expect = word;
        atomic_compare_exchange_strong(&dev_cls_pages[slot], &expect, 0);
    } else {
        atomic_fetch_add_explicit(&cls_stat_stores, 1, memory_order_relaxed);
    }
    return kind;
}

DEV_API dev_mem_kind_t dev_mem_classify(const void *ptr)
{
    const dev_backend_ops_t *ops = atomic_load_explicit(&dev_ops, memory_order_acquire);

    if (NULL == ops || NULL == ptr) {
        return DEV_MEM_HOST;
    }
    if (dev_mem_cached_host(ptr)) {
        return DEV_MEM_HOST;
    }
    return classify_miss(ops, ptr);
}

/* Clear every slot whose page lies in [first, last]: a scan of the 256 slots, whatever the
 * length (a release of gigabytes costs the same as one of a page). */
static void forget_pages(uint64_t first, uint64_t last)
{
    atomic_fetch_add(&cls_generation, 1);
    for (int i = 0; i < CLS_SLOTS; ++i) {
        uint64_t w = atomic_load(&dev_cls_pages[i]);
        if (0 != w && (w >> 1) >= first && (w >> 1) <= last) {
            atomic_compare_exchange_strong(&dev_cls_pages[i], &w, 0);
        }
    }
}

/* Called from inside munmap/free by the memory hooks: no lock, no allocation, no syscall. */
DEV_API void dev_mem_forget(const void *base, size_t len)
{
    uintptr_t b = (uintptr_t) base;
    uintptr_t end = (len > UINTPTR_MAX - b) ? UINTPTR_MAX : b + len - (len ? 1 : 0);

    atomic_fetch_add_explicit(&cls_stat_forgets, 1, memory_order_relaxed);
    forget_pages((uint64_t) b >> CLS_PAGE_SHIFT, (uint64_t) end >> CLS_PAGE_SHIFT);
}

DEV_API void dev_mem_classify_flush(void)
{
    forget_pages(0, UINT64_MAX >> 1);
}

void dev_classify_reset(void)
{
    dev_mem_classify_flush();
}

DEV_API bool dev_mem_classify_cache_enable(bool on)
{
    const char *env = getenv("COLL_GPU_CLASSIFY_CACHE");
    int probe = 1;

    if (!on) {
        atomic_store(&cls_enabled, false);
        dev_mem_classify_flush(); /* bumps the generation: a store in flight is taken back */
        return false;
    }
    if (NULL != env && 0 == strcmp(env, "0")) {
        dev_fail(DEV_ERR_UNSUPPORTED, "classification cache: off (COLL_GPU_CLASSIFY_CACHE=0)");
        return false;
    }
    if (!host_readable(&probe)) {
        dev_fail(DEV_ERR_UNSUPPORTED, "classification cache: off (process_vm_readv cannot read "
                 "this process, so a mapped page cannot be told from an unmapped one)");
        return false;
    }
    atomic_store(&cls_enabled, true);
    return true;
}

DEV_API bool dev_mem_classify_cache_enabled(void)
{
    return atomic_load(&cls_enabled);
}

DEV_API void dev_mem_classify_stats(dev_classify_stats_t *stats)
{
    stats->queries = atomic_load_explicit(&cls_stat_queries, memory_order_relaxed);
    stats->stores = atomic_load_explicit(&cls_stat_stores, memory_order_relaxed);
    stats->forgets = atomic_load_explicit(&cls_stat_forgets, memory_order_relaxed);
}

DEV_API void dev_mem_classify_test_hook(void (*fn)(const void *ptr, void *arg), void *arg)
{
    atomic_store(&cls_test_hook_arg, arg);
    atomic_store(&cls_test_hook, fn);
}
