/*
 * coll_gpu_ipcmap.c - this process's mappings of its peers' device allocations: one table for
 * the whole process, shared by every team.
 *
 * Why one table: the driver keeps one mapping per peer allocation per process, not per
 * communicator.  While any mapping of an allocation the peer has freed is still open here, the
 * peer's next allocation at an overlapping address cannot be mapped (cudaErrorAlreadyMapped).
 * With a cache per team, the team of MPI_COMM_WORLD kept the stale mapping that a dup's team
 * then tripped over (device bcast from 1 MiB on 2 H200s).  Here a new allocation of a peer
 * closes every mapping of that peer that overlaps it first: the peer's allocations never
 * overlap while alive, so those are stale by construction.
 *
 * Holds: a team holds what it imported for its current call until its next call (so that no
 * other team evicts a mapping in use), and holds its peers' scratch for its lifetime.  Unheld
 * mappings stay cached (at most IPCMAP_CACHED, least recently used out first) until a team
 * with that peer is destroyed: a mapping of a buffer the peer has freed holds the peer's
 * memory.  A held mapping is never evicted; a stale one is closed even when held (its peer
 * freed it, so nobody may use it any more), and the holder's release then finds a newer
 * generation and does nothing.
 *
 * The table has no fixed size: held mappings grow with the communicators alive (every team
 * holds its peers' scratch), and a call must not fail because other teams hold many (it did
 * at 256: about 120 communicators of 3 ranks).
 *
 * Thread safety: one mutex around the table (MPI_THREAD_MULTIPLE programs run collectives on
 * several communicators at once).
 */
#include "coll_gpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define IPCMAP_SLOTS_FIRST 256 /* the table's first size; it doubles when all slots are held */
/* Unheld mappings kept for later calls.  Each keeps its peer's allocation alive after the peer
 * frees it (the driver gives the memory back when the last mapping closes), so they are few. */
#define IPCMAP_CACHED COLL_GPU_REGCACHE_ENTRIES

typedef struct {
    uint64_t owner;     /* the exporting process, dev_process_identity (0: slot free) */
    uint64_t base;      /* the allocation's base and size in the owner's address space */
    uint64_t size;
    uint64_t buffer_id;
    void *mapped;       /* its base here */
    uint32_t gen;       /* bumped when the slot's mapping closes */
    int holds;
    uint64_t last_use;
} ipcmap_slot_t;

static pthread_mutex_t ipcmap_lock = PTHREAD_MUTEX_INITIALIZER;
static ipcmap_slot_t *ipcmap;  /* ipcmap_slots entries; a hold names its slot by index */
static uint32_t ipcmap_slots;
static uint64_t ipcmap_clock;
static uint64_t ipcmap_hits, ipcmap_misses, ipcmap_stale_closed;

/* Close slot s's mapping; the caller holds the lock. */
static void slot_close(ipcmap_slot_t *s)
{
    (void) dev_ipc_close(s->mapped);
    s->mapped = NULL;
    s->owner = 0;
    s->holds = 0;
    ++s->gen;
}

/* Close every mapping of x's owner that overlaps x's allocation but is not it; with all_owner,
 * every unheld mapping of the owner (the driver still refused: something we cannot see). */
static void close_stale(const coll_gpu_xbuf_t *x, bool all_owner)
{
    for (uint32_t i = 0; i < ipcmap_slots; ++i) {
        ipcmap_slot_t *s = &ipcmap[i];
        if (NULL == s->mapped || s->owner != x->owner) {
            continue;
        }
        bool overlaps = s->base < x->base + x->size && x->base < s->base + s->size;
        bool other = s->base != x->base || s->buffer_id != x->buffer_id;
        if (all_owner ? 0 == s->holds : overlaps && other) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL,
                             "coll:gpu: closing the mapping of process %" PRIu64 "'s allocation "
                             "0x%" PRIx64 " (+%" PRIu64 " B, buffer %" PRIu64 "): %s",
                             s->owner, s->base, s->size, s->buffer_id,
                             all_owner ? "the driver refused a new mapping of that process"
                                       : "freed there, its range now holds another allocation");
            slot_close(s);
            ++ipcmap_stale_closed;
        }
    }
}

/* Double the table (all its slots are held); false when no memory can be had.  Slots keep their
 * index, which is what a hold names. */
static bool table_grow(void)
{
    uint32_t n = (0 == ipcmap_slots) ? IPCMAP_SLOTS_FIRST : 2 * ipcmap_slots;
    ipcmap_slot_t *grown;

    if (n <= ipcmap_slots || n >= UINT32_MAX / 2) {
        return false;
    }
    grown = realloc(ipcmap, (size_t) n * sizeof(*grown));
    if (NULL == grown) {
        return false;
    }
    memset(grown + ipcmap_slots, 0, (size_t) (n - ipcmap_slots) * sizeof(*grown));
    ipcmap = grown;
    ipcmap_slots = n;
    return true;
}

/* A slot for a new mapping: a free one, after closing the least recently used unheld mapping
 * when IPCMAP_CACHED are kept already (or no slot is free); the table grows when every slot is
 * held (each team holds its peers' scratch for its life and the buffers of its last call until
 * its next one, so the held mappings grow with the communicators alive); NULL only when it
 * cannot grow. */
static ipcmap_slot_t *slot_for_new(void)
{
    ipcmap_slot_t *lru = NULL, *free_slot = NULL;
    int cached = 0;

    for (uint32_t i = 0; i < ipcmap_slots; ++i) {
        ipcmap_slot_t *s = &ipcmap[i];
        if (NULL == s->mapped) {
            free_slot = (NULL == free_slot) ? s : free_slot;
        } else if (0 == s->holds) {
            ++cached;
            if (NULL == lru || s->last_use < lru->last_use) {
                lru = s;
            }
        }
    }
    if (NULL != lru && (NULL == free_slot || cached >= IPCMAP_CACHED)) {
        slot_close(lru);
        free_slot = (NULL == free_slot) ? lru : free_slot;
    }
    if (NULL == free_slot) {
        uint32_t first_new = ipcmap_slots;
        free_slot = table_grow() ? &ipcmap[first_new] : NULL;
    }
    return free_slot;
}

int mca_coll_gpu_ipcmap_open(const coll_gpu_xbuf_t *x, void **base, coll_gpu_ipcmap_hold_t *hold)
{
    ipcmap_slot_t *s = NULL;
    void *mapped = NULL;
    int rc = DEV_OK;

    pthread_mutex_lock(&ipcmap_lock);
    ++ipcmap_clock;
    for (uint32_t i = 0; i < ipcmap_slots; ++i) {
        ipcmap_slot_t *e = &ipcmap[i];
        if (NULL != e->mapped && e->owner == x->owner && e->base == x->base
            && e->buffer_id == x->buffer_id) {
            s = e;
            ++ipcmap_hits;
            break;
        }
    }
    if (NULL == s) {
        ++ipcmap_misses;
        close_stale(x, false);
        rc = dev_ipc_import(&x->handle, &mapped);
        if (DEV_ERR_ALREADY_MAPPED == rc) {
            close_stale(x, true);
            rc = dev_ipc_import(&x->handle, &mapped);
        }
        if (DEV_OK == rc) {
            s = slot_for_new();
            if (NULL == s) {
                (void) dev_ipc_close(mapped);
                rc = dev_fail(DEV_ERR_NOMEM, "coll/gpu: no host memory for more than %u peer "
                              "mappings", (unsigned) ipcmap_slots);
            } else {
                *s = (ipcmap_slot_t) {.owner = x->owner, .base = x->base, .size = x->size,
                                      .buffer_id = x->buffer_id, .mapped = mapped, .gen = s->gen};
            }
        }
    }
    if (NULL != s && DEV_OK == rc) {
        s->last_use = ipcmap_clock;
        ++s->holds;
        hold->slot = (uint32_t) (s - ipcmap);
        hold->gen = s->gen;
        *base = s->mapped;
    }
    pthread_mutex_unlock(&ipcmap_lock);
    return rc;
}

void mca_coll_gpu_ipcmap_release(coll_gpu_ipcmap_hold_t *hold, bool close_now)
{
    ipcmap_slot_t *s;

    if (UINT32_MAX == hold->slot) {
        return;
    }
    pthread_mutex_lock(&ipcmap_lock);
    s = (hold->slot < ipcmap_slots) ? &ipcmap[hold->slot] : NULL;
    if (NULL != s && NULL != s->mapped && s->gen == hold->gen && s->holds > 0) {
        --s->holds;
        if (close_now && 0 == s->holds) {
            slot_close(s);
        }
    }
    pthread_mutex_unlock(&ipcmap_lock);
    hold->slot = UINT32_MAX;
}

void mca_coll_gpu_ipcmap_forget(uint64_t owner)
{
    pthread_mutex_lock(&ipcmap_lock);
    for (uint32_t i = 0; i < ipcmap_slots; ++i) {
        if (NULL != ipcmap[i].mapped && ipcmap[i].owner == owner && 0 == ipcmap[i].holds) {
            slot_close(&ipcmap[i]);
        }
    }
    pthread_mutex_unlock(&ipcmap_lock);
}

void mca_coll_gpu_ipcmap_finalize(void)
{
    pthread_mutex_lock(&ipcmap_lock);
    COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL,
                     "coll:gpu: peer mappings: %" PRIu64 " hit(s), %" PRIu64 " miss(es), %" PRIu64
                     " stale mapping(s) closed",
                     ipcmap_hits, ipcmap_misses, ipcmap_stale_closed);
    for (uint32_t i = 0; i < ipcmap_slots; ++i) {
        if (NULL != ipcmap[i].mapped) {
            slot_close(&ipcmap[i]);
        }
    }
    free(ipcmap);
    ipcmap = NULL;
    ipcmap_slots = 0;
    pthread_mutex_unlock(&ipcmap_lock);
}
