/*
 * coll_gpu_team.c - node team setup and teardown, the shared control block's signals, and the
 * registration caches (our exports, peers' imports).
 *
 * Setup is collective over the communicator and runs through the saved host allgather, in
 * two rounds, so that every rank reaches the same verdict:
 *
 *   round 1: {ok, GPU uuid, scratch IPC handle, control block name (rank 0)}
 *            each rank: allocate + export scratch; rank 0 also creates the control block
 *   round 2: {ok, team summary and ring (rank 0)}  after mapping every peer's scratch and
 *            the control block; rank 0 then unlinks the control block's name (the mappings
 *            stay).  Rank 0 alone asks the node model, so that ranks whose models differ
 *            (CUDA_VISIBLE_DEVICES) still agree on the algorithms and the ring.
 *
 * Any failure anywhere makes every rank drop the team: the communicator keeps the staged path.
 */
#include "ompi_config.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ompi/proc/proc.h"
#include "opal/mca/hwloc/hwloc-internal.h"

#include "coll_gpu.h"

#define COLL_GPU_CTL_MAGIC 0x636f6c6c67707531ULL /* "collgpu1" */

/* Round 2: whether the rank mapped everything, and (from rank 0) the team's summary and ring
 * (ring[i] is the rank at ring position i). */
typedef struct team_card2_t {
    int ok;
    topo_team_info_t info;
    int ring[COLL_GPU_TEAM_MAX];
} team_card2_t;

typedef struct team_card_t {
    int ok;
    dev_uuid_t uuid;
    dev_ipc_handle_t scratch;
    char ctl_name[64];
} team_card_t;

/* Exchange one fixed-size record per rank through the saved host allgather. */
static int team_allgather(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                          const void *mine, void *all, size_t bytes)
{
    return m->prev_allgather.fn(mine, (int) bytes, MPI_BYTE, all, (int) bytes, MPI_BYTE, comm,
                                m->prev_allgather.module);
}

/* Are all ranks of the communicator on this node?  Local and uniform: Open MPI knows every
 * peer's locality without communication. */
static bool all_on_node(struct ompi_communicator_t *comm)
{
    int size = ompi_comm_size(comm);
    for (int i = 0; i < size; ++i) {
        ompi_proc_t *proc = ompi_comm_peer_lookup(comm, i);
        if (NULL == proc) {
            return false;
        }
        if (proc != ompi_proc_local() && !OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags)) {
            return false;
        }
    }
    return true;
}

static void team_release_memory(coll_gpu_team_t *t)
{
    mca_coll_gpu_nvl_release(t);
    for (int i = 0; i < COLL_GPU_REGCACHE_ENTRIES; ++i) {
        if (NULL != t->cache[i].mapped) {
            (void) dev_ipc_close(t->cache[i].mapped);
            t->cache[i].mapped = NULL;
        }
    }
    for (int p = 0; p < COLL_GPU_TEAM_MAX; ++p) {
        if (NULL != t->peer_scratch[p] && t->peer_scratch[p] != t->scratch) {
            (void) dev_ipc_close(t->peer_scratch[p]);
        }
        t->peer_scratch[p] = NULL;
    }
    if (NULL != t->scratch) {
        (void) dev_mem_free(t->scratch);
        t->scratch = NULL;
    }
    for (int i = 0; i < COLL_GPU_CHAIN_DEPTH; ++i) {
        if (NULL != t->events[i]) {
            (void) dev_event_destroy(t->events[i]);
            t->events[i] = NULL;
        }
    }
    if (NULL != t->stream) {
        (void) dev_stream_destroy(t->stream);
        t->stream = NULL;
    }
    if (NULL != t->ctl) {
        munmap(t->ctl, sizeof(coll_gpu_ctl_t));
        t->ctl = NULL;
    }
}

void mca_coll_gpu_team_destroy(mca_coll_gpu_module_t *m)
{
    coll_gpu_team_t *t = m->team;
    if (NULL == t) {
        return;
    }
    team_release_memory(t);
    free(t);
    m->team = NULL;
}

/* Map (and with create, make) the control block. */
static coll_gpu_ctl_t *ctl_map(const char *name, bool create, int nranks)
{
    coll_gpu_ctl_t *ctl;
    int fd = shm_open(name, create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
    if (0 > fd) {
        return NULL;
    }
    if (create && 0 != ftruncate(fd, sizeof(coll_gpu_ctl_t))) {
        close(fd);
        shm_unlink(name);
        return NULL;
    }
    ctl = mmap(NULL, sizeof(coll_gpu_ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (MAP_FAILED == ctl) {
        if (create) {
            shm_unlink(name);
        }
        return NULL;
    }
    if (create) {
        memset(ctl, 0, sizeof(*ctl));
        ctl->nranks = nranks;
        ctl->magic = COLL_GPU_CTL_MAGIC;
    }
    return ctl;
}

/* Summarise the team's GPUs from this process' node model (rank 0 does it for the team: ranks
 * may see different models, e.g. with different CUDA_VISIBLE_DEVICES, and must not choose
 * differently), and give the team's ring: ring[i] is the rank at position i of topo_ring()
 * over the ranks' GPUs (widest slowest hop, ranks sharing a GPU adjacent, rank 0 first); the
 * summary's peer-access verdict for ring neighbours is about that same ring.  GPUs the model
 * does not know (the emulated device, unless a topology file names its UUIDs) are taken as
 * what the team proved it can do: every pair mapped the other's memory, over NVLink-class
 * paths; their ring is 0..n-1. */
void mca_coll_gpu_team_summary(coll_gpu_team_t *t, topo_team_info_t *info, int *ring)
{
    const topo_t *model = mca_coll_gpu_topo();
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    int idx[COLL_GPU_TEAM_MAX];
    bool known = (NULL != model);

    for (int p = 0; p < t->size; ++p) {
        ring[p] = p;
    }
    for (int p = 0; known && p < t->size; ++p) {
        idx[p] = topo_find_gpu_by_uuid(model, t->uuid[p].bytes);
        known = (0 <= idx[p]);
    }
    if (known && TOPO_OK != topo_ring(model, idx, t->size, ring, NULL)) {
        for (int p = 0; p < t->size; ++p) {
            ring[p] = p; /* out of memory in the search: any ring is correct, this one too */
        }
    }
    if (known
        && TOPO_OK == topo_team_info(model, idx, t->size, ring,
                                     (topo_p2p_level_t) c->p2p_level, c->p2p_disable, info)) {
        return;
    }
    for (int p = 0; p < t->size; ++p) {
        ring[p] = p;
    }
    memset(info, 0, sizeof(*info));
    info->n = t->size;
    info->ngpus = t->ngpus;
    info->worst = info->best = (1 == t->ngpus) ? TOPO_LINK_X : TOPO_LINK_NVL;
    info->p2p_all = info->p2p_ring = !(c->p2p_disable && 1 < t->ngpus);
    snprintf(info->label, sizeof(info->label), "%s", (1 == t->ngpus) ? "X" : "P2P");
}

/* Take rank 0's ring: position <-> rank maps.  Every rank checks the same card, so a ring that
 * is not a permutation of the ranks (it cannot happen short of memory corruption) is refused
 * by all alike. */
static bool team_set_ring(coll_gpu_team_t *t, const int *ring)
{
    for (int p = 0; p < t->size; ++p) {
        t->ring_pos[p] = -1;
    }
    for (int i = 0; i < t->size; ++i) {
        if (ring[i] < 0 || ring[i] >= t->size || 0 <= t->ring_pos[ring[i]]) {
            return false;
        }
        t->ring_rank[i] = ring[i];
        t->ring_pos[ring[i]] = i;
    }
    return true;
}

/* Build the team.  Collective; every rank returns the same verdict (OMPI_SUCCESS when the
 * team is ready). */
static int team_setup(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm)
{
    static _Atomic int ctl_counter = 0;
    coll_gpu_team_t *t = m->team;
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    team_card_t mine, *cards = NULL;
    team_card2_t mine2, *cards2 = NULL;
    int ordinal = 0, rc;
    bool all_ok = true;

    memset(&mine, 0, sizeof(mine));
    t->size = size;
    t->rank = rank;
    t->slot_bytes = mca_coll_gpu_component.oneshot_slot_bytes;

    /* local checks first; a failing rank still takes part in both rounds */
    mine.ok = (size <= COLL_GPU_TEAM_MAX) && all_on_node(comm);
    if (mine.ok) {
        mine.ok = DEV_OK == dev_current_device(&ordinal)
                  && DEV_OK == dev_device_uuid(ordinal, &mine.uuid)
                  && DEV_OK == dev_stream_create(&t->stream)
                  && DEV_OK == dev_mem_alloc(&t->scratch, 2 * t->slot_bytes)
                  /* zero before any peer can map it: the fused allreduce's flags live here */
                  && DEV_OK == dev_memset(t->scratch, 0, 2 * t->slot_bytes)
                  && DEV_OK == dev_ipc_export(t->scratch, &mine.scratch);
        for (int i = 0; mine.ok && i < COLL_GPU_CHAIN_DEPTH; ++i) {
            mine.ok = DEV_OK == dev_event_create(&t->events[i]);
        }
        if (!mine.ok) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:team (cid %d): rank %d: %s",
                             coll_gpu_comm_cid(comm), rank, dev_error_string());
        }
    }
    if (mine.ok && 0 == rank) {
        snprintf(mine.ctl_name, sizeof(mine.ctl_name), "/collgpu-ctl-%d-%d", (int) getpid(),
                 atomic_fetch_add(&ctl_counter, 1) + 1);
        t->ctl = ctl_map(mine.ctl_name, true, size);
        mine.ok = (NULL != t->ctl);
    }

    cards = calloc((size_t) size, sizeof(*cards));
    cards2 = calloc((size_t) size, sizeof(*cards2));
    memset(&mine2, 0, sizeof(mine2));
    if (NULL == cards || NULL == cards2) {
        /* the exchange must still happen: take part with a failed card */
        mine.ok = 0;
    }
    rc = team_allgather(m, comm, &mine, cards, sizeof(mine));
    if (OMPI_SUCCESS != rc || NULL == cards || NULL == cards2) {
        free(cards);
        free(cards2);
        return OMPI_SUCCESS == rc ? OMPI_ERR_OUT_OF_RESOURCE : rc;
    }
    for (int p = 0; p < size; ++p) {
        all_ok = all_ok && cards[p].ok;
    }

    /* round 2: map every peer's scratch and the control block */
    mine2.ok = all_ok;
    if (mine2.ok) {
        for (int p = 0; p < size && mine2.ok; ++p) {
            t->uuid[p] = cards[p].uuid;
            if (p == rank) {
                t->peer_scratch[p] = t->scratch;
            } else {
                mine2.ok = DEV_OK == dev_ipc_import(&cards[p].scratch, &t->peer_scratch[p]);
            }
        }
        if (mine2.ok && 0 != rank) {
            t->ctl = ctl_map(cards[0].ctl_name, false, size);
            mine2.ok = (NULL != t->ctl) && COLL_GPU_CTL_MAGIC == t->ctl->magic;
        }
        if (!mine2.ok) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR,
                             "coll:gpu:team (cid %d): rank %d cannot map its peers: %s",
                             coll_gpu_comm_cid(comm), rank, dev_error_string());
        }
    }
    if (mine2.ok && 0 == rank) {
        t->ngpus = 0;
        for (int p = 0; p < size; ++p) {
            bool seen = false;
            for (int q = 0; q < p; ++q) {
                seen = seen || 0 == memcmp(&t->uuid[p], &t->uuid[q], sizeof(dev_uuid_t));
            }
            t->ngpus += seen ? 0 : 1;
        }
        mca_coll_gpu_team_summary(t, &mine2.info, mine2.ring);
    }
    rc = team_allgather(m, comm, &mine2, cards2, sizeof(mine2));
    if (0 == rank && '\0' != mine.ctl_name[0]) {
        shm_unlink(mine.ctl_name); /* every rank has mapped it, or gives up */
    }
    for (int p = 0; OMPI_SUCCESS == rc && p < size; ++p) {
        all_ok = all_ok && cards2[p].ok;
    }
    if (OMPI_SUCCESS == rc && all_ok) {
        t->info = cards2[0].info;
        t->ngpus = t->info.ngpus;
        all_ok = team_set_ring(t, cards2[0].ring);
    }
    free(cards);
    free(cards2);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    return all_ok ? OMPI_SUCCESS : OMPI_ERR_NOT_AVAILABLE;
}

coll_gpu_team_t *mca_coll_gpu_team_get(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm)
{
    coll_gpu_team_t *t = m->team;

    if (NULL != t) {
        return COLL_GPU_TEAM_READY == t->state ? t : NULL;
    }
    t = calloc(1, sizeof(*t));
    if (NULL == t) {
        return NULL;
    }
    m->team = t;
    if (OMPI_SUCCESS == team_setup(m, comm)) {
        char ring[COLL_GPU_TEAM_MAX * 4] = "";
        size_t len = 0;
        t->state = COLL_GPU_TEAM_READY;
        for (int i = 0; i < t->size && len < sizeof(ring); ++i) {
            len += (size_t) snprintf(ring + len, sizeof(ring) - len, "%s%d", i ? " " : "",
                                     t->ring_rank[i]);
        }
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY,
                         "coll:gpu:team (cid %d): %d ranks on %d GPU(s), worst link %s%s, "
                         "scratch 2 x %zu B, ring %s",
                         coll_gpu_comm_cid(comm), t->size, t->ngpus, t->info.label,
                         t->info.p2p_all ? "" : " (peer access refused for some pairs)",
                         t->slot_bytes, ring);
        if ('\0' != t->info.warning[0] && 0 == t->rank) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:team (cid %d): warning: %s",
                             coll_gpu_comm_cid(comm), t->info.warning);
        }
        return t;
    }
    team_release_memory(t);
    t->state = COLL_GPU_TEAM_FAILED;
    COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR,
                     "coll:gpu:team (cid %d): no NVLink/IPC team for this communicator; its "
                     "device-buffer calls stay on the staged path",
                     coll_gpu_comm_cid(comm));
    return NULL;
}

/* ---- signals ------------------------------------------------------------------------------ */

/* Spin politely: the ranks of a team may outnumber the cores (CI, several ranks per GPU). */
static inline void spin_pause(unsigned *spins)
{
    if (++*spins > 1000) {
        sched_yield();
    }
}

void mca_coll_gpu_team_arrive(coll_gpu_team_t *t, uint64_t seq)
{
    atomic_store_explicit(&t->ctl->rank[t->rank].arrive, seq, memory_order_release);
}

void mca_coll_gpu_team_done(coll_gpu_team_t *t, uint64_t seq)
{
    atomic_store_explicit(&t->ctl->rank[t->rank].done, seq, memory_order_release);
}

void mca_coll_gpu_team_wait_arrive(coll_gpu_team_t *t, int peer, uint64_t seq)
{
    unsigned spins = 0;
    while (atomic_load_explicit(&t->ctl->rank[peer].arrive, memory_order_acquire) < seq) {
        spin_pause(&spins);
    }
}

void mca_coll_gpu_team_wait_done(coll_gpu_team_t *t, int peer, uint64_t seq)
{
    unsigned spins = 0;
    while (atomic_load_explicit(&t->ctl->rank[peer].done, memory_order_acquire) < seq) {
        spin_pause(&spins);
    }
}

/* Steps (ring allreduce) and chunks (chain bcast): published after the data they cover is
 * final in device memory, so that a peer that sees the count may read that data. */
void mca_coll_gpu_team_step(coll_gpu_team_t *t, uint64_t seq, uint64_t step)
{
    atomic_store_explicit(&t->ctl->rank[t->rank].step, COLL_GPU_STEP(seq, step),
                          memory_order_release);
}

bool mca_coll_gpu_team_step_reached(coll_gpu_team_t *t, int peer, uint64_t seq, uint64_t step)
{
    return atomic_load_explicit(&t->ctl->rank[peer].step, memory_order_acquire)
           >= COLL_GPU_STEP(seq, step);
}

/* Wait until peer completed step of call seq, or failed in it (then its failure flag is set;
 * the caller checks it). */
void mca_coll_gpu_team_wait_step(coll_gpu_team_t *t, int peer, uint64_t seq, uint64_t step)
{
    unsigned spins = 0;
    while (!mca_coll_gpu_team_step_reached(t, peer, seq, step)) {
        spin_pause(&spins);
    }
}

void mca_coll_gpu_team_pause(unsigned *spins)
{
    spin_pause(spins);
}

/* ---- registration caches -------------------------------------------------------------------- */

/* Publish a user buffer of ours for this call: its allocation's handle (exported once per
 * allocation and kept) and its offset. */
int mca_coll_gpu_team_export(coll_gpu_team_t *t, const void *ptr, coll_gpu_xbuf_t *out)
{
    coll_gpu_export_entry_t *slot = NULL;
    void *base;
    size_t size;
    uint64_t id;
    int rc;

    rc = dev_mem_range(ptr, &base, &size, &id);
    if (DEV_OK != rc) {
        return rc;
    }
    out->base = (uint64_t) (uintptr_t) base;
    out->buffer_id = id;
    out->offset = (uint64_t) ((const char *) ptr - (const char *) base);
    ++t->clock;
    for (int i = 0; i < COLL_GPU_REGCACHE_ENTRIES; ++i) {
        coll_gpu_export_entry_t *e = &t->exports[i];
        if (0 != e->last_use && e->base == out->base && e->buffer_id == id) {
            e->last_use = t->clock;
            out->handle = e->handle;
            return DEV_OK;
        }
        if (NULL == slot || e->last_use < slot->last_use) {
            slot = e; /* empty or least recently used */
        }
    }
    rc = dev_ipc_export(base, &slot->handle);
    if (DEV_OK != rc) {
        slot->last_use = 0;
        return rc;
    }
    slot->base = out->base;
    slot->buffer_id = id;
    slot->last_use = t->clock;
    out->handle = slot->handle;
    return DEV_OK;
}

/* A peer's published buffer, mapped here: from the cache when the same allocation (base and
 * buffer id) was mapped before, else imported, evicting the least recently used mapping. */
int mca_coll_gpu_team_import(coll_gpu_team_t *t, int peer, const coll_gpu_xbuf_t *x, void **ptr)
{
    coll_gpu_regcache_entry_t *slot = NULL;
    void *mapped;
    int rc;

    ++t->clock;
    for (int i = 0; i < COLL_GPU_REGCACHE_ENTRIES; ++i) {
        coll_gpu_regcache_entry_t *e = &t->cache[i];
        if (NULL != e->mapped && e->peer == peer && e->base == x->base
            && e->buffer_id == x->buffer_id) {
            e->last_use = t->clock;
            ++t->cache_hits;
            *ptr = (char *) e->mapped + x->offset;
            return DEV_OK;
        }
        if (NULL == slot || NULL == e->mapped
            || (NULL != slot->mapped && e->last_use < slot->last_use)) {
            slot = e;
        }
    }
    ++t->cache_misses;
    if (NULL != slot->mapped) {
        (void) dev_ipc_close(slot->mapped);
        slot->mapped = NULL;
    }
    rc = dev_ipc_import(&x->handle, &mapped);
    if (DEV_OK != rc) {
        return rc;
    }
    slot->peer = peer;
    slot->base = x->base;
    slot->buffer_id = x->buffer_id;
    slot->mapped = mapped;
    slot->last_use = t->clock;
    *ptr = (char *) mapped + x->offset;
    return DEV_OK;
}

/* ---- failures ------------------------------------------------------------------------------ */

/* Mark this rank failed in call seq.  Its step counter jumps past every step of the call, so
 * that neighbours waiting on it wake up, read the flag and fail too: a failure travels along
 * the ring instead of leaving a peer waiting. */
void mca_coll_gpu_team_fail(coll_gpu_team_t *t, uint64_t seq)
{
    atomic_store_explicit(&t->ctl->rank[t->rank].failed, seq, memory_order_release);
    atomic_store_explicit(&t->ctl->rank[t->rank].step, COLL_GPU_STEP(seq, COLL_GPU_STEP_FAILED),
                          memory_order_release);
}

/* Did peer fail in call seq?  Read after the peer's arrive or done for that call. */
bool mca_coll_gpu_team_failed(coll_gpu_team_t *t, int peer, uint64_t seq)
{
    return seq == atomic_load_explicit(&t->ctl->rank[peer].failed, memory_order_acquire);
}

bool mca_coll_gpu_team_any_failed(coll_gpu_team_t *t, uint64_t seq)
{
    for (int p = 0; p < t->size; ++p) {
        if (mca_coll_gpu_team_failed(t, p, seq)) {
            return true;
        }
    }
    return false;
}
