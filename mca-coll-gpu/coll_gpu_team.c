/*
 * coll_gpu_team.c - node team setup and teardown, the shared control block's signals, and the
 * registration caches (our exports, peers' imports).
 *
 * Setup is collective over the communicator, in two rounds of point-to-point messages of
 * coll/gpu's own tags (each rank sends its card to every peer), so that every rank reaches the
 * same verdict; it never waits inside a nonblocking call (progress carries it on:
 * mca_coll_gpu_team_begin, mca_coll_gpu_team_setup_step), and a blocking call waits for it
 * (mca_coll_gpu_team_get, in the engine, which steps it under its lock):
 *
 *   round 1: {ok, GPU uuid, scratch IPC handle, control block name (rank 0)}
 *            each rank: allocate + export scratch; rank 0 also creates the control block
 *   round 2: {ok, team summary and ring (rank 0)}  after mapping every peer's scratch and
 *            the control block; rank 0 then unlinks the control block's name (the mappings
 *            stay).  Rank 0 alone asks the node model, so that ranks whose models differ
 *            (CUDA_VISIBLE_DEVICES) still agree on the algorithms and the ring.
 *
 * Every rank goes through both rounds whatever happened to it before: a local failure (an
 * allocation, an export, a mapping) travels in the rank's card, so that every rank reaches the
 * same verdict in the same round, and a failing rank never leaves its peers waiting in a round
 * it skipped.  Any failure anywhere makes every rank drop the team, release what it built
 * (scratch, mappings, control block and its name) and keep the staged path for that
 * communicator, permanently (a setup that a nonblocking call began keeps its queue, whose
 * calls then run through the host: coll_gpu_fallback.c).
 *
 * The calls' own signals (arrive, done, step, failed) are written and read here; the engine
 * (coll_gpu_engine.c) polls them and never blocks on a peer.  Its waits, and the host exchanges
 * of the setup and of the path agreement (watched from the progress engine), report once when
 * they have waited longer than coll_gpu_hang_warn_seconds; an engine wait gives up after
 * coll_gpu_hang_error_seconds (mca_coll_gpu_team_watch: then the call fails on every rank).
 */
#include "ompi_config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"
#include "ompi/request/request.h"
#include "opal/mca/hwloc/hwloc-internal.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/show_help.h"

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
    coll_gpu_xbuf_t scratch;
    char ctl_name[64];
} team_card_t;

/* What identifies the allocation holding ptr to an importer (all but the handle). */
static int team_describe(const void *ptr, coll_gpu_xbuf_t *x)
{
    void *base;
    size_t size;
    uint64_t id;
    int rc = dev_mem_range(ptr, &base, &size, &id);

    if (DEV_OK != rc) {
        return rc;
    }
    /* not getpid(): ranks in separate PID namespaces that share IPC may have the same pid */
    x->owner = dev_process_identity();
    x->base = (uint64_t) (uintptr_t) base;
    x->size = (uint64_t) size;
    x->buffer_id = id;
    x->offset = (uint64_t) ((const char *) ptr - (const char *) base);
    return DEV_OK;
}

/* ---- hang reports ------------------------------------------------------------------------ */

/* A message of help-coll-gpu.txt, printed by this rank itself: opal_show_help would fold the
 * same report from other ranks and communicators into "N more processes have sent help
 * message" (each waiting rank's line says whom it waits for), and it hands the text to mpirun
 * without waiting, so a message sent shortly before the job ends can be lost. */
static void team_say(const char *topic, ...)
{
    va_list ap;
    char *msg;
    size_t len;

    va_start(ap, topic);
    msg = opal_show_help_vstring("help-coll-gpu.txt", topic, false, ap);
    va_end(ap);
    if (NULL == msg) {
        return;
    }
    len = strlen(msg);
    while (0 < len && '\n' == msg[len - 1]) {
        msg[--len] = '\0';
    }
    opal_output(0, "%s", msg);
    free(msg);
}

/* "Allreduce" from "allreduce": the MPI name of a collective in the messages. */
static void mpi_name(const char *what, char *out, size_t len)
{
    snprintf(out, len, "%s", (NULL != what) ? what : "collective");
    if ('\0' != out[0]) {
        out[0] = (char) toupper((unsigned char) out[0]);
    }
}

/* The host exchange of ours that this thread is in (team setup, agreement), for the progress
 * engine's watch below; NULL when none. */
static _Thread_local coll_gpu_host_watch_t *host_watch_now;
static _Atomic bool host_watch_registered;

/* Called by opal_progress (low priority: every 8th turn) in every wait of the process; costs a
 * thread-local load unless this thread is in one of our host exchanges.  The exchange is a
 * blocking call of the component below us (tuned), which spins in opal_progress: so it stays as
 * fast as before and still reports a long wait. */
static int host_watch_progress(void)
{
    coll_gpu_host_watch_t *w = host_watch_now;
    double now;

    if (NULL == w || w->warned || 0 != (++w->polls & 63)) {
        return 0;
    }
    now = mca_coll_gpu_now();
    if (0.0 == w->start) {
        w->start = now;
    } else if (now - w->start >= (double) mca_coll_gpu_component.hang_warn_seconds) {
        char name[32];
        mpi_name(w->what, name, sizeof(name));
        w->warned = true;
        team_say("hang-warning-host", ompi_comm_rank(w->comm), (int) (now - w->start), name,
                 coll_gpu_comm_cid(w->comm), w->stage);
    }
    return 0;
}

void mca_coll_gpu_host_watch_begin(coll_gpu_host_watch_t *w, struct ompi_communicator_t *comm,
                                   const char *what, const char *stage)
{
    w->active = (0 < mca_coll_gpu_component.hang_warn_seconds);
    if (!w->active) {
        return;
    }
    if (!atomic_load_explicit(&host_watch_registered, memory_order_acquire)) {
        static opal_mutex_t lock = OPAL_MUTEX_STATIC_INIT;
        OPAL_THREAD_LOCK(&lock);
        if (!atomic_load(&host_watch_registered)
            && OPAL_SUCCESS == opal_progress_register_lp(host_watch_progress)) {
            atomic_store(&host_watch_registered, true);
        }
        OPAL_THREAD_UNLOCK(&lock);
    }
    w->comm = comm;
    w->what = what;
    w->stage = stage;
    w->start = 0.0;
    w->polls = 0;
    w->warned = false;
    w->outer = host_watch_now;
    host_watch_now = w;
}

void mca_coll_gpu_host_watch_end(coll_gpu_host_watch_t *w)
{
    if (w->active) {
        host_watch_now = w->outer;
    }
}

void mca_coll_gpu_host_watch_finalize(void)
{
    /* the callback lives in this DSO: it must be gone before the DSO is */
    if (atomic_load(&host_watch_registered)) {
        (void) opal_progress_unregister(host_watch_progress);
        atomic_store(&host_watch_registered, false);
    }
}

/* Are all ranks of the communicator on this node?  Local and uniform: Open MPI knows every
 * peer's locality without communication. */
int mca_coll_gpu_emulated_node(struct ompi_proc_t *proc)
{
    int n = mca_coll_gpu_component.emulate_nodes, world;

    if (1 >= n) {
        return 0; /* off */
    }
    world = coll_gpu_world_size();
    return (0 < world) ? (int) (((int64_t) proc->super.proc_name.vpid * n) / world) : 0;
}

bool mca_coll_gpu_on_my_node(struct ompi_proc_t *proc)
{
    return (proc == ompi_proc_local() || OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags))
           && mca_coll_gpu_emulated_node(proc) == mca_coll_gpu_emulated_node(ompi_proc_local());
}

/* Every rank sees a peer off its node as soon as two ranks sit on different nodes, and the
 * emulated node of every member is a function of its name: the answer is the same on all.
 * Asked once per communicator (the device path asks it at every call). */
bool mca_coll_gpu_spans_nodes(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm)
{
    bool spans = false;

    if (0 != m->spans) {
        return 2 == m->spans;
    }
    for (int i = 0; !OMPI_COMM_IS_INTER(comm) && !spans && i < ompi_comm_size(comm); ++i) {
        spans = !mca_coll_gpu_on_my_node(ompi_comm_peer_lookup(comm, i));
    }
    m->spans = spans ? 2 : 1;
    return spans;
}

bool mca_coll_gpu_all_on_host(struct ompi_communicator_t *comm)
{
    int size = ompi_comm_size(comm);
    for (int i = 0; i < size; ++i) {
        ompi_proc_t *proc = ompi_comm_peer_lookup(comm, i);
        if (NULL == proc
            || (proc != ompi_proc_local() && !OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags))) {
            return false;
        }
    }
    return true;
}

/* Give back the mappings the team's last call held (they stay cached for other teams). */
static void team_release_call_holds(coll_gpu_team_t *t)
{
    for (int i = 0; i < t->nholds; ++i) {
        mca_coll_gpu_ipcmap_release(&t->holds[i], false);
    }
    t->nholds = 0;
}

/* What the setup built: peers' scratch mappings, our scratch, events, stream, control block.
 * (A setup that failed gives it back from progress, where the queued calls' own release, in
 * mca_coll_gpu_team_destroy, must not run: it waits for them.) */
static void team_release_built(coll_gpu_team_t *t)
{
    for (int p = 0; p < COLL_GPU_TEAM_MAX; ++p) {
        /* the peers free their scratch with the team: close, do not cache; and whatever else
         * of theirs is cached unheld may be memory they have freed, held alive by us */
        mca_coll_gpu_ipcmap_release(&t->scratch_hold[p], true);
        t->peer_scratch[p] = NULL;
        if (0 != t->owner[p] && p != t->rank) {
            mca_coll_gpu_ipcmap_forget(t->owner[p]);
        }
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

/* What m->team holds once the communicator is known to have no team: one object for all such
 * communicators (never freed), so that a failed setup needs no memory to be remembered. */
static coll_gpu_team_t team_unavailable = {.state = COLL_GPU_TEAM_FAILED};

void mca_coll_gpu_team_destroy(mca_coll_gpu_module_t *m)
{
    coll_gpu_team_t *t = m->team;

    m->team = NULL;
    /* a setup still in flight (no call waited for it: only a communicator freed by a program
     * that never completed its calls): its messages may still land in it, so it stays, and so
     * does the team */
    if (NULL != t && &team_unavailable != t && NULL == t->setup) {
        mca_coll_gpu_nvl_release(t);
        team_release_call_holds(t);
        team_release_built(t);
        free(t);
    }
}

/* Names of control blocks team_setup tries before it gives up. */
#define CTL_NAME_TRIES 1024

void *mca_coll_gpu_shm_map(const char *name, bool create, size_t len)
{
    void *p;
    int fd = shm_open(name, create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
    if (0 > fd) {
        return NULL;
    }
    if (create && 0 != ftruncate(fd, (off_t) len)) {
        close(fd);
        shm_unlink(name);
        return NULL;
    }
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (MAP_FAILED == p) {
        if (create) {
            shm_unlink(name);
        }
        return NULL;
    }
    return p;
}

/* Map (and with create, make) the control block; NULL with errno set when it fails. */
static coll_gpu_ctl_t *ctl_map(const char *name, bool create, int nranks)
{
    coll_gpu_ctl_t *ctl = mca_coll_gpu_shm_map(name, create, sizeof(coll_gpu_ctl_t));
    if (NULL == ctl) {
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
static void team_summary(coll_gpu_team_t *t, topo_team_info_t *info, int *ring)
{
    const topo_t *model = mca_coll_gpu_topo();
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    int idx[COLL_GPU_TEAM_MAX];
    bool known = (NULL != model);

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

/* ---- setup --------------------------------------------------------------------------------- */

/* The setup's exchange in flight (coll_gpu_team_t.setup; the file's header).  Point-to-point
 * messages of tags of its own run beside whatever else the program has started on the
 * communicator; a blocking exchange would hang programs that start their first nonblocking
 * calls of two communicators in different orders on different ranks. */
struct coll_gpu_team_setup_t {
    struct ompi_communicator_t *comm;
    const char *what;
    int round;                   /* 1 or 2: that round's messages are in flight */
    team_card_t mine, cards[COLL_GPU_TEAM_MAX];
    team_card2_t mine2, cards2[COLL_GPU_TEAM_MAX];
    ompi_request_t *reqs[2 * COLL_GPU_TEAM_MAX];
    int nreqs;
    int rc;                      /* the first error of the exchange itself */
    char ctl_name[sizeof(((team_card_t *) 0)->ctl_name)];
    char why[256];               /* this rank's own reason, when the failure is its own */
};

/* Post one round: our card to every peer, theirs into all[] (ours copied in). */
static void exchange_post(coll_gpu_team_setup_t *st, int tag, const void *mine, void *all,
                          size_t bytes)
{
    struct ompi_communicator_t *comm = st->comm;
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm), rc;

    st->nreqs = 0;
    memcpy((char *) all + (size_t) rank * bytes, mine, bytes);
    for (int p = 0; p < size; ++p) {
        if (p == rank) {
            continue;
        }
        rc = MCA_PML_CALL(irecv((char *) all + (size_t) p * bytes, bytes, MPI_BYTE, p, tag, comm,
                                &st->reqs[st->nreqs]));
        st->nreqs += (OMPI_SUCCESS == rc);
        st->rc = (OMPI_SUCCESS == st->rc) ? rc : st->rc;
        rc = MCA_PML_CALL(isend(mine, bytes, MPI_BYTE, p, tag, MCA_PML_BASE_SEND_STANDARD, comm,
                                &st->reqs[st->nreqs]));
        st->nreqs += (OMPI_SUCCESS == rc);
        st->rc = (OMPI_SUCCESS == st->rc) ? rc : st->rc;
    }
}

bool mca_coll_gpu_requests_done(ompi_request_t **reqs, int *nreqs, int *first_error)
{
    int flag = 0, rc;

    if (0 == *nreqs) {
        return true;
    }
    rc = ompi_request_test_all((size_t) *nreqs, reqs, &flag, MPI_STATUSES_IGNORE);
    if (!flag && OMPI_SUCCESS == rc) {
        return false;
    }
    if (OMPI_SUCCESS != rc && OMPI_SUCCESS == *first_error) {
        *first_error = rc;
    }
    *nreqs = 0;
    return true;
}

/* Has the round's exchange ended (its requests freed)? */
static bool exchange_done(coll_gpu_team_setup_t *st)
{
    return mca_coll_gpu_requests_done(st->reqs, &st->nreqs, &st->rc);
}

/* Round 1's card: this rank's local work (a failing rank still takes part, with a failed
 * card; why gets its reason). */
static void setup_local(coll_gpu_team_t *t, coll_gpu_team_setup_t *st)
{
    static _Atomic int ctl_counter = 0;
    struct ompi_communicator_t *comm = st->comm;
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm), ordinal = 0;
    team_card_t *mine = &st->mine;

    mine->ok = mca_coll_gpu_all_on_host(comm);
    if (mine->ok) {
        t->slot_bytes = mca_coll_gpu_component.oneshot_slot_bytes;
        mine->ok = DEV_OK == dev_current_device(&ordinal)
                   && DEV_OK == dev_device_uuid(ordinal, &mine->uuid)
                   && DEV_OK == dev_stream_create(&t->stream);
        t->device = ordinal;
        if (mine->ok && rank == mca_coll_gpu_component.test_fail_team) {
            /* testing only: this rank's scratch allocation fails */
            mine->ok = 0;
            snprintf(st->why, sizeof(st->why), "device scratch allocation refused by "
                                               "coll_gpu_test_fail_team");
        } else if (mine->ok) {
            mine->ok = DEV_OK == dev_mem_alloc(&t->scratch, 2 * t->slot_bytes)
                       /* zero before any peer can map it: the fused allreduce's flags live here */
                       && DEV_OK == dev_memset(t->scratch, 0, 2 * t->slot_bytes)
                       && DEV_OK == team_describe(t->scratch, &mine->scratch)
                       && DEV_OK == dev_ipc_export(t->scratch, &mine->scratch.handle);
        }
        for (int i = 0; mine->ok && i < COLL_GPU_CHAIN_DEPTH; ++i) {
            mine->ok = DEV_OK == dev_event_create(&t->events[i]);
        }
        if (!mine->ok && '\0' == st->why[0]) {
            snprintf(st->why, sizeof(st->why), "%s", dev_error_string());
        }
    }
    if (mine->ok && 0 == rank) {
        /* The name is made from the pid, and a process killed between the two rounds (a job
         * ended by a timeout or an abort) leaves its name behind; pids wrap (at 32768 by
         * default), so a later process with the same pid finds its first names taken.  A
         * taken name is skipped, never removed here: in another pid namespace that shares
         * /dev/shm its owner may be alive.  (On the emulated device, dev_open removes the names
         * of pids dead in this namespace, these among them: kernels/dev_emulated.c.) */
        for (int tries = 0; tries < CTL_NAME_TRIES; ++tries) {
            snprintf(st->ctl_name, sizeof(st->ctl_name), "/collgpu-ctl-%d-%d", (int) getpid(),
                     atomic_fetch_add(&ctl_counter, 1) + 1);
            t->ctl = ctl_map(st->ctl_name, true, size);
            if (NULL != t->ctl || EEXIST != errno) {
                break;
            }
        }
        mine->ok = (NULL != t->ctl);
        if (mine->ok) {
            memcpy(mine->ctl_name, st->ctl_name, sizeof(st->ctl_name));
        } else {
            snprintf(st->why, sizeof(st->why), "cannot create the control block %s: %s",
                     st->ctl_name, strerror(errno));
            st->ctl_name[0] = '\0'; /* ctl_map removed it */
        }
    }
}

/* Round 2's card, once every card of round 1 is in: map every peer's scratch and the control
 * block; rank 0 summarises the team. */
static void setup_map(coll_gpu_team_t *t, coll_gpu_team_setup_t *st)
{
    int size = ompi_comm_size(st->comm), rank = ompi_comm_rank(st->comm);
    bool all_ok = (OMPI_SUCCESS == st->rc);
    team_card2_t *mine2 = &st->mine2;

    for (int p = 0; p < size; ++p) {
        all_ok = all_ok && st->cards[p].ok;
    }
    mine2->ok = all_ok;
    for (int p = 0; mine2->ok && p < size; ++p) {
        t->uuid[p] = st->cards[p].uuid;
        t->owner[p] = st->cards[p].scratch.owner;
        if (p == rank) {
            t->peer_scratch[p] = t->scratch;
        } else {
            mine2->ok = DEV_OK == mca_coll_gpu_ipcmap_open(&st->cards[p].scratch,
                                                           &t->peer_scratch[p],
                                                           &t->scratch_hold[p]);
        }
    }
    if (mine2->ok && 0 != rank) {
        t->ctl = ctl_map(st->cards[0].ctl_name, false, size);
        mine2->ok = (NULL != t->ctl) && COLL_GPU_CTL_MAGIC == t->ctl->magic;
    }
    if (all_ok && !mine2->ok) {
        snprintf(st->why, sizeof(st->why), "cannot map its peers' memory: %s",
                 dev_error_string());
    }
    if (mine2->ok && 0 == rank) {
        t->ngpus = 0;
        for (int p = 0; p < size; ++p) {
            bool seen = false;
            for (int q = 0; q < p; ++q) {
                seen = seen || 0 == memcmp(&t->uuid[p], &t->uuid[q], sizeof(dev_uuid_t));
            }
            t->ngpus += seen ? 0 : 1;
        }
        team_summary(t, &mine2->info, mine2->ring);
    }
}

/* The verdict, once every card of round 2 is in: the same on every rank. */
static bool setup_verdict(coll_gpu_team_t *t, coll_gpu_team_setup_t *st)
{
    int size = ompi_comm_size(st->comm);
    bool all_ok = (OMPI_SUCCESS == st->rc);

    if (OMPI_SUCCESS != st->rc && '\0' == st->why[0]) {
        snprintf(st->why, sizeof(st->why), "the setup exchange failed (%d)", st->rc);
    }
    for (int p = 0; p < size; ++p) {
        all_ok = all_ok && st->cards2[p].ok;
    }
    if (all_ok) {
        t->info = st->cards2[0].info;
        t->ngpus = t->info.ngpus;
        all_ok = team_set_ring(t, st->cards2[0].ring);
    }
    return all_ok;
}

/* The team is ready, or failed: log it, announce this rank's own error, release what a failed
 * one built. */
static void setup_end(coll_gpu_team_t *t, coll_gpu_team_setup_t *st, bool ready)
{
    struct ompi_communicator_t *comm = st->comm;

    t->state = ready ? COLL_GPU_TEAM_READY : COLL_GPU_TEAM_FAILED;
    if (ready) {
        char ring[COLL_GPU_TEAM_MAX * 4] = "";
        size_t len = 0;
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
        return;
    }
    team_release_built(t);
    /* an error of this rank's own is announced (once: the setup is never tried again); a team
     * that cannot exist, or a peer's error (that peer announces it), only in the log */
    if ('\0' != st->why[0]) {
        team_say("team-failed", ompi_comm_rank(comm), coll_gpu_comm_cid(comm), st->why);
    }
    COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR,
                     "coll:gpu:team (cid %d): no NVLink/IPC team for this communicator; its "
                     "device-buffer calls stay on the staged path",
                     coll_gpu_comm_cid(comm));
}

coll_gpu_team_state_t mca_coll_gpu_team_setup_step(coll_gpu_team_t *t)
{
    coll_gpu_team_setup_t *st = t->setup;
    dev_device_scope_t scope;

    if (NULL == st || !exchange_done(st)) {
        return t->state;
    }
    /* the mappings and the end of the setup run on the team's device, whichever thread
     * progresses them (round 1's local work ran on the thread that began the setup) */
    (void) dev_device_enter(t->device, &scope);
    if (1 == st->round) {
        setup_map(t, st);
        st->round = 2;
        exchange_post(st, COLL_GPU_TAG_SETUP2, &st->mine2, st->cards2, sizeof(st->mine2));
        if (!exchange_done(st)) {
            dev_device_leave(&scope);
            return t->state;
        }
    }
    /* every rank has mapped the control block, or gives up: its name can go (on every path) */
    if ('\0' != st->ctl_name[0]) {
        shm_unlink(st->ctl_name);
    }
    setup_end(t, st, setup_verdict(t, st));
    t->setup = NULL;
    free(st);
    dev_device_leave(&scope);
    return t->state;
}

/* No host memory for the setup's state: this rank still goes through both rounds, with a
 * failed card in each, reading its peers' cards into one on the stack (not kept), a peer after
 * the other, so that every rank reaches the verdict "no team" instead of waiting for cards that
 * never come.  Blocking, unlike the setup it stands for (mca_coll_gpu_team_begin): every peer
 * posts all its messages of a round at once, so this waits for nothing but their arrival. */
static void team_setup_refused(struct ompi_communicator_t *comm)
{
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    team_card_t mine, theirs;
    team_card2_t mine2, theirs2;
    ompi_request_t *reqs[2];

    memset(&mine, 0, sizeof(mine));
    memset(&mine2, 0, sizeof(mine2));
    for (int round = 1; round <= 2; ++round) {
        void *out = (1 == round) ? (void *) &mine : (void *) &mine2;
        void *in = (1 == round) ? (void *) &theirs : (void *) &theirs2;
        size_t bytes = (1 == round) ? sizeof(mine) : sizeof(mine2);
        int tag = (1 == round) ? COLL_GPU_TAG_SETUP1 : COLL_GPU_TAG_SETUP2;
        for (int p = 0; p < size; ++p) {
            int n = 0;
            if (p == rank) {
                continue;
            }
            n += OMPI_SUCCESS == MCA_PML_CALL(irecv(in, bytes, MPI_BYTE, p, tag, comm, &reqs[n]));
            n += OMPI_SUCCESS == MCA_PML_CALL(isend(out, bytes, MPI_BYTE, p, tag,
                                                    MCA_PML_BASE_SEND_STANDARD, comm, &reqs[n]));
            (void) ompi_request_wait_all((size_t) n, reqs, MPI_STATUSES_IGNORE);
        }
    }
}

coll_gpu_team_t *mca_coll_gpu_team_begin(mca_coll_gpu_module_t *m,
                                         struct ompi_communicator_t *comm, const char *what,
                                         bool async)
{
    coll_gpu_team_t *t = m->team;
    coll_gpu_team_setup_t *st;

    if (NULL != t) {
        return t;
    }
    /* the same on every rank: they agree without an exchange that there is no team */
    if (ompi_comm_size(comm) > COLL_GPU_TEAM_MAX) {
        m->team = &team_unavailable;
        return m->team;
    }
    t = calloc(1, sizeof(*t));
    st = calloc(1, sizeof(*st));
    if (mca_coll_gpu_test_fail_alloc("team")) {
        free(st); /* testing only: as if out of host memory */
        st = NULL;
    }
    if (NULL == st || NULL == t) {
        /* the peers wait for this rank's cards: it sends failed ones and ends where they end,
         * with a failed team (one a nonblocking call began keeps its queue, as theirs do, so
         * that the calls queued there take the host fallback on every rank; without the team
         * itself, a nonblocking call's peers queue it on theirs: not covered) */
        team_say("team-failed", ompi_comm_rank(comm), coll_gpu_comm_cid(comm),
                 (NULL == st) ? "out of host memory for the setup's state (it took part with "
                                "failed cards)"
                              : "out of host memory for the team (it took part in the setup "
                                "with failed cards)");
        free(st);
        st = NULL;
        team_setup_refused(comm);
        if (NULL == t) {
            m->team = &team_unavailable;
            return m->team;
        }
    }
    for (int p = 0; p < COLL_GPU_TEAM_MAX; ++p) {
        t->scratch_hold[p].slot = UINT32_MAX; /* none (0 would name a slot) */
    }
    t->state = (NULL != st) ? COLL_GPU_TEAM_PENDING : COLL_GPU_TEAM_FAILED;
    t->async_setup = async;
    t->size = ompi_comm_size(comm);
    t->rank = ompi_comm_rank(comm);
    t->cid = coll_gpu_comm_cid(comm);
    m->team = t;
    if (NULL == st) {
        return t;
    }
    t->setup = st;
    st->comm = comm;
    st->what = what;
    st->rc = OMPI_SUCCESS;
    setup_local(t, st);
    st->round = 1;
    exchange_post(st, COLL_GPU_TAG_SETUP1, &st->mine, st->cards, sizeof(st->mine));
    return t;
}

int mca_coll_gpu_team_setup_round(const coll_gpu_team_t *t)
{
    return (NULL != t->setup) ? t->setup->round : 0;
}

void mca_coll_gpu_team_give_up(mca_coll_gpu_module_t *m)
{
    if (&team_unavailable != m->team) {
        mca_coll_gpu_team_destroy(m);
        m->team = &team_unavailable;
    }
}

/* ---- signals ------------------------------------------------------------------------------ */

/* The ranks w is still waiting for, as text: "rank(s) 1 3 to enter the call", ... */
static void team_wait_text(coll_gpu_team_t *t, const coll_gpu_wait_t *w, char *out, size_t len)
{
    size_t n = 0;

    if (COLL_GPU_WAIT_STEP == w->kind) {
        snprintf(out, len, "rank %d to reach step %lu of the call", w->peer,
                 (unsigned long) w->step);
        return;
    }
    if (COLL_GPU_WAIT_CALL == w->kind) {
        snprintf(out, len, "rank(s) %d to enter the call (the root: its plan)", w->peer);
        return;
    }
    n = (size_t) snprintf(out, len, "rank(s)");
    for (int p = 0; p < t->size && n < len; ++p) {
        _Atomic uint64_t *flag = (COLL_GPU_WAIT_DONE != w->kind) ? &t->ctl->rank[p].arrive
                                                                 : &t->ctl->rank[p].done;
        if (COLL_GPU_WAIT_RECORDS == w->kind) {
            flag = &t->ctl->rank[p].call[w->seq & 1].seq;
        }
        if ((0 > w->peer || p == w->peer)
            && atomic_load_explicit(flag, memory_order_acquire) < w->seq) {
            n += (size_t) snprintf(out + n, len - n, " %d", p);
        }
    }
    if (COLL_GPU_WAIT_FUSED == w->kind && n == strlen("rank(s)")) {
        /* every rank entered: the fused kernel waits for the data of those not finished */
        coll_gpu_wait_t done = *w;
        done.kind = COLL_GPU_WAIT_DONE;
        team_wait_text(t, &done, out, len);
        return;
    }
    if (n < len) {
        snprintf(out + n, len - n, " to %s the call",
                 (COLL_GPU_WAIT_DONE != w->kind) ? "enter" : "finish");
    }
}

static void team_report(coll_gpu_team_t *t, const coll_gpu_wait_t *w, const char *what,
                        const char *topic, double waited)
{
    char name[32], whom[COLL_GPU_TEAM_MAX * 4 + 64];

    mpi_name(what, name, sizeof(name));
    team_wait_text(t, w, whom, sizeof(whom));
    team_say(topic, t->rank, (int) waited, name, t->cid, (unsigned long) w->seq, whom);
}

/* Give up on call seq (coll_gpu_hang_error_seconds): this rank fails the call (its step counter
 * jumps past it, which releases its ring and chain neighbours) and, from now on, every later
 * call of the team too.  A peer that has not entered the call yet must never touch our memory
 * for it: abandoned is stored before we look at the peer's arrive, and the peer stores its
 * arrive before it reads the failure flags, all sequentially consistent, so either we see it
 * arrived (and keep waiting for it as usual) or it sees that we gave up (and fails without
 * touching anything of ours).  The mark stays: a peer that is still calls behind cannot tell
 * which of our later calls it would be safe to join. */
static void team_give_up(coll_gpu_team_t *t, uint64_t seq)
{
    if (0 == t->abandoned) {
        t->abandoned = seq;
        atomic_store(&t->ctl->rank[t->rank].abandoned, seq);
    }
    mca_coll_gpu_team_fail(t, seq);
}

void mca_coll_gpu_team_watch(coll_gpu_team_t *t, coll_gpu_wait_t *w, const char *what)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    double now, waited;

    if (0 >= c->hang_warn_seconds && 0 >= c->hang_error_seconds) {
        return;
    }
    now = mca_coll_gpu_now();
    if (0.0 == w->start) {
        w->start = now;
        return;
    }
    waited = now - w->start;
    if (0 < c->hang_warn_seconds && waited >= (double) c->hang_warn_seconds
        && t->warned_seq != w->seq) {
        t->warned_seq = w->seq;
        team_report(t, w, what, "hang-warning", waited);
    }
    if (0 < c->hang_error_seconds && waited >= (double) c->hang_error_seconds
        && 0 == t->abandoned) {
        team_report(t, w, what, "hang-error", waited);
        team_give_up(t, w->seq);
    }
}

bool mca_coll_gpu_team_gave_up_on(coll_gpu_team_t *t, int peer, uint64_t seq)
{
    /* the peer's arrive, sequentially consistent as the stores of arrive and abandoned are:
     * see team_give_up */
    return 0 != t->abandoned && atomic_load(&t->ctl->rank[peer].arrive) < seq;
}

bool mca_coll_gpu_team_reached(coll_gpu_team_t *t, _Atomic uint64_t *word, int peer,
                               uint64_t seq)
{
    return atomic_load_explicit(word, memory_order_acquire) >= seq
           || mca_coll_gpu_team_gave_up_on(t, peer, seq);
}

void mca_coll_gpu_team_arrive(coll_gpu_team_t *t, uint64_t seq)
{
    /* sequentially consistent: pairs with team_give_up (one locked store per call) */
    atomic_store(&t->ctl->rank[t->rank].arrive, seq);
}

void mca_coll_gpu_team_done(coll_gpu_team_t *t, uint64_t seq)
{
    atomic_store_explicit(&t->ctl->rank[t->rank].done, seq, memory_order_release);
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

/* ---- registration caches -------------------------------------------------------------------- */


/* The record is written before our arrive, which publishes it. */
int mca_coll_gpu_team_export(coll_gpu_team_t *t, const void *ptr, size_t bytes,
                             coll_gpu_xbuf_t *out)
{
    coll_gpu_export_entry_t *slot = NULL;
    void *base;
    uint64_t id;
    int rc;

    /* a failed export must not leave the previous call's stamp behind */
    out->seq = 0;
    rc = team_describe(ptr, out);
    if (DEV_OK != rc) {
        return rc;
    }
    out->seq = t->seq;
    out->bytes = (uint64_t) bytes;
    base = (void *) (uintptr_t) out->base;
    id = out->buffer_id;
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
    /* pool, VMM and managed memory cannot be exported: refuse before the export call, and
     * before the least recently used entry is given up for nothing */
    if (!dev_mem_ipc_capable(base)) {
        return DEV_ERR_UNSUPPORTED;
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

/* The holds of the team's previous call go first (its calls run one at a time, and the previous
 * one has ended on this rank).  A record left from an earlier call (the peer published nothing
 * this time: it runs another algorithm or another count, an erroneous call) names memory the
 * peer may have given another use, and one of fewer bytes ends before what we would write. */
int mca_coll_gpu_team_import(coll_gpu_team_t *t, int peer, const coll_gpu_xbuf_t *x,
                             size_t need, void **ptr)
{
    void *base;
    int rc;

    if (x->seq != t->seq) {
        return dev_fail(DEV_ERR_ARG, "coll/gpu: rank %d published no buffer for call %" PRIu64
                        " (its record is of call %" PRIu64 "): the ranks' calls differ",
                        peer, t->seq, x->seq);
    }
    if (x->bytes < need || x->offset > x->size || x->size - x->offset < need) {
        return dev_fail(DEV_ERR_ARG, "coll/gpu: rank %d published %" PRIu64 " B for call %"
                        PRIu64 ", this rank needs %zu B of it: the ranks' counts differ",
                        peer, x->bytes, t->seq, need);
    }
    if (t->hold_seq != t->seq) {
        team_release_call_holds(t);
        t->hold_seq = t->seq;
    }
    if (t->nholds == COLL_GPU_CALL_HOLDS) {
        return dev_fail(DEV_ERR_ARG, "coll/gpu: more than %d peer buffers in one call",
                        COLL_GPU_CALL_HOLDS);
    }
    rc = mca_coll_gpu_ipcmap_open(x, &base, &t->holds[t->nholds]);
    if (DEV_OK != rc) {
        return rc;
    }
    ++t->nholds;
    *ptr = (char *) base + x->offset;
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

/* Can call seq not go on with peer: did the peer fail in it, or give up in it or an earlier
 * call (team_give_up), or did this rank give up on it?  The last makes a wait that returned
 * because we gave up look, to the caller, like the peer's failure.  Read after the peer's
 * arrive or done for that call, or after a wait on it. */
bool mca_coll_gpu_team_failed(coll_gpu_team_t *t, int peer, uint64_t seq)
{
    uint64_t abandoned;

    if (0 != t->abandoned && t->abandoned <= seq) {
        return true;
    }
    if (seq == atomic_load_explicit(&t->ctl->rank[peer].failed, memory_order_acquire)) {
        return true;
    }
    abandoned = atomic_load(&t->ctl->rank[peer].abandoned);
    return 0 != abandoned && abandoned <= seq;
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
