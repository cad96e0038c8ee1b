/*
 * coll_gpu_kinds.c - which memory kinds the ranks of one call pass: the agreement behind the
 * path of every blocking MPI_Allreduce, MPI_Bcast, MPI_Reduce, MPI_Allgather(v),
 * MPI_Alltoall(v) and MPI_Reduce_scatter(_block) on an intracommunicator.
 *
 * The GPU path of a call needs every rank on it; host memory on any rank sends the whole call
 * to the component below (the device ranks stage).  MPI lets each rank pass any kind of memory
 * to any call, and Open MPI makes collectives of its own on a user's communicators
 * (MPI_Comm_split_type opens with a host allreduce), so no earlier call can stand for this one:
 * the decision is made per call, from what every rank of that call contributes.
 *
 * The kinds board.  On a communicator whose ranks share one host, each rank owns a record in a
 * POSIX shared memory block made at the communicator's first such call, on pages of its own
 * (the stream of one rank's stores never prefetches another's lines): a ring of
 * COLL_GPU_KINDS_RING slots, slot u mod RING holding a word (u << 8 | flags) once the rank has
 * entered call u and, on the same cache line, the details of a device call (collective, bytes,
 * op, element type, root).  Per call u:
 *
 *   host memory here     store word u (release), go to the component below.  No wait: a host
 *                        rank already knows the call cannot take the GPU path.  One store to
 *                        a line no other rank reads in a host-only program: it stays in this
 *                        core's cache.
 *   device memory here   write details u, store word u, wait until every peer's word u is
 *                        there, read them: all device (and one signature) -> the GPU path; any
 *                        host -> staged through the component below, like the host ranks.
 *
 * Nonblocking allreduces and bcasts note their calls on the same ring, and a device rank reads
 * the notes from progress instead of waiting at the call (coll_gpu_defer.c).
 *
 * Every device rank reads the same entries, so every rank takes the same path, and a host rank
 * takes the only path its peers can take with it.  A device rank waits only for peers that are
 * behind it in the communicator's call order: they never need it to get there (it finished
 * those calls), so the wait cannot deadlock a program that would not deadlock were the call
 * synchronizing (MPI's rule for correct programs).  The wait serves opal_progress, so that
 * nonblocking calls a peer waits for move on meanwhile.
 *
 * Why no fence on the host path: only device ranks read entries, and only after they see the
 * writer's word (acquire after release), so the order of the writer's own stores is all that
 * matters; no rank decides from the absence of another's store (the Dekker pattern that needs a
 * store-load fence on both sides does not arise, because a host rank never waits and a device
 * rank always waits for every peer's entry of its call).
 *
 * The ring: a rank may run ahead of its peers through calls that do not wait (a host root of
 * several bcasts, eager messages), past COLL_GPU_KINDS_RING calls even, and overwrite the word
 * a slower device rank has yet to read.  That reader then finds a later call's number there
 * (never an earlier one: a word only grows) and counts that rank as not on the device path,
 * which is the truth of the call: a rank passes call u without waiting for the reader only
 * where u is not an all-device call (it had host memory there, or it staged, which every rank
 * does when one rank has host memory), for in an all-device call it waits in the node team
 * for every rank, the reader too.  A nonblocking call does not wait there, so no note laps
 * one that its rank still has queued or running on the team (coll_gpu_defer.c: the only case
 * where a rank waits for a slower one to read).  The details of an all-device call, which
 * only its readers compare, stay in place until all have read them.
 *
 * An erroneous call whose ranks all pass device memory is found here: byte counts, ops, element
 * types, roots or collectives that differ make every rank return the same MPI error (no data
 * moves), and the lowest rank says what differed on which ranks.  Where some rank passes host
 * memory, no one can tell it (it does not wait), and the call goes to the component below.
 *
 * Communicators whose ranks span hosts have no shared memory to agree through: every blocking
 * call of those there agrees with one small host allreduce of the kinds and a device call's
 * details (kinds_host_agree), host-only calls included.  One agreement for the whole
 * communicator: the node steps and the leaders' step of the hierarchical path then all run, or
 * none.
 *
 * Promises that skip the agreement, agreed at the communicator's first call:
 *   - coll_gpu_uniform_buffers=true: every rank passes the kind this one does (NCCL's rule);
 *   - the MPI 4.1 info assertion mpi_assert_memory_alloc_kinds on the communicator, when every
 *     rank's value lists device kinds only (cuda:device, cuda:managed: every call takes the
 *     device path; a host buffer is then moved through a device temporary) or host kinds only
 *     (system, mpi, cuda:host: every call goes to the component below; a device buffer, which
 *     the promise rules out, is still staged rather than crashing).
 */
#include "ompi_config.h"

#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/request/request.h"
#include "opal/runtime/opal_progress.h"

#include "coll_gpu.h"
#include "collgpu.h"

#define COLL_GPU_KINDS_MAGIC 0x636f6c6c6b696e64ULL /* "collkind" */

/* Entry flags. */
#define KINDS_DEVICE 0x1  /* this rank's buffers are not (all) host memory */
#define KINDS_CAPABLE 0x2 /* the kernels take this call's element type and op */

/* What a rank with device memory brings to one call, beside its word. */
typedef struct coll_gpu_kinds_entry_t {
    uint64_t seq;
    uint64_t bytes;
    int32_t root;
    uint16_t op;   /* coll_gpu_kinds_op_id */
    uint8_t dt;    /* dev_dtype_t when KINDS_CAPABLE */
    uint8_t flags;
    uint8_t coll;  /* topo_coll_t, or COLL_GPU_KINDS_REDUCE */
    uint8_t pad[7];
} coll_gpu_kinds_entry_t;

#define KINDS_PAGE 4096

/* One call's slot of a rank's record: its details and its word on one cache line, so that a
 * device rank reading a peer's entry of the call takes one miss per peer, not two (the word
 * tells the entry is there, the details are what it compares). */
typedef struct coll_gpu_kinds_slot_t {
    coll_gpu_kinds_entry_t detail;
    _Atomic uint64_t word; /* (u << 8) | flags for call u, stored last (release) */
} __attribute__((aligned(64))) coll_gpu_kinds_slot_t;

typedef struct coll_gpu_kinds_rank_t {
    coll_gpu_kinds_slot_t slot[COLL_GPU_KINDS_RING];
    _Atomic uint64_t abandoned __attribute__((aligned(64))); /* gave up in this call; 0: none */
} __attribute__((aligned(KINDS_PAGE))) coll_gpu_kinds_rank_t;
_Static_assert(64 == sizeof(coll_gpu_kinds_slot_t), "a slot is one cache line");
_Static_assert(COLL_GPU_KINDS_SLOT_WORDS * sizeof(uint64_t) == sizeof(coll_gpu_kinds_slot_t),
               "mca_coll_gpu_kinds_publish steps from word to word by whole slots");

struct coll_gpu_kinds_board_t {
    uint64_t magic;
    int nranks;
    coll_gpu_kinds_rank_t rank[] __attribute__((aligned(KINDS_PAGE)));
};

/* Peer p's word in the slot of call u: (u << 8 | flags) once p entered call u; an earlier
 * call's before; a later call's when p ran RING or more calls past u without waiting (then it
 * was not on the device path at u: the top of the file). */
static inline uint64_t kinds_word(const coll_gpu_kinds_board_t *b, int p, uint64_t u,
                                  memory_order order)
{
    return atomic_load_explicit(&b->rank[p].slot[u % COLL_GPU_KINDS_RING].word, order);
}

/* Peer p's details of call u (valid once its word u shows KINDS_DEVICE). */
static inline const coll_gpu_kinds_entry_t *kinds_detail(const coll_gpu_kinds_board_t *b, int p,
                                                         uint64_t u)
{
    return &b->rank[p].slot[u % COLL_GPU_KINDS_RING].detail;
}

/* Names tried before a board cannot be made (names of killed processes may be left). */
#define KINDS_NAME_TRIES 1024

static size_t board_bytes(int nranks)
{
    return sizeof(coll_gpu_kinds_board_t) + (size_t) nranks * sizeof(coll_gpu_kinds_rank_t);
}

/* An op as the entries compare it: a predefined op by its index (the same in every process);
 * libcollgpu's 16-bit ops by their format and base op (0x8000 | format << 8 | the base's id);
 * any other user-defined op as one value (two of them cannot be compared across processes). */
static uint16_t kinds_op_id(struct ompi_op_t *op)
{
    struct ompi_op_t *base = NULL;
    int format;

    if (NULL == op) {
        return 0;
    }
    if (ompi_op_is_intrinsic(op)) {
        return (uint16_t) (1 + (op->o_f_to_c_index & 0xff));
    }
    format = collgpu_op_query(op, &base);
    return 0 == format ? 0xffff : (uint16_t) (0x8000 | format << 8 | kinds_op_id(base));
}

/* ---- the promise of mpi_assert_memory_alloc_kinds -------------------------------------- */

/*
 * This rank's promise for comm: KINDS_PROMISE_DEVICE when the communicator's info asserts
 * (MPI 4.1, "memory allocation kinds") that only device kinds are used on it, _HOST when only
 * host kinds, else _NONE.  The value is a comma-separated list of kinds with optional
 * restrictors ("system", "mpi", "cuda:device", "cuda:host,cuda:managed"); a kind without
 * restrictors means all of them, so "cuda" alone allows host and device memory.
 */
typedef enum { KINDS_PROMISE_NONE = 0, KINDS_PROMISE_DEVICE, KINDS_PROMISE_HOST } kinds_promise_t;

static kinds_promise_t kinds_read_promise(struct ompi_communicator_t *comm)
{
    char value[MPI_MAX_INFO_VAL + 1], *save = NULL, *tok;
    bool any_host = false, any_device = false, other = false;

    if (!coll_gpu_comm_info_get(comm, "mpi_assert_memory_alloc_kinds", value, sizeof(value))) {
        return KINDS_PROMISE_NONE;
    }
    for (tok = strtok_r(value, ", \t", &save); NULL != tok; tok = strtok_r(NULL, ", \t", &save)) {
        if (0 == strcmp(tok, "system") || 0 == strcmp(tok, "mpi")
            || 0 == strcmp(tok, "cuda:host")) {
            any_host = true;
        } else if (0 == strcmp(tok, "cuda:device") || 0 == strcmp(tok, "cuda:managed")
                   || 0 == strcmp(tok, "cuda:device:managed")
                   || 0 == strcmp(tok, "cuda:managed:device")) {
            any_device = true;
        } else {
            other = true; /* "cuda" (every restrictor), another kind, or a typo: no promise */
        }
    }
    if (other || any_host == any_device) {
        return KINDS_PROMISE_NONE;
    }
    return any_device ? KINDS_PROMISE_DEVICE : KINDS_PROMISE_HOST;
}

/* ---- setup: the communicator's first call ------------------------------------------------ */

static coll_gpu_kinds_board_t *board_map(const char *name, bool create, int nranks)
{
    size_t len = board_bytes(nranks);
    coll_gpu_kinds_board_t *b = mca_coll_gpu_shm_map(name, create, len);

    if (NULL == b) {
        return NULL;
    }
    if (create) {
        /* the name is new (O_EXCL), so its pages read as zero; each rank's record is first
         * touched by its owner (kinds_setup), which places it in that rank's memory */
        b->nranks = nranks;
        b->magic = COLL_GPU_KINDS_MAGIC;
    } else if (COLL_GPU_KINDS_MAGIC != b->magic || nranks != b->nranks) {
        munmap(b, len);
        return NULL;
    }
    return b;
}

/* Rank 0's new board, its name in name[64] (empty when none could be made). */
static coll_gpu_kinds_board_t *board_create(char *name, int size)
{
    static _Atomic int counter;
    coll_gpu_kinds_board_t *b = NULL;

    for (int i = 0; i < KINDS_NAME_TRIES && NULL == b; ++i) {
        snprintf(name, 64, "/collgpu-kb-%d-%d", (int) getpid(),
                 atomic_fetch_add(&counter, 1) + 1);
        /* (testing: kinds_board makes the block fail, so that the agreement of communicators
         * that span hosts runs on one) */
        b = mca_coll_gpu_test_fail_alloc("kinds_board") ? NULL : board_map(name, true, size);
        if (NULL == b && EEXIST != errno) {
            break;
        }
    }
    if (NULL == b) {
        name[0] = '\0';
    }
    return b;
}

/* The board once rank 0's name is here (b: rank 0's own), this rank's record first touched:
 * by its owner, before any peer can read it (they read only after the setup's allreduce), so
 * that its pages come from this rank's memory.  NULL when it cannot be had. */
static coll_gpu_kinds_board_t *board_join(coll_gpu_kinds_board_t *b, char *name, int rank,
                                          int size)
{
    name[63] = '\0';
    if (0 != rank && '\0' != name[0]) {
        b = board_map(name, false, size);
    }
    if (NULL != b) {
        memset(&b->rank[rank], 0, sizeof(b->rank[rank]));
    }
    return b;
}

/* The end of a setup: the name goes (every rank mapped it or never will), the board stays only
 * where keep (every rank has it, and no promise skips it). */
static void board_settle(mca_coll_gpu_module_t *m, coll_gpu_kinds_board_t *b, const char *name,
                         int rank, int size, bool keep)
{
    if (0 == rank && '\0' != name[0]) {
        shm_unlink(name);
    }
    if (!keep && NULL != b) {
        munmap(b, board_bytes(size));
        b = NULL;
    }
    m->board = b;
    m->board_rank = rank;
    m->kinds_words = (NULL != b) ? &b->rank[rank].slot[0].word : NULL;
}

/*
 * The communicator's first blocking allreduce, bcast or reduce: every rank is in it, so two
 * host collectives of the component below (nested calls go straight to it) settle how its
 * calls agree from now on: rank 0 makes the board and sends its name; every rank maps it and
 * reads its promise; one allreduce says whether every rank mapped it and what every rank
 * promised.  The board's name is removed at once (the mappings keep it).  A rank that cannot
 * map it still takes part, and the communicator then agrees through host allreduces.
 */
static int kinds_setup(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                       const char *what)
{
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm), rc;
    kinds_promise_t promise = kinds_read_promise(comm);
    bool on_host = mca_coll_gpu_all_on_host(comm);
    static const char *const how[] = {
        [COLL_GPU_KMODE_BOARD] = "per call through a shared block of this host",
        [COLL_GPU_KMODE_AGREE] = "per call by a host allreduce (the ranks span hosts, or the "
                                 "shared block could not be made)",
        [COLL_GPU_KMODE_PROMISE_DEVICE] = "never: every rank asserts device memory only "
                                          "(mpi_assert_memory_alloc_kinds)",
        [COLL_GPU_KMODE_PROMISE_HOST] = "never: every rank asserts host memory only "
                                        "(mpi_assert_memory_alloc_kinds)",
    };
    char name[64] = "";
    int in[3], out[3] = {0, 0, 0};
    coll_gpu_kinds_board_t *b = NULL;

    if (1 == size) {
        m->kmode = COLL_GPU_KMODE_SINGLE;
        return OMPI_SUCCESS;
    }
    if (on_host) {
        if (0 == rank) {
            b = board_create(name, size);
        }
        rc = m->prev_bcast.fn(name, sizeof(name), MPI_CHAR, 0, comm, m->prev_bcast.module);
        if (OMPI_SUCCESS != rc) {
            name[0] = '\0';
        }
        b = board_join(b, name, rank, size);
    }
    in[0] = (NULL != b) ? 1 : 0;
    in[1] = (KINDS_PROMISE_DEVICE == promise) ? 1 : 0;
    in[2] = (KINDS_PROMISE_HOST == promise) ? 1 : 0;
    rc = m->prev_allreduce.fn(in, out, 3, MPI_INT, MPI_MIN, comm, m->prev_allreduce.module);
    if (OMPI_SUCCESS != rc) {
        out[0] = out[1] = out[2] = 0;
    }
    board_settle(m, b, name, rank, size, 1 == out[0] && 1 != out[1] && 1 != out[2]);
    m->kmode = (1 == out[1])   ? COLL_GPU_KMODE_PROMISE_DEVICE
               : (1 == out[2]) ? COLL_GPU_KMODE_PROMISE_HOST
               : (NULL != m->board) ? COLL_GPU_KMODE_BOARD
                                    : COLL_GPU_KMODE_AGREE;
    COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:%s (cid %d): memory kinds agreed %s", what,
                     coll_gpu_comm_cid(comm), how[m->kmode]);
    return rc;
}

/*
 * The same setup begun by a nonblocking call (a communicator whose first call that agrees on
 * kinds is nonblocking on every rank): it may not wait, so rank 0's name goes by the component
 * below's nonblocking bcast, started here, and the check that every rank mapped the block by
 * its nonblocking allreduce, started from progress once the name is in, with a tag taken here
 * (the component below matches its calls by the order they take tags: coll_gpu_defer.c).  The
 * promise of mpi_assert_memory_alloc_kinds is not read here: a persistent init made while the
 * setup runs on one rank and after it ended on another must decide alike, and only a promise
 * of device memory would change its decision (mca_coll_gpu_nb_team_path).  Such communicators
 * agree per call even under that promise.
 */
void mca_coll_gpu_kinds_setup_begin(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm)
{
    coll_gpu_kinds_setup_t *st = &m->ksetup;
    int rc;

    memset(st, 0, sizeof(*st));
    m->kmode = COLL_GPU_KMODE_PENDING;
    st->comm = comm;
    st->phase = 1;
    if (0 == ompi_comm_rank(comm)) {
        st->b = board_create(st->name, ompi_comm_size(comm));
    }
    rc = m->prev_ibcast.fn(st->name, sizeof(st->name), MPI_CHAR, 0, comm, &st->req,
                           m->prev_ibcast.module);
    st->tag = ompi_coll_base_nbc_reserve_tags(comm, 1); /* the allreduce's */
    if (OMPI_SUCCESS != rc) {
        st->req = MPI_REQUEST_NULL; /* this rank goes on without the block (the allreduce) */
        if (0 != ompi_comm_rank(comm)) {
            st->name[0] = '\0'; /* (rank 0 keeps its own, to remove it) */
        }
    }
}

/* The request in flight ended (its request gone): true, with its outcome in *ok. */
static bool setup_request_ended(coll_gpu_kinds_setup_t *st, bool *ok)
{
    *ok = true;
    if (MPI_REQUEST_NULL == st->req) {
        return true;
    }
    if (!REQUEST_COMPLETE(st->req)) {
        return false; /* (no ompi_request_test: it calls opal_progress, and this is progress) */
    }
    *ok = (MPI_SUCCESS == st->req->req_status.MPI_ERROR);
    (void) ompi_request_free(&st->req);
    return true;
}

bool mca_coll_gpu_kinds_setup_step(mca_coll_gpu_module_t *m)
{
    coll_gpu_kinds_setup_t *st = &m->ksetup;
    struct ompi_communicator_t *comm = st->comm;
    int rank = ompi_comm_rank(comm), size = ompi_comm_size(comm), rc;
    bool ok;

    if (COLL_GPU_KMODE_PENDING != m->kmode) {
        return true;
    }
    if (!setup_request_ended(st, &ok)) {
        return false;
    }
    if (1 == st->phase) {
        int32_t now = comm->c_nbc_tag;
        if (!ok && 0 != rank) {
            st->name[0] = '\0'; /* no name came (rank 0 keeps its own, to remove it) */
        }
        st->b = board_join(st->b, st->name, rank, size);
        st->in = (NULL != st->b) ? 1 : 0;
        st->phase = 2;
        comm->c_nbc_tag = st->tag; /* its place among the communicator's calls */
        rc = m->prev_iallreduce.fn(&st->in, &st->out, 1, MPI_INT, MPI_MIN, comm, &st->req,
                                   m->prev_iallreduce.module);
        comm->c_nbc_tag = now;
        if (OMPI_SUCCESS != rc) {
            st->req = MPI_REQUEST_NULL;
            st->out = 0;
        }
        return false;
    }
    board_settle(m, st->b, st->name, rank, size, ok && 1 == st->out);
    m->kmode = (NULL != m->board) ? COLL_GPU_KMODE_BOARD : COLL_GPU_KMODE_AGREE;
    COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu (cid %d): memory kinds agreed %s, set up "
                     "by a nonblocking call", coll_gpu_comm_cid(comm),
                     NULL != m->board ? "per call through a shared block of this host"
                                   : "per call by a host allreduce (the shared block could not "
                                     "be made)");
    return true;
}

void mca_coll_gpu_kinds_release(mca_coll_gpu_module_t *m)
{
    if (NULL != m->board) {
        munmap(m->board, board_bytes(m->board->nranks));
        m->board = NULL;
        m->kinds_words = NULL;
    }
}

/* ---- waits ------------------------------------------------------------------------------- */

/* One look at the words of call u: 1 when every peer's is there, 0 while some is missing, an
 * error when this rank or a peer gave up.  A long wait is reported once
 * (coll_gpu_hang_warn_seconds) and given up (coll_gpu_hang_error_seconds: OMPI_ERROR, and this
 * rank's mark makes every later waiter give up too); w keeps the wait's start between looks
 * (zeroed before the first), *polls counts them (the clock is read every 64th). */
int mca_coll_gpu_kinds_poll(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                            const char *what, uint64_t u, coll_gpu_kinds_watch_t *w)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    coll_gpu_kinds_board_t *b = m->board;
    int missing = -1;
    char name[32];

    for (int p = 0; p < b->nranks; ++p) {
        if (atomic_load_explicit(&b->rank[p].abandoned, memory_order_acquire)) {
            return OMPI_ERROR;
        }
        if ((kinds_word(b, p, u, memory_order_acquire) >> 8) < u) {
            missing = p;
            break;
        }
    }
    if (0 > missing) {
        return 1;
    }
    if (0 != (++w->polls & 63) || (0 >= c->hang_warn_seconds && 0 >= c->hang_error_seconds)) {
        return 0;
    }
    double now = mca_coll_gpu_now();
    if (0.0 == w->start) {
        w->start = now;
        return 0;
    }
    /* "Allreduce" from "allreduce", for the messages */
    snprintf(name, sizeof(name), "%s", what);
    name[0] = (char) toupper((unsigned char) name[0]);
    if (!w->warned && 0 < c->hang_warn_seconds && now - w->start >= c->hang_warn_seconds) {
        char whom[256];
        size_t n = 0;
        w->warned = true;
        for (int p = 0; p < b->nranks && n < sizeof(whom); ++p) {
            if ((kinds_word(b, p, u, memory_order_relaxed) >> 8) < u) {
                n += (size_t) snprintf(whom + n, sizeof(whom) - n, " %d", p);
            }
        }
        opal_output(0, "coll/gpu: rank %d has waited %d s in MPI_%s on communicator %d "
                    "(call %lu, memory-kind agreement) for rank(s)%s to enter the call; "
                    "still waiting (coll_gpu_hang_warn_seconds)", ompi_comm_rank(comm),
                    (int) (now - w->start), name, coll_gpu_comm_cid(comm), (unsigned long) u,
                    whom);
    }
    if (0 < c->hang_error_seconds && now - w->start >= c->hang_error_seconds) {
        opal_output(0, "coll/gpu: rank %d gave up after %d s in MPI_%s on communicator %d "
                    "(call %lu, memory-kind agreement) waiting for rank %d; this call and "
                    "every later agreed call on device memory there returns "
                    "an error (coll_gpu_hang_error_seconds)", ompi_comm_rank(comm),
                    (int) (now - w->start), name, coll_gpu_comm_cid(comm), (unsigned long) u,
                    missing);
        atomic_store(&b->rank[m->board_rank].abandoned, u);
        return OMPI_ERROR;
    }
    return 0;
}

/* Every peer's word of call u there (mca_coll_gpu_kinds_poll, until it answers).  The wait
 * serves opal_progress: a peer behind may wait for a nonblocking call of ours. */
static int kinds_wait(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                      const char *what, uint64_t u)
{
    coll_gpu_kinds_watch_t w = {0};
    unsigned spins = 0;
    int rc;

    while (0 == (rc = mca_coll_gpu_kinds_poll(m, comm, what, u, &w))) {
        if (++spins < 256) {
            continue;
        }
        opal_progress();
        if (spins > 4096) {
            sched_yield(); /* ranks may outnumber cores */
        }
    }
    return (1 == rc) ? OMPI_SUCCESS : rc;
}

/* ---- the device ranks' decision ---------------------------------------------------------- */

static const char *coll_mpi_name(int coll)
{
    return (TOPO_COLL_ALLREDUCE == coll)         ? "Allreduce"
           : (TOPO_COLL_BCAST == coll)           ? "Bcast"
           : (COLL_GPU_KINDS_ALLGATHER == coll) ? "Allgather"
           : (COLL_GPU_KINDS_REDUCE_SCATTER == coll) ? "Reduce_scatter_block"
           : (COLL_GPU_KINDS_ALLGATHERV == coll)     ? "Allgatherv"
           : (COLL_GPU_KINDS_ALLTOALL == coll)       ? "Alltoall"
           : (COLL_GPU_KINDS_ALLTOALLV == coll)      ? "Alltoallv"
           : (COLL_GPU_KINDS_REDUCE_SCATTERV == coll) ? "Reduce_scatter"
                                                      : "Reduce";
}

/* The name of an op of kinds_op_id (Open MPI's predefined ops in their Fortran index order). */
static const char *kinds_op_name(uint16_t id)
{
    static const char *const names[] = {"MPI_OP_NULL", "MPI_MAX",     "MPI_MIN",    "MPI_SUM",
                                        "MPI_PROD",    "MPI_LAND",    "MPI_BAND",   "MPI_LOR",
                                        "MPI_BOR",     "MPI_LXOR",    "MPI_BXOR",   "MPI_MAXLOC",
                                        "MPI_MINLOC",  "MPI_REPLACE", "MPI_NO_OP"};
    if (0xffff == id) {
        return "a user-defined op";
    }
    if (0x8000 & id) {
        return (id >> 8 & 0x7f) == COLLGPU_BFLOAT16 ? "a libcollgpu bfloat16 op"
                                                    : "a libcollgpu float16 op";
    }
    return (0 < id && id <= sizeof(names) / sizeof(names[0])) ? names[id - 1]
                                                              : "a predefined op";
}

/* The details the ranks of a device call compare (kinds_compare), and their names. */
typedef enum { KF_COLL, KF_ROOT, KF_BYTES, KF_OP, KF_DT } kinds_field_t;
static const char *const kinds_field_name[] = {"collective", "root", "byte count", "op",
                                               "element type"};

static bool kinds_differ(const coll_gpu_kinds_entry_t *e, const coll_gpu_kinds_entry_t *ref,
                         kinds_field_t f)
{
    switch (f) {
    case KF_COLL:
        return e->coll != ref->coll;
    case KF_ROOT:
        return e->root != ref->root;
    case KF_BYTES:
        return e->bytes != ref->bytes;
    case KF_OP:
        return e->op != ref->op; /* user-defined ops are all one value (kinds_op_id) */
    default:
        /* the kernels take the call on every rank or on none (they decide from the signature
         * and the op alone), and then of one element type */
        return (e->flags & KINDS_CAPABLE) != (ref->flags & KINDS_CAPABLE)
               || ((e->flags & KINDS_CAPABLE) && e->dt != ref->dt);
    }
}

/* The entries of one call that the ranks compare: call u on the board, or (flat) one per rank
 * gathered through the host (kinds_gather_compare). */
typedef struct {
    const coll_gpu_kinds_board_t *b;
    const coll_gpu_kinds_entry_t *flat;
    uint64_t u;
    int nranks;
} kinds_view_t;

static const coll_gpu_kinds_entry_t *view_entry(const kinds_view_t *v, int p)
{
    return (NULL != v->flat) ? &v->flat[p] : kinds_detail(v->b, p, v->u);
}

/* OMPI_SUCCESS when field f of the call is on every rank what it is on rank ref; else the MPI
 * error class err, and the lowest rank says what differs (errname: err's name). */
static int kinds_check(struct ompi_communicator_t *comm, const kinds_view_t *v, kinds_field_t f,
                       int ref, int err, const char *errname)
{
    const coll_gpu_kinds_entry_t *r = view_entry(v, ref);
    char list[512], value[64];
    size_t len = 0;
    int p = 0;

    while (p < v->nranks && !kinds_differ(view_entry(v, p), r, f)) {
        ++p;
    }
    if (p == v->nranks) {
        return OMPI_SUCCESS;
    }
    if (0 != ompi_comm_rank(comm)) {
        return err;
    }
    for (p = 0; p < v->nranks && len < sizeof(list); ++p) {
        const coll_gpu_kinds_entry_t *e = view_entry(v, p);
        switch (f) {
        case KF_COLL:
            snprintf(value, sizeof(value), "MPI_%s", coll_mpi_name(e->coll));
            break;
        case KF_ROOT:
            snprintf(value, sizeof(value), "root %d", (int) e->root);
            break;
        case KF_BYTES:
            snprintf(value, sizeof(value), "%lu B", (unsigned long) e->bytes);
            break;
        case KF_OP:
            snprintf(value, sizeof(value), "%s", kinds_op_name(e->op));
            break;
        default:
            snprintf(value, sizeof(value), "%s",
                     (e->flags & KINDS_CAPABLE) ? dev_dtype_name((dev_dtype_t) e->dt)
                                                : "(no GPU kernel)");
            break;
        }
        len += (size_t) snprintf(list + len, sizeof(list) - len, "%srank %d: %s",
                                 p ? ", " : "", p, value);
    }
    opal_output(0, "coll/gpu: erroneous MPI_%s on communicator %d (call %lu): the ranks' %s "
                "differs (%s); the call returns %s on every rank and moves no data",
                coll_mpi_name(view_entry(v, 0)->coll), coll_gpu_comm_cid(comm),
                (unsigned long) v->u, kinds_field_name[f], list, errname);
    return err;
}

/*
 * Compare the details of call u, whose ranks all pass device memory: OMPI_SUCCESS, or the MPI
 * error class every rank returns (each rank compares the same details).
 */
static int kinds_compare(struct ompi_communicator_t *comm, const kinds_view_t *v)
{
    const coll_gpu_kinds_entry_t *ref = view_entry(v, 0);
    int rc = kinds_check(comm, v, KF_COLL, 0, MPI_ERR_OTHER, "MPI_ERR_OTHER");

    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    switch (ref->coll) {
    case TOPO_COLL_BCAST:
        rc = kinds_check(comm, v, KF_ROOT, 0, MPI_ERR_ROOT, "MPI_ERR_ROOT");
        if (OMPI_SUCCESS != rc || 0 > ref->root || ref->root >= v->nranks) {
            return rc; /* an invalid root: the component below tells it (param check) */
        }
        return kinds_check(comm, v, KF_BYTES, ref->root, MPI_ERR_TRUNCATE,
                           "MPI_ERR_TRUNCATE");
    case COLL_GPU_KINDS_ALLGATHER:
    case COLL_GPU_KINDS_ALLGATHERV:
    case COLL_GPU_KINDS_ALLTOALL:
    case COLL_GPU_KINDS_ALLTOALLV:
        /* every rank receives every rank's block: one size on all of them (allgatherv: one
         * total; alltoallv: none, 0, its exchange checks each piece) */
        return kinds_check(comm, v, KF_BYTES, 0, MPI_ERR_TRUNCATE, "MPI_ERR_TRUNCATE");
    case COLL_GPU_KINDS_REDUCE:
        rc = kinds_check(comm, v, KF_ROOT, 0, MPI_ERR_ROOT, "MPI_ERR_ROOT");
        break;
    default:
        break;
    }
    /* allreduce, reduce, the reduce-scatters (reduce_scatter: the whole input's bytes, not
     * the counts per rank): one count, op and element type */
    if (OMPI_SUCCESS == rc) {
        rc = kinds_check(comm, v, KF_BYTES, 0, MPI_ERR_COUNT, "MPI_ERR_COUNT");
    }
    if (OMPI_SUCCESS == rc) {
        rc = kinds_check(comm, v, KF_OP, 0, MPI_ERR_OP, "MPI_ERR_OP");
    }
    if (OMPI_SUCCESS == rc) {
        rc = kinds_check(comm, v, KF_DT, 0, MPI_ERR_OTHER, "MPI_ERR_OTHER");
    }
    return rc;
}

/* The details of call u that this rank brings to the comparison (kinds_compare). */
static void kinds_entry_fill(coll_gpu_kinds_entry_t *e, uint64_t u,
                             const coll_gpu_kinds_call_t *call)
{
    e->seq = u;
    e->flags = KINDS_DEVICE | (call->capable ? KINDS_CAPABLE : 0);
    e->coll = (uint8_t) call->coll;
    e->bytes = call->bytes;
    e->root = call->root;
    e->op = kinds_op_id(call->op);
    e->dt = (uint8_t) call->dt;
}

void mca_coll_gpu_kinds_note(mca_coll_gpu_module_t *m, uint64_t u,
                             const coll_gpu_kinds_call_t *call)
{
    if (NULL == call) {
        mca_coll_gpu_kinds_publish(m, u, 0);
        return;
    }
    kinds_entry_fill(&m->board->rank[m->board_rank].slot[u % COLL_GPU_KINDS_RING].detail, u,
                     call);
    mca_coll_gpu_kinds_publish(m, u, KINDS_DEVICE);
}

int mca_coll_gpu_kinds_read(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                            uint64_t u, bool *all_device)
{
    coll_gpu_kinds_board_t *b = m->board;
    bool device = true;
    int rc = OMPI_SUCCESS;

    for (int p = 0; p < b->nranks; ++p) {
        uint64_t w = kinds_word(b, p, u, memory_order_acquire);
        device = device && (w >> 8) == u && (w & KINDS_DEVICE) && kinds_detail(b, p, u)->seq == u;
    }
    *all_device = false;
    if (device) {
        kinds_view_t v = {.b = b, .u = u, .nranks = b->nranks};
        rc = kinds_compare(comm, &v);
        *all_device = (OMPI_SUCCESS == rc);
    }
    return rc;
}

static int kinds_board_device(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                              const char *what, const coll_gpu_kinds_call_t *call,
                              bool *all_device)
{
    uint64_t u = ++m->kinds_seq;
    int rc;

    mca_coll_gpu_kinds_note(m, u, call);
    *all_device = false;
    rc = kinds_wait(m, comm, what, u);
    return (OMPI_SUCCESS == rc) ? mca_coll_gpu_kinds_read(m, comm, u, all_device) : rc;
}

int mca_coll_gpu_agree_memory(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                              bool have)
{
    int nomem = !have, any_nomem = 0;
    int rc = m->prev_allreduce.fn(&nomem, &any_nomem, 1, MPI_INT, MPI_MAX, comm,
                                  m->prev_allreduce.module);

    return (OMPI_SUCCESS == rc && any_nomem) ? OMPI_ERR_OUT_OF_RESOURCE : rc;
}

/*
 * The same comparison where no board holds the details: every rank's entry for this call
 * gathered through the component below (a host allgather), once the folded agreement below
 * found details that differ (the error path: it names them).
 */
static int kinds_gather_compare(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                const char *what, const coll_gpu_kinds_entry_t *mine)
{
    int n = ompi_comm_size(comm), rc;
    coll_gpu_kinds_entry_t *all = malloc(sizeof(*all) * (size_t) n);
    coll_gpu_host_watch_t watch;

    mca_coll_gpu_host_watch_begin(&watch, comm, what, "comparison of the call's details");
    rc = mca_coll_gpu_agree_memory(m, comm, NULL != all);
    if (OMPI_SUCCESS == rc) {
        rc = m->prev_allgather.fn(mine, (int) sizeof(*mine), MPI_BYTE, all, (int) sizeof(*mine),
                                  MPI_BYTE, comm, m->prev_allgather.module);
    }
    mca_coll_gpu_host_watch_end(&watch);
    if (OMPI_SUCCESS == rc) {
        kinds_view_t v = {.flat = all, .u = mine->seq, .nranks = n};
        rc = kinds_compare(comm, &v);
    }
    free(all);
    return rc;
}

/* The fields of the folded agreement: whether this rank passes device memory, then the details
 * a device call compares (kinds_compare).  Each is sent as itself and negated, so that one MIN
 * gives every field's minimum and maximum over the ranks. */
enum { KA_DEVICE, KA_COLL, KA_ROOT, KA_BYTES, KA_OP, KA_DT, KA_FIELDS };

/*
 * The agreement where no board is shared: one host allreduce through the component below us,
 * watched for a long wait (coll_gpu_hang_warn_seconds), of this rank's kind and its call's
 * details.  *all_device: every rank passes device memory (device: this rank does, or promised
 * to).  A call found all device has its details compared: where some field's minimum and
 * maximum differ, the entries are gathered to tell which ranks differ and how
 * (kinds_gather_compare: every rank returns the same error).  For every call of communicators
 * whose ranks span hosts (host-only calls too), and for the device calls of those across nodes
 * under a promise (of device memory, or of uniform buffers): there no node team compares the
 * calls between nodes, and an erroneous one would hang the leaders' chains (each leader
 * sending and waiting for its own byte count).  One collective per call, error or not.
 */
static int kinds_host_agree(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                            const char *what, const coll_gpu_kinds_call_t *call, bool device,
                            bool *all_device)
{
    coll_gpu_host_watch_t watch;
    coll_gpu_kinds_entry_t mine;
    int64_t in[2 * KA_FIELDS], out[2 * KA_FIELDS];
    bool differ = false;
    int rc;

    memset(&mine, 0, sizeof(mine));
    kinds_entry_fill(&mine, ++m->kinds_seq, call);
    in[KA_DEVICE] = device ? 1 : 0;
    in[KA_COLL] = mine.coll;
    in[KA_ROOT] = mine.root;
    in[KA_BYTES] = (int64_t) mine.bytes;
    in[KA_OP] = mine.op;
    in[KA_DT] = (mine.flags & KINDS_CAPABLE) ? 1 + (int64_t) mine.dt : 0;
    for (int i = 0; i < KA_FIELDS; ++i) {
        in[KA_FIELDS + i] = -in[i];
    }
    mca_coll_gpu_host_watch_begin(&watch, comm, what, "agreement on the buffers' kind");
    rc = m->prev_allreduce.fn(in, out, 2 * KA_FIELDS, MPI_INT64_T, MPI_MIN, comm,
                              m->prev_allreduce.module);
    mca_coll_gpu_host_watch_end(&watch);
    *all_device = (OMPI_SUCCESS == rc && 1 == out[KA_DEVICE]);
    if (!*all_device) {
        return rc;
    }
    for (int i = KA_COLL; i < KA_FIELDS; ++i) {
        differ = differ || out[i] != -out[KA_FIELDS + i];
    }
    if (differ) {
        rc = kinds_gather_compare(m, comm, what, &mine);
        *all_device = (OMPI_SUCCESS == rc);
    }
    return rc;
}

/* The path of this call, by the way its communicator agrees (set up already). */
static int kinds_agree(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                       const char *what, const coll_gpu_kinds_call_t *call, bool *all_device)
{
    coll_gpu_kmode_t mode = m->kmode;

    if (mca_coll_gpu_component.uniform_buffers && COLL_GPU_KMODE_PROMISE_HOST != mode
        && COLL_GPU_KMODE_PROMISE_DEVICE != mode) {
        /* the user's promise (coll_gpu_uniform_buffers): every rank passes this rank's kind */
        mode = COLL_GPU_KMODE_SINGLE;
    }
    switch (mode) {
    case COLL_GPU_KMODE_SINGLE:
        /* the promise of uniform buffers across nodes: every rank passes device memory here,
         * and the details are compared as under the promise of device memory */
        if (call->device && 1 < ompi_comm_size(comm) && mca_coll_gpu_spans_nodes(m, comm)) {
            return kinds_host_agree(m, comm, what, call, true, all_device);
        }
        *all_device = call->device;
        return OMPI_SUCCESS;
    case COLL_GPU_KMODE_PROMISE_DEVICE:
        /* inside one node the node team's records compare the calls; across nodes, here */
        if (mca_coll_gpu_spans_nodes(m, comm)) {
            return kinds_host_agree(m, comm, what, call, true, all_device);
        }
        *all_device = true;
        return OMPI_SUCCESS;
    case COLL_GPU_KMODE_PROMISE_HOST:
        *all_device = false;
        return OMPI_SUCCESS;
    case COLL_GPU_KMODE_BOARD:
        if (call->device) {
            return kinds_board_device(m, comm, what, call, all_device);
        }
        (void) mca_coll_gpu_host_noted(m, true); /* the host rank's note, as on the hot path */
        *all_device = false;
        return OMPI_SUCCESS;
    default:
        return kinds_host_agree(m, comm, what, call, call->device, all_device);
    }
}

int mca_coll_gpu_kinds_agree(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                             const char *what, const coll_gpu_kinds_call_t *call,
                             bool *all_device)
{
    int rc = OMPI_SUCCESS;

    /* the agreement's own host collectives may come back to us (coll/basic's allreduce is a
     * reduce and a bcast): those go straight through; the call itself, and whatever the
     * component below makes of it after, count as the program's (the same on every rank) */
    m->in_agreed_call = true;
    if (COLL_GPU_KMODE_UNSET == m->kmode) {
        rc = kinds_setup(m, comm, what);
    }
    if (OMPI_SUCCESS == rc && (NULL != m->defer || COLL_GPU_KMODE_PENDING == m->kmode)) {
        /* nonblocking calls before this one still undecided here: decided and on their way
         * first, in call order (coll_gpu_defer.c) */
        rc = mca_coll_gpu_defer_settle(m, call->device);
    }
    if (OMPI_SUCCESS == rc) {
        rc = kinds_agree(m, comm, what, call, all_device);
    }
    if (OMPI_SUCCESS == rc && *all_device) {
        /* every rank knows it alike (mca_coll_gpu_nb_team_path) */
        m->nb_device = m->pers_device = true;
    }
    m->in_agreed_call = false;
    return rc;
}
