/*
 * dev_emulated.c - the emulated backend: the CPU plays the GPU, for CI and for machines
 * without one.  Selected explicitly (MCA parameter, tests); never chosen automatically.
 *
 * Device memory.  A POSIX shared-memory segment (/collgpu-<pid>-<seq>) mapped twice:
 *
 *     returned address  PROT_NONE   host code that dereferences it faults, as it would on a
 *                                   real device pointer, so a missed classification is a crash
 *                                   in CI rather than a silent success;
 *     alias             read-write  used by this file only: copies, memset and kernels
 *                                   translate any pointer into the range to alias + offset.
 *
 * Every allocation, import, managed and pinned buffer is entered in a registry sorted by base
 * address and searched under a read lock; the registry plays the driver (emu_mem_query: what
 * it holds is "known", anything else is plain host memory), skipped while nothing is
 * registered.  Managed memory is an ordinary read-write mapping registered as MANAGED; pinned
 * host memory is a read-write anonymous mapping registered as HOST (driver-known, as
 * cudaMallocHost memory is); pool memory (dev_mem_alloc_pool) is device memory that the IPC
 * below refuses, as the legacy CUDA IPC refuses cudaMallocAsync and VMM memory.
 *
 * Address reuse (COLL_GPU_EMULATED_REUSE=1, for tests).  The CUDA driver hands the virtual
 * address of freed pinned memory to a later device allocation without any munmap() that the
 * process could see.  In this mode the emulated backend does the same: a freed allocation of
 * any kind keeps its addresses as a PROT_NONE reservation (mmap MAP_FIXED over it, not
 * munmap, made with the system call itself so that no memory hook sees it), and the next
 * allocation of any kind with the same page-rounded size is mapped there.  Without it, frees unmap, and the kernel's mmap may or may not reuse an address.
 *
 * IPC.  The handle carries the segment's name and size; dev_ipc_import() opens the segment and
 * maps it twice like an allocation (registered as DEVICE in the importer).  The creator
 * unlinks the name when it frees the allocation; mappings already made by peers stay valid
 * until they close them, as with CUDA.  A process killed before it frees (a crash, MPI_Abort,
 * a test timeout) leaves its names in /dev/shm, which is memory: dev_open removes every
 * collgpu-<pid>-*, collgpu-ctl-<pid>-* and collgpu-kb-<pid>-* (the node team's control block
 * and the memory-kinds block, which coll/gpu names from their maker's pid) whose pid no longer
 * exists
 * (COLL_GPU_EMULATED_SWEEP=0 turns that off, e.g. where processes of other pid namespaces
 * share /dev/shm).
 *
 * Streams and events.  Every operation runs to completion when it is enqueued, so streams are
 * trivially in order and events are always complete.  For tests of code that must not take an
 * asynchronous copy's data before the copy has ended, COLL_GPU_EMULATED_ASYNC=N holds back
 * dev_memcpy_async on a stream of dev_stream_create: the copies queued on a stream run only once
 * N queries (dev_event_query of an event recorded after them, dev_stream_query) have found them
 * pending, or when something waits for them (dev_event_sync, dev_stream_sync,
 * dev_stream_wait_event, another operation enqueued on that stream, dev_stream_destroy).  A
 * reader that looks early finds the old bytes, as on a GPU.  The default stream (NULL) and the
 * blocking copies are never held back: the streams stand for CUDA's non-blocking ones, which
 * the default stream does not wait for.
 */
#include "dev_backend.h"
#include "reference.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EMU_MAX_DEVICES 64
#define EMU_SHM_NAME_LEN 48
#define EMU_SHM_NAME_TRIES 1024 /* names device_alloc tries before it gives up */

typedef enum {
    EMU_ALLOC,   /* dev_mem_alloc: shm segment created here */
    EMU_IMPORT,  /* dev_ipc_import: a peer's segment */
    EMU_MANAGED, /* dev_mem_alloc_managed: anonymous read-write mapping */
    EMU_PINNED,  /* dev_host_alloc: page-aligned heap memory */
    EMU_POOL     /* dev_mem_alloc_pool: like EMU_ALLOC, but dev_ipc_export refuses it */
} emu_origin_t;

typedef struct {
    uintptr_t base;  /* the address handed out */
    size_t size;     /* the size asked for: classification and dev_mem_range use it */
    size_t map_size; /* size rounded up to pages: what is mapped */
    char *alias;     /* read-write view (== base for managed and pinned memory) */
    uint64_t buffer_id;
    dev_mem_kind_t kind;
    emu_origin_t origin;
    pid_t creator; /* the process that created the segment; only it unlinks the name */
    int device;    /* the emulated device it lives on (the creator's current device) */
    uintptr_t creator_base; /* imports: the allocation's base in the creator's process */
    char shm_name[EMU_SHM_NAME_LEN];
} emu_range_t;

/* The registry: ranges sorted by base, never overlapping. */
static pthread_rwlock_t emu_lock = PTHREAD_RWLOCK_INITIALIZER;
static emu_range_t *emu_ranges = NULL;
static size_t emu_nranges = 0;
static size_t emu_capacity = 0;
static atomic_size_t emu_nranges_hint = 0; /* lets classify skip the lock when empty */

/* Address reuse (see the file header): reservations left by frees, most recent last. */
#define EMU_HOLES 16
static bool emu_reuse = false;
static struct {
    uintptr_t base;
    size_t size;
} emu_holes[EMU_HOLES];
static size_t emu_nholes = 0;
static pthread_mutex_t emu_holes_lock = PTHREAD_MUTEX_INITIALIZER;

static int emu_async_polls = 0; /* COLL_GPU_EMULATED_ASYNC (see the file header); 0: off */
static atomic_uint_fast64_t emu_next_buffer_id = 1;
static atomic_uint_fast64_t emu_next_shm_seq = 0;
static int emu_ndevices = 1;
static __thread int emu_device = 0;

/* What an exported handle carries between processes. */
typedef struct {
    char magic[8];
    uint64_t size;
    uint64_t map_size;
    int32_t creator;
    int32_t device;
    uint64_t creator_base;
    char shm_name[EMU_SHM_NAME_LEN];
} emu_ipc_wire_t;

_Static_assert(sizeof(emu_ipc_wire_t) <= sizeof(dev_ipc_handle_t),
               "the emulated IPC handle must fit dev_ipc_handle_t");

static const char emu_ipc_magic[8] = "CGPUEMU";

/* ---- registry ---------------------------------------------------------------------------- */

/* Index of the range containing p, or -1.  Caller holds emu_lock (either mode). */
static ptrdiff_t registry_find(uintptr_t p)
{
    size_t lo = 0, hi = emu_nranges;

    /* first range whose base is above p; the one before it is the only candidate */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (emu_ranges[mid].base <= p) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (0 == lo) {
        return -1;
    }
    if (p - emu_ranges[lo - 1].base < emu_ranges[lo - 1].size) {
        return (ptrdiff_t) (lo - 1);
    }
    return -1;
}

static int registry_insert(const emu_range_t *r)
{
    size_t pos = 0;

    pthread_rwlock_wrlock(&emu_lock);
    if (emu_nranges == emu_capacity) {
        size_t cap = emu_capacity ? 2 * emu_capacity : 64;
        emu_range_t *v = realloc(emu_ranges, cap * sizeof(*v));
        if (NULL == v) {
            pthread_rwlock_unlock(&emu_lock);
            return dev_fail(DEV_ERR_NOMEM, "emulated: registry of %zu ranges is full", cap / 2);
        }
        emu_ranges = v;
        emu_capacity = cap;
    }
    while (pos < emu_nranges && emu_ranges[pos].base < r->base) {
        ++pos;
    }
    memmove(&emu_ranges[pos + 1], &emu_ranges[pos], (emu_nranges - pos) * sizeof(*r));
    emu_ranges[pos] = *r;
    ++emu_nranges;
    atomic_store_explicit(&emu_nranges_hint, emu_nranges, memory_order_release);
    pthread_rwlock_unlock(&emu_lock);
    return DEV_OK;
}

/* Remove the range whose base is exactly p and whose origin is one of `origins` (a bit mask
 * of 1 << emu_origin_t); copy it to *out.  DEV_ERR_ARG when there is none. */
static int registry_remove(const void *p, unsigned origins, emu_range_t *out, const char *fn)
{
    ptrdiff_t i;
    int rc = DEV_OK;

    pthread_rwlock_wrlock(&emu_lock);
    i = registry_find((uintptr_t) p);
    if (i < 0 || emu_ranges[i].base != (uintptr_t) p
        || 0 == (origins & (1u << emu_ranges[i].origin))) {
        rc = dev_fail(DEV_ERR_ARG, "%s(%p): not the base of an allocation this call can release",
                      fn, p);
        goto out;
    }
    *out = emu_ranges[i];
    memmove(&emu_ranges[i], &emu_ranges[i + 1], (emu_nranges - (size_t) i - 1) * sizeof(*out));
    --emu_nranges;
    atomic_store_explicit(&emu_nranges_hint, emu_nranges, memory_order_release);
out:
    pthread_rwlock_unlock(&emu_lock);
    return rc;
}

/* mmap as the system call itself: memory hooks that patch libc's mmap (Open MPI's patcher
 * reports an mmap over an existing mapping as a release) do not see it, just as they do not see
 * the CUDA driver hand its own addresses from one allocation to the next. */
static void *raw_mmap(void *addr, size_t len, int prot, int flags, int fd)
{
    return (void *) syscall(SYS_mmap, addr, len, prot, flags, fd, (off_t) 0);
}

/* An address for a new mapping of map_size bytes: in reuse mode the most recently freed
 * reservation of exactly that size, else NULL (the kernel chooses). */
static void *hole_take(size_t map_size)
{
    void *at = NULL;

    if (!emu_reuse) {
        return NULL;
    }
    pthread_mutex_lock(&emu_holes_lock);
    for (size_t i = emu_nholes; i-- > 0;) {
        if (emu_holes[i].size == map_size) {
            at = (void *) emu_holes[i].base;
            memmove(&emu_holes[i], &emu_holes[i + 1], (emu_nholes - i - 1) * sizeof(emu_holes[0]));
            --emu_nholes;
            break;
        }
    }
    pthread_mutex_unlock(&emu_holes_lock);
    return at;
}

/* Give up the addresses of a freed allocation: munmap, or in reuse mode keep them reserved
 * (PROT_NONE, mapped over without an munmap, as the CUDA driver keeps its own) for the next
 * allocation of that size.  The oldest reservation is unmapped when there are too many. */
static void release_addresses(void *base, size_t map_size)
{
    uintptr_t old_base = 0;
    size_t old_size = 0;

    if (!emu_reuse
        || MAP_FAILED == raw_mmap(base, map_size, PROT_NONE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1)) {
        munmap(base, map_size);
        return;
    }
    pthread_mutex_lock(&emu_holes_lock);
    if (EMU_HOLES == emu_nholes) {
        old_base = emu_holes[0].base;
        old_size = emu_holes[0].size;
        memmove(&emu_holes[0], &emu_holes[1], (EMU_HOLES - 1) * sizeof(emu_holes[0]));
        --emu_nholes;
    }
    emu_holes[emu_nholes].base = (uintptr_t) base;
    emu_holes[emu_nholes].size = map_size;
    ++emu_nholes;
    pthread_mutex_unlock(&emu_holes_lock);
    if (0 != old_size) {
        munmap((void *) old_base, old_size);
    }
}

/* mmap at `at` (MAP_FIXED over a reservation of ours) or wherever the kernel likes (at NULL);
 * a failed fixed mapping gives the reservation up and lets the kernel choose. */
static void *map_at(void *at, size_t size, int prot, int flags, int fd)
{
    void *p;

    if (NULL != at) {
        p = raw_mmap(at, size, prot, flags | MAP_FIXED, fd);
        if (MAP_FAILED != p) {
            return p;
        }
        munmap(at, size);
    }
    return mmap(NULL, size, prot, flags, fd, 0);
}

/* Unmap (and for the creator, unlink) what a removed range held. */
static void range_release(const emu_range_t *r)
{
    switch (r->origin) {
    case EMU_ALLOC:
    case EMU_POOL:
    case EMU_IMPORT:
        release_addresses((void *) r->base, r->map_size);
        munmap(r->alias, r->map_size);
        if (EMU_IMPORT != r->origin && getpid() == r->creator) {
            shm_unlink(r->shm_name);
        }
        break;
    case EMU_MANAGED:
    case EMU_PINNED:
        release_addresses((void *) r->base, r->map_size);
        break;
    }
}

/* The host view of [p, p + bytes): alias + offset inside device memory, p itself elsewhere.
 * A device range overrun is an error (a real GPU would fault). */
static int host_view(const void *p, size_t bytes, const char *fn, void **view)
{
    ptrdiff_t i;
    int rc = DEV_OK;

    *view = (void *) p;
    if (0 == atomic_load_explicit(&emu_nranges_hint, memory_order_acquire)) {
        return DEV_OK;
    }
    pthread_rwlock_rdlock(&emu_lock);
    i = registry_find((uintptr_t) p);
    if (i >= 0 && DEV_MEM_DEVICE == emu_ranges[i].kind) {
        const emu_range_t *r = &emu_ranges[i];
        size_t off = (uintptr_t) p - r->base;
        if (bytes > r->size - off) {
            rc = dev_fail(DEV_ERR_ARG,
                          "%s: %zu bytes at %p run past the end of the device allocation "
                          "%p + %zu",
                          fn, bytes, p, (void *) r->base, r->size);
        } else {
            *view = r->alias + off;
        }
    }
    pthread_rwlock_unlock(&emu_lock);
    return rc;
}

/* ---- lifecycle and devices --------------------------------------------------------------- */

/* The owner pid in a name coll/gpu makes in /dev/shm: collgpu-<pid>-<n> (emulated device
 * memory, above), collgpu-ctl-<pid>-<n> (a node team's control block, coll_gpu_team.c) or
 * collgpu-kb-<pid>-<n> (a communicator's memory-kinds block, coll_gpu_kinds.c); 0 for any
 * other name.  All are swept by the same rule: a block's name lives only while its ranks map
 * it, so a rank killed then leaves it as surely as its memory. */
static long shm_name_owner(const char *name)
{
    static const char *const prefixes[] = {"collgpu-ctl-", "collgpu-kb-", "collgpu-"};
    char *end = NULL;
    long pid;

    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); ++i) {
        size_t len = strlen(prefixes[i]);
        if (0 != strncmp(name, prefixes[i], len)) {
            continue;
        }
        pid = strtol(name + len, &end, 10);
        if (name + len == end || '-' != *end || 0 >= pid || INT32_MAX < pid) {
            return 0;
        }
        return pid;
    }
    return 0;
}

/* Unlink the names of processes that no longer exist (shm_name_owner).  Only names are
 * removed: a live process that still maps such a segment keeps its memory until it unmaps it.
 * A pid that is alive, or that kill() cannot judge (EPERM: another user's), is left alone. */
static void sweep_dead_segments(void)
{
    const char *env = getenv("COLL_GPU_EMULATED_SWEEP");
    struct dirent *e;
    DIR *dir;

    if (NULL != env && 0 == strcmp(env, "0")) {
        return;
    }
    dir = opendir("/dev/shm");
    if (NULL == dir) {
        return;
    }
    while (NULL != (e = readdir(dir))) {
        char name[EMU_SHM_NAME_LEN + 8];
        long pid = shm_name_owner(e->d_name);

        if (0 == pid || (pid_t) pid == getpid()) {
            continue;
        }
        if (0 == kill((pid_t) pid, 0) || ESRCH != errno) {
            continue; /* alive, or not ours to judge */
        }
        if ((size_t) snprintf(name, sizeof(name), "/%s", e->d_name) < sizeof(name)) {
            shm_unlink(name);
        }
    }
    closedir(dir);
}

static int emu_open(void)
{
    const char *env = getenv("COLL_GPU_EMULATED_DEVICES");

    const char *reuse = getenv("COLL_GPU_EMULATED_REUSE");
    const char *async = getenv("COLL_GPU_EMULATED_ASYNC");

    emu_reuse = NULL != reuse && 0 == strcmp(reuse, "1");
    emu_async_polls = 0;
    if (NULL != async && '\0' != async[0]) {
        char *end = NULL;
        long n = strtol(async, &end, 10);
        if ('\0' != *end || n < 0 || n > 1000000) {
            return dev_fail(DEV_ERR_ARG,
                            "emulated: COLL_GPU_EMULATED_ASYNC=%s is not a number in 0..1000000",
                            async);
        }
        emu_async_polls = (int) n;
    }
    emu_ndevices = 1;
    if (NULL != env && '\0' != env[0]) {
        char *end = NULL;
        long n = strtol(env, &end, 10);
        if ('\0' != *end || n < 1 || n > EMU_MAX_DEVICES) {
            return dev_fail(DEV_ERR_ARG,
                            "emulated: COLL_GPU_EMULATED_DEVICES=%s is not a number in 1..%d",
                            env, EMU_MAX_DEVICES);
        }
        emu_ndevices = (int) n;
    }
    sweep_dead_segments();
    return DEV_OK;
}

/* The last dev_close(): release everything still registered. */
static void emu_close(void)
{
    pthread_rwlock_wrlock(&emu_lock);
    for (size_t i = 0; i < emu_nranges; ++i) {
        range_release(&emu_ranges[i]);
    }
    free(emu_ranges);
    emu_ranges = NULL;
    emu_nranges = emu_capacity = 0;
    atomic_store_explicit(&emu_nranges_hint, 0, memory_order_release);
    pthread_rwlock_unlock(&emu_lock);
    pthread_mutex_lock(&emu_holes_lock);
    for (size_t i = 0; i < emu_nholes; ++i) {
        munmap((void *) emu_holes[i].base, emu_holes[i].size);
    }
    emu_nholes = 0;
    pthread_mutex_unlock(&emu_holes_lock);
}

static int check_ordinal(int ordinal, const char *fn)
{
    if (ordinal < 0 || ordinal >= emu_ndevices) {
        return dev_fail(DEV_ERR_ARG, "%s: device %d does not exist (%d emulated devices)", fn,
                        ordinal, emu_ndevices);
    }
    return DEV_OK;
}

static int emu_device_count(int *count)
{
    *count = emu_ndevices;
    return DEV_OK;
}

static int emu_current_device(int *ordinal)
{
    *ordinal = emu_device;
    return DEV_OK;
}

static int emu_set_device(int ordinal)
{
    int rc = check_ordinal(ordinal, "dev_set_device");
    if (DEV_OK == rc) {
        emu_device = ordinal;
    }
    return rc;
}

static int emu_device_enter(int ordinal, dev_device_scope_t *scope)
{
    int rc = check_ordinal(ordinal, "dev_device_enter");
    if (DEV_OK == rc && emu_device != ordinal) {
        scope->ordinal = emu_device;
        scope->changed = true;
        emu_device = ordinal;
    }
    return rc;
}

static void emu_device_leave(dev_device_scope_t *scope)
{
    emu_device = scope->ordinal;
}

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; '\0' != *s; ++s) {
        h = (h ^ (uint8_t) *s) * 0x100000001b3ull;
    }
    return h;
}

/* Deterministic per ordinal, so that every process of a job names emulated device N alike. */
static int emu_device_uuid(int ordinal, dev_uuid_t *uuid)
{
    char text[32];
    uint64_t h[2];
    int rc = check_ordinal(ordinal, "dev_device_uuid");

    if (DEV_OK != rc) {
        return rc;
    }
    snprintf(text, sizeof(text), "emulated-%d", ordinal);
    h[0] = fnv1a64(text);
    h[1] = h[0] * 0x9e3779b97f4a7c15ull ^ (h[0] >> 29); /* second half: a remix of the first */
    for (int i = 0; i < 16; ++i) {
        uuid->bytes[i] = (uint8_t) (h[i / 8] >> (8 * (7 - i % 8)));
    }
    return DEV_OK;
}

static int emu_device_pci_bus_id(int ordinal, char *buf, size_t len)
{
    int rc = check_ordinal(ordinal, "dev_device_pci_bus_id");
    if (DEV_OK != rc) {
        return rc;
    }
    if ((size_t) snprintf(buf, len, "0000:%02x:00.0", ordinal) >= len) {
        return dev_fail(DEV_ERR_ARG, "dev_device_pci_bus_id: buffer of %zu bytes is too small",
                        len);
    }
    return DEV_OK;
}

static int emu_device_can_access_peer(int ordinal, int peer_ordinal, bool *can)
{
    int rc = check_ordinal(ordinal, "dev_device_can_access_peer");
    if (DEV_OK == rc) {
        rc = check_ordinal(peer_ordinal, "dev_device_can_access_peer");
    }
    if (DEV_OK == rc) {
        *can = true;
    }
    return rc;
}

/* ---- memory ------------------------------------------------------------------------------ */

/* The "driver" of this backend is the registry: it knows every allocation of this layer
 * (pinned host memory included) and nothing else. */
static dev_mem_kind_t emu_mem_query(const void *ptr, bool *known)
{
    dev_mem_kind_t kind = DEV_MEM_HOST;
    ptrdiff_t i;

    *known = false;
    if (0 == atomic_load_explicit(&emu_nranges_hint, memory_order_acquire)) {
        return DEV_MEM_HOST;
    }
    pthread_rwlock_rdlock(&emu_lock);
    i = registry_find((uintptr_t) ptr);
    if (i >= 0) {
        kind = emu_ranges[i].kind;
        *known = true;
    }
    pthread_rwlock_unlock(&emu_lock);
    return kind;
}

/* Device and managed memory report the device current when they were allocated (an import:
 * the exporter's); pinned and unknown memory are host. */
static int emu_mem_device(const void *ptr, int *ordinal)
{
    ptrdiff_t i;
    int rc = DEV_OK;

    pthread_rwlock_rdlock(&emu_lock);
    i = registry_find((uintptr_t) ptr);
    if (i < 0 || DEV_MEM_HOST == emu_ranges[i].kind) {
        rc = dev_fail(DEV_ERR_ARG, "dev_mem_device(%p): host memory has no device", ptr);
    } else {
        *ordinal = emu_ranges[i].device;
    }
    pthread_rwlock_unlock(&emu_lock);
    return rc;
}

static int emu_mem_range(const void *ptr, void **base, size_t *size, uint64_t *buffer_id)
{
    ptrdiff_t i;
    int rc = DEV_OK;

    pthread_rwlock_rdlock(&emu_lock);
    i = registry_find((uintptr_t) ptr);
    if (i < 0) {
        rc = dev_fail(DEV_ERR_ARG, "dev_mem_range(%p): not inside any allocation of this layer",
                      ptr);
    } else {
        *base = (void *) emu_ranges[i].base;
        *size = emu_ranges[i].size;
        *buffer_id = emu_ranges[i].buffer_id;
    }
    pthread_rwlock_unlock(&emu_lock);
    return rc;
}

static size_t page_round(size_t size)
{
    size_t page = (size_t) sysconf(_SC_PAGESIZE);
    return (size + page - 1) / page * page;
}

/* Map the segment behind fd twice: PROT_NONE for the caller (at `at` when not NULL: see
 * hole_take), read-write for us. */
static int map_twice(int fd, size_t map_size, const char *fn, void *at, void **base,
                     char **alias)
{
    void *b, *a;

    b = map_at(at, map_size, PROT_NONE, MAP_SHARED, fd);
    if (MAP_FAILED == b) {
        return dev_fail(DEV_ERR_NOMEM, "%s: mmap(PROT_NONE, %zu) failed: %s", fn, map_size,
                        strerror(errno));
    }
    a = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (MAP_FAILED == a) {
        int err = errno;
        munmap(b, map_size);
        return dev_fail(DEV_ERR_NOMEM, "%s: mmap(PROT_READ|PROT_WRITE, %zu) failed: %s", fn,
                        map_size, strerror(err));
    }
    *base = b;
    *alias = a;
    return DEV_OK;
}

/* Device memory of either origin: EMU_ALLOC (exportable) or EMU_POOL (not). */
static int device_alloc(void **ptr, size_t size, emu_origin_t origin)
{
    emu_range_t r = {0};
    void *base;
    int fd = -1, rc;

    r.size = size;
    r.map_size = page_round(size);
    r.kind = DEV_MEM_DEVICE;
    r.origin = origin;
    r.creator = getpid();
    r.device = emu_device;
    /* A name left by a killed process whose pid this one got again (pids wrap; the sweep
     * spares names of live pids, this one's included) is skipped, not removed. */
    for (int tries = 0; tries < EMU_SHM_NAME_TRIES; ++tries) {
        snprintf(r.shm_name, sizeof(r.shm_name), "/collgpu-%d-%" PRIuFAST64, (int) r.creator,
                 atomic_fetch_add(&emu_next_shm_seq, 1));
        fd = shm_open(r.shm_name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (0 <= fd || EEXIST != errno) {
            break;
        }
    }
    if (fd < 0) {
        return dev_fail(DEV_ERR_NOMEM, "dev_mem_alloc: shm_open(%s) failed: %s", r.shm_name,
                        strerror(errno));
    }
    if (0 != ftruncate(fd, (off_t) r.map_size)) {
        rc = dev_fail(DEV_ERR_NOMEM, "dev_mem_alloc: ftruncate(%s, %zu) failed: %s",
                      r.shm_name, r.map_size, strerror(errno));
        goto fail_unlink;
    }
    rc = map_twice(fd, r.map_size, "dev_mem_alloc", hole_take(r.map_size), &base, &r.alias);
    if (DEV_OK != rc) {
        goto fail_unlink;
    }
    close(fd);
    r.base = (uintptr_t) base;
    r.buffer_id = atomic_fetch_add(&emu_next_buffer_id, 1);
    rc = registry_insert(&r);
    if (DEV_OK != rc) {
        range_release(&r);
        return rc;
    }
    *ptr = base;
    return DEV_OK;

fail_unlink:
    close(fd);
    shm_unlink(r.shm_name);
    return rc;
}

static int emu_mem_alloc(void **ptr, size_t size)
{
    return device_alloc(ptr, size, EMU_ALLOC);
}

/* Pool memory plays the part of cudaMallocAsync and VMM memory: device memory through and
 * through, except that the legacy IPC cannot export it. */
static int emu_mem_alloc_pool(void **ptr, size_t size)
{
    return device_alloc(ptr, size, EMU_POOL);
}

/* Only plain device allocations of this process export (as cudaMalloc memory does; an
 * imported mapping cannot be exported again). */
static bool emu_mem_ipc_capable(const void *ptr)
{
    bool capable = false;
    ptrdiff_t i;

    pthread_rwlock_rdlock(&emu_lock);
    i = registry_find((uintptr_t) ptr);
    if (i >= 0) {
        capable = EMU_ALLOC == emu_ranges[i].origin;
    }
    pthread_rwlock_unlock(&emu_lock);
    return capable;
}

static int emu_mem_alloc_managed(void **ptr, size_t size)
{
    emu_range_t r = {0};
    void *base;
    int rc;

    r.size = size;
    r.map_size = page_round(size);
    base = map_at(hole_take(r.map_size), r.map_size, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1);
    if (MAP_FAILED == base) {
        return dev_fail(DEV_ERR_NOMEM, "dev_mem_alloc_managed: mmap(%zu) failed: %s",
                        r.map_size, strerror(errno));
    }
    r.base = (uintptr_t) base;
    r.alias = base;
    r.kind = DEV_MEM_MANAGED;
    r.origin = EMU_MANAGED;
    r.creator = getpid();
    r.device = emu_device;
    r.buffer_id = atomic_fetch_add(&emu_next_buffer_id, 1);
    rc = registry_insert(&r);
    if (DEV_OK != rc) {
        range_release(&r);
        return rc;
    }
    *ptr = base;
    return DEV_OK;
}

/* Take the range that starts at ptr out of the registry (it must be of one of the origins)
 * and release its mappings: the free of every kind of emulated memory. */
static int remove_and_release(void *ptr, unsigned origins, const char *fn)
{
    emu_range_t r;
    int rc = registry_remove(ptr, origins, &r, fn);
    if (DEV_OK == rc) {
        range_release(&r);
    }
    return rc;
}

static int emu_mem_free(void *ptr)
{
    return remove_and_release(ptr, (1u << EMU_ALLOC) | (1u << EMU_MANAGED) | (1u << EMU_POOL),
                              "dev_mem_free");
}

static int emu_host_alloc(void **ptr, size_t size)
{
    emu_range_t r = {0};
    void *base = NULL;
    int rc;

    r.size = size;
    r.map_size = page_round(size);
    base = map_at(hole_take(r.map_size), r.map_size, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1);
    if (MAP_FAILED == base) {
        return dev_fail(DEV_ERR_NOMEM, "dev_host_alloc: mmap(%zu) failed: %s", r.map_size,
                        strerror(errno));
    }
    r.base = (uintptr_t) base;
    r.alias = base;
    r.kind = DEV_MEM_HOST;
    r.origin = EMU_PINNED;
    r.creator = getpid();
    r.buffer_id = atomic_fetch_add(&emu_next_buffer_id, 1);
    rc = registry_insert(&r);
    if (DEV_OK != rc) {
        munmap(base, r.map_size);
        return rc;
    }
    *ptr = base;
    return DEV_OK;
}

static int emu_host_free(void *ptr)
{
    return remove_and_release(ptr, 1u << EMU_PINNED, "dev_host_free");
}

/* ---- streams and events: everything completes when enqueued (or held back for tests) ---- */

/* A copy held back (COLL_GPU_EMULATED_ASYNC): the views were resolved when it was enqueued. */
typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
} emu_copy_t;

/* A stream belongs to the device current when it was made.  As on CUDA, a kernel launched on it
 * from a thread whose current device is another fails ("invalid resource handle"), so that CI
 * sees device work run from the wrong device; copies, queries, waits and syncs on it work from
 * any device, as CUDA's do (stream_here guards the launches only). */
struct dev_stream {
    int device;         /* the device current when it was made (stream_here) */
    pthread_mutex_t lock;
    emu_copy_t *held;   /* copies not run yet, in order */
    size_t nheld, cap;
    uint64_t enqueued;  /* copies ever held back on this stream */
    uint64_t ran;       /* of which have run */
    int polls_left;     /* queries still to find the held copies pending */
};

static int stream_here(const dev_stream_t *stream, const char *fn)
{
    if (NULL != stream && stream->device != emu_device) {
        return dev_fail(DEV_ERR, "%s: the stream belongs to device %d, the thread works on "
                        "device %d (invalid resource handle)", fn, stream->device, emu_device);
    }
    return DEV_OK;
}

struct dev_event {
    dev_stream_t *stream; /* the stream of its last record; NULL: complete */
    uint64_t ticket;      /* complete once stream->ran reaches it */
};

/* Run every copy held back on the stream.  Caller holds stream->lock. */
static void stream_flush_locked(dev_stream_t *stream)
{
    for (size_t i = 0; i < stream->nheld; ++i) {
        memmove(stream->held[i].dst, stream->held[i].src, stream->held[i].bytes);
    }
    stream->nheld = 0;
    stream->ran = stream->enqueued;
}

static void stream_flush(dev_stream_t *stream)
{
    if (NULL == stream || 0 == emu_async_polls) {
        return;
    }
    pthread_mutex_lock(&stream->lock);
    stream_flush_locked(stream);
    pthread_mutex_unlock(&stream->lock);
}

/* A query of work up to ticket on stream: DEV_OK when it has run (now, if this was the query
 * that lets it), 1 when it stays pending. */
static int stream_poll(dev_stream_t *stream, uint64_t ticket)
{
    int rc = DEV_OK;

    if (NULL == stream || 0 == emu_async_polls) {
        return DEV_OK;
    }
    pthread_mutex_lock(&stream->lock);
    if (stream->ran < ticket) {
        if (0 < stream->polls_left) {
            --stream->polls_left;
            rc = 1;
        } else {
            stream_flush_locked(stream);
        }
    }
    pthread_mutex_unlock(&stream->lock);
    return rc;
}

static int emu_stream_create(dev_stream_t **stream)
{
    dev_stream_t *st = calloc(1, sizeof(*st));

    if (NULL == st) {
        return dev_fail(DEV_ERR_NOMEM, "dev_stream_create: out of memory");
    }
    pthread_mutex_init(&st->lock, NULL);
    st->device = emu_device;
    *stream = st;
    return DEV_OK;
}

static int emu_stream_destroy(dev_stream_t *stream)
{
    stream_flush(stream);
    pthread_mutex_destroy(&stream->lock);
    free(stream->held);
    free(stream);
    return DEV_OK;
}

static int emu_stream_sync(dev_stream_t *stream)
{
    stream_flush(stream);
    return DEV_OK;
}

static int emu_event_create(dev_event_t **event)
{
    *event = calloc(1, sizeof(**event));
    return (NULL == *event) ? dev_fail(DEV_ERR_NOMEM, "dev_event_create: out of memory")
                            : DEV_OK;
}

static int emu_event_destroy(dev_event_t *event)
{
    free(event);
    return DEV_OK;
}

static int emu_event_record(dev_event_t *event, dev_stream_t *stream)
{
    event->stream = NULL;
    event->ticket = 0;
    if (NULL != stream && 0 != emu_async_polls) {
        pthread_mutex_lock(&stream->lock);
        event->stream = stream;
        event->ticket = stream->enqueued;
        pthread_mutex_unlock(&stream->lock);
    }
    return DEV_OK;
}

static int emu_event_sync(dev_event_t *event)
{
    stream_flush(event->stream);
    return DEV_OK;
}

static int emu_event_query(dev_event_t *event)
{
    return stream_poll(event->stream, event->ticket);
}

/* ---- copies and kernels ------------------------------------------------------------------ */

static int emu_memcpy_sync(void *dst, const void *src, size_t bytes)
{
    void *d, *s;
    int rc = host_view(dst, bytes, "dev_memcpy (destination)", &d);
    if (DEV_OK == rc) {
        rc = host_view(src, bytes, "dev_memcpy (source)", &s);
    }
    if (DEV_OK == rc) {
        memmove(d, s, bytes);
    }
    return rc;
}

static int emu_memcpy_async(void *dst, const void *src, size_t bytes, dev_stream_t *stream)
{
    void *d, *s;
    int rc;

    if (NULL == stream || 0 == emu_async_polls) {
        return emu_memcpy_sync(dst, src, bytes);
    }
    rc = host_view(dst, bytes, "dev_memcpy_async (destination)", &d);
    if (DEV_OK == rc) {
        rc = host_view(src, bytes, "dev_memcpy_async (source)", &s);
    }
    if (DEV_OK != rc) {
        return rc;
    }
    pthread_mutex_lock(&stream->lock);
    if (stream->nheld == stream->cap) {
        size_t cap = (0 == stream->cap) ? 8 : 2 * stream->cap;
        emu_copy_t *held = realloc(stream->held, cap * sizeof(*held));
        if (NULL == held) {
            pthread_mutex_unlock(&stream->lock);
            return dev_fail(DEV_ERR_NOMEM, "dev_memcpy_async: out of memory");
        }
        stream->held = held;
        stream->cap = cap;
    }
    if (0 == stream->nheld) {
        stream->polls_left = emu_async_polls;
    }
    stream->held[stream->nheld++] = (emu_copy_t){d, s, bytes};
    ++stream->enqueued;
    pthread_mutex_unlock(&stream->lock);
    return DEV_OK;
}

static int emu_memset_sync(void *dst, int value, size_t bytes)
{
    void *d;
    int rc = host_view(dst, bytes, "dev_memset", &d);
    if (DEV_OK == rc) {
        memset(d, value, bytes);
    }
    return rc;
}

static int emu_reduce(void *dst, const void *a, const void *b, size_t count, dev_dtype_t dtype,
                      dev_op_t op, dev_stream_t *stream)
{
    size_t bytes = count * dev_dtype_size(dtype);
    void *d, *x, *y;
    int rc;

    rc = stream_here(stream, "dev_reduce");
    if (DEV_OK != rc) {
        return rc;
    }
    stream_flush(stream); /* in order after the copies held back there */
    if (count > SIZE_MAX / dev_dtype_size(dtype)) {
        return dev_fail(DEV_ERR_ARG, "dev_reduce: count %zu overflows", count);
    }
    rc = host_view(dst, bytes, "dev_reduce (destination)", &d);
    if (DEV_OK == rc) {
        rc = host_view(a, bytes, "dev_reduce (first operand)", &x);
    }
    if (DEV_OK == rc) {
        rc = host_view(b, bytes, "dev_reduce (second operand)", &y);
    }
    if (DEV_OK == rc) {
        rc = dev_ref_reduce(d, x, y, count, dtype, op);
    }
    return rc;
}

/* Every pointer goes through host_view on its own: sources and destinations may lie in
 * different allocations, local or imported, and a dst may be a src (the reference reads a
 * whole block of every source before it writes that block anywhere). */
static int emu_reduce_multi(void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                            size_t count, dev_dtype_t dtype, dev_op_t op,
                            const dev_launch_t *launch, dev_stream_t *stream)
{
    const size_t bytes = count * dev_dtype_size(dtype); /* dev.c checked the overflow */
    void *dv[DEV_MULTI_MAX];
    const void *sv[DEV_MULTI_MAX];
    char what[48];
    int rc;

    (void) launch;
    rc = stream_here(stream, "dev_reduce_multi");
    if (DEV_OK != rc) {
        return rc;
    }
    stream_flush(stream); /* in order after the copies held back there */
    for (int k = 0; k < nsrc; ++k) {
        void *v;
        snprintf(what, sizeof(what), "dev_reduce_multi (source %d)", k);
        rc = host_view(srcs[k], bytes, what, &v);
        if (DEV_OK != rc) {
            return rc;
        }
        sv[k] = v;
    }
    for (int k = 0; k < ndst; ++k) {
        snprintf(what, sizeof(what), "dev_reduce_multi (destination %d)", k);
        rc = host_view(dsts[k], bytes, what, &dv[k]);
        if (DEV_OK != rc) {
            return rc;
        }
    }
    rc = dev_ref_reduce_multi(dv, ndst, sv, nsrc, count, dtype, op);
    if (DEV_OK != rc) {
        return dev_fail(rc, "dev_reduce_multi: the reference refused %s on %s",
                        dev_op_name(op), dev_dtype_name(dtype));
    }
    return DEV_OK;
}

/* ---- IPC --------------------------------------------------------------------------------- */

static int emu_ipc_export(void *base, dev_ipc_handle_t *handle)
{
    emu_ipc_wire_t wire;
    ptrdiff_t i;
    int rc = DEV_OK;

    memset(&wire, 0, sizeof(wire));
    pthread_rwlock_rdlock(&emu_lock);
    i = registry_find((uintptr_t) base);
    if (i >= 0 && EMU_ALLOC != emu_ranges[i].origin) {
        rc = dev_fail(DEV_ERR_UNSUPPORTED,
                      "dev_ipc_export(%p): the memory cannot be exported with IPC (pool, "
                      "managed, pinned or imported memory)",
                      base);
    } else if (i < 0 || emu_ranges[i].base != (uintptr_t) base) {
        rc = dev_fail(DEV_ERR_ARG,
                      "dev_ipc_export(%p): not the base of a device allocation of this process",
                      base);
    } else {
        memcpy(wire.magic, emu_ipc_magic, sizeof(wire.magic));
        wire.size = emu_ranges[i].size;
        wire.map_size = emu_ranges[i].map_size;
        wire.creator = (int32_t) emu_ranges[i].creator;
        wire.device = (int32_t) emu_ranges[i].device;
        wire.creator_base = (uint64_t) emu_ranges[i].base;
        memcpy(wire.shm_name, emu_ranges[i].shm_name, sizeof(wire.shm_name));
    }
    pthread_rwlock_unlock(&emu_lock);
    if (DEV_OK == rc) {
        memset(handle, 0, sizeof(*handle));
        memcpy(handle->bytes, &wire, sizeof(wire));
    }
    return rc;
}

/* Does this process still map another allocation of the handle's creator that overlapped the
 * handle's range in the creator's address space?  Then the creator freed it since, and the CUDA
 * driver would refuse the new mapping (cudaErrorAlreadyMapped): so do we, so that code tested
 * here closes stale mappings as it must on a GPU.  The same allocation mapped twice is allowed
 * (the driver counts references). */
static bool import_overlaps_stale(const emu_ipc_wire_t *wire)
{
    uintptr_t lo = (uintptr_t) wire->creator_base, hi = lo + (uintptr_t) wire->size;
    bool stale = false;

    pthread_rwlock_rdlock(&emu_lock);
    for (size_t i = 0; !stale && i < emu_nranges; ++i) {
        const emu_range_t *r = &emu_ranges[i];
        stale = EMU_IMPORT == r->origin && r->creator == (pid_t) wire->creator
                && r->creator_base < hi && lo < r->creator_base + r->size
                && 0 != strcmp(r->shm_name, wire->shm_name);
    }
    pthread_rwlock_unlock(&emu_lock);
    return stale;
}

static int emu_ipc_import(const dev_ipc_handle_t *handle, void **ptr)
{
    emu_ipc_wire_t wire;
    emu_range_t r = {0};
    struct stat st;
    void *base;
    int fd, rc;

    memcpy(&wire, handle->bytes, sizeof(wire));
    if (0 != memcmp(wire.magic, emu_ipc_magic, sizeof(wire.magic))
        || '\0' != wire.shm_name[sizeof(wire.shm_name) - 1]) {
        return dev_fail(DEV_ERR_ARG, "dev_ipc_import: not a handle of the emulated backend");
    }
    /* CUDA refuses to open a handle in the process that exported it; so do we, so that code
     * tested here behaves the same on a GPU. */
    if ((pid_t) wire.creator == getpid()) {
        return dev_fail(DEV_ERR_ARG, "dev_ipc_import(%s): the allocation belongs to this "
                        "process; use its own pointer", wire.shm_name);
    }
    if (import_overlaps_stale(&wire)) {
        return dev_fail(DEV_ERR_ALREADY_MAPPED, "dev_ipc_import(%s): this process still maps "
                        "another allocation of process %d that overlapped [0x%" PRIx64
                        ", +%" PRIu64 ") there (freed since; close that mapping first)",
                        wire.shm_name, (int) wire.creator, wire.creator_base, wire.size);
    }
    fd = shm_open(wire.shm_name, O_RDWR, 0);
    if (fd < 0) {
        return dev_fail(DEV_ERR_ARG, "dev_ipc_import: shm_open(%s) failed: %s (freed by its "
                        "owner?)", wire.shm_name, strerror(errno));
    }
    if (0 != fstat(fd, &st) || (uint64_t) st.st_size < wire.map_size) {
        close(fd);
        return dev_fail(DEV_ERR_ARG, "dev_ipc_import(%s): segment is smaller than the handle "
                        "says (%" PRIu64 " bytes)", wire.shm_name, wire.map_size);
    }
    r.size = (size_t) wire.size;
    r.map_size = (size_t) wire.map_size;
    rc = map_twice(fd, r.map_size, "dev_ipc_import", hole_take(r.map_size), &base, &r.alias);
    close(fd);
    if (DEV_OK != rc) {
        return rc;
    }
    r.base = (uintptr_t) base;
    r.kind = DEV_MEM_DEVICE;
    r.origin = EMU_IMPORT;
    r.creator = (pid_t) wire.creator;
    r.device = (int) wire.device;
    r.creator_base = (uintptr_t) wire.creator_base;
    memcpy(r.shm_name, wire.shm_name, sizeof(r.shm_name));
    r.buffer_id = atomic_fetch_add(&emu_next_buffer_id, 1);
    rc = registry_insert(&r);
    if (DEV_OK != rc) {
        range_release(&r);
        return rc;
    }
    *ptr = base;
    return DEV_OK;
}

static int emu_ipc_close(void *ptr)
{
    return remove_and_release(ptr, 1u << EMU_IMPORT, "dev_ipc_close");
}

/* ---- fast-path additions (dev.h's block of the same name) -------------------------------- */

/* Streams complete their work when it is enqueued, but for the copies held back for tests:
 * a wait on them runs them, a query counts as one of the polls they wait for. */
static int emu_stream_wait_event(dev_stream_t *stream, dev_event_t *event)
{
    (void) stream;
    stream_flush(event->stream);
    return DEV_OK;
}

static int emu_stream_query(dev_stream_t *stream)
{
    uint64_t ticket = 0;

    if (NULL == stream || 0 == emu_async_polls) {
        return DEV_OK;
    }
    pthread_mutex_lock(&stream->lock);
    ticket = stream->enqueued;
    pthread_mutex_unlock(&stream->lock);
    return stream_poll(stream, ticket);
}

/* Pinned memory is host memory here, and the "kernels" are host code: one address for both. */
static int emu_host_alloc_mapped(void **host, void **device, size_t size)
{
    int rc = emu_host_alloc(host, size);
    if (DEV_OK == rc) {
        *device = *host;
    }
    return rc;
}

/* The fused allreduce of dev.h on the CPU, block by block with the partition of
 * allreduce_fused.cu, always by the flag protocol (the low-latency words are the cuda kernel's
 * way around a system-scope fence, which host atomics do not need): push every
 * block's range to every peer and signal it, then wait for each block's flags and reduce it
 * with the reference.  The flags are C11 atomics on the segments that every rank maps: a
 * release store after the data, an acquire load before reading it. */
#define EMU_FUSED_BLOCK_BYTES 16384
#define EMU_FUSED_ALIGN 256
static int emu_fused_allreduce(const dev_fused_allreduce_t *a, const dev_launch_t *launch,
                               dev_stream_t *stream)
{
    const size_t esize = dev_dtype_size(a->dtype), bytes = a->count * esize;
    char *slot[DEV_MULTI_MAX], *sbuf = NULL, *rbuf = NULL;
    _Atomic uint64_t *done;
    size_t blocks, per;
    bool abandoned = false;
    void *v;
    int rc = stream_here(stream, "dev_fused_allreduce");

    if (DEV_OK != rc) {
        return rc;
    }
    stream_flush(stream); /* in order after the copies held back there */
    blocks = (launch->nblocks > 0) ? (size_t) launch->nblocks
                                   : (bytes + EMU_FUSED_BLOCK_BYTES - 1) / EMU_FUSED_BLOCK_BYTES;
    blocks = (blocks < 1) ? 1 : (blocks > DEV_FUSED_MAX_BLOCKS) ? DEV_FUSED_MAX_BLOCKS : blocks;
    per = (bytes + blocks - 1) / blocks;
    per = (per + EMU_FUSED_ALIGN - 1) / EMU_FUSED_ALIGN * EMU_FUSED_ALIGN;
    per = (0 == per) ? EMU_FUSED_ALIGN : per;
    for (int r = 0; r < a->nranks; ++r) {
        rc = host_view(a->slot[r], DEV_FUSED_HEAD_BYTES(a->nranks) + (size_t) a->nranks * a->cap,
                       "dev_fused_allreduce (slot)", &v);
        if (DEV_OK != rc) {
            return rc;
        }
        slot[r] = v;
    }
    if (bytes > 0) {
        rc = host_view(a->sbuf, bytes, "dev_fused_allreduce (sbuf)", &v);
        if (DEV_OK != rc) {
            return rc;
        }
        sbuf = v;
        rc = host_view(a->rbuf, bytes, "dev_fused_allreduce (rbuf)", &v);
        if (DEV_OK != rc) {
            return rc;
        }
        rbuf = v;
    }
    rc = host_view(a->done, sizeof(uint64_t), "dev_fused_allreduce (done)", &v);
    if (DEV_OK != rc) {
        return rc;
    }
    done = v;

    for (size_t b = 0; b < blocks; ++b) {
        size_t lo = (b * per < bytes) ? b * per : bytes;
        size_t hi = (lo + per < bytes) ? lo + per : bytes;
        for (int q = 0; q < a->nranks; ++q) {
            if (q != a->rank && hi > lo) {
                memcpy(slot[q] + DEV_FUSED_HEAD_BYTES(a->nranks) + (size_t) a->rank * a->cap + lo,
                       sbuf + lo,
                       hi - lo);
            }
        }
        for (int q = 0; q < a->nranks; ++q) {
            if (q != a->rank) {
                _Atomic uint64_t *f = (_Atomic uint64_t *) slot[q] + b * DEV_MULTI_MAX + a->rank;
                atomic_store_explicit(f, a->seq, memory_order_release);
            }
        }
    }
    for (size_t b = 0; b < blocks; ++b) {
        size_t lo = (b * per < bytes) ? b * per : bytes;
        size_t hi = (lo + per < bytes) ? lo + per : bytes;
        const void *srcs[DEV_MULTI_MAX];
        void *dst = rbuf + lo;
        for (int q = 0; q < a->nranks; ++q) {
            _Atomic uint64_t *f = (_Atomic uint64_t *) slot[a->rank] + b * DEV_MULTI_MAX + q;
            unsigned spins = 0;
            uint64_t val;
            if (q == a->rank) {
                continue;
            }
            while (((val = atomic_load_explicit(f, memory_order_acquire)) & ~DEV_FUSED_ABANDON)
                   != a->seq) {
                if (++spins > 100) {
                    sched_yield();
                    if (NULL != a->abandon && a->abandon(a->abandon_ctx)) {
                        val = DEV_FUSED_ABANDON;
                        break;
                    }
                }
            }
            abandoned = abandoned || 0 != (val & DEV_FUSED_ABANDON);
        }
        if (abandoned || hi == lo) {
            continue;
        }
        for (int q = 0; q < a->nranks; ++q) {
            srcs[q] = (q == a->rank) ? (const void *) (sbuf + lo)
                                     : (const void *) (slot[a->rank]
                                                       + DEV_FUSED_HEAD_BYTES(a->nranks)
                                                       + (size_t) q * a->cap + lo);
        }
        rc = dev_ref_reduce_multi(&dst, 1, srcs, a->nranks, (hi - lo) / esize, a->dtype,
                                  a->op);
        if (DEV_OK != rc) {
            return dev_fail(rc, "dev_fused_allreduce: the reference refused %s on %s",
                            dev_op_name(a->op), dev_dtype_name(a->dtype));
        }
    }
    atomic_store_explicit(done, a->seq, memory_order_release);
    return DEV_OK;
}
/* ---- end of fast-path additions */

const dev_backend_ops_t dev_emulated_ops = {
    .name = "emulated",
    .open = emu_open,
    .close = emu_close,
    .device_count = emu_device_count,
    .current_device = emu_current_device,
    .set_device = emu_set_device,
    .device_enter = emu_device_enter,
    .device_leave = emu_device_leave,
    .device_uuid = emu_device_uuid,
    .device_pci_bus_id = emu_device_pci_bus_id,
    .device_can_access_peer = emu_device_can_access_peer,
    .mem_query = emu_mem_query,
    .mem_range = emu_mem_range,
    .mem_device = emu_mem_device,
    .mem_alloc = emu_mem_alloc,
    .mem_alloc_managed = emu_mem_alloc_managed,
    .mem_alloc_pool = emu_mem_alloc_pool,
    .mem_ipc_capable = emu_mem_ipc_capable,
    .mem_free = emu_mem_free,
    .host_alloc = emu_host_alloc,
    .host_free = emu_host_free,
    .stream_create = emu_stream_create,
    .stream_destroy = emu_stream_destroy,
    .stream_sync = emu_stream_sync,
    .event_create = emu_event_create,
    .event_destroy = emu_event_destroy,
    .event_record = emu_event_record,
    .event_sync = emu_event_sync,
    .event_query = emu_event_query,
    .memcpy_async = emu_memcpy_async,
    .memcpy_sync = emu_memcpy_sync,
    .memset_sync = emu_memset_sync,
    .ipc_export = emu_ipc_export,
    .ipc_import = emu_ipc_import,
    .ipc_close = emu_ipc_close,
    .reduce = emu_reduce,
    .reduce_multi = emu_reduce_multi,
    /* fast-path additions */
    .stream_wait_event = emu_stream_wait_event,
    .stream_query = emu_stream_query,
    .host_alloc_mapped = emu_host_alloc_mapped,
    .fused_allreduce = emu_fused_allreduce,
};
