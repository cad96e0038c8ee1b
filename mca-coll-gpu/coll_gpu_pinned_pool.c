/*
 * coll_gpu_pinned_pool.c - the process's pool of pinned (page-locked) host memory for staging:
 * the bounce memory of nonblocking and persistent staged calls, which cannot use their
 * communicator's two cached slots (the next call may use those while the request is in
 * flight), and of blocking staged calls larger than coll_gpu_stage_cache_bytes.
 *
 * cudaHostAlloc and cudaFreeHost take milliseconds each (the driver pins and unpins every
 * page); before this pool a staged MPI_Iallgather of 16 B paid two of each per call.  Blocks
 * come in powers of two from 4 KiB, kept on one list, the most recently returned first (its
 * pages are the likeliest to be in the caches), up to coll_gpu_pinned_pool_bytes in all; a
 * size above that is allocated and freed for its call alone.
 *
 *   get (the start of a call)              put (the end of a call: maybe inside progress)
 *   -------------------------              ----------------------------------------------
 *   the list's first block of the size,    a pooled size: to the front of the list; while
 *   or one of that size waiting to be        it keeps more than the bound, its least
 *   freed, or dev_host_alloc                 recently returned blocks wait to be freed
 *   free the other blocks waiting          a larger size: waits to be freed
 *                                          outside a completion: free what waits, at once
 *
 * Inside progress nothing may block, so a put made within a completion
 * (mca_coll_gpu_pinned_completion_enter) only links blocks into the waiting list; the next
 * get, a communicator's free or the component's close frees them.  A communicator's free also
 * frees the blocks nobody used for COLL_GPU_PINNED_IDLE_SECONDS; the close frees everything.
 * One lock guards the lists; the driver is called outside it.
 */
#include "ompi_config.h"

#include <stdlib.h>

#include "coll_gpu.h"

#define POOL_MIN_SHIFT 12 /* the smallest block: 4 KiB, a page */
#define POOL_CLASSES 40   /* up to 2^51 B: beyond any bound the parameter's range allows */

/* A block the pool holds: on the list, or waiting to be freed (next only). */
typedef struct pool_block_t {
    struct pool_block_t *prev, *next;
    void *ptr;
    size_t size;
    int cls;         /* -1: above the bound, never pooled */
    double returned; /* when it was given back (monotonic seconds) */
} pool_block_t;

static opal_mutex_t pool_lock = OPAL_MUTEX_STATIC_INIT;
static pool_block_t *pool_head, *pool_tail; /* the pooled blocks, most recent first */
static pool_block_t *pool_waiting;          /* to be freed outside a completion */
static size_t pool_kept;                    /* bytes on the list */
static _Thread_local int pool_in_completion;

/* The size class of len, or -1 when its block would be larger than the pool may keep. */
static int pool_class(size_t len)
{
    int cls = 0;

    while (cls < POOL_CLASSES && ((size_t) 1 << (POOL_MIN_SHIFT + cls)) < len) {
        ++cls;
    }
    if (POOL_CLASSES == cls
        || ((size_t) 1 << (POOL_MIN_SHIFT + cls)) > mca_coll_gpu_component.pinned_pool_bytes) {
        return -1;
    }
    return cls;
}

static size_t pool_size(int cls, size_t len)
{
    return (0 <= cls) ? (size_t) 1 << (POOL_MIN_SHIFT + cls) : len;
}

/* Take b off the list.  Caller holds pool_lock. */
static void pool_unlink(pool_block_t *b)
{
    *((NULL != b->prev) ? &b->prev->next : &pool_head) = b->next;
    *((NULL != b->next) ? &b->next->prev : &pool_tail) = b->prev;
    b->prev = b->next = NULL;
    pool_kept -= b->size;
}

/* The block unused longest leaves the list: it waits to be freed.  Caller holds pool_lock. */
static void pool_retire_oldest(void)
{
    pool_block_t *old = pool_tail;

    pool_unlink(old);
    old->next = pool_waiting;
    pool_waiting = old;
}

/* Free what waits (taken under pool_lock, freed outside it: the driver may take
 * milliseconds); nothing inside a completion (it waits for a later call). */
static void pool_free_waiting(void)
{
    pool_block_t *list = NULL;

    if (0 == pool_in_completion) {
        list = pool_waiting;
        pool_waiting = NULL;
    }
    OPAL_THREAD_UNLOCK(&pool_lock);
    while (NULL != list) {
        pool_block_t *b = list;
        list = b->next;
        (void) dev_host_free(b->ptr);
        free(b);
    }
}

int mca_coll_gpu_pinned_get(size_t len, void **ptr)
{
    int cls = pool_class(len);
    pool_block_t *b, **pp;
    int rc;

    OPAL_THREAD_LOCK(&pool_lock);
    b = (0 <= cls) ? pool_head : NULL; /* the most recently returned block of the size */
    while (NULL != b && b->cls != cls) {
        b = b->next;
    }
    if (NULL != b) {
        pool_unlink(b);
    }
    /* what waits to be freed: one that fits is as good as a pooled block (a larger call that
     * repeats reuses its memory instead of freeing and pinning it again); the rest goes */
    for (pp = &pool_waiting; NULL == b && NULL != *pp; pp = &(*pp)->next) {
        if ((0 <= cls) ? (*pp)->cls == cls : (*pp)->size >= len && (*pp)->size / 2 < len) {
            b = *pp;
            *pp = b->next;
            break;
        }
    }
    pool_free_waiting(); /* never inside a completion: all of it */
    if (NULL != b) {
        *ptr = b->ptr;
        free(b);
        return DEV_OK;
    }
    rc = dev_host_alloc(ptr, pool_size(cls, len));
    if (DEV_OK != rc && 0 <= cls) {
        /* memory the pool keeps may be what is missing: give it back and try once more */
        mca_coll_gpu_pinned_trim(0.0);
        rc = dev_host_alloc(ptr, pool_size(cls, len));
    }
    return rc;
}

void mca_coll_gpu_pinned_put(void *ptr, size_t len)
{
    pool_block_t *b;

    if (NULL == ptr) {
        return;
    }
    b = calloc(1, sizeof(*b));
    if (NULL == b) {
        (void) dev_host_free(ptr); /* cannot be tracked: better a wait than a leak */
        return;
    }
    b->ptr = ptr;
    b->cls = pool_class(len);
    b->size = pool_size(b->cls, len);
    b->returned = mca_coll_gpu_now();
    OPAL_THREAD_LOCK(&pool_lock);
    if (0 > b->cls) {
        b->next = pool_waiting;
        pool_waiting = b;
    } else {
        b->next = pool_head;
        *((NULL != pool_head) ? &pool_head->prev : &pool_tail) = b;
        pool_head = b;
        pool_kept += b->size;
        /* over the bound: the blocks unused longest make room (b alone fits: pool_class) */
        while (pool_kept > mca_coll_gpu_component.pinned_pool_bytes) {
            pool_retire_oldest();
        }
    }
    pool_free_waiting();
}

void mca_coll_gpu_pinned_trim(double idle_seconds)
{
    double cutoff = mca_coll_gpu_now() - idle_seconds;

    OPAL_THREAD_LOCK(&pool_lock);
    while (NULL != pool_tail && (0.0 >= idle_seconds || pool_tail->returned <= cutoff)) {
        pool_retire_oldest();
    }
    pool_free_waiting();
}

void mca_coll_gpu_pinned_completion_enter(void)
{
    ++pool_in_completion;
}

void mca_coll_gpu_pinned_completion_leave(void)
{
    --pool_in_completion;
}

void mca_coll_gpu_pinned_finalize(void)
{
    mca_coll_gpu_pinned_trim(0.0);
}
