/*
 * coll_gpu.h - component and module of coll/gpu, the collective component for CUDA device
 * buffers.
 *
 * Every collective that carries data, blocking and nonblocking, is intercepted.  A call whose
 * buffers are all host memory goes straight to the module that held the slot before us (tuned,
 * basic, libnbc, ...), saved at enable time.  A call that touches device memory is staged through
 * pinned host buffers (always correct) or, where a fast path exists, run on the GPUs.
 */
#ifndef MCA_COLL_GPU_H
#define MCA_COLL_GPU_H

#include "ompi_config.h"

#include <time.h>

#include "coll_gpu_compat.h"

#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/op/op.h"
#include "ompi/request/request.h"
#include "ompi/runtime/mpiruntime.h"
#include "opal/class/opal_object.h"
#include "opal/util/output.h"

#include "dev.h"
#include "topo.h"

#include "coll_gpu_team.h"

BEGIN_C_DECLS

/* The blocking collectives coll/gpu intercepts (all that carry data). */
#define COLL_GPU_FOREACH_INTERCEPTED(X) \
    X(allgather)                        \
    X(allgatherv)                       \
    X(allreduce)                        \
    X(alltoall)                         \
    X(alltoallv)                        \
    X(alltoallw)                        \
    X(bcast)                            \
    X(exscan)                           \
    X(gather)                           \
    X(gatherv)                          \
    X(reduce)                           \
    X(reduce_scatter)                   \
    X(reduce_scatter_block)             \
    X(scan)                             \
    X(scatter)                          \
    X(scatterv)

/* The nonblocking collectives coll/gpu intercepts (all that carry data): device buffers are
 * staged through bounce memory owned by the request (coll_gpu_staged_colls.c), but for
 * MPI_Iallreduce and MPI_Ibcast on a node team, which run its algorithms
 * (coll_gpu_engine.c). */
#define COLL_GPU_FOREACH_INTERCEPTED_NB(X) \
    X(iallgather)                          \
    X(iallgatherv)                         \
    X(iallreduce)                          \
    X(ialltoall)                           \
    X(ialltoallv)                          \
    X(ialltoallw)                          \
    X(ibcast)                              \
    X(iexscan)                             \
    X(igather)                             \
    X(igatherv)                            \
    X(ireduce)                             \
    X(ireduce_scatter)                     \
    X(ireduce_scatter_block)               \
    X(iscan)                               \
    X(iscatter)                            \
    X(iscatterv)

/* The neighborhood collectives coll/gpu intercepts (coll_gpu_neighbor.c).  Their slots share
 * the function types of the plain collectives (all but alltoallw, whose displacements are
 * MPI_Aint), so each has a coll_gpu_<name>_fn_t below for the saved fallback. */
#define COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR(X) \
    X(neighbor_allgather)                        \
    X(neighbor_allgatherv)                       \
    X(neighbor_alltoall)                         \
    X(neighbor_alltoallv)                        \
    X(neighbor_alltoallw)

typedef mca_coll_base_module_allgather_fn_t coll_gpu_neighbor_allgather_fn_t;
typedef mca_coll_base_module_allgatherv_fn_t coll_gpu_neighbor_allgatherv_fn_t;
typedef mca_coll_base_module_alltoall_fn_t coll_gpu_neighbor_alltoall_fn_t;
typedef mca_coll_base_module_alltoallv_fn_t coll_gpu_neighbor_alltoallv_fn_t;
typedef mca_coll_base_module_neighbor_alltoallw_fn_t coll_gpu_neighbor_alltoallw_fn_t;

/* Their nonblocking twins: bounce memory owned by the request, as for the others. */
#define COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_NB(X) \
    X(ineighbor_allgather)                          \
    X(ineighbor_allgatherv)                         \
    X(ineighbor_alltoall)                           \
    X(ineighbor_alltoallv)                          \
    X(ineighbor_alltoallw)

typedef mca_coll_base_module_iallgather_fn_t coll_gpu_ineighbor_allgather_fn_t;
typedef mca_coll_base_module_iallgatherv_fn_t coll_gpu_ineighbor_allgatherv_fn_t;
typedef mca_coll_base_module_ialltoall_fn_t coll_gpu_ineighbor_alltoall_fn_t;
typedef mca_coll_base_module_ialltoallv_fn_t coll_gpu_ineighbor_alltoallv_fn_t;
typedef mca_coll_base_module_ineighbor_alltoallw_fn_t coll_gpu_ineighbor_alltoallw_fn_t;

/* What coll/gpu takes on an intercommunicator: the collectives MPI defines there (no scans, no
 * neighborhood collectives), blocking and nonblocking, staged through the host. */
#define COLL_GPU_FOREACH_INTER(X)                                                            \
    X(allgather) X(allgatherv) X(allreduce) X(alltoall) X(alltoallv) X(alltoallw) X(bcast)   \
    X(gather) X(gatherv) X(reduce) X(reduce_scatter) X(reduce_scatter_block) X(scatter)      \
    X(scatterv)                                                                              \
    X(iallgather) X(iallgatherv) X(iallreduce) X(ialltoall) X(ialltoallv) X(ialltoallw)      \
    X(ibcast) X(igather) X(igatherv) X(ireduce) X(ireduce_scatter) X(ireduce_scatter_block)  \
    X(iscatter) X(iscatterv)

/* Which device backend to use (coll_gpu_device). */
typedef enum {
    COLL_GPU_DEVICE_AUTO = 0,    /* cuda when a driver and a device are there, else host only */
    COLL_GPU_DEVICE_CUDA = 1,    /* cuda, and say so when it cannot be had */
    COLL_GPU_DEVICE_EMULATED = 2 /* the CPU pretends to be a GPU: testing only */
} coll_gpu_device_choice_t;

typedef struct mca_coll_gpu_component_t {
    coll_gpu_base_component_t super;

    /* MCA parameters (registered in coll_gpu_component.c, each one read somewhere) */
    int priority;
    int verbose;
    int device_choice;          /* coll_gpu_device_choice_t */
    size_t stage_cache_bytes;   /* pinned bounce memory kept per communicator between calls */
    size_t pinned_pool_bytes;   /* pinned memory the process's pool keeps between calls */
    int allreduce_algorithm;    /* topo_allreduce_alg_t (settable through MPI_T) */
    int bcast_algorithm;        /* topo_bcast_alg_t (settable through MPI_T) */
    int exchange_algorithm;     /* allgather(v), alltoall(v): 0 auto, 1 staged (MPI_T too) */
    int nblocks;                /* kernel thread blocks; 0: the decision table's */
    int nthreads;               /* threads per block; 0: the decision table's */
    size_t chunk_bytes;         /* pipeline chunk; 0: the decision table's */
    size_t oneshot_slot_bytes;  /* per-rank scratch for one-shot (two slots); caps one-shot */
    bool uniform_buffers;       /* all ranks pass the same memory kind to a call */
    int p2p_level;              /* topo_p2p_level_t */
    bool p2p_disable;
    char *topo_file;            /* load the node model from here instead of probing */
    char *topo_dump_file;       /* write the probed or loaded model here */
    int hang_warn_seconds;      /* a wait of ours reports once past this; 0: never */
    int hang_error_seconds;     /* a team flag wait gives up past this (error); 0: never */
    int test_fail_team;         /* testing only: this rank's team scratch allocation fails */
    int test_fail_alloc;        /* testing only: this world rank's allocations fail; -1: off */
    char *test_fail_alloc_site; /* testing only: ... at this site (stage, team, fallback) */
    /* across nodes (coll_gpu_hier.c, coll_gpu_ucx.c) */
    int emulate_nodes;          /* split one host's ranks into this many nodes; 0, 1: off */
    size_t ucx_chunk_bytes;     /* the leaders' pipeline chunk */
    int ucx_depth;              /* chunks in flight per leader */
    size_t hier_rail_min_bytes; /* allreduces of this size or more take the rails; 0: never */
    bool ucx_device_direct;     /* device memory straight to UCX where it can (else staged) */
    int ucx_timeout_seconds;    /* a leader with no UCX progress this long gives up; 0: never */
    int test_fail_ucx;          /* testing only: this rank's UCX sends fail once; -1: off */
    bool test_fail_ucx_silent;  /* testing only: ... and it does not tell the other leaders */

    /* state */
    int output;                 /* opal_output stream for verbose logging */
    bool dev_opened;            /* dev_open() succeeded; dev_close() at component close.  When
                                 * false, every buffer is host memory to coll/gpu (it still fills
                                 * slots and takes part in every agreement) */
    bool dev_tried;             /* the first comm_query already tried to open the backend */
} mca_coll_gpu_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_gpu_component_t mca_coll_gpu_component;

/* The function and module that held a slot before coll/gpu took it. */
#define COLL_GPU_DECLARE_SAVED_AS(name, fn_type)      \
    struct {                                          \
        fn_type fn;                                   \
        mca_coll_base_module_t *module;               \
    } prev_##name;
#define COLL_GPU_DECLARE_SAVED(name) \
    COLL_GPU_DECLARE_SAVED_AS(name, mca_coll_base_module_##name##_fn_t)
#define COLL_GPU_DECLARE_SAVED_NEIGHBOR(name) \
    COLL_GPU_DECLARE_SAVED_AS(name, coll_gpu_##name##_fn_t)

/* Pinned host bounce buffer kept between calls (one per role, so send and receive can be
 * staged at the same time). */
typedef struct coll_gpu_bounce_t {
    void *ptr;
    size_t size;
} coll_gpu_bounce_t;

/* The hierarchical path across nodes (coll_gpu_hier.c), made on first use. */
typedef struct coll_gpu_hier_t coll_gpu_hier_t;

/* How the blocking allreduces, bcasts and reduces of a communicator agree on their ranks'
 * memory kinds (coll_gpu_kinds.c), settled at its first such call. */
typedef enum {
    COLL_GPU_KMODE_UNSET = 0,      /* no such call yet: the next one settles it */
    COLL_GPU_KMODE_BOARD,          /* per call, through a block shared on this host */
    COLL_GPU_KMODE_AGREE,          /* per call, by a host allreduce (the ranks span hosts) */
    COLL_GPU_KMODE_SINGLE,         /* one rank: nothing to agree */
    COLL_GPU_KMODE_PROMISE_DEVICE, /* every rank asserts device memory only (MPI 4.1 info) */
    COLL_GPU_KMODE_PROMISE_HOST,   /* every rank asserts host memory only (MPI 4.1 info) */
    COLL_GPU_KMODE_PENDING         /* a nonblocking call began the setup; not ended here yet */
} coll_gpu_kmode_t;

/* The kinds board's setup begun by a nonblocking call, in flight (coll_gpu_kinds.c). */
typedef struct coll_gpu_kinds_setup_t {
    struct ompi_communicator_t *comm;
    char name[64];                  /* the block's, from rank 0 */
    int in, out;                    /* mapped here; mapped on every rank */
    int32_t tag;                    /* the allreduce's, taken at the call */
    ompi_request_t *req;
    int phase;                      /* 1: the name in flight; 2: the allreduce */
    struct coll_gpu_kinds_board_t *b;
} coll_gpu_kinds_setup_t;

/* The shared block of the per-call agreement (coll_gpu_kinds.c). */
typedef struct coll_gpu_kinds_board_t coll_gpu_kinds_board_t;
struct coll_gpu_defer_t;
#define COLL_GPU_KINDS_RING 64 /* calls a rank's record keeps (coll_gpu_kinds.c) */
#define COLL_GPU_KINDS_SLOT_WORDS 8 /* a call's slot: one cache line of 8 words */

typedef struct mca_coll_gpu_module_t {
    mca_coll_base_module_t super;

    COLL_GPU_FOREACH_INTERCEPTED(COLL_GPU_DECLARE_SAVED)
    COLL_GPU_FOREACH_INTERCEPTED_NB(COLL_GPU_DECLARE_SAVED)
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR(COLL_GPU_DECLARE_SAVED_NEIGHBOR)
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_NB(COLL_GPU_DECLARE_SAVED_NEIGHBOR)
    /* the persistent (_init) slots: 5.0's table, and 4.1's through its pcollreq extension
     * (coll_gpu_compat.h) */
    COLL_GPU_FOREACH_INTERCEPTED_INIT(COLL_GPU_DECLARE_SAVED)
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_INIT(COLL_GPU_DECLARE_SAVED_NEIGHBOR)
    /* MPI_Reduce_local (through MPI_COMM_SELF's table): taken only where a function to fall
     * back on is there after the gap filling (coll_gpu_module.c), unlike the slots above */
    COLL_GPU_DECLARE_SAVED(reduce_local)

    /* Inside one of our blocking allreduces, bcasts or reduces: the saved module may call back
     * into the communicator's table (coll/basic's allreduce is a reduce and a bcast), and those
     * nested calls, always on host memory, go straight through: they are no calls of the
     * program's, and every rank must count the same calls (coll_gpu_kinds.c). */
    bool in_agreed_call;
    bool released;              /* the fallbacks' references are dropped (disable is idempotent) */
    bool inter;                 /* an intercommunicator: staging only, no team, no agreement */
    signed char spans;          /* mca_coll_gpu_spans_nodes: 0 not asked yet, 1 no, 2 yes */
    /* The per-call agreement on memory kinds (coll_gpu_kinds.c): how, the shared block, this
     * rank's record in it and the calls published; nb_device: a call had device memory on
     * every rank, from which on the nonblocking allreduces and bcasts take the node team's
     * path (mca_coll_gpu_nb_team_path). */
    coll_gpu_kmode_t kmode;
    coll_gpu_kinds_setup_t ksetup; /* the setup a nonblocking call began (PENDING) */
    coll_gpu_kinds_board_t *board;
    int board_rank;
    uint64_t kinds_seq;
    /* this rank's call words on the board: slot i's word at kinds_words[i *
     * COLL_GPU_KINDS_SLOT_WORDS] (the host path's one store, mca_coll_gpu_kinds_publish) */
    _Atomic uint64_t *kinds_words;
    bool nb_device;
    bool pers_device; /* nb_device as the blocking calls alone set it: the persistent inits'
                       * (a deferred call sets nb_device when each rank gets to it) */
    /* Nonblocking calls deferred until their path is known, or flying since, in call order
     * (coll_gpu_defer.c): NULL on the hot path */
    struct coll_gpu_defer_t *defer, *defer_tail;
    struct mca_coll_gpu_module_t *defer_mnext; /* the modules with deferred calls */
    bool defer_listed;
    signed char defer_ok;                      /* 0 not asked yet, 1 the saved are libnbc's */

    coll_gpu_bounce_t bounce[2];
    /* Device temporaries (send and receive roles) for the ranks whose own buffer the team path
     * cannot use in place (coll_gpu_adapt.c); kept between calls so that peers map them once. */
    coll_gpu_bounce_t dev_tmp[3]; /* 2: a whole result of a composed collective, or the copy
                                   * an alltoall in place lends */

    /* The node team for the fast path, built on the first call that can use it. */
    coll_gpu_team_t *team;
    /* The sub-communicators and UCX endpoints of a communicator spanning nodes. */
    coll_gpu_hier_t *hier;

    /* Modules created to fill slots nothing else provides, one per provider (coll_gpu_gapfill.c) */
    mca_coll_base_module_t *gap_modules[5];
    int n_gap_modules;
} mca_coll_gpu_module_t;

/* ---- component / module lifecycle (coll_gpu_module.c) ---- */
int mca_coll_gpu_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_gpu_comm_query(struct ompi_communicator_t *comm, int *priority);

/* ---- gap filling (coll_gpu_gapfill.c) ---- */
void mca_coll_gpu_gapfill(mca_coll_gpu_module_t *module, struct ompi_communicator_t *comm);
void mca_coll_gpu_gapfill_finalize(void);

/* ---- node team (coll_gpu_team.c) ---- */
/* The communicator's team in whatever state it is, its setup begun when there is none yet
 * (async: by a nonblocking call, which does not wait for it); NULL only when this rank has no
 * memory for it.  Collective as mca_coll_gpu_team_get. */
coll_gpu_team_t *mca_coll_gpu_team_begin(mca_coll_gpu_module_t *m,
                                         struct ompi_communicator_t *comm, const char *what,
                                         bool async);
/* Move a pending setup on without waiting; the team's state after.  Called under the
 * engine's lock. */
coll_gpu_team_state_t mca_coll_gpu_team_setup_step(coll_gpu_team_t *t);
/* Have the nreqs requests posted ended?  Then they are freed, nreqs is 0 and the first error
 * among them is kept in first_error (unless it holds one already).  Never waits.  Serves
 * coll/gpu's own point-to-point messages: the team setup's and the fallback's. */
bool mca_coll_gpu_requests_done(ompi_request_t **reqs, int *nreqs, int *first_error);
/* The round (1 or 2) a pending setup is in; 0 when none is. */
int mca_coll_gpu_team_setup_round(const coll_gpu_team_t *t);
/* A blocking host exchange of ours (team setup, path agreement) between begin and end: the
 * progress engine, in which the component below us waits, reports it once past
 * coll_gpu_hang_warn_seconds (what: the collective, stage: the exchange).  Per thread. */
typedef struct coll_gpu_host_watch_t {
    bool active, warned;
    struct ompi_communicator_t *comm;
    const char *what, *stage;
    double start;
    unsigned polls;
    struct coll_gpu_host_watch_t *outer;   /* the one this one is nested in */
} coll_gpu_host_watch_t;
void mca_coll_gpu_host_watch_begin(coll_gpu_host_watch_t *w, struct ompi_communicator_t *comm,
                                   const char *what, const char *stage);
void mca_coll_gpu_host_watch_end(coll_gpu_host_watch_t *w);
void mca_coll_gpu_host_watch_finalize(void);
/* The team goes (the engine's calls on it have ended: mca_coll_gpu_async_destroy_team). */
void mca_coll_gpu_team_destroy(mca_coll_gpu_module_t *m);
/* After a failed setup: the team goes, and the communicator has none from now on. */
void mca_coll_gpu_team_give_up(mca_coll_gpu_module_t *m);
void mca_coll_gpu_team_arrive(coll_gpu_team_t *t, uint64_t seq);
void mca_coll_gpu_team_done(coll_gpu_team_t *t, uint64_t seq);
void mca_coll_gpu_team_fail(coll_gpu_team_t *t, uint64_t seq);
/* The engine's hang watch: called now and then while a wait of call w->seq finds what it waits
 * for missing (w->start 0.0 at the wait's first call, again when a wait ends); past
 * coll_gpu_hang_warn_seconds it reports the wait once per call, naming the missing ranks and
 * the collective (what: "allreduce", "iallreduce", ... becomes MPI_Allreduce, ...), and past
 * coll_gpu_hang_error_seconds this rank gives the call up: it fails the call and every later one
 * of the team (t->abandoned). */
void mca_coll_gpu_team_watch(coll_gpu_team_t *t, coll_gpu_wait_t *w, const char *what);
/* Has this rank given up on the team (t->abandoned) while peer has not entered call seq?  Then
 * the peer never touches our memory for the call and sees the failure when it comes. */
bool mca_coll_gpu_team_gave_up_on(coll_gpu_team_t *t, int peer, uint64_t seq);
/* Has peer's word (its arrive or done) reached call seq, or mca_coll_gpu_team_gave_up_on? */
bool mca_coll_gpu_team_reached(coll_gpu_team_t *t, _Atomic uint64_t *word, int peer,
                               uint64_t seq);
bool mca_coll_gpu_team_failed(coll_gpu_team_t *t, int peer, uint64_t seq);
bool mca_coll_gpu_team_any_failed(coll_gpu_team_t *t, uint64_t seq);
/* Step counters of the ring allreduce and chain bcast (COLL_GPU_STEP in coll_gpu_team.h). */
void mca_coll_gpu_team_step(coll_gpu_team_t *t, uint64_t seq, uint64_t step);
bool mca_coll_gpu_team_step_reached(coll_gpu_team_t *t, int peer, uint64_t seq, uint64_t step);
/* Publish a device buffer of this rank to the team (exported once per allocation and kept),
 * stamped with the team's current call and the bytes that call uses from ptr on.
 * A dev_status_t: DEV_ERR_UNSUPPORTED, with no export attempted, for memory the legacy IPC
 * cannot export (dev_mem_ipc_capable: pool, VMM, managed or host memory). */
int mca_coll_gpu_team_export(coll_gpu_team_t *t, const void *ptr, size_t bytes,
                             coll_gpu_xbuf_t *out);
/* Map a peer's published buffer for the team's current call (held until its next call), of
 * which this rank will touch need bytes.  DEV_ERR_ARG, with nothing mapped, for a record of
 * another call or one of fewer bytes (the call then fails on every rank, through the flags). */
int mca_coll_gpu_team_import(coll_gpu_team_t *t, int peer, const coll_gpu_xbuf_t *x,
                             size_t need, void **ptr);

/* ---- the process's mappings of peers' allocations (coll_gpu_ipcmap.c) ---- */
/* Map x's allocation (or find its mapping) and hold it; *base is its base here.  Mappings of
 * the same owner that overlap it but are not it are closed first (freed by the owner).  A
 * dev_status_t. */
int mca_coll_gpu_ipcmap_open(const coll_gpu_xbuf_t *x, void **base, coll_gpu_ipcmap_hold_t *hold);
/* Give a hold back (a no-op for an empty one, and for a mapping closed since as stale); with
 * close_now the mapping closes when no other hold remains, else it stays cached. */
void mca_coll_gpu_ipcmap_release(coll_gpu_ipcmap_hold_t *hold, bool close_now);
/* Close every unheld mapping of owner's allocations (a team with that peer is going away). */
void mca_coll_gpu_ipcmap_forget(uint64_t owner);
void mca_coll_gpu_ipcmap_finalize(void);

/* ---- across nodes (coll_gpu_hier.c) ---- */
/* Can this call take the hierarchical path (collective on the first call: builds the
 * sub-communicators and the UCX endpoints)?  The same answer on every rank. */
bool mca_coll_gpu_hier_usable(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                              topo_coll_t coll);
/* node_rc: an error that every rank of this rank's node passes alike (their agreement) when
 * one of them cannot take part with data: the node skips its node step, the call fails on every
 * rank. */
int mca_coll_gpu_hier_allreduce(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                dev_dtype_t dt, dev_op_t dop, size_t nelems, int node_rc);
int mca_coll_gpu_hier_bcast(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm, void *buf,
                            int count, struct ompi_datatype_t *dtype, int root);
void mca_coll_gpu_hier_release(mca_coll_gpu_module_t *m);

/* ---- the node team's calls, run by the engine (coll_gpu_engine.c) ---- */
/* A blocking call on the team: posted to the team's queue behind its nonblocking calls and run
 * to its end on this thread, with the schedule a nonblocking call of the same plan runs.
 * local_rc: OMPI_SUCCESS, or what failed on this rank before the call: then the rank takes
 * part without data, so that its peers fail instead of waiting, and returns local_rc.  The
 * user's buffers (count x dtype; nelems kernel elements of dt for an allreduce) go through the
 * module's device temporaries where the team cannot use them in place, as a nonblocking call's
 * go through its own (coll_gpu_adapt.c).  Allreduce: counts, ops, element types or uses of
 * MPI_IN_PLACE that differ across ranks make every rank return MPI_ERR_COUNT, MPI_ERR_OP,
 * MPI_ERR_OTHER or MPI_ERR_BUFFER without moving data.  Bcast: the root's plan and byte count
 * are the call's, and a rank whose byte count differs from the root's returns
 * MPI_ERR_TRUNCATE without moving data (the root then too); agreed: this call's agreement
 * compared every rank's byte count and root already (mca_coll_gpu_kinds_compared), so no rank
 * waits for the root's. */
int mca_coll_gpu_team_allreduce(coll_gpu_team_t *t, mca_coll_gpu_module_t *m,
                                struct ompi_communicator_t *comm, const topo_plan_t *plan,
                                const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, size_t nelems, dev_dtype_t dt,
                                dev_op_t op, int local_rc);
int mca_coll_gpu_team_bcast(coll_gpu_team_t *t, mca_coll_gpu_module_t *m,
                            struct ompi_communicator_t *comm, const topo_plan_t *plan, void *buf,
                            int count, struct ompi_datatype_t *dtype, int root, int local_rc,
                            bool agreed);
/* The allreduce's agreement (coll_gpu_nvl.c): publish this rank's record of call seq (before
 * waiting for anyone); once every rank's is there, compare them: OMPI_SUCCESS, or the error of
 * the call on every rank (one line names the difference). */
void mca_coll_gpu_nvl_allreduce_publish(coll_gpu_team_t *t, uint64_t seq, size_t bytes,
                                        dev_dtype_t dt, dev_op_t op, bool in_place);
int mca_coll_gpu_nvl_allreduce_check(coll_gpu_team_t *t, uint64_t seq, const char *what,
                                     struct ompi_communicator_t *comm);
/* The copy-engine two-shot's resources of a team (made on first use, with a staging buffer of
 * at least bytes, kept with the team): the pulls' and the pushes' streams (the exchange spreads
 * its copies over them too), the pieces' events, the staging memory. */
#define COLL_GPU_CE_DEPTH 2 /* pieces in flight */
typedef struct coll_gpu_ce_t {
    dev_stream_t *pull, *push;
    dev_event_t *copied[COLL_GPU_CE_DEPTH], *reduced[COLL_GPU_CE_DEPTH];
    void *stage;
    size_t stage_bytes;
} coll_gpu_ce_t;
int mca_coll_gpu_nvl_ce(coll_gpu_team_t *t, size_t bytes, coll_gpu_ce_t **out);
/* Wait until nothing of this rank's runs on the team's streams (after a failure: nothing of
 * ours may touch a peer's memory once we are done). */
void mca_coll_gpu_nvl_drain(coll_gpu_team_t *t);
/* One rank's part in a team step of the exchange (under allgather, alltoall and their v forms)
 * or of a reduce-scatter.  Every rank lends src (src_bytes of dense device memory, NULL when 0).
 * Exchange: it offers peer q the bytes [offer_off[q], + offer_len[q]) of src and receives from
 * each peer p that peer's offer to it into dst[p] (dense device memory), which must be
 * want_len[p] bytes (p == this rank: a copy within src); an offer whose length differs from
 * what its receiver wants fails the call on every rank (MPI_ERR_TRUNCATE) before a byte of it
 * moves.  Reduce-scatter (reduce): count elements of dt at byte offset off of every rank's src,
 * reduced with op into dst[0] (dense device memory, not lent); the ranks agreed on the element
 * type, op and input size before.  No rank touches a peer's memory beyond what that peer lent.
 * local_rc: a failure before the call (the rank takes part without data). */
typedef struct coll_gpu_xstep_t {
    bool reduce;
    const void *src;
    size_t src_bytes;
    uint64_t offer_off[COLL_GPU_TEAM_MAX], offer_len[COLL_GPU_TEAM_MAX];
    uint64_t want_len[COLL_GPU_TEAM_MAX];
    void *dst[COLL_GPU_TEAM_MAX];
    size_t off, count;
    dev_dtype_t dt;
    dev_op_t op;
    int local_rc;
} coll_gpu_xstep_t;
#define COLL_GPU_XSTEP_STREAMS 3 /* the most streams a move queues on */
/* The step's two halves, which the engine runs (coll_gpu_engine.c): open publishes the
 * offers, lends src and arrives (returns this rank's failure, the call already failed through
 * the team's flags); move, once every rank arrived and none failed, maps the peers' lent bytes
 * and queues the copies or the reduction on *nstreams streams (returns a failure after
 * draining them and failing the call, or MPI_ERR_TRUNCATE on every rank for offers that do not
 * match). */
int mca_coll_gpu_nvl_xstep_open(coll_gpu_team_t *t, uint64_t seq, const coll_gpu_xstep_t *x,
                                const char *what, struct ompi_communicator_t *comm);
int mca_coll_gpu_nvl_xstep_move(coll_gpu_team_t *t, uint64_t seq, const coll_gpu_xstep_t *x,
                                const char *what, struct ompi_communicator_t *comm,
                                dev_stream_t **streams, int *nstreams);
/* The device side's own state of a team (streams, events, mapped words, staging memory), made
 * on first use; released with the team (coll_gpu_team.c). */
void mca_coll_gpu_nvl_release(coll_gpu_team_t *t);
size_t mca_coll_gpu_nvl_fused_cap(const coll_gpu_team_t *t);
/* The fused allreduce (its schedule: coll_gpu_engine.c): launch one piece of
 * call seq on the team's stream without waiting (abandon: the emulated kernel's callback, dev.h);
 * the mapped word the kernel sets to seq when it ends; release our kernel's waits for call seq
 * (a peer failed). */
int mca_coll_gpu_nvl_fused_launch(coll_gpu_team_t *t, uint64_t seq, const void *sbuf, void *rbuf,
                                  size_t count, dev_dtype_t dt, dev_op_t op, size_t cap,
                                  const dev_launch_t *launch, bool (*abandon)(void *ctx),
                                  void *ctx);
uint64_t *mca_coll_gpu_nvl_fused_word(coll_gpu_team_t *t);
int mca_coll_gpu_nvl_fused_release(coll_gpu_team_t *t, uint64_t seq);
/* A rank that takes no part in fused call seq (a local failure) releases its peers' kernels
 * itself: the abandon flags of seq go straight into every peer's slot, so that a peer's kernel
 * ends even while that peer's host cannot poll (an application blocked in cudaFree or
 * cudaDeviceSynchronize waits for the kernel, and the kernel for the host's release). */
int mca_coll_gpu_nvl_fused_release_peers(coll_gpu_team_t *t, uint64_t seq);

/* ---- nonblocking and persistent calls on the team (coll_gpu_engine.c) ---- */
/* MPI_Iallreduce / MPI_Ibcast (persistent: MPI_Allreduce_init / MPI_Bcast_init) on device
 * buffers through the node team, when coll_gpu_uniform_buffers is true, the communicator an
 * intracommunicator and the plan has a nonblocking form: *taken true and *request set (the
 * call started; persistent: an inactive request whose every MPI_Start runs one such call);
 * *taken false: the caller stages (the same on every rank).  The caller has sent calls whose
 * (bcast: this rank's) buffers are host memory elsewhere. */
/* Is this thread inside the engine's progress (a nested poll)? */
bool mca_coll_gpu_async_busy(void);
int mca_coll_gpu_async_allreduce(mca_coll_gpu_module_t *m, const void *sbuf, void *rbuf,
                                 int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, bool persistent,
                                 ompi_request_t **request, bool *taken);
int mca_coll_gpu_async_bcast(mca_coll_gpu_module_t *m, void *buf, int count,
                             struct ompi_datatype_t *dtype, int root,
                             struct ompi_communicator_t *comm, bool persistent,
                             ompi_request_t **request, bool *taken);
/* The communicator's team (coll_gpu_team.c), built on first use or waited for when a
 * nonblocking call began it (collective: every rank must call it for the same call, what names
 * it in hang reports); NULL when the communicator cannot have one (then never again). */
coll_gpu_team_t *mca_coll_gpu_team_get(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                       const char *what);
/* Choose the path of a blocking allreduce or bcast of bytes on this communicator, waiting for
 * the team's setup (the plans are coll_gpu_select.c's: topo_select with the MCA overrides);
 * fills plan (alg is TOPO_AR_STAGED / TOPO_BC_STAGED when the fast path cannot take it) and
 * returns the team to use, or NULL for the staged path.  not_capable, when not NULL, is why
 * the call cannot take the GPU path (it becomes the plan's reason).  Every input must be the
 * same on all ranks of the call. */
coll_gpu_team_t *mca_coll_gpu_select(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                     topo_coll_t coll, size_t bytes, const char *not_capable,
                                     topo_plan_t *plan);
/* Module teardown: the team's calls end, then the team goes. */
void mca_coll_gpu_async_destroy_team(mca_coll_gpu_module_t *m);
/* One turn of a wait of ours outside the engine (the hierarchical path's): every team's queued
 * calls move, the rest of Open MPI now and then, and the core is yielded once the wait has
 * spun a while (the ranks of a node may outnumber its cores). */
void mca_coll_gpu_async_pause(unsigned *spins);
/* At component close: the progress callback lives in this DSO, it must be gone before it. */
void mca_coll_gpu_async_finalize(void);

/* ---- selection (coll_gpu_select.c) ---- */
/* NULL when the kernels take count x dtype reduced with op (dt, dop, nelems say how), else why
 * not (coll_gpu_select.c). */
const char *mca_coll_gpu_map_reduction(struct ompi_datatype_t *dtype, size_t count,
                                       struct ompi_op_t *op, dev_dtype_t *dt, dev_op_t *dop,
                                       size_t *nelems);
/* What selection decides before it needs the team (the same on every rank: the arguments,
 * the parameters, the membership): false when the call is staged whatever the team (plan says
 * so and why).  not_capable, when not NULL, is why the call cannot take the GPU path. */
bool mca_coll_gpu_select_needs_team(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                    topo_coll_t coll, size_t bytes, const char *not_capable,
                                    topo_plan_t *plan);
/* The plan's reason when the communicator has no team. */
void mca_coll_gpu_select_no_team(topo_plan_t *plan);
/* The plan of a call on a ready team; false when it is staged. */
bool mca_coll_gpu_select_plan(coll_gpu_team_t *t, topo_coll_t coll, size_t bytes,
                              topo_plan_t *plan);
void mca_coll_gpu_plan_for_call(topo_plan_t *plan, bool in_place, dev_dtype_t dt);

/* ---- one rank's buffers on the agreed path (coll_gpu_adapt.c) ---- */

/* A rank's view of count elements of dtype at user for the team path: dense bytes in device
 * memory the team can export, either the user's own or a device temporary (the module's, or
 * the call's own). */
typedef struct coll_gpu_adapt_t {
    void *user;
    int count;
    struct ompi_datatype_t *dtype;
    void *dev;   /* what the team path reads or writes: bytes dense bytes */
    size_t bytes;
    int slot;    /* the module's dev_tmp slot behind dev, COLL_GPU_ADAPT_OWN, or -1: dev is
                  * the user's memory */
} coll_gpu_adapt_t;
/* The slot of a temporary of the call's own (a request's), freed by mca_coll_gpu_adapt_out. */
#define COLL_GPU_ADAPT_OWN (-2)

/* Prepare count x dtype at user for the team path, in a temporary (dev_tmp slot, or
 * COLL_GPU_ADAPT_OWN) when it cannot be used in place (layout with gaps, managed memory, or,
 * when exported (peers map it), memory the legacy IPC cannot export): packed into the
 * temporary when copy_in.  On failure a->dev is NULL and the failure is reported. */
int mca_coll_gpu_adapt_in(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                          const char *what, int slot, const void *user, int count,
                          struct ompi_datatype_t *dtype, bool copy_in, bool exported,
                          coll_gpu_adapt_t *a);
/* After the team path: unpack the temporary into the user's layout when copy_out (gaps keep
 * their bytes), and free it when it is the call's own.  Nothing to do when the user's memory
 * was used in place.  Never the module's bounce or the pinned pool: safe inside progress. */
int mca_coll_gpu_adapt_out(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                           const char *what, coll_gpu_adapt_t *a, bool copy_out);
/* A device temporary of at least bytes: the module's dev_tmp slot (kept between calls), or
 * with COLL_GPU_ADAPT_OWN one of the caller's own (dev_mem_free it).  Error reported. */
int mca_coll_gpu_adapt_tmp(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                           const char *what, int slot, size_t bytes, void **ptr);
/* Free the device temporaries (module teardown). */
void mca_coll_gpu_adapt_release(mca_coll_gpu_module_t *m);
/* Copy scount x sdtype at src into rcount x rdtype at dst (one signature; either may be device
 * or host memory, any layout), through dense device temporaries where needed.  Local; an error
 * reported.  MPI_ERR_TRUNCATE where the byte counts differ. */
int mca_coll_gpu_adapt_copy(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                            const char *what, const void *src, int scount,
                            struct ompi_datatype_t *sdtype, void *dst, int rcount,
                            struct ompi_datatype_t *rdtype);
/* The module's device scratch for a whole result of a composed collective (a reduce-scatter's
 * allreduce), at least bytes long, kept between calls (peers map it once).  Error reported. */
int mca_coll_gpu_adapt_scratch(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                               const char *what, size_t bytes, void **ptr);

/* What one rank brings to a blocking allreduce, bcast, reduce or allgather, for the
 * agreement. */
#define COLL_GPU_KINDS_REDUCE 7    /* coll of a reduce (beside topo_coll_t's values) */
#define COLL_GPU_KINDS_ALLGATHER 8 /* coll of an allgather */
#define COLL_GPU_KINDS_REDUCE_SCATTER 9 /* coll of a reduce_scatter_block */
#define COLL_GPU_KINDS_ALLGATHERV 10    /* coll of an allgatherv */
#define COLL_GPU_KINDS_ALLTOALL 11      /* coll of an alltoall */
#define COLL_GPU_KINDS_ALLTOALLV 12     /* coll of an alltoallv */
#define COLL_GPU_KINDS_REDUCE_SCATTERV 13 /* coll of a reduce_scatter (counts per rank) */
typedef struct coll_gpu_kinds_call_t {
    int coll;               /* TOPO_COLL_ALLREDUCE, TOPO_COLL_BCAST or COLL_GPU_KINDS_* */
    bool device;            /* this rank's buffers are not all host memory */
    bool capable;           /* allreduce: the kernels take the element type and op */
    int dt;                 /* ... that element type (dev_dtype_t) */
    uint64_t bytes;         /* count x type size of this rank (reduce_scatter: of its
                             * whole input, the sum of the counts) */
    int root;               /* bcast */
    struct ompi_op_t *op;   /* allreduce */
} coll_gpu_kinds_call_t;

/* A device rank's reduction in its record (coll_gpu_select.c): whether the kernels take its
 * signature and op, and then its element type (what the ranks compare). */
void mca_coll_gpu_kinds_reduction(coll_gpu_kinds_call_t *call, struct ompi_datatype_t *dtype,
                                  size_t count, struct ompi_op_t *op);
/* The path of this call, agreed with every rank of it (coll_gpu_kinds.c): *all_device is true
 * on every rank when every rank passes device memory (then the GPU path, else the component
 * below).  An erroneous call whose ranks all pass device memory returns the same MPI error on
 * every rank.  Collective: every rank of the call makes it, host-memory ranks too. */
int mca_coll_gpu_kinds_agree(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                             const char *what, const coll_gpu_kinds_call_t *call,
                             bool *all_device);
/* Whether every rank of comm has the host memory it needs (have), in one host allreduce through
 * the component below: OMPI_ERR_OUT_OF_RESOURCE on every rank when one has not, so that all
 * give up together (coll_gpu_kinds.c).  Collective. */
int mca_coll_gpu_agree_memory(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                              bool have);
/* Store this rank's word of call u, (u << 8) | flags: from now on its peers may read it (and
 * the details stored before it).  A host-memory rank's whole part of a call on a board (the
 * hot path: one store, no wait) is this with flags 0 for its next call. */
static inline void mca_coll_gpu_kinds_publish(mca_coll_gpu_module_t *m, uint64_t u,
                                              unsigned flags)
{
    atomic_store_explicit(&m->kinds_words[(u % COLL_GPU_KINDS_RING) * COLL_GPU_KINDS_SLOT_WORDS],
                          (u << 8) | flags, memory_order_release);
}
/* This rank's note of call u: host memory (call NULL), or device memory with call's details. */
void mca_coll_gpu_kinds_note(mca_coll_gpu_module_t *m, uint64_t u,
                             const coll_gpu_kinds_call_t *call);
/* A wait for every peer's note of call u, one look at a time (a nonblocking call's, from
 * progress): its start and the looks so far, zeroed before the first. */
typedef struct coll_gpu_kinds_watch_t {
    double start;
    unsigned polls;
    bool warned;
} coll_gpu_kinds_watch_t;
/* 1: every peer's note of call u is there; 0: not yet; an error: a hang given up
 * (coll_gpu_hang_error_seconds, reported) or a peer that gave up. */
int mca_coll_gpu_kinds_poll(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                            const char *what, uint64_t u, coll_gpu_kinds_watch_t *w);
/* Once every note of call u is there: *all_device, with the details compared (an erroneous
 * call: the same MPI error on every rank). */
int mca_coll_gpu_kinds_read(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                            uint64_t u, bool *all_device);
/* The setup of the kinds board begun by a nonblocking call (no wait: the component below's
 * nonblocking bcast and allreduce, the second with the tag taken now): kmode PENDING until
 * mca_coll_gpu_kinds_setup_step, called from progress, has seen it end (true).  Collective. */
void mca_coll_gpu_kinds_setup_begin(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm);
bool mca_coll_gpu_kinds_setup_step(mca_coll_gpu_module_t *m);
/* Before a blocking call's note (coll_gpu_defer.c): the deferred calls dispatched first where
 * the call may take the team (device), and none of them lapped by the note. */
int mca_coll_gpu_defer_settle(mca_coll_gpu_module_t *m, bool device);
/* Does this communicator agree on each call through its board (no promise, not across hosts)?
 * Then a host rank's note is its whole part of a call, and a call the agreement put on the
 * device path has had every rank's record compared (byte counts, roots, ops, element types:
 * kinds_compare); under a promise or across hosts the agreement only knows the kinds. */
static inline bool mca_coll_gpu_kinds_compared(const mca_coll_gpu_module_t *m)
{
    return COLL_GPU_KMODE_BOARD == m->kmode && !mca_coll_gpu_component.uniform_buffers;
}
/* The first step of every blocking collective that agrees per call, in one place: a rank whose
 * buffers are all host memory (host), on a communicator agreeing through its board (no
 * promise), notes its kind and goes to the component below at once: true.  Otherwise false: the
 * caller fills its coll_gpu_kinds_call_t and agrees (mca_coll_gpu_kinds_agree). */
static inline bool mca_coll_gpu_host_noted(mca_coll_gpu_module_t *m, bool host)
{
    if (host && mca_coll_gpu_kinds_compared(m)) {
        if (OPAL_UNLIKELY(NULL != m->defer)) {
            (void) mca_coll_gpu_defer_settle(m, false); /* (a note must not lap one of them) */
        }
        mca_coll_gpu_kinds_publish(m, ++m->kinds_seq, 0);
        return true;
    }
    return false;
}
/* The hot path of the blocking entries that agree per call: this rank's buffers are all host
 * memory (host), and there is nothing to agree (an intercommunicator; a call nested in an
 * agreement) or the note is this rank's whole part (mca_coll_gpu_host_noted): true, and the
 * entry goes to the component below at once.  Inline, with the rest of the entry out of line:
 * a host call runs a few loads, one store and a tail call (the budget is 50 ns over the
 * component below; what the note still costs MPI_Allreduce is recorded in
 * tests/bench/results/2026-12-03-h200x1-hostpath-22f7fef). */
static inline bool mca_coll_gpu_host_pass(mca_coll_gpu_module_t *m, bool host)
{
    return host && (m->inter || m->in_agreed_call || mca_coll_gpu_host_noted(m, true));
}
/* mca_coll_gpu_host_pass for a rank whose buffers are host memory, with no call in it: false
 * where it would settle deferred calls first (those are for the entry's out-of-line part, which
 * asks again).  With mca_coll_gpu_data_host_quick, the entry of a host call makes no call of its
 * own, so it needs no stack frame and reaches the component below with one jump. */
static inline bool mca_coll_gpu_host_pass_quick(mca_coll_gpu_module_t *m)
{
    if (m->inter || m->in_agreed_call) {
        return true;
    }
    if (!mca_coll_gpu_kinds_compared(m) || NULL != m->defer) {
        return false;
    }
    mca_coll_gpu_kinds_publish(m, ++m->kinds_seq, 0);
    return true;
}
void mca_coll_gpu_kinds_release(mca_coll_gpu_module_t *m);
/* Map a POSIX shared memory block of len bytes by name (coll_gpu_team.c); with create, make it
 * (O_EXCL: a taken name fails with EEXIST) and remove the name again when mapping fails.  NULL
 * with errno set on failure. */
void *mca_coll_gpu_shm_map(const char *name, bool create, size_t len);
/* The emulated node of a process (coll_gpu_emulate_nodes: its rank in MPI_COMM_WORLD cut into
 * that many blocks; 0 without), from its name, so the same on every rank that asks; does proc
 * share this process' node, real (Open MPI knows from the launch) and emulated?
 * (coll_gpu_team.c) */
int mca_coll_gpu_emulated_node(struct ompi_proc_t *proc);
bool mca_coll_gpu_on_my_node(struct ompi_proc_t *proc);
/* Does comm span nodes (real ones, or emulated)?  The same on every rank; a communicator that
 * does never gets a node team (coll_gpu_team.c). */
bool mca_coll_gpu_spans_nodes(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm);
/* Are all ranks of comm on this host?  The same answer on every rank (coll_gpu_team.c). */
bool mca_coll_gpu_all_on_host(struct ompi_communicator_t *comm);

/* Does a nonblocking or persistent allreduce or bcast take the node team's path (its
 * algorithms, coll_gpu_engine.c), whatever this rank's own kind (a rank with host memory
 * goes through a device temporary)?  It cannot wait for its peers at the call: that would hang
 * programs that start such calls in different orders on different communicators, which MPI
 * allows.  So it follows what every rank knows alike: whether some call on the communicator
 * before it, in the order every rank makes them, had device memory on every rank (a blocking
 * allreduce, bcast or reduce, whose agreement told every rank; or a deferred nonblocking call,
 * coll_gpu_defer.c, which every rank decides from the same notes before the later calls).
 * From then on every rank can run the team's path; before, every rank is staged (or defers).
 * Persistent inits follow the blocking calls alone (pers_device).  Under a promise
 * (coll_gpu_uniform_buffers, one rank) its own kind decides. */
static inline bool mca_coll_gpu_nb_team_path(const mca_coll_gpu_module_t *m, bool own_device,
                                             bool persistent)
{
    if (COLL_GPU_KMODE_SINGLE == m->kmode
        || (mca_coll_gpu_component.uniform_buffers && COLL_GPU_KMODE_PROMISE_HOST != m->kmode
            && COLL_GPU_KMODE_PROMISE_DEVICE != m->kmode)) {
        return own_device;
    }
    if (COLL_GPU_KMODE_PROMISE_DEVICE == m->kmode) {
        return true;
    }
    return persistent ? m->pers_device : m->nb_device;
}
/* Do this communicator's nonblocking calls follow the kinds history instead of a per-call
 * decision, by what is known without asking anything (mca_coll_gpu_defer_on, which also asks
 * once whether the component below is libnbc, and the hot path below share this test)? */
static inline bool mca_coll_gpu_defer_off(const mca_coll_gpu_module_t *m)
{
    return (COLL_GPU_KMODE_BOARD != m->kmode && COLL_GPU_KMODE_PENDING != m->kmode
            && COLL_GPU_KMODE_UNSET != m->kmode)
           || m->inter || mca_coll_gpu_component.uniform_buffers || ompi_mpi_thread_multiple;
}
/*
 * The hot path of a nonblocking call that may be decided per call (MPI_Iallreduce, MPI_Ibcast,
 * the nonblocking exchanges, reduce-scatters and reduce) for a rank whose buffers are host memory
 * by what is known without a call: true where the call goes to the component below at once, as
 * its path would send it; false: ask that path.
 *   - every rank takes the node team (mca_coll_gpu_nb_team_path, this rank through a device
 *     temporary): false;
 *   - no per-call decision here (mca_coll_gpu_defer_on would say no without asking anything):
 *     the kinds history, which says below;
 *   - per call through the board, nothing deferred (mca_coll_gpu_defer_call decides at the
 *     call): this rank's note where note (the calls that note their kind), *tag_rule (the call
 *     must take one tag of the component below: mca_coll_gpu_nb_one_tag), and below;
 *   - anything else (the board's setup, a first call, deferred calls): false.
 */
static inline bool mca_coll_gpu_nb_host_pass_quick(mca_coll_gpu_module_t *m, bool note,
                                                   bool *tag_rule)
{
    *tag_rule = false;
    if (mca_coll_gpu_nb_team_path(m, false, false)) {
        return false;
    }
    if (mca_coll_gpu_defer_off(m) || 0 > m->defer_ok) {
        return true;
    }
    if (COLL_GPU_KMODE_BOARD != m->kmode || 0 == m->defer_ok || NULL != m->defer) {
        return false;
    }
    if (note) {
        mca_coll_gpu_kinds_publish(m, ++m->kinds_seq, 0);
    }
    *tag_rule = true;
    return true;
}
/* After such a call went below (rc its return): it took one tag of the component below's
 * counter, as every call that a peer may defer must (coll_gpu_defer.c); one that took none (an
 * empty call) takes one now, as mca_coll_gpu_defer_call does. */
static inline int mca_coll_gpu_nb_one_tag(struct ompi_communicator_t *comm, int32_t before,
                                          bool tag_rule, int rc)
{
    if (tag_rule && comm->c_nbc_tag == before) {
        (void) ompi_coll_base_nbc_reserve_tags(comm, 1);
    }
    return rc;
}
/* The process-wide node model (probed or loaded once); NULL when none could be had. */
const topo_t *mca_coll_gpu_topo(void);
void mca_coll_gpu_topo_finalize(void);
/* The classification cache's invalidation through Open MPI's memory hooks
 * (coll_gpu_memhooks.c): init once the device backend is open, fini at component close. */
void mca_coll_gpu_memhooks_init(void);
void mca_coll_gpu_memhooks_fini(void);

/* Testing only: do coll_gpu_test_fail_alloc and coll_gpu_test_fail_alloc_site make this
 * process's allocations at site fail (coll_gpu_component.c)? */
bool mca_coll_gpu_test_fail_alloc(const char *site);
/* Testing only: does the environment variable name (a rank of MPI_COMM_WORLD) name this
 * process?  Read once into *target (which starts at -2; -1 then means unset). */
bool mca_coll_gpu_test_env_names_me(const char *name, int *target);

/* ---- the process's pool of pinned host memory (coll_gpu_pinned_pool.c) ---- */

/* Pinned host memory of at least len bytes for a staged call's bounce memory: a block the pool
 * keeps, or a new one.  Never inside progress (it may free what waits to be freed). */
int mca_coll_gpu_pinned_get(size_t len, void **ptr);
/* Give back what mca_coll_gpu_pinned_get(len) gave.  Inside a completion (between
 * mca_coll_gpu_pinned_completion_enter and _leave on this thread) it never calls the driver. */
void mca_coll_gpu_pinned_put(void *ptr, size_t len);
/* Free the blocks unused for idle_seconds or more (0: every block the pool keeps). */
void mca_coll_gpu_pinned_trim(double idle_seconds);
/* This thread runs a request's completion inside progress: no blocking driver call until
 * _leave (nests). */
void mca_coll_gpu_pinned_completion_enter(void);
void mca_coll_gpu_pinned_completion_leave(void);
/* Free everything (component close: after the last request, before the device closes). */
void mca_coll_gpu_pinned_finalize(void);
/* Blocks the pool keeps that nobody used for this long are freed at communicator free. */
#define COLL_GPU_PINNED_IDLE_SECONDS 10.0

/* ---- staging (coll_gpu_stage.c) ---- */

/* A part of a staged span that is copied on its own: the bytes [off, off + len) relative to
 * the user pointer, in host memory (copied with memcpy) or not (dev_memcpy; [base, base + size)
 * is its allocation). */
typedef struct coll_gpu_piece_t {
    ptrdiff_t off;
    size_t len;
    bool host;
    const char *base;
    size_t size;
} coll_gpu_piece_t;

/* Where the bounce memory of a call's own comes from (coll_gpu_staged_t's owned). */
typedef enum {
    COLL_GPU_OWNED_POOL,   /* the pinned pool */
    COLL_GPU_OWNED_MALLOC, /* plain memory: no pinned memory could be had */
    COLL_GPU_OWNED_MAP     /* an anonymous mapping of len bytes: a sparse span, or scratch */
} coll_gpu_owned_t;

/* A user buffer seen from the host: either the buffer itself (host memory) or a bounce copy of
 * the bytes [lo, lo + len) relative to the user pointer. */
typedef struct coll_gpu_staged_t {
    void *user;        /* the pointer the application passed */
    char *host_base;   /* what to hand to the host collective: host_base + lo is bounce memory */
    ptrdiff_t lo;      /* first byte the layout touches, relative to user */
    size_t len;        /* bytes from lo to the last byte the layout touches */
    void *owned;       /* bounce memory allocated for this call only (NULL: a cached slot) */
    coll_gpu_owned_t owned_how;
    coll_gpu_piece_t *pieces; /* the parts copied when the span is not one copy (it crosses
                               * allocations or kinds); NULL: the whole span is */
    int npieces;
    bool staged;       /* false: user memory is host memory and is used in place */
    bool fill;         /* the call reads the bounce memory (or its holes must go back as they
                        * were): it is copied in before the call */
    int fail;          /* staging failed: host_base is scratch that lets this rank take part in
                        * the collective; nothing is copied back, and unstaging returns this */
} coll_gpu_staged_t;

/* The byte range touched by count elements of dtype: [*lo, *lo + *len). */
void mca_coll_gpu_span(ompi_datatype_t *dtype, size_t count, ptrdiff_t *lo, size_t *len);

/* The union of the spans of n blocks: counts[i] elements of types[i] at byte displacements
 * idispls[i] or adispls[i] (the w collectives), or (types NULL) of dtype at idispls[i] extents
 * (the v collectives). */
void mca_coll_gpu_span_blocks(int n, const int *counts, ompi_datatype_t *dtype,
                              struct ompi_datatype_t *const *types, const int *idispls,
                              const MPI_Aint *adispls, ptrdiff_t *lo, size_t *len);
/* Prepare user memory for a host collective.  When it is device memory, take a bounce buffer
 * (slot 0 or 1; -1: memory allocated for this call, freed by stage_out) and, when copy_in, copy
 * the range in.  *out tells where the host collective must look.
 *
 * A rank whose staging fails must still take part in the collective, or its peers wait for it
 * forever: so when the copy (or the pinned allocation) fails, *out is left pointing at host
 * scratch of the right size, out->fail holds the error (reported once, with the device layer's
 * reason), and OMPI_SUCCESS is returned; unstaging then copies nothing back and returns the
 * error.  Without host memory of len bytes, mapped scratch (pages given when touched) stands in,
 * and the call fails the same way.  An error is returned (nothing staged, the caller cannot
 * take part) only when not even that can be had. */
int mca_coll_gpu_stage_in(mca_coll_gpu_module_t *module, int slot, const void *user,
                          dev_mem_kind_t kind, ptrdiff_t lo, size_t len, bool copy_in,
                          struct ompi_communicator_t *comm, const char *what,
                          coll_gpu_staged_t *out);
/* Copy between the user's memory and the bounce memory of a staged buffer (to_bounce: in),
 * the span or its pieces; with a stream, device pieces are queued on it (counted in *enqueued)
 * instead of waited for.  DEV_OK, or the device layer's status of the first failed copy (its
 * dev_error_string() says which); *failed_len is that copy's length. */
int mca_coll_gpu_stage_copy(const coll_gpu_staged_t *staged, bool to_bounce, dev_stream_t *stream,
                            int *enqueued, size_t *failed_len);
/* Give the bounce memory back without copying (what stage_out does after its copy); inside a
 * completion (mca_coll_gpu_pinned_completion_enter) without a blocking driver call. */
void mca_coll_gpu_stage_release(coll_gpu_staged_t *staged);
void mca_coll_gpu_bounce_release(mca_coll_gpu_module_t *module);

/* What a collective does with a buffer, which decides the copies around the host call. */
typedef enum {
    COLL_GPU_NONE = 0,      /* not significant on this rank: left alone */
    COLL_GPU_READ = 1,      /* copied in */
    COLL_GPU_WRITE = 2,     /* copied out; copied in too when the layout has gaps to keep */
    COLL_GPU_READWRITE = 3  /* both (MPI_IN_PLACE) */
} coll_gpu_dir_t;

/* The part of a buffer a collective touches: count elements of dtype, or (n > 0) the blocks
 * counts[i] at displacements displs[i] (in extents) of a v collective. */
typedef struct coll_gpu_layout_t {
    ompi_datatype_t *dtype;
    size_t count;
    int n;
    const int *counts;
    const int *displs;
} coll_gpu_layout_t;

#define COLL_GPU_LAYOUT(dt, cnt) ((coll_gpu_layout_t){(dt), (size_t) (cnt), 0, NULL, NULL})
#define COLL_GPU_LAYOUT_V(dt, nb, cnts, dsps) ((coll_gpu_layout_t){(dt), 0, (nb), (cnts), (dsps)})

/* The kind of the memory a layout at buf occupies, as the path of a call must see it: host
 * only when every byte the layout touches is host memory, else the kind of the first non-host
 * block found (a rank with such a layout is a device rank).  buf itself may lie outside the
 * memory (MPI_BOTTOM, a positive lower bound).  A dense layout costs one classification of its
 * first byte; a layout with gaps whose first byte is host memory is walked (each page of its
 * span, or each of its blocks, whichever are fewer), since its blocks may lie anywhere. */
dev_mem_kind_t mca_coll_gpu_layout_kind(const void *buf, coll_gpu_layout_t layout);
/* The parts in which the span [lo, lo + len) of a layout at buf is copied between the user's
 * memory and a host image of it: *pieces NULL when one copy of the span is right (a dense
 * layout; a span inside one device or managed allocation), else an array (free() it) of one
 * part per device or managed allocation (its blocks' span there, gaps included, as a whole-span
 * copy would have them) and one per run of host blocks (only the blocks: host memory between
 * them may not be mapped).  OMPI_ERR_OUT_OF_RESOURCE when the array cannot be had. */
int mca_coll_gpu_layout_pieces(const void *buf, coll_gpu_layout_t layout, ptrdiff_t lo,
                               size_t len, coll_gpu_piece_t **pieces, int *npieces);
/* Copy the pieces (NULL: the whole span [lo, lo + len)) between user memory and a host image
 * of it (image + off is user + off), to_image or back; as mca_coll_gpu_stage_copy. */
int mca_coll_gpu_pieces_copy(void *user, char *image, ptrdiff_t lo, size_t len,
                             const coll_gpu_piece_t *pieces, int npieces, bool to_image,
                             size_t *failed_len);

/* One buffer of a call as staging takes it: a layout that the call uses as dir says, or (span)
 * the union [lo, lo + len) of per-block types' blocks (the w collectives), copied whole both
 * ways so that the holes go back unchanged.  A span's blocks (their kinds decide whether it is
 * staged: MPI_BOTTOM says nothing of them): layout.n of them, layout.counts, a type each, at
 * byte displacements idispls or adispls. */
typedef struct coll_gpu_side_t {
    const void *buf;
    coll_gpu_dir_t dir;
    coll_gpu_layout_t layout;
    bool span;
    ptrdiff_t lo;
    size_t len;
    struct ompi_datatype_t *const *dtypes;
    const int *idispls;
    const MPI_Aint *adispls;
} coll_gpu_side_t;

/* Stage the send and the receive buffer of a call into the module's cached slots 0 and 1 or,
 * owned, into bounce memory of the call's own (slot -1: it outlives the call).  A buffer is
 * left alone when it is host memory, MPI_IN_PLACE, or insignificant on this rank (dir 0; its
 * layout is then not looked at: its type may not be one).  A failed copy leaves scratch to
 * take part with (stage_in); on an error return nothing stays staged. */
int mca_coll_gpu_stage_sides(mca_coll_gpu_module_t *module, bool owned, const coll_gpu_side_t *s,
                             const coll_gpu_side_t *r, struct ompi_communicator_t *comm,
                             const char *what, coll_gpu_staged_t *sst, coll_gpu_staged_t *rst);
/* Finish both after the host call returned rc; returns the first failure, staging failures
 * first (then neither buffer is copied back: the result was computed from scratch). */
int mca_coll_gpu_unstage_pair(mca_coll_gpu_module_t *module, struct ompi_communicator_t *comm,
                              const char *what, int rc, coll_gpu_staged_t *s, coll_gpu_dir_t sdir,
                              coll_gpu_staged_t *r, coll_gpu_dir_t rdir);

/* The pointer to hand to the host collective: MPI_IN_PLACE stays MPI_IN_PLACE. */
static inline void *mca_coll_gpu_view(const coll_gpu_staged_t *staged)
{
    return staged->staged ? (void *) staged->host_base : staged->user;
}

/* Finish a staged buffer after the host call returned rc: copy out when the call wrote it and
 * succeeded, free the bounce memory.  Returns rc, or the copy's failure when rc was success. */
int mca_coll_gpu_unstage(mca_coll_gpu_module_t *module, coll_gpu_staged_t *staged, int rc,
                         coll_gpu_dir_t dir, struct ompi_communicator_t *comm, const char *what);
/* A request of coll/gpu's own for a collective on comm (the engine's, a deferred call's):
 * active, or an inactive persistent one; MPI_Cancel does nothing (a collective runs to its
 * end); free_fn frees it (coll_gpu_component.c). */
void mca_coll_gpu_request_init(ompi_request_t *req, struct ompi_communicator_t *comm,
                               bool persistent, ompi_request_free_fn_t free_fn);
/* Tell the user that a device operation failed in a call: the call, the rank, the communicator
 * and the cause (help-coll-gpu.txt: device-failure). */
void mca_coll_gpu_report_failure(const char *what, struct ompi_communicator_t *comm,
                                 const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Log one line for a device-buffer call at COLL_GPU_LOG_CALL. */
void mca_coll_gpu_log_call(const char *what, struct ompi_communicator_t *comm, size_t bytes,
                           ompi_datatype_t *dtype, struct ompi_op_t *op, const char *path);
/* The same for a call that went through selection: the algorithm, path, launch and reason. */
void mca_coll_gpu_log_plan(const char *what, struct ompi_communicator_t *comm, size_t bytes,
                           ompi_datatype_t *dtype, struct ompi_op_t *op, topo_coll_t coll,
                           const coll_gpu_team_t *team, const topo_plan_t *plan);

/* A buffer's kind, as the staging decision needs it: host memory is used in place; device and
 * managed memory are staged. */
static inline bool mca_coll_gpu_is_host(dev_mem_kind_t kind)
{
    return DEV_MEM_HOST == kind;
}

/* A rank without a usable device (dev_opened false) sees host memory only, whatever the
 * device layer, which the application may share, would say. */
static inline dev_mem_kind_t mca_coll_gpu_classify(const void *ptr)
{
    if (MPI_IN_PLACE == ptr || NULL == ptr || !mca_coll_gpu_component.dev_opened
        || dev_mem_cached_host(ptr)) {
        return DEV_MEM_HOST;
    }
    return dev_mem_classify(ptr);
}

/* The first byte that count elements of dtype at buf touch: the address whose memory kind is
 * the buffer's.  buf itself may lie outside the allocation (before it, for a type with a
 * positive lower bound whose elements start inside; MPI_BOTTOM with absolute displacements).
 * MPI_IN_PLACE, and buf of an empty call, come back unchanged. */
static inline const void *mca_coll_gpu_data_start(const void *buf, ompi_datatype_t *dtype,
                                                  size_t count)
{
    ptrdiff_t lb, extent, true_lb, true_extent;

    if (MPI_IN_PLACE == buf || 0 == count) {
        return buf;
    }
    ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
    ompi_datatype_get_extent(dtype, &lb, &extent);
    if (0 > extent) {
        true_lb += (ptrdiff_t) (count - 1) * extent; /* the last element comes first */
    }
    return (const char *) buf + true_lb;
}

/* The kind of the memory count elements of dtype at buf occupy: host only when all of it is
 * host memory (mca_coll_gpu_layout_kind).  A contiguous type is one range: the kind of its
 * first byte, and the host hot path pays one classification and a flag test, as before.
 * (Whether count elements are one range is the same answer for every count above 1: asked
 * for 2, since the datatype engine takes an int.) */
static inline dev_mem_kind_t mca_coll_gpu_data_kind(const void *buf, ompi_datatype_t *dtype,
                                                    size_t count)
{
    dev_mem_kind_t kind = mca_coll_gpu_classify(mca_coll_gpu_data_start(buf, dtype, count));

    if (!mca_coll_gpu_is_host(kind) || MPI_IN_PLACE == buf || 0 == count
        || ompi_datatype_is_contiguous_memory_layout(dtype, 1 < count ? 2 : 1)) {
        return kind;
    }
    return mca_coll_gpu_layout_kind(buf, COLL_GPU_LAYOUT(dtype, count));
}

/* mca_coll_gpu_data_host_c from what is known without a call: true where no device can be
 * involved, or where the elements are one range whose page the classification cache holds as
 * plain host memory; false means "ask mca_coll_gpu_data_host_c", never "device".  An empty
 * buffer is the kind of its pointer, as there. */
static inline bool mca_coll_gpu_data_host_quick_c(const void *buf, ompi_datatype_t *dtype,
                                                  size_t count)
{
    const void *start = buf;

    if (MPI_IN_PLACE == buf || !mca_coll_gpu_component.dev_opened) {
        return true;
    }
    if (0 < count) {
        if (!ompi_datatype_is_contiguous_memory_layout(dtype, 1 < count ? 2 : 1)) {
            return false;
        }
        start = mca_coll_gpu_data_start(buf, dtype, count);
    }
    return NULL == start || dev_mem_cached_host(start);
}

/* The same for the int count of an MPI call (a negative one counts as empty). */
static inline bool mca_coll_gpu_data_host_quick(const void *buf, ompi_datatype_t *dtype,
                                                int count)
{
    return mca_coll_gpu_data_host_quick_c(buf, dtype, 0 < count ? (size_t) count : 0);
}

/* The elements of n blocks of an int count each (a negative count: none). */
static inline size_t mca_coll_gpu_blocks(int count, int n)
{
    return (0 < count && 0 < n) ? (size_t) count * (size_t) n : 0;
}

/* The ranks a buffer of an all-to-all pattern holds a block for: the remote group on an
 * intercommunicator. */
static inline int mca_coll_gpu_peers(struct ompi_communicator_t *comm)
{
    return OMPI_COMM_IS_INTER(comm) ? ompi_comm_remote_size(comm) : ompi_comm_size(comm);
}

/* The staged path's test of a buffer by its pointer (coll_gpu_staged_colls.c, HOST_PTRS), from
 * what is known without a call: MPI_IN_PLACE, or host memory by the cache (or no device), but
 * never MPI_BOTTOM (a type of absolute addresses may reach device memory anywhere); false means
 * "ask the staged path". */
static inline bool mca_coll_gpu_ptr_host_quick(const void *ptr)
{
    return MPI_IN_PLACE == ptr
           || (MPI_BOTTOM != ptr
               && (!mca_coll_gpu_component.dev_opened || dev_mem_cached_host(ptr)));
}

/* Is all the memory of count elements of dtype at buf host memory (MPI_IN_PLACE is)?  A count
 * that may pass INT_MAX (the whole input of a reduce-scatter: a sum or product of int counts)
 * is asked as a size_t, the large-count "_c" of MPI 4. */
static inline bool mca_coll_gpu_data_host_c(const void *buf, ompi_datatype_t *dtype,
                                            size_t count)
{
    return mca_coll_gpu_is_host(mca_coll_gpu_data_kind(buf, dtype, count));
}

/* The same for an int count of the MPI call (a negative one, which the call's checks refuse,
 * counts as empty). */
static inline bool mca_coll_gpu_data_host(const void *buf, ompi_datatype_t *dtype, int count)
{
    return mca_coll_gpu_data_host_c(buf, dtype, 0 < count ? (size_t) count : 0);
}

/* ---- roots and block counts, intercommunicators included ---- */

/* Is this rank the root of a rooted collective?  On an intercommunicator the root passes
 * MPI_ROOT, the other ranks of its group MPI_PROC_NULL, and the remote group the root's rank. */
static inline bool mca_coll_gpu_is_root(struct ompi_communicator_t *comm, int root)
{
    return OMPI_COMM_IS_INTER(comm) ? (MPI_ROOT == root) : (ompi_comm_rank(comm) == root);
}

/* Does the call leave this rank out altogether (MPI_PROC_NULL on an intercommunicator)? */
static inline bool mca_coll_gpu_is_idle(int root)
{
    return MPI_PROC_NULL == root;
}

/* The first failure of two. */
static inline int mca_coll_gpu_first_error(int rc, int rc2)
{
    return (OMPI_SUCCESS != rc) ? rc : rc2;
}

/* Seconds on the monotonic clock (the hang watches, the timeouts). */
static inline double mca_coll_gpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/* The data size of a call, for log lines. */
static inline size_t mca_coll_gpu_call_bytes(ompi_datatype_t *dtype, size_t count)
{
    size_t dsize;
    ompi_datatype_type_size(dtype, &dsize);
    return dsize * count;
}

/* The entries of the module's table, declared with the types of their slots (the compiler
 * checks each definition against its slot's type): one file per family; MPI_Iallreduce,
 * MPI_Ibcast and their _init forms in coll_gpu_nonblocking.c. */
#define COLL_GPU_DECLARE_ENTRY(name) \
    __typeof__(*(mca_coll_base_module_##name##_fn_t) 0) mca_coll_gpu_##name;
#define COLL_GPU_DECLARE_ENTRY_NEIGHBOR(name) \
    __typeof__(*(coll_gpu_##name##_fn_t) 0) mca_coll_gpu_##name;
COLL_GPU_FOREACH_INTERCEPTED(COLL_GPU_DECLARE_ENTRY)
COLL_GPU_FOREACH_INTERCEPTED_NB(COLL_GPU_DECLARE_ENTRY)
COLL_GPU_FOREACH_INTERCEPTED_INIT(COLL_GPU_DECLARE_ENTRY)
COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR(COLL_GPU_DECLARE_ENTRY_NEIGHBOR)
COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_NB(COLL_GPU_DECLARE_ENTRY_NEIGHBOR)
COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_INIT(COLL_GPU_DECLARE_ENTRY_NEIGHBOR)
COLL_GPU_DECLARE_ENTRY(reduce_local)
#undef COLL_GPU_DECLARE_ENTRY
#undef COLL_GPU_DECLARE_ENTRY_NEIGHBOR

/* The entries that only describe their call (a coll_gpu_staged_call_t) and hand it to a
 * function that runs it: COLL_GPU_ENTRIES_ASYNC defines the nonblocking mca_coll_gpu_i<name>
 * and the persistent mca_coll_gpu_<name>_init, COLL_GPU_ENTRIES the blocking
 * mca_coll_gpu_<name> (run by run_blocking) as well.  params: the arguments before comm;
 * fields: the members of the call that they set (both in parentheses). */
#define COLL_GPU_ARGS(...) __VA_ARGS__
#define COLL_GPU_ENTRIES_ASYNC(name, sc, run, params, fields)                                     \
    int mca_coll_gpu_i##name(COLL_GPU_ARGS params, struct ompi_communicator_t *comm,              \
                             ompi_request_t **request, mca_coll_base_module_t *module)            \
    {                                                                                             \
        return run(&(coll_gpu_staged_call_t){                                                     \
            COLL_GPU_STAGED(module, sc, NONBLOCKING, i##name), COLL_GPU_ARGS fields,              \
            .comm = comm, .request = request});                                                   \
    }                                                                                             \
    COLL_GPU_ENTRY_INIT(name, sc, run, params, fields)
#define COLL_GPU_ENTRY_INIT(name, sc, run, params, fields)                                        \
    int mca_coll_gpu_##name##_init(COLL_GPU_ARGS params, struct ompi_communicator_t *comm,        \
                                   struct ompi_info_t *info, ompi_request_t **request,            \
                                   mca_coll_base_module_t *module)                                \
    {                                                                                             \
        return run(&(coll_gpu_staged_call_t){                                                     \
            COLL_GPU_STAGED(module, sc, PERSISTENT, name##_init), COLL_GPU_ARGS fields,           \
            .comm = comm, .info = info, .request = request});                                     \
    }
#define COLL_GPU_ENTRIES(name, sc, run_blocking, run, params, fields)                             \
    int mca_coll_gpu_##name(COLL_GPU_ARGS params, struct ompi_communicator_t *comm,               \
                            mca_coll_base_module_t *module)                                       \
    {                                                                                             \
        return run_blocking(&(coll_gpu_staged_call_t){                                            \
            COLL_GPU_STAGED(module, sc, BLOCKING, name), COLL_GPU_ARGS fields,                    \
            .comm = comm});                                                                       \
    }                                                                                             \
    COLL_GPU_ENTRIES_ASYNC(name, sc, run, params, fields)
/* The entries of a collective that agrees per call, with a hot path in its blocking and its
 * nonblocking call: where host (an expression of the parameters and comm: host buffers by what
 * is known without a call) holds, the note (blocking: mca_coll_gpu_host_pass_quick; nonblocking:
 * mca_coll_gpu_nb_host_pass_quick, which the exchanges' nonblocking calls take without a note)
 * and the saved function at once. */
#define COLL_GPU_ENTRIES_AGREED_QUICK(name, sc, run_blocking, run, params, fields, args, host)     \
    COLL_GPU_ENTRY_BLOCKING_QUICK(name, sc, run_blocking, params, fields, args,                   \
                                  (host) && mca_coll_gpu_host_pass_quick(m))                      \
    COLL_GPU_ENTRY_NB_QUICK(name, sc, run, params, fields, args,                                  \
                            (host) && mca_coll_gpu_nb_host_pass_quick(m, false, &tag_rule))       \
    COLL_GPU_ENTRY_INIT(name, sc, run, params, fields)
/* The entries of a collective that is only staged (no GPU path, nothing to agree, so the same
 * hot path serves its blocking and nonblocking calls; the persistent init, made once, has none). */
#define COLL_GPU_ENTRIES_STAGED(name, sc, params, fields, args, quick)                            \
    COLL_GPU_ENTRY_BLOCKING_QUICK(name, sc, mca_coll_gpu_staged, params, fields, args, quick)     \
    COLL_GPU_ENTRY_NB_QUICK(name, sc, mca_coll_gpu_staged, params, fields, args, quick)           \
    COLL_GPU_ENTRY_INIT(name, sc, mca_coll_gpu_staged, params, fields)
/* A blocking entry with a hot path: where quick holds (an expression of the parameters, comm
 * and m, the module), the saved function at once, called with args; else the call described
 * and run by run_blocking.  quick may say "no" where the call turns out to be host memory after
 * all, never "yes" where it is not. */
#define COLL_GPU_ENTRY_BLOCKING_QUICK(name, sc, run_blocking, params, fields, args, quick)        \
    int mca_coll_gpu_##name(COLL_GPU_ARGS params, struct ompi_communicator_t *comm,               \
                            mca_coll_base_module_t *module)                                       \
    {                                                                                             \
        mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;                              \
        if (quick) {                                                                              \
            return m->prev_##name.fn(COLL_GPU_ARGS args, comm, m->prev_##name.module);            \
        }                                                                                         \
        return run_blocking(&(coll_gpu_staged_call_t){                                            \
            COLL_GPU_STAGED(module, sc, BLOCKING, name), COLL_GPU_ARGS fields,                    \
            .comm = comm});                                                                       \
    }
/* A nonblocking entry with a hot path, as COLL_GPU_ENTRY_BLOCKING_QUICK; quick may also set
 * tag_rule (mca_coll_gpu_nb_host_pass_quick), and then the call takes its one tag of the
 * component below (mca_coll_gpu_nb_one_tag).  MPI_Iallreduce and MPI_Ibcast are the others
 * that use it (coll_gpu_nonblocking.c). */
#define COLL_GPU_ENTRY_NB_QUICK(name, sc, run, params, fields, args, quick)                       \
    int mca_coll_gpu_i##name(COLL_GPU_ARGS params, struct ompi_communicator_t *comm,              \
                             ompi_request_t **request, mca_coll_base_module_t *module)            \
    {                                                                                             \
        mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;                              \
        int32_t tag = comm->c_nbc_tag;                                                            \
        bool tag_rule = false;                                                                    \
        if (quick) {                                                                              \
            return mca_coll_gpu_nb_one_tag(comm, tag, tag_rule,                                   \
                                           m->prev_i##name.fn(COLL_GPU_ARGS args, comm, request,  \
                                                              m->prev_i##name.module));           \
        }                                                                                         \
        return run(&(coll_gpu_staged_call_t){                                                     \
            COLL_GPU_STAGED(module, sc, NONBLOCKING, i##name), COLL_GPU_ARGS fields,              \
            .comm = comm, .request = request});                                                   \
    }

/* A blocking allreduce whose path is decided (all_device: agreed; coll_gpu_allreduce.c), for the
 * collectives composed of one (coll_gpu_reduce.c); prior_rc: a failure of this rank before the
 * call (it takes part without data), on communicators inside one node (the hierarchical path
 * has no rank without data). */
int mca_coll_gpu_allreduce_device(const void *sbuf, void *rbuf, int count,
                                  struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                  struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                                  bool all_device, int prior_rc);
/* The agreement of a blocking call that agrees per call (coll_gpu_allreduce.c): a rank whose
 * buffers are all host memory (host) notes its kind where that suffices (the hot path), else
 * every rank publishes coll (TOPO_COLL_* or COLL_GPU_KINDS_*), count x dtype, op (a reduction's;
 * NULL for none) and root, and reads its peers' (mca_coll_gpu_kinds_agree).  *all_device as
 * agreed (false after a note); an agreed error is returned on every rank.  A host rank goes to
 * the saved module unless *all_device. */
int mca_coll_gpu_entry_agree(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                             const char *what, int coll, bool host, struct ompi_datatype_t *dtype,
                             size_t count, struct ompi_op_t *op, int root, bool *all_device);

/* ---- the one staged path (coll_gpu_staged_colls.c) ---- */

/* How a call completes: at once, through a request, or through a persistent request that every
 * MPI_Start runs again. */
typedef enum {
    COLL_GPU_BLOCKING,
    COLL_GPU_NONBLOCKING,
    COLL_GPU_PERSISTENT
} coll_gpu_mode_t;

/* The collectives the staged path knows, by the buffers they touch (a row of its table each);
 * MPI_Scan and MPI_Exscan touch theirs as MPI_Allreduce does. */
typedef enum {
    COLL_GPU_SC_ALLGATHER,
    COLL_GPU_SC_ALLGATHERV,
    COLL_GPU_SC_ALLREDUCE,
    COLL_GPU_SC_ALLTOALL,
    COLL_GPU_SC_ALLTOALLV,
    COLL_GPU_SC_ALLTOALLW,
    COLL_GPU_SC_BCAST,
    COLL_GPU_SC_GATHER,
    COLL_GPU_SC_GATHERV,
    COLL_GPU_SC_REDUCE,
    COLL_GPU_SC_REDUCE_SCATTER,
    COLL_GPU_SC_REDUCE_SCATTER_BLOCK,
    COLL_GPU_SC_SCATTER,
    COLL_GPU_SC_SCATTERV,
    COLL_GPU_SC_NEIGHBOR_ALLGATHER,
    COLL_GPU_SC_NEIGHBOR_ALLGATHERV,
    COLL_GPU_SC_NEIGHBOR_ALLTOALL,
    COLL_GPU_SC_NEIGHBOR_ALLTOALLV,
    COLL_GPU_SC_NEIGHBOR_ALLTOALLW,
    COLL_GPU_SC_REDUCE_LOCAL,
    COLL_GPU_SC_COUNT
} coll_gpu_sc_t;

/* A saved function of any type (cast back to its own type before the call). */
typedef void (*coll_gpu_saved_fn_t)(void);

/* One call as the application made it: which collective, in which mode, the saved function
 * below coll/gpu, and the arguments (those the collective has; the others stay 0).  The
 * calls of one type and one count name it in sdtype and scount (rdtype, rcount: the same);
 * MPI_Bcast names its buffer rbuf; the reduce-scatters name rcounts (or rcount) on both sides. */
typedef struct coll_gpu_staged_call_t {
    coll_gpu_sc_t coll;
    coll_gpu_mode_t mode;
    const char *what;              /* the call's name, for log lines and reports */
    bool decided;                  /* the caller classified and logged it: stage at once */
    bool host;                     /* the caller found host memory only: the saved function */
    mca_coll_gpu_module_t *gpu;
    coll_gpu_saved_fn_t fn;        /* the saved function and its module */
    mca_coll_base_module_t *module;
    const void *sbuf;
    void *rbuf;
    int scount, rcount;
    const int *scounts, *sdispls, *rcounts, *rdispls;
    const MPI_Aint *sadispls, *radispls;              /* MPI_Neighbor_alltoallw's */
    struct ompi_datatype_t *sdtype, *rdtype;
    struct ompi_datatype_t *const *sdtypes, *const *rdtypes;
    struct ompi_op_t *op;
    int root;
    struct ompi_communicator_t *comm;
    struct ompi_info_t *info;      /* persistent */
    ompi_request_t **request;      /* nonblocking and persistent */
} coll_gpu_staged_call_t;

/* ---- nonblocking calls decided per call (coll_gpu_defer.c) ---- */

typedef int (*coll_gpu_defer_run_t)(coll_gpu_staged_call_t *c);
/* Are this communicator's nonblocking allreduces, bcasts and team exchanges decided per call
 * (the same on every rank)?  At the communicator's first call that agrees on kinds, this
 * begins the board's setup (mca_coll_gpu_kinds_setup_begin): ask at a nonblocking call only. */
bool mca_coll_gpu_defer_on(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm);
/* A nonblocking call that may take the node team, on a communicator where defer is enabled:
 * run at once where this rank can tell its path, else deferred (a request of ours).  kinds:
 * an allreduce's or bcast's note (its kind, a device rank's details); NULL for the calls that
 * only keep their order (the team exchanges). */
int mca_coll_gpu_defer_call(coll_gpu_staged_call_t *c, coll_gpu_defer_run_t run,
                            const coll_gpu_kinds_call_t *kinds);
/* The module goes: off the list of modules with deferred calls. */
void mca_coll_gpu_defer_forget(mca_coll_gpu_module_t *m);
/* Component close: the progress callback goes. */
void mca_coll_gpu_defer_finalize(void);

/* The first members of a coll_gpu_staged_call_t: collective (COLL_GPU_SC_...), mode, the module
 * (coll/gpu's, as the entry got it) and the saved slot, whose name is the call's. */
#define COLL_GPU_STAGED(gpu_module, sc, md, slot)                                         \
    .coll = COLL_GPU_SC_##sc, .mode = COLL_GPU_##md, .what = #slot,                       \
    .gpu = (mca_coll_gpu_module_t *) (gpu_module),                                        \
    .fn = (coll_gpu_saved_fn_t) ((mca_coll_gpu_module_t *) (gpu_module))->prev_##slot.fn, \
    .module = ((mca_coll_gpu_module_t *) (gpu_module))->prev_##slot.module

/* The type and count of a call with one of each (the reductions, MPI_Bcast). */
#define COLL_GPU_ONE_TYPE(dt, cnt) .sdtype = (dt), .rdtype = (dt), .scount = (cnt), .rcount = (cnt)

/* The params and fields of COLL_GPU_ENTRIES shared by several calls: one count and type per
 * side (allgather, alltoall, their neighborhood forms; gather and scatter add a root), and a
 * reduction of count x dtype (scan, exscan, MPI_Iallreduce; MPI_Reduce adds a root). */
#define COLL_GPU_P_EACH                                                                      \
    const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf, int rcount,    \
        struct ompi_datatype_t *rdtype
#define COLL_GPU_F_EACH                                                                      \
    .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,        \
    .rdtype = rdtype
#define COLL_GPU_P_REDUCTION \
    const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype, struct ompi_op_t *op
#define COLL_GPU_F_REDUCTION .sbuf = sbuf, .rbuf = rbuf, COLL_GPU_ONE_TYPE(dtype, count), .op = op

/* Run a call on the host: straight to the saved function when every buffer that matters on
 * this rank is host memory, else staged through bounce memory and completed in c's mode. */
int mca_coll_gpu_staged(const coll_gpu_staged_call_t *c);
/* Its nonblocking and persistent modes (coll_gpu_stage_async.c): stage the sides s and r into
 * bounce memory the request owns, call invoke (the saved function of c's collective and mode)
 * on it, and hook the copy back on the request's completion. */
typedef int (*coll_gpu_invoke_fn_t)(const coll_gpu_staged_call_t *c, const void *s, void *r);
int mca_coll_gpu_staged_request(const coll_gpu_staged_call_t *c, const coll_gpu_side_t *s,
                                const coll_gpu_side_t *r, coll_gpu_invoke_fn_t invoke);
/* Component close: end the copies back in flight, free the copy streams and events. */
void mca_coll_gpu_copyback_finalize(void);
/* Blocking MPI_Allgather, MPI_Allgatherv, MPI_Alltoall and MPI_Alltoallv (c->coll): one
 * exchange on the node team when every rank passes device memory, else below or staged
 * (coll_gpu_exchange.c). */
int mca_coll_gpu_exchange(coll_gpu_staged_call_t *c);
/* Nonblocking and persistent MPI_Allgather(v), MPI_Alltoall(v), MPI_Reduce_scatter,
 * MPI_Reduce_scatter_block and MPI_Reduce (c->coll; a reduce is the reduce-scatter whose whole
 * result is the root's piece): the same team step through the engine where every rank takes it,
 * else staged (coll_gpu_exchange.c). */
int mca_coll_gpu_exchange_async(coll_gpu_staged_call_t *c);
/* The engine's side of it (coll_gpu_engine.c): *taken when the call is the team's; the
 * decision uses only what is the same on every rank of the call. */
int mca_coll_gpu_async_xcall(const coll_gpu_staged_call_t *c, bool *taken);
/* A blocking exchange (allgather(v), alltoall(v)), reduce-scatter or reduce agreed for team t
 * (a reduction: of a type and op the kernels take), run by the engine with the layout and the
 * schedule of the nonblocking one, through the module's device temporaries where a rank's
 * buffers need them. */
int mca_coll_gpu_team_xcall(coll_gpu_team_t *t, const coll_gpu_staged_call_t *c);
/* Are all the bytes an exchange or reduce-scatter c touches on this rank host memory
 * (MPI_IN_PLACE is)? */
bool mca_coll_gpu_xcall_host(const coll_gpu_staged_call_t *c);
/* MPI_Allgather(v) on device memory of a communicator that spans nodes, agreed on every rank:
 * node allgatherv, node leaders over UCX, node bcast where the hierarchical path is set up, else
 * staged (coll_gpu_hier_exchange.c). */
int mca_coll_gpu_hier_allgather(coll_gpu_staged_call_t *c);
/* A reduce-scatter or reduce across nodes (coll_gpu_hier_exchange.c). */
int mca_coll_gpu_hier_reduce_scatter(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                     const char *what, const void *sbuf, void *rbuf,
                                     size_t total, size_t before, int mine,
                                     struct ompi_datatype_t *dtype, struct ompi_op_t *op);

#define COLL_GPU_VERBOSE(level, ...) \
    opal_output_verbose((level), mca_coll_gpu_component.output, __VA_ARGS__)

/* Documented verbosity levels (README, coll_gpu_verbose help text). */
#define COLL_GPU_LOG_ERROR 1     /* failures and permanent fallbacks */
#define COLL_GPU_LOG_QUERY 5     /* comm_query decisions, disqualifications */
#define COLL_GPU_LOG_CALL 10     /* one line per device-buffer call: the path taken */

/* ---- host fallback of calls queued on a team that has no GPU path (coll_gpu_fallback.c) --- */
typedef struct coll_gpu_fallback_t {
    mca_coll_gpu_module_t *m;
    struct ompi_communicator_t *comm;
    const char *what;
    bool bcast, started;
    int root, count, phase, rc;
    struct ompi_datatype_t *dtype;
    struct ompi_op_t *op;
    coll_gpu_staged_t s, r;     /* the buffers seen from the host */
    coll_gpu_dir_t sdir, rdir;
    char *gather;               /* allreduce, rank 0: the other ranks' inputs */
    ptrdiff_t lo;
    size_t span;
    ompi_request_t **reqs;
    int nreqs;
} coll_gpu_fallback_t;
/* Start an allreduce (sbuf may be MPI_IN_PLACE) or a bcast from root; an error means the call
 * could not start (as fatal as a request that cannot be allocated). */
int mca_coll_gpu_fallback_start(coll_gpu_fallback_t *f, mca_coll_gpu_module_t *m,
                                struct ompi_communicator_t *comm, const char *what, bool bcast,
                                const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root);
/* Move it on without waiting; true once it has ended (result in f->rc, buffers copied back). */
bool mca_coll_gpu_fallback_test(coll_gpu_fallback_t *f);


END_C_DECLS

#endif /* MCA_COLL_GPU_H */
