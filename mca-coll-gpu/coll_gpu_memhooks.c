/*
 * coll_gpu_memhooks.c - keeps the device layer's classification cache true through Open MPI's
 * memory hooks (every MPI call classifies its buffers: kernels/dev_classify.c).
 *
 * The cache remembers only plain host pages, and such a page can change owner only after it
 * leaves the address space (munmap, mremap, brk shrinking, shmdt).  Open MPI's memory framework
 * (the patcher component) intercepts exactly those and calls the release callbacks first; ours
 * tells the device layer to forget the range (dev_mem_forget).  Open MPI 4.1 installs the hooks
 * only when something opens the memory framework (common/ucx does; with btl/vader and pml/ob1
 * nothing does), so we open it ourselves: support level 0 after MPI_Init becomes FREE|MUNMAP.
 *
 * Only with MUNMAP support and our callback registered is the cache turned on; otherwise every
 * classification asks the driver (~50-150 ns on host buffers), which is always right.  The
 * decision is logged at COLL_GPU_LOG_QUERY.  At component close the cache is turned off before
 * the callback goes.
 */
#include "ompi_config.h"

#include "opal/mca/base/base.h"
#include <inttypes.h>

#include "opal/mca/memory/base/base.h"
#include "opal/memoryhooks/memory.h"

#include "coll_gpu.h"

static bool memhooks_framework_opened = false;
static bool memhooks_registered = false;

/* Runs inside munmap() and free(), possibly on any thread: dev_mem_forget takes no lock and
 * allocates nothing. */
static void memhooks_release(void *buf, size_t length, void *cbdata, bool from_alloc)
{
    (void) cbdata;
    (void) from_alloc;
    dev_mem_forget(buf, length);
}

void mca_coll_gpu_memhooks_init(void)
{
    int level;

    if (memhooks_registered) {
        return;
    }
    if (OPAL_SUCCESS == mca_base_framework_open(&opal_memory_base_framework, 0)) {
        memhooks_framework_opened = true;
    }
    level = opal_mem_hooks_support_level();
    if (0 == (level & OPAL_MEMORY_MUNMAP_SUPPORT)
        || OPAL_SUCCESS != opal_mem_hooks_register_release(memhooks_release, NULL)) {
        dev_mem_classify_cache_enable(false);
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY,
                         "coll:gpu:memhooks: classification cache off: %s (support level %d); "
                         "every buffer is classified by the driver",
                         (level & OPAL_MEMORY_MUNMAP_SUPPORT)
                             ? "the release callback could not be registered"
                             : "Open MPI's memory hooks cannot see munmap", level);
        return;
    }
    memhooks_registered = true;
    /* only now, with every later release reported, may plain host pages be remembered */
    if (dev_mem_classify_cache_enable(true)) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY,
                         "coll:gpu:memhooks: classification cache on (memory hooks support "
                         "level %d)", level);
    } else {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:memhooks: %s", dev_error_string());
    }
}

void mca_coll_gpu_memhooks_fini(void)
{
    dev_classify_stats_t stats;

    /* what the cache saved: a host path that asks the driver on most calls shows here */
    dev_mem_classify_stats(&stats);
    COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY,
                     "coll:gpu:memhooks: classification: %" PRIu64 " driver queries, %" PRIu64
                     " host pages remembered, %" PRIu64 " releases seen",
                     (uint64_t) stats.queries, (uint64_t) stats.stores, (uint64_t) stats.forgets);
    if (memhooks_registered) {
        dev_mem_classify_cache_enable(false);
        (void) opal_mem_hooks_unregister_release(memhooks_release);
        memhooks_registered = false;
    }
    if (memhooks_framework_opened) {
        (void) mca_base_framework_close(&opal_memory_base_framework);
        memhooks_framework_opened = false;
    }
}
