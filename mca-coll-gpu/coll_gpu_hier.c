/*
 * coll_gpu_hier.c - MPI_Allreduce and MPI_Bcast on device buffers of a communicator that spans
 * nodes (real ones, or coll_gpu_emulate_nodes' emulated ones): the node's own path inside each
 * node, UCX (coll_gpu_ucx.c) between one leader per node, or for large allreduces between the
 * ranks of each rail (below).  The setup, the pipeline and the leaders' chain bcasts also serve
 * MPI_Allgather and the reduce-scatters (coll_gpu_hier_exchange.c); the state is in
 * coll_gpu_hier.h.
 *
 * The sub-communicators are made on the first such call, as coll/han does (every rank in the
 * same order, inside a collective call): the node's (its collectives are coll/gpu's: device
 * buffers take its node team) and the leaders' (node rank 0 of every node).  The leaders then
 * connect over UCX, and every rank agrees on the outcome: a failure anywhere leaves the
 * communicator on the staged path for good, on every rank.
 *
 *   allreduce                               bcast
 *   1. node allreduce (node team)           1. bcast inside the root's node, from the root
 *   2. leaders: chain reduce up, chain      2. leaders: pipelined chain from the root's leader
 *      bcast down, pipelined (below)        3. bcast inside every other node, from its leader
 *   3. leaders agree the UCX step worked    (2 ends with the same agreement and fallback)
 *      (else: a host allreduce between
 *      them from the node results kept)
 *   4. node bcast from the leader
 *
 * The pipeline moves the message in chunks (coll_gpu_ucx_chunk_bytes), coll_gpu_ucx_depth of
 * them in flight per leader, each in a slot of pinned host memory, of device memory and a
 * stream.  Per chunk, leader p of L (P: the node result kept by the leader, R: the receive
 * buffer, H/D: the slot's host and device memory):
 *
 *   p = 0          p in (0, L-1)                        p = L-1
 *   H <- P (D2H)   recv H from p-1                      recv H from p-1
 *   send H to p+1  D <- H; R = P op D; H <- R (one       D <- H; R = P op D; H <- R
 *   recv H from    stream: H2D, reduce on the device,   send H to p-1
 *     p+1            D2H)
 *   R <- H (H2D)   send H to p+1
 *                  recv H from p+1
 *                  send H to p-1 and R <- H (together)
 *
 * With coll_gpu_ucx_device_direct (agreed at setup) the messages leave from and land in device
 * memory (P, R, D) and the host copies go.  Every leader reduces the chunks in the same order,
 * and the last one's result is what all receive: every rank ends with the same bits.  The bcast
 * chain is the second half: recv H from the previous leader, send H to the next and R <- H.
 *
 * Rails.  An allreduce of coll_gpu_hier_rail_min_bytes or more, where every node has 2 ranks or
 * more, does not push the whole message through one process per node: it is cut into shards
 * of whole elements, one per rail (as many as the smallest node has ranks), and node rank r of
 * every node runs the chain above on shard r over rail r's communicator (rail 0: the leaders')
 * and UCX endpoints of its own.  Steps 1 and 4 stay the node team's allreduce and bcasts: the
 * shards are cut in elements, not at the team's pieces, and NVLink is much faster than the
 * network the rails relieve.
 *
 *   node rank     0                  1                  ..  rails-1            rails.. (uneven)
 *   1.            node allreduce (node team): every rank holds the node's result
 *   2.            chain on shard 0   chain on shard 1   ..  chain on shard     -
 *                 (rail 0: leaders)  (rail 1)               rails-1
 *   3.            every rank agrees that every rank had its data and every rail's transfers
 *                 completed (else every rail redoes its shard through the host; all agree again)
 *   4.            node bcast of shard 0 from node rank 0, of shard 1 from node rank 1, ...
 *
 * What every rank decides alone is the same on all: the membership (spans, rails), the
 * signature's bytes, the agreed setup, the parameters (ALL_EQ).  A rank of a chain that fails
 * locally keeps to the message schedule without its data and says so in the agreement; one
 * whose UCX failed tells the rest of its chain through Open MPI's point-to-point layer
 * (coll_gpu_ucx_timeout_seconds bounds a wait on a peer that stopped without a word).  Either
 * way every chain redoes the step between nodes through the host, and UCX stays off on that
 * communicator afterwards.
 */
#include "ompi_config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ompi/mca/pml/pml.h"

#include "coll_gpu.h"
#include "coll_gpu_hier.h"
#include "coll_gpu_ucx.h"

/* The point-to-point tag of a rank's notice that its UCX transfers failed, on its chain's
 * communicator (the leaders' or a rail's: only coll/gpu uses them, so any tag is ours). */
#define HIER_ABORT_TAG 4242
/* Idle turns of the progress loop between two looks for that notice. */
#define HIER_ABORT_POLL 64

/* The id this process gives comm in UCX tags: its local cid.  COLL_GPU_TEST_CID_SKEW (tests
 * only) makes it differ between processes, as sessions-made communicators' local cids may on
 * Open MPI 5.0, so that a test shows every message carries its receiver's id. */
static int tag_cid(struct ompi_communicator_t *comm)
{
    const char *skew = getenv("COLL_GPU_TEST_CID_SKEW");
    int cid = coll_gpu_comm_cid(comm);

    if (NULL != skew && '\0' != skew[0] && '0' != skew[0]) {
        cid += 4096 * (1 + (int) (ompi_proc_local()->super.proc_name.vpid % 1024));
    }
    return cid;
}

/* The state of a communicator whose hierarchical state could not be allocated on this rank
 * (mca_coll_gpu_hier_ready): failed for good, leaders' path and rails; never freed. */
static coll_gpu_hier_t hier_no_memory = {.state = HIER_FAILED, .rails_state = HIER_FAILED};

/* Give up this rank's chain: its UCX endpoints and the pipeline's slots. */
static void chain_disconnect(coll_gpu_hier_t *h)
{
    mca_coll_gpu_ucx_comm_destroy(h->ucx);
    h->ucx = NULL;
    for (int s = 0; s < HIER_DEPTH_MAX; ++s) {
        (void) dev_event_destroy(h->event[s]);
        (void) dev_stream_destroy(h->stream[s]);
        h->event[s] = NULL;
        h->stream[s] = NULL;
    }
    (void) dev_host_free(h->host);
    (void) dev_mem_free(h->dtmp);
    (void) dev_mem_free(h->saved);
    h->host = NULL;
    h->dtmp = NULL;
    h->saved = NULL;
    h->saved_bytes = 0;
}

void mca_coll_gpu_hier_release(mca_coll_gpu_module_t *m)
{
    coll_gpu_hier_t *h = m->hier;

    m->hier = NULL;
    if (NULL == h || &hier_no_memory == h) {
        return;
    }
    chain_disconnect(h);
    struct ompi_communicator_t **comms[] = {&h->rail_comm, &h->leader_comm, &h->node_comm};
    for (int i = 0; i < 3; ++i) {
        if (NULL != *comms[i]) {
            (void) ompi_comm_free(comms[i]);
        }
    }
    free(h->leader_of); /* and the other tables: one allocation (hier_setup) */
    free(h);
}

/* The pipeline's slots of a chain's rank (h->chunk x h->depth).  A failed allocation leaves
 * its pointer NULL (the backends set a stream or an event only when they made it). */
static int hier_alloc_slots(coll_gpu_hier_t *h)
{
    size_t bytes = h->chunk * (size_t) h->depth;

    if (DEV_OK != dev_host_alloc((void **) &h->host, bytes)) {
        h->host = NULL;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    if (DEV_OK != dev_mem_alloc((void **) &h->dtmp, bytes)) {
        h->dtmp = NULL;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    for (int s = 0; s < h->depth; ++s) {
        if (DEV_OK != dev_stream_create(&h->stream[s])
            || DEV_OK != dev_event_create(&h->event[s])) {
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
    }
    return OMPI_SUCCESS;
}

/*
 * Connect this rank's chain (NULL: none) and agree over comm (MIN) on ok: [0] its UCX endpoints
 * and slots are ready, [1] device memory can go straight to UCX (asked for, a real GPU, a UCX
 * that moves CUDA memory; the caller's answer for a rank on no chain).  The chain is undone when
 * the setup failed anywhere.  Returns the allreduce's outcome; all_ok holds the agreed pair.
 */
static int chain_connect(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                         const char *what, struct ompi_communicator_t *chain, int ok[2],
                         int all_ok[2])
{
    coll_gpu_hier_t *h = m->hier;
    bool want = mca_coll_gpu_component.ucx_device_direct;
    int rc;

    if (NULL != chain) {
        /* every rank of the chain takes part in the exchange, whatever its local state */
        ok[0] = (OMPI_SUCCESS == mca_coll_gpu_ucx_comm_create(chain, &h->ucx));
        if (ok[0] && OMPI_SUCCESS != hier_alloc_slots(h)) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:%s (cid %d): rank %d: no memory for "
                             "the UCX pipeline's slots of rail %d (%s)", what,
                             coll_gpu_comm_cid(comm), ompi_comm_rank(comm), h->node_rank,
                             dev_error_string());
            ok[0] = 0;
        }
        ok[1] = want && mca_coll_gpu_ucx_device_memory() && DEV_BACKEND_CUDA == dev_backend();
        if (want && !ok[1]) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:%s (cid %d): rank %d: "
                             "coll_gpu_ucx_device_direct: not here (%s, %s backend): chunks "
                             "staged through host memory", what, coll_gpu_comm_cid(comm),
                             ompi_comm_rank(comm), mca_coll_gpu_ucx_describe(),
                             dev_backend_name(dev_backend()));
        }
    }
    rc = m->prev_allreduce.fn(ok, all_ok, 2, MPI_INT, MPI_MIN, comm, m->prev_allreduce.module);
    if (NULL != chain && (OMPI_SUCCESS != rc || !all_ok[0])) {
        chain_disconnect(h);
    }
    return rc;
}

/* Agree over comm whether every rank has the memory for the hierarchical setup (an allreduce
 * of one int: nothing to allocate).  OMPI_ERR_OUT_OF_RESOURCE on every rank when one has not. */
static int hier_agree_memory(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                             const char *what, bool nomem)
{
    int mine = nomem, any = 0;
    int rc = m->prev_allreduce.fn(&mine, &any, 1, MPI_INT, MPI_MAX, comm,
                                  m->prev_allreduce.module);

    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    if (nomem) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:%s (cid %d): rank %d: no host memory "
                         "for the hierarchical path's setup%s", what, coll_gpu_comm_cid(comm),
                         ompi_comm_rank(comm), mca_coll_gpu_test_fail_alloc("hier")
                         ? " (coll_gpu_test_fail_alloc, test only)" : "");
    }
    if (any && 0 == ompi_comm_rank(comm)) {
        opal_output(0, "coll:gpu:%s (cid %d): a rank had no memory for the hierarchical path's "
                    "setup: device buffers on this communicator are staged through Open MPI's "
                    "point-to-point layer", what, coll_gpu_comm_cid(comm));
    }
    return any ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_SUCCESS;
}

/* Split comm by color (MPI_UNDEFINED: *out is NULL).  A failure of the split itself is Open
 * MPI's, reported on every rank.  The split's own collectives on comm (an allgather of the
 * colors, the agreement on the new id), on host memory, come back to m: they go straight to
 * the component below (in_agreed_call), or under a promise of device memory they would take
 * the hierarchical path again, whose setup this is, and recurse until the stack ends. */
static int hier_split(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm, int color,
                      int key, struct ompi_communicator_t **out)
{
    bool nested = m->in_agreed_call;
    int rc;

    m->in_agreed_call = true;
    rc = ompi_comm_split(comm, color, key, out, false);
    m->in_agreed_call = nested;

    if (OMPI_SUCCESS != rc || &ompi_mpi_comm_null.comm == *out) {
        *out = NULL;
    }
    return rc;
}

/*
 * Build the sub-communicators, the tables of who leads whom and the leaders' UCX endpoints
 * (collective over comm, on the first device call that needs them).  Every rank ends in the
 * same state: READY, or FAILED for good.
 */
static int hier_setup(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                      const char *what)
{
    coll_gpu_hier_t *h = m->hier;
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    int n = (1 < mca_coll_gpu_component.emulate_nodes) ? mca_coll_gpu_component.emulate_nodes : 1;
    int color = -1, leader_rank, rc;
    int ok[2] = {1, 1}, all_ok[2] = {0, 0};
    int *cards = NULL;

    /* The tables, before the first collective step: a rank that cannot have them says so in an
     * agreement that needs no memory, and every rank gives up together (leaving before a step
     * would leave its peers waiting in it). */
    if (!mca_coll_gpu_test_fail_alloc("hier")) {
        cards = malloc(sizeof(int) * 4 * (size_t) size);
        h->leader_of = malloc(sizeof(int) * (5 * (size_t) size + 2));
    }
    rc = hier_agree_memory(m, comm, what, NULL == cards || NULL == h->leader_of);
    if (OMPI_SUCCESS != rc) {
        goto out;
    }
    h->node_rank_of = h->leader_of + size;
    h->tag_cid_of = h->node_rank_of + size;
    h->node_first = h->tag_cid_of + size;
    h->byte_first = h->node_first + size + 1;
    /* the pipeline's shape, from parameters of scope ALL_EQ; a chunk a multiple of 16 B, so
     * that it holds whole elements of every type */
    h->depth = mca_coll_gpu_component.ucx_depth;
    h->depth = (1 > h->depth) ? 1 : (HIER_DEPTH_MAX < h->depth) ? HIER_DEPTH_MAX : h->depth;
    h->chunk = mca_coll_gpu_component.ucx_chunk_bytes & ~(size_t) 15;
    h->chunk = (16 > h->chunk) ? 16 : h->chunk;
    /* the node: the lowest rank on my real node, times the emulated node */
    for (int i = 0; i < size && 0 > color; ++i) {
        if (mca_coll_gpu_on_my_node(ompi_comm_peer_lookup(comm, i))) {
            color = i * n + mca_coll_gpu_emulated_node(ompi_proc_local());
        }
    }
    rc = hier_split(m, comm, color, rank, &h->node_comm);
    if (OMPI_SUCCESS != rc) {
        goto out;
    }
    h->node_rank = ompi_comm_rank(h->node_comm);
    rc = hier_split(m, comm, (0 == h->node_rank) ? 0 : MPI_UNDEFINED, rank, &h->leader_comm);
    if (OMPI_SUCCESS != rc) {
        goto out;
    }
    leader_rank = (NULL != h->leader_comm) ? ompi_comm_rank(h->leader_comm) : -1;
    /* who leads whom: (node color, node rank, leader rank, tag id) of every rank */
    int mine[4] = {color, h->node_rank, leader_rank, tag_cid(comm)};
    rc = m->prev_allgather.fn(mine, 4, MPI_INT, cards, 4, MPI_INT, comm,
                              m->prev_allgather.module);
    if (OMPI_SUCCESS != rc) {
        goto out;
    }
    memset(h->node_first, 0, sizeof(int) * ((size_t) size + 1));
    h->nnodes = 0;
    for (int i = 0; i < size; ++i) {
        h->node_rank_of[i] = cards[4 * i + 1];
        h->tag_cid_of[i] = cards[4 * i + 3];
        for (int j = 0; j < size; ++j) { /* the leader: node rank 0 of the same color */
            if (cards[4 * j] == cards[4 * i] && 0 == cards[4 * j + 1]) {
                h->leader_of[i] = cards[4 * j + 2];
            }
        }
        h->nnodes += (0 == cards[4 * i + 1]);
        ++h->node_first[h->leader_of[i] + 1];
    }
    /* node-major order (coll_gpu_hier.h): node j's ranks after those of the nodes before it;
     * the rails: as many as the smallest node has ranks (from the membership: the same on all) */
    h->max_node = 0;
    h->rails = INT_MAX;
    for (int j = 0; j < h->nnodes; ++j) {
        h->max_node = (h->node_first[j + 1] > h->max_node) ? h->node_first[j + 1] : h->max_node;
        h->rails = (h->node_first[j + 1] < h->rails) ? h->node_first[j + 1] : h->rails;
        h->node_first[j + 1] += h->node_first[j];
    }
    h->node_major = true;
    for (int i = 0; i < size; ++i) {
        h->node_major = h->node_major
                        && (i == h->node_first[h->leader_of[i]] + h->node_rank_of[i]);
    }
    h->chain_comm = h->leader_comm;
    rc = chain_connect(m, comm, what, h->leader_comm, ok, all_ok);
    if (OMPI_SUCCESS != rc) {
        goto out;
    }
    h->direct = (1 == all_ok[1]);
    if (!all_ok[0]) {
        if (0 == rank) {
            opal_output(0, "coll:gpu:%s (cid %d): the UCX connection between the %d nodes could "
                        "not be set up (%s; see coll_gpu_verbose 1 for the cause on each rank): "
                        "device buffers on this communicator are staged through Open MPI's "
                        "point-to-point layer", what, coll_gpu_comm_cid(comm), h->nnodes,
                        mca_coll_gpu_ucx_describe());
        }
        rc = OMPI_ERR_NOT_AVAILABLE;
        goto out;
    }
    COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:%s (cid %d): rank %d: %d nodes, node rank %d "
                     "of %d, leader %d; %s", what, coll_gpu_comm_cid(comm), rank, h->nnodes,
                     h->node_rank, ompi_comm_size(h->node_comm), leader_rank,
                     (NULL != h->leader_comm) ? mca_coll_gpu_ucx_describe()
                                              : "no UCX on this rank (not a leader)");
out:
    free(cards);
    return rc;
}

/*
 * Set up the rails (collective over comm, in the first allreduce that would take them): rail
 * r's communicator (node rank r of every node, ordered as the leaders) for r = 1 .. rails - 1,
 * its UCX endpoints and slots; rail 0 is the leaders' chain.  Every rank ends in the same
 * state: READY, or FAILED for good (the leaders then take every size), announced once.
 */
static bool rails_ready(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                        const char *what)
{
    coll_gpu_hier_t *h = m->hier;
    int rank = ompi_comm_rank(comm), color, rc;
    int ok[2] = {1, 1}, all_ok[2] = {0, 0};

    if (HIER_UNTRIED != h->rails_state) {
        return HIER_READY == h->rails_state;
    }
    h->rails_state = HIER_FAILED;
    color = (0 < h->node_rank && h->node_rank < h->rails) ? h->node_rank : MPI_UNDEFINED;
    /* keyed by the node's place among the leaders: every rail orders the nodes alike */
    if (OMPI_SUCCESS != hier_split(m, comm, color, h->leader_of[rank], &h->rail_comm)) {
        return false;
    }
    if (0 == h->node_rank) {
        ok[1] = h->direct; /* rail 0: the leaders' agreed setup */
    }
    rc = chain_connect(m, comm, what, h->ucx_broken ? NULL : h->rail_comm, ok, all_ok);
    if (OMPI_SUCCESS != rc || !all_ok[0]) {
        if (0 == rank && OMPI_SUCCESS == rc) {
            opal_output(0, "coll:gpu:%s (cid %d): the UCX connections of the %d rails between "
                        "the %d nodes could not be set up (see coll_gpu_verbose 1 for the cause "
                        "on each rank): every allreduce on this communicator goes through the "
                        "node leaders", what, coll_gpu_comm_cid(comm), h->rails, h->nnodes);
        }
        return false;
    }
    h->rails_direct = (1 == all_ok[1]);
    if (NULL != h->rail_comm) {
        h->chain_comm = h->rail_comm;
    }
    h->rails_state = HIER_READY;
    COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:%s (cid %d): rank %d: %d rails ready; %s",
                     what, coll_gpu_comm_cid(comm), rank, h->rails,
                     (NULL != h->chain_comm) ? "this rank is on one" : "not on a rail");
    return true;
}

bool mca_coll_gpu_hier_ready(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                             const char *what)
{
    /* all of it the same on every rank: the membership, the build */
    if (!mca_coll_gpu_spans_nodes(m, comm) || !mca_coll_gpu_ucx_built()) {
        return false;
    }
    if (NULL == m->hier && !mca_coll_gpu_test_fail_alloc("hier_state")) {
        m->hier = calloc(1, sizeof(*m->hier));
    }
    if (NULL == m->hier) {
        /* this rank has no memory for the state: it takes part in the setup's first step, the
         * memory agreement, and fails with its peers, for good */
        (void) hier_agree_memory(m, comm, what, true);
        m->hier = &hier_no_memory;
    } else if (HIER_UNTRIED == m->hier->state) {
        m->hier->state = (OMPI_SUCCESS == hier_setup(m, comm, what)) ? HIER_READY : HIER_FAILED;
    }
    return HIER_READY == m->hier->state;
}

bool mca_coll_gpu_hier_usable(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                              topo_coll_t coll)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    int forced = (TOPO_COLL_ALLREDUCE == coll) ? c->allreduce_algorithm : c->bcast_algorithm;
    int staged = (TOPO_COLL_ALLREDUCE == coll) ? TOPO_AR_STAGED : TOPO_BC_STAGED;

    /* the parameters: ALL_EQ */
    return staged != forced && mca_coll_gpu_hier_ready(m, comm, topo_coll_name(coll));
}

/* ---- a chain's pipeline (the leaders', or a rail's) ------------------------------------- */

/* What a chunk's step does on the device (in its slot's stream) and over UCX (together). */
typedef enum {
    DEV_NONE = 0,
    DEV_LOAD,     /* H <- P */
    DEV_COMBINE,  /* D <- H; R = P op D; H <- R */
    DEV_STORE,    /* R <- H */
    DEV_REDUCE    /* R = P op D (direct: D came from UCX) */
} step_dev_t;
typedef enum { NET_NONE, NET_RECV_PREV, NET_SEND_NEXT, NET_RECV_NEXT, NET_SEND_PREV } step_net_t;

/* Which memory a step's message leaves from or lands in: the slot's pinned host memory, the
 * slot's device memory, or the chunk of P or R itself (the direct path). */
typedef enum { BUF_HOST = 0, BUF_DTMP, BUF_SRC, BUF_OUT } step_buf_t;

typedef struct {
    step_dev_t dev;
    step_net_t net;
    step_buf_t buf;
} step_t;

/* A chain position's program: its steps, ended by one that does nothing (all zero). */
#define STEPS_MAX 6
#define S(d, n, b) {DEV_##d, NET_##n, BUF_##b}
/* [bcast][direct][first, middle, last rank of the chain]: the allreduce chain (the file's
 * header) through the slots' pinned host memory, then direct (messages from and to device
 * memory, no host copies); the bcast chain (MPI_Bcast's leaders' step and the allgather's
 * chains), the same two ways */
static const step_t chain_progs[2][2][3][STEPS_MAX] = {
    {{{S(LOAD, NONE, HOST), S(NONE, SEND_NEXT, HOST), S(NONE, RECV_NEXT, HOST),
       S(STORE, NONE, HOST)},
      {S(NONE, RECV_PREV, HOST), S(COMBINE, NONE, HOST), S(NONE, SEND_NEXT, HOST),
       S(NONE, RECV_NEXT, HOST), S(STORE, SEND_PREV, HOST)},
      {S(NONE, RECV_PREV, HOST), S(COMBINE, NONE, HOST), S(NONE, SEND_PREV, HOST)}},
     {{S(NONE, SEND_NEXT, SRC), S(NONE, RECV_NEXT, OUT)},
      {S(NONE, RECV_PREV, DTMP), S(REDUCE, NONE, HOST), S(NONE, SEND_NEXT, OUT),
       S(NONE, RECV_NEXT, OUT), S(NONE, SEND_PREV, OUT)},
      {S(NONE, RECV_PREV, DTMP), S(REDUCE, NONE, HOST), S(NONE, SEND_PREV, OUT)}}},
    {{{S(LOAD, NONE, HOST), S(NONE, SEND_NEXT, HOST)},
      {S(NONE, RECV_PREV, HOST), S(STORE, SEND_NEXT, HOST)},
      {S(NONE, RECV_PREV, HOST), S(STORE, NONE, HOST)}},
     {{S(NONE, SEND_NEXT, OUT)},
      {S(NONE, RECV_PREV, OUT), S(NONE, SEND_NEXT, OUT)},
      {S(NONE, RECV_PREV, OUT)}}}};
#undef S

/* The phases of the tags: up and down the allreduce chain, down the bcast chain */
enum { PHASE_UP = 0, PHASE_DOWN = 1, PHASE_BCAST = 2 };

typedef struct {
    coll_gpu_hier_t *h;
    struct ompi_communicator_t *chain; /* the chain's communicator (leaders, or a rail) */
    uint32_t cid, peer_cid[2];  /* the tag ids of comm in this process, its prev and next */
    uint64_t seq;
    int peer[2];                /* prev and next: ranks in chain, -1 at the ends */
    int phase_fwd;              /* the phase of messages sent to next (PHASE_UP or _BCAST) */
    const step_t *prog;         /* chain_progs' program of this rank's position */
    const char *src;            /* DEV_LOAD and DEV_COMBINE's P: device memory */
    char *out;                  /* DEV_COMBINE and DEV_STORE's R: device memory */
    size_t bytes, esize;
    dev_dtype_t dt;
    dev_op_t op;
    bool degraded;              /* a local failure: keep the message schedule, skip the device */
    bool direct;                /* messages from and to device memory (agreed by the chain) */
} pipe_t;

typedef struct {
    bool busy, dev_pending;
    int step;
    uint64_t chunk;
    coll_gpu_ucx_req_t net;
} slot_t;

/* The tag id of comm in the process at position pos (-1: none) of this rank's chain: every
 * chain orders the nodes as the leaders do, and holds the ranks of one node rank, this rank's. */
static uint32_t chain_tag_cid(const coll_gpu_hier_t *h, struct ompi_communicator_t *comm,
                              int pos)
{
    for (int i = 0; 0 <= pos && i < ompi_comm_size(comm); ++i) {
        if (h->node_rank_of[i] == h->node_rank && h->leader_of[i] == pos) {
            return (uint32_t) h->tag_cid_of[i];
        }
    }
    return 0;
}

/* Start slot s's current step: its device work, then its message. */
static int step_start(pipe_t *pp, int s, slot_t *sl)
{
    coll_gpu_hier_t *h = pp->h;
    const step_t *st = &pp->prog[sl->step];
    size_t off = (size_t) sl->chunk * h->chunk;
    size_t len = (pp->bytes - off < h->chunk) ? pp->bytes - off : h->chunk;
    char *hs = h->host + (size_t) s * h->chunk;
    char *ds = h->dtmp + (size_t) s * h->chunk;
    dev_stream_t *q = h->stream[s];
    bool fwd = (NET_RECV_PREV == st->net || NET_SEND_NEXT == st->net), dev;
    bool send = (NET_SEND_NEXT == st->net || NET_SEND_PREV == st->net);
    int rc = DEV_OK, side = (NET_SEND_NEXT == st->net);
    char *buf;

    sl->dev_pending = false;
    memset(&sl->net, 0, sizeof(sl->net));
    if (DEV_NONE != st->dev && !pp->degraded) {
        if (DEV_LOAD == st->dev) {
            rc = dev_memcpy_async(hs, pp->src + off, len, q);
        } else if (DEV_STORE == st->dev) {
            rc = dev_memcpy_async(pp->out + off, hs, len, q);
        } else {
            if (DEV_COMBINE == st->dev) {
                rc = dev_memcpy_async(ds, hs, len, q);
            }
            if (DEV_OK == rc) {
                rc = dev_reduce(pp->out + off, pp->src + off, ds, len / pp->esize, pp->dt,
                                pp->op, q);
            }
            if (DEV_OK == rc && DEV_COMBINE == st->dev) {
                rc = dev_memcpy_async(hs, pp->out + off, len, q);
            }
        }
        if (DEV_OK == rc) {
            rc = dev_event_record(h->event[s], q);
        }
        if (DEV_OK != rc) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:hier: a device copy or reduction of "
                             "chunk %" PRIu64 " failed: %s", sl->chunk, dev_error_string());
            pp->degraded = true; /* keep sending and receiving, without data */
        } else {
            sl->dev_pending = true;
        }
    }
    if (NET_NONE == st->net) {
        return OMPI_SUCCESS;
    }
    /* a rank without its data (degraded) keeps the schedule with its host slot */
    dev = pp->direct && !pp->degraded && BUF_HOST != st->buf;
    buf = !dev                    ? hs
          : (BUF_DTMP == st->buf) ? ds
          : (BUF_SRC == st->buf)  ? (char *) pp->src + off
                                  : pp->out + off;
    /* a message carries its receiver's id; forward ones the call's phase, the rest PHASE_DOWN */
    return mca_coll_gpu_ucx_start(
        h->ucx, send ? pp->peer[side] : -1, buf, len,
        mca_coll_gpu_ucx_tag(send ? pp->peer_cid[side] : pp->cid, pp->seq,
                             fwd ? pp->phase_fwd : PHASE_DOWN, sl->chunk),
        dev, &sl->net);
}

/* 0: the step is done; 1: in flight; < 0: a UCX failure. */
static int step_test(pipe_t *pp, int s, slot_t *sl)
{
    int rc = mca_coll_gpu_ucx_test(&sl->net);

    if (0 > rc) {
        return rc;
    }
    if (sl->dev_pending) {
        int q = dev_event_query(pp->h->event[s]);
        if (1 == q) {
            return 1;
        }
        sl->dev_pending = false;
        if (DEV_OK != q) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:hier: a device step of chunk %" PRIu64
                             " failed: %s", sl->chunk, dev_error_string());
            pp->degraded = true;
        }
    }
    return rc;
}

/*
 * A rank whose UCX transfers failed tells the rest of its chain through Open MPI's
 * point-to-point layer, so that none waits for a message that will not come (each listens while
 * its transfers run).  UCX then stays off on the communicator, so a notice that arrives too
 * late for its call is never taken for a later one's.
 */
static void abort_notify(struct ompi_communicator_t *chain)
{
    static int one = 1;
    int me = ompi_comm_rank(chain), nl = ompi_comm_size(chain);

    for (int i = 0; i < nl; ++i) {
        ompi_request_t *req = NULL;

        if (i != me
            && OMPI_SUCCESS == MCA_PML_CALL(isend(&one, 1, MPI_INT, i, HIER_ABORT_TAG,
                                                  MCA_PML_BASE_SEND_STANDARD, chain, &req))) {
            (void) ompi_request_free(&req); /* completes on its own: 4 bytes, eager */
        }
    }
}

/*
 * Run the chunks of one call through the slots.  Returns OMPI_SUCCESS when every step completed
 * (pp->degraded says whether the data is right), or the UCX failure (then every request of ours
 * is given up: receives cancelled, sends left to UCX), its own or a peer's (its notice).
 */
static int pipe_run(pipe_t *pp)
{
    coll_gpu_hier_t *h = pp->h;
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    slot_t slots[HIER_DEPTH_MAX];
    uint64_t nchunks = (pp->bytes + h->chunk - 1) / h->chunk, next = 0, done = 0;
    double last = MPI_Wtime();
    unsigned spins = 0, idle = 0;
    bool fail_sends = false, told = false;
    ompi_request_t *notice = NULL;
    int notice_buf = 0, rc = OMPI_SUCCESS;

    memset(slots, 0, sizeof(slots));
    /* listen for a peer's failure notice (without it, only coll_gpu_ucx_timeout_seconds ends
     * a wait on a peer whose transfers stopped) */
    if (OMPI_SUCCESS != MCA_PML_CALL(irecv(&notice_buf, 1, MPI_INT, MPI_ANY_SOURCE,
                                           HIER_ABORT_TAG, pp->chain, &notice))) {
        notice = NULL;
    }
    /* testing only: this rank's sends fail, as after an endpoint error, in its first chain on
     * the communicator */
    if (0 <= c->test_fail_ucx && !h->test_failed
        && c->test_fail_ucx == coll_gpu_world_rank()) {
        h->test_failed = true;
        fail_sends = true;
    }
    while (done < nchunks && OMPI_SUCCESS == rc) {
        bool moved = false;

        for (int s = 0; s < h->depth && OMPI_SUCCESS == rc; ++s) {
            slot_t *sl = &slots[s];
            /* 0: the slot moves on (a free one to the next chunk), 1: it waits, < 0: failed */
            int t = sl->busy ? step_test(pp, s, sl) : (next < nchunks) ? 0 : 1;

            if (0 != t) {
                rc = (0 > t) ? t : rc;
                continue;
            }
            moved = true;
            if (!sl->busy) {
                *sl = (slot_t) {.busy = true, .chunk = next++};
            } else if (DEV_NONE == pp->prog[++sl->step].dev
                       && NET_NONE == pp->prog[sl->step].net) {
                sl->busy = false;
                ++done;
                continue;
            } else if (fail_sends && (NET_SEND_NEXT == pp->prog[sl->step].net
                                      || NET_SEND_PREV == pp->prog[sl->step].net)) {
                COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:hier: coll_gpu_test_fail_ucx: "
                                 "this rank's UCX sends fail from now on");
                rc = OMPI_ERR_UNREACH;
                continue;
            }
            rc = step_start(pp, s, sl);
        }
        mca_coll_gpu_ucx_progress();
        if (moved) {
            last = MPI_Wtime();
            spins = 0;
        } else if (0 < c->ucx_timeout_seconds
                   && MPI_Wtime() - last > (double) c->ucx_timeout_seconds) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:hier: no UCX progress for %d s "
                             "(coll_gpu_ucx_timeout_seconds): giving the transfer up",
                             c->ucx_timeout_seconds);
            rc = OMPI_ERR_TIMEOUT;
        } else if (NULL != notice && 0 == ++idle % HIER_ABORT_POLL) {
            int arrived = 0;

            (void) ompi_request_test(&notice, &arrived, MPI_STATUS_IGNORE);
            if (arrived) {
                notice = NULL;
                told = true;
                COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:hier: another %s's UCX "
                                 "transfers failed: giving this one's up",
                                 (pp->chain == h->leader_comm) ? "leader" : "rank of the rail");
                rc = OMPI_ERR_UNREACH;
            }
        } else {
            /* a polite spin: yields the core after a while (oversubscribed nodes) */
            mca_coll_gpu_async_pause(&spins);
        }
    }
    if (OMPI_SUCCESS != rc && !told && !(fail_sends && c->test_fail_ucx_silent)) {
        abort_notify(pp->chain);
    }
    if (NULL != notice && MPI_REQUEST_NULL != notice) {
        (void) ompi_request_cancel(notice);
        (void) ompi_request_wait(&notice, MPI_STATUS_IGNORE);
    }
    for (int s = 0; s < h->depth; ++s) {
        if (slots[s].busy) {
            mca_coll_gpu_ucx_abandon(&slots[s].net);
            if (slots[s].dev_pending) {
                (void) dev_event_sync(h->event[s]);
            }
        }
    }
    return rc;
}

/*
 * One call's chain over UCX for this rank of chain, between prev and next (-1 at the ends):
 * the allreduce of src (P) into out (R), or (bcast) out down the chain from its first rank.
 * The tags carry comm's id in the receiving process and the number of this rank's chains on
 * comm (a process is on one chain of comm, whose ranks all count the same calls).  A rank
 * whose data failed (*local_rc) keeps to the message schedule without it; a device step that
 * fails sets *local_rc.  Returns the transfers' outcome.
 */
static int chain_run(coll_gpu_hier_t *h, struct ompi_communicator_t *comm,
                     struct ompi_communicator_t *chain, bool direct, bool bcast, int prev,
                     int next, const char *src, char *out, size_t bytes, dev_dtype_t dt,
                     dev_op_t op, int *local_rc)
{
    /* cid: tag_cid(comm), from setup; esize: a bcast's is DEV_T_UINT8's */
    pipe_t pp = {.h = h, .chain = chain, .cid = (uint32_t) h->tag_cid_of[ompi_comm_rank(comm)],
                 .peer_cid = {chain_tag_cid(h, comm, prev), chain_tag_cid(h, comm, next)},
                 .seq = h->seq++, .peer = {prev, next},
                 .phase_fwd = bcast ? PHASE_BCAST : PHASE_UP,
                 .prog = chain_progs[bcast][direct][(-1 == prev) ? 0 : (-1 == next) ? 2 : 1],
                 .src = src, .out = out, .bytes = bytes, .esize = dev_dtype_size(dt), .dt = dt,
                 .op = op, .degraded = (OMPI_SUCCESS != *local_rc), .direct = direct};
    int rc = (0 < bytes) ? pipe_run(&pp) : OMPI_SUCCESS;

    if (pp.degraded && OMPI_SUCCESS == *local_rc) {
        *local_rc = OMPI_ERROR; /* a device step failed (logged) */
    }
    return rc;
}

/* The MPI datatype of the dense elements the pipeline reduces (the fallback's host allreduce;
 * the 16-bit floats' op, libcollgpu's, reads the format: 16-bit carriers); NULL for others. */
static struct ompi_datatype_t *mpi_type_of(dev_dtype_t dt)
{
    static struct ompi_datatype_t *const types[DEV_T_COUNT] = {
        [DEV_T_INT8] = MPI_INT8_T, [DEV_T_UINT8] = MPI_UINT8_T, [DEV_T_INT16] = MPI_INT16_T,
        [DEV_T_UINT16] = MPI_UINT16_T, [DEV_T_FLOAT16] = MPI_UINT16_T,
        [DEV_T_BFLOAT16] = MPI_UINT16_T, [DEV_T_INT32] = MPI_INT32_T,
        [DEV_T_UINT32] = MPI_UINT32_T, [DEV_T_INT64] = MPI_INT64_T, [DEV_T_UINT64] = MPI_UINT64_T,
        [DEV_T_FLOAT] = MPI_FLOAT, [DEV_T_DOUBLE] = MPI_DOUBLE,
        [DEV_T_CFLOAT] = MPI_C_FLOAT_COMPLEX, [DEV_T_CDOUBLE] = MPI_C_DOUBLE_COMPLEX,
        [DEV_T_BOOL] = MPI_C_BOOL, [DEV_T_2INT] = MPI_2INT, [DEV_T_FLOAT_INT] = MPI_FLOAT_INT};

    return ((unsigned) dt < DEV_T_COUNT) ? types[dt] : NULL;
}

/*
 * Did every rank have its data (data_rc) and complete its UCX transfers (net_rc)?  One host
 * allreduce (MIN) over the leaders (their communicator's own module) or, on the rails, every
 * rank of comm (the module below coll/gpu).  Returns an error on every rank when one had no
 * data; else *redo when a UCX transfer failed anywhere (the step is redone through the host).
 * A UCX failure anywhere switches UCX off on this communicator for good.
 */
static int chain_agree(mca_coll_gpu_module_t *m, const char *what,
                       struct ompi_communicator_t *comm, bool rails, int data_rc, int net_rc,
                       bool *redo)
{
    coll_gpu_hier_t *h = m->hier;
    struct ompi_communicator_t *over = rails ? comm : h->leader_comm;
    int in[2] = {OMPI_SUCCESS == data_rc, OMPI_SUCCESS == net_rc}, out[2] = {0, 0};
    int rc = rails ? m->prev_allreduce.fn(in, out, 2, MPI_INT, MPI_MIN, comm,
                                          m->prev_allreduce.module)
                   : over->c_coll->coll_allreduce(in, out, 2, MPI_INT, MPI_MIN, over,
                                                  over->c_coll->coll_allreduce_module);

    *redo = (OMPI_SUCCESS == rc && 1 == out[0] && 1 != out[1]);
    if (OMPI_SUCCESS == rc && 1 != out[1] && !h->ucx_broken) {
        h->ucx_broken = true;
        if (0 == ompi_comm_rank(over)) {
            opal_output(0, "coll:gpu:%s (cid %d): the UCX transfer between %s failed "
                        "(see coll_gpu_verbose 1 for the cause): this call and every later one "
                        "on this communicator are staged through Open MPI's point-to-point "
                        "layer between the %s", what, coll_gpu_comm_cid(comm),
                        rails ? "the ranks of a rail" : "node leaders",
                        rails ? "ranks of each rail" : "leaders");
        }
    }
    return (OMPI_SUCCESS == rc && 1 != out[0]) ? OMPI_ERROR : rc; /* no data somewhere */
}

int mca_coll_gpu_hier_node_finish(coll_gpu_hier_t *h, int rc, bool data, void *buf, int count,
                                  struct ompi_datatype_t *dtype)
{
    struct ompi_communicator_t *node = h->node_comm;
    int failed = (OMPI_SUCCESS != rc), brc;

    if (1 == ompi_comm_size(node)) {
        return rc;
    }
    brc = node->c_coll->coll_bcast(&failed, 1, MPI_INT, 0, node, node->c_coll->coll_bcast_module);
    if (OMPI_SUCCESS != brc || failed) {
        /* our leader (or another node's) failed: the result is not there */
        return mca_coll_gpu_first_error(rc, (OMPI_SUCCESS != brc) ? brc : OMPI_ERROR);
    }
    return !data ? rc
                 : mca_coll_gpu_first_error(rc, node->c_coll->coll_bcast(
                                                    buf, count, dtype, 0, node,
                                                    node->c_coll->coll_bcast_module));
}

/* A host bcast (op NULL: from root) or in-place allreduce of n elements of type (esize bytes
 * each) at buf over comm's own module, in pieces of at most INT_MAX elements (MPI counts are
 * ints; a message may be larger). */
static int host_pieces(struct ompi_communicator_t *comm, char *buf, size_t n, size_t esize,
                       struct ompi_datatype_t *type, struct ompi_op_t *op, int root)
{
    int rc = OMPI_SUCCESS;

    for (size_t done = 0, k; OMPI_SUCCESS == rc && done < n; done += k) {
        k = (n - done > (size_t) INT_MAX) ? (size_t) INT_MAX : n - done;
        rc = (NULL == op) ? comm->c_coll->coll_bcast(buf + done * esize, (int) k, type, root, comm,
                                                     comm->c_coll->coll_bcast_module)
                          : comm->c_coll->coll_allreduce(MPI_IN_PLACE, buf + done * esize,
                                                         (int) k, type, op, comm,
                                                         comm->c_coll->coll_allreduce_module);
    }
    return rc;
}

/* The step between nodes through the host, along a chain (the leaders' communicator, or a
 * rail's): the fallback, and the path once UCX broke on this communicator.  buf: the rank's
 * dense data in device memory (every rank of the chain has it: chain_agree said so); op NULL:
 * a bcast of bytes from root_leader, else an allreduce of nelems elements of dt. */
static int chain_staged(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                        const char *what, struct ompi_communicator_t *chain, void *buf,
                        size_t bytes, size_t nelems, dev_dtype_t dt, struct ompi_op_t *op,
                        int root_leader)
{
    bool reduce = (NULL != op), is_root = (ompi_comm_rank(chain) == root_leader);
    coll_gpu_staged_t st;
    int rc = mca_coll_gpu_stage_in(m, -1, buf, DEV_MEM_DEVICE, 0, bytes, reduce || is_root, comm,
                                   what, &st);

    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = host_pieces(chain, mca_coll_gpu_view(&st), reduce ? nelems : bytes,
                     reduce ? bytes / nelems : 1, reduce ? mpi_type_of(dt) : MPI_BYTE, op,
                     root_leader);
    return mca_coll_gpu_unstage(m, &st, rc,
                                (reduce || !is_root) ? COLL_GPU_WRITE : COLL_GPU_NONE, comm,
                                what);
}

/* Only here is UCX asked for the transports of this rank's endpoints. */
void mca_coll_gpu_hier_log(const char *what, struct ompi_communicator_t *comm, size_t bytes,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op, coll_gpu_hier_t *h,
                           const char *steps)
{
    bool rails = (NULL == steps);
    bool on_chain = rails ? (h->node_rank < h->rails) : (NULL != h->leader_comm);
    char inter[300], path[500];

    if (opal_output_get_verbosity(mca_coll_gpu_component.output) < COLL_GPU_LOG_CALL) {
        return;
    }
    if (!on_chain) {
        /* only the ranks of a chain know how its exchange went (UCX, or its fallback) */
        snprintf(inter, sizeof(inter), "%s", rails ? "on no rail (it receives every shard)"
                 : "exchange between the other ranks (this rank is in the node steps only)");
    } else if (h->ucx_broken) {
        snprintf(inter, sizeof(inter), "staged through Open MPI's point-to-point layer (UCX "
                 "failed earlier)");
    } else {
        snprintf(inter, sizeof(inter), "via UCX/%s (%s), %s, chunk %zu B, depth %d",
                 mca_coll_gpu_ucx_transports(h->ucx), mca_coll_gpu_ucx_describe(),
                 (rails ? h->rails_direct : h->direct)
                     ? "device memory straight to UCX"
                     : "chunks staged through pinned host memory",
                 h->chunk, h->depth);
    }
    if (rails) {
        snprintf(path, sizeof(path), "hierarchical: %d nodes, node step on %d rank(s), %d rails, "
                 "%s%d %s", h->nnodes, ompi_comm_size(h->node_comm), h->rails,
                 on_chain ? "shard of rail " : "node rank ", h->node_rank, inter);
    } else {
        snprintf(path, sizeof(path), "hierarchical: %d nodes, %s on %d rank(s), leaders %s",
                 h->nnodes, steps, ompi_comm_size(h->node_comm), inter);
    }
    mca_coll_gpu_log_call(what, comm, bytes, dtype, op, path);
}

/* One chain of one block: an allreduce's, MPI_Bcast's. */
static const int whole[2] = {0, 1};

/*
 * The step between nodes on this rank's chain (chain_comm: the leaders', or on the rails its
 * rail's; none: only the agreements).  op NULL: the leaders' bcasts (coll_gpu_hier.h); else
 * steps 2 and 3 of an allreduce (the file's header), one chain from rank 0 whose buf, the node's
 * result or (rails) this rank's shard of it, becomes every node's (0 bytes: no chain).  Every
 * rank runs the chains in the same order with the same sequence numbers; a fallback redoes an
 * allreduce's from the copy kept in h->saved, and on the rails every rank of comm then agrees
 * again.  Returns the outcome, the same on every rank.
 */
static int chain_step(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                      const char *what, bool rails, char *buf, size_t block, const int *first,
                      int nchains, int root, dev_dtype_t dt, dev_op_t dop, struct ompi_op_t *op,
                      int *local_rc)
{
    coll_gpu_hier_t *h = m->hier;
    struct ompi_communicator_t *chain = h->chain_comm;
    size_t bytes = (size_t) first[nchains] * block, esize = dev_dtype_size(dt);
    bool reduce = (NULL != op), run = !reduce || 0 < bytes, redo;
    int net_rc = OMPI_SUCCESS, prior_rc = *local_rc, rc;

    if (run && h->ucx_broken) {
        net_rc = OMPI_ERR_NOT_AVAILABLE; /* buf keeps its data for the staged step */
    } else if (run) {
        int pos = ompi_comm_rank(chain), nl = ompi_comm_size(chain);

        if (reduce && OMPI_SUCCESS == *local_rc && h->saved_bytes < bytes) {
            (void) dev_mem_free(h->saved);
            h->saved_bytes = 0;
            if (DEV_OK != dev_mem_alloc(&h->saved, bytes)) {
                h->saved = NULL;
                *local_rc = OMPI_ERR_OUT_OF_RESOURCE;
            } else {
                h->saved_bytes = bytes;
            }
        }
        if (reduce && OMPI_SUCCESS == *local_rc && DEV_OK != dev_memcpy(h->saved, buf, bytes)) {
            *local_rc = OMPI_ERROR;
        }
        /* a failure before this one (the node step's, adapt_in's) was reported where it was */
        if (OMPI_SUCCESS == prior_rc && OMPI_SUCCESS != *local_rc) {
            mca_coll_gpu_report_failure(what, comm, "the node's result could not be prepared "
                                        "for the exchange between nodes (%s)",
                                        dev_error_string());
        }
        for (int j = 0; j < nchains; ++j) {
            char *at = (NULL != buf) ? buf + (size_t) first[j] * block : NULL;
            int q = (pos - root - j + 2 * nl) % nl;

            if (OMPI_SUCCESS != net_rc) {
                ++h->seq; /* the chain this rank no longer runs keeps its number */
                continue;
            }
            net_rc = chain_run(h, comm, chain, rails ? h->rails_direct : h->direct, !reduce,
                               (0 == q) ? -1 : (pos - 1 + nl) % nl,
                               (nl - 1 == q) ? -1 : (pos + 1) % nl, reduce ? h->saved : at, at,
                               (size_t) (first[j + 1] - first[j]) * block, dt, dop, local_rc);
        }
    }
    rc = chain_agree(m, what, comm, rails, *local_rc, net_rc, &redo);
    if (OMPI_SUCCESS != rc || !redo) {
        return rc;
    }
    /* again through the host: every chain's first rank still has its data (every rank takes
     * part in every chain, whatever became of the one before), an allreduce's in h->saved */
    if (run && reduce && OMPI_ERR_NOT_AVAILABLE != net_rc
        && DEV_OK != dev_memcpy(buf, h->saved, bytes)) {
        *local_rc = OMPI_ERROR;
    }
    for (int j = 0; run && j < nchains; ++j) {
        size_t len = (size_t) (first[j + 1] - first[j]) * block;

        if (0 < len) {
            rc = mca_coll_gpu_first_error(
                rc, chain_staged(m, comm, what, chain, buf + (size_t) first[j] * block, len,
                                 len / esize, dt, op, reduce ? -1 : root + j));
        }
    }
    if (run && OMPI_SUCCESS == rc) { /* a fallback: after a UCX failure in this call */
        COLL_GPU_VERBOSE(COLL_GPU_LOG_CALL, "coll:gpu:%s (cid %d): rank %d: %s step staged "
                         "through Open MPI's point-to-point layer%s", what,
                         coll_gpu_comm_cid(comm), ompi_comm_rank(comm),
                         (chain == h->leader_comm) ? "leaders'" : "rail's",
                         (OMPI_ERR_NOT_AVAILABLE != net_rc) ? " (fallback)" : "");
    }
    /* the shards are spread only when all of them made it */
    return !rails ? rc
                  : chain_agree(m, what, comm, true, mca_coll_gpu_first_error(rc, *local_rc),
                                OMPI_SUCCESS, &redo);
}

/* Shard r of n elements on rails rails: whole elements, the first n % rails shards one longer
 * (a shard is empty when n < rails). */
static void shard_of(size_t n, int rails, int r, size_t *lo, size_t *len)
{
    size_t base = n / (size_t) rails, extra = n % (size_t) rails, ur = (size_t) r;

    *lo = ur * base + ((ur < extra) ? ur : extra);
    *len = base + ((ur < extra) ? 1 : 0);
}

int mca_coll_gpu_hier_allreduce(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                dev_dtype_t dt, dev_op_t dop, size_t nelems, int node_rc)
{
    static const char *const what = "allreduce";
    coll_gpu_hier_t *h = m->hier;
    size_t esize = dev_dtype_size(dt), bytes = nelems * esize, lo = 0, n = nelems, size;
    size_t rail_min = mca_coll_gpu_component.hier_rail_min_bytes;
    /* the rails: from the membership (every node has 2 ranks or more), the signature's bytes
     * and an ALL_EQ parameter, so the same on every rank; their setup agrees too */
    bool rails = 2 <= h->rails && 0 < rail_min && bytes >= rail_min && rails_ready(m, comm, what);
    bool member = rails ? (h->node_rank < h->rails) : (NULL != h->leader_comm), dense;
    int rc = node_rc, local_rc;
    ptrdiff_t lb, extent;
    coll_gpu_adapt_t a;

    mca_coll_gpu_hier_log(what, comm, bytes, dtype, op, h, rails ? NULL : "node step");
    /* 1. inside the node: coll/gpu's allreduce on the node communicator (its team); a node of
     * one rank (never on the rails) only copies a dense input (a local matter: no peer is
     * involved; the node communicator's own path handles any other layout); node_rc: the whole
     * node skips its step (the caller's agreement) */
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_type_size(dtype, &size);
    dense = ompi_datatype_is_contiguous_memory_layout(dtype, count) && 0 == lb
            && (size_t) extent == size;
    if (OMPI_SUCCESS == node_rc
        && (1 < ompi_comm_size(h->node_comm) || (MPI_IN_PLACE != sbuf && !dense))) {
        rc = h->node_comm->c_coll->coll_allreduce(sbuf, rbuf, count, dtype, op, h->node_comm,
                                                  h->node_comm->c_coll->coll_allreduce_module);
    } else if (OMPI_SUCCESS == node_rc && MPI_IN_PLACE != sbuf
               && DEV_OK != dev_memcpy(rbuf, sbuf, size * (size_t) count)) {
        mca_coll_gpu_report_failure(what, comm, "a device copy of the input failed (%s)",
                                    dev_error_string());
        rc = OMPI_ERROR;
    }
    /* 2. and 3. between nodes, on the leaders' chain or shard r along rail r: the node's dense
     * result in device memory (the user's buffer when it is that already).  On the rails every
     * rank of comm takes part in the agreements, so that a failure on any rail is known to all
     * before the shards are spread, and receives the other shards in it. */
    if (rails || member) {
        local_rc = rc;
        a.dev = NULL;
        if (OMPI_SUCCESS == local_rc) {
            local_rc = mca_coll_gpu_adapt_in(m, comm, what, 1, rbuf, count, dtype, member, false,
                                             &a);
        }
        if (rails) {
            n = 0;
            if (member) {
                shard_of(nelems, h->rails, h->node_rank, &lo, &n);
            }
        }
        rc = chain_step(m, comm, what, rails, (NULL != a.dev) ? a.dev + lo * esize : NULL,
                        n * esize, whole, 1, 0, dt, dop, op, &local_rc);
        /* 4. (rails) every shard from its rail's rank to the rest of its node (team bcasts) */
        for (int r = 0; rails && OMPI_SUCCESS == rc && r < h->rails; ++r) {
            shard_of(nelems, h->rails, r, &lo, &n);
            rc = host_pieces(h->node_comm, a.dev + lo * esize, n * esize, 1, MPI_BYTE, NULL, r);
        }
        if (OMPI_SUCCESS == rc && OMPI_SUCCESS == local_rc) {
            rc = mca_coll_gpu_adapt_out(m, comm, what, &a, true);
        }
        /* the rails' outcome is the agreed one */
        rc = rails ? rc : mca_coll_gpu_first_error(local_rc, rc);
    }
    /* 4. the outcome, then the result, from the leader to its node */
    return rails ? rc : mca_coll_gpu_hier_node_finish(h, rc, true, rbuf, count, dtype);
}

int mca_coll_gpu_hier_leaders_bcast(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                    const char *what, char *buf, size_t block, const int *first,
                                    int nchains, int root, int *local_rc)
{
    return chain_step(m, comm, what, false, buf, block, first, nchains, root, DEV_T_UINT8,
                      DEV_OP_SUM, NULL, local_rc);
}

int mca_coll_gpu_hier_bcast(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm, void *buf,
                            int count, struct ompi_datatype_t *dtype, int root)
{
    static const char *const what = "bcast";
    coll_gpu_hier_t *h = m->hier;
    size_t bytes = mca_coll_gpu_call_bytes(dtype, (size_t) count);
    int rc = OMPI_SUCCESS, root_leader = h->leader_of[root];
    bool root_node = (h->leader_of[ompi_comm_rank(comm)] == root_leader);

    mca_coll_gpu_hier_log(what, comm, bytes, dtype, NULL, h, "node step");
    /* 1. the root's node gets the data from the root */
    if (root_node && 1 < ompi_comm_size(h->node_comm)) {
        rc = h->node_comm->c_coll->coll_bcast(buf, count, dtype, h->node_rank_of[root],
                                              h->node_comm,
                                              h->node_comm->c_coll->coll_bcast_module);
    }
    /* 2. the chain of leaders from the root's */
    if (NULL != h->leader_comm) {
        int local_rc = rc;
        coll_gpu_adapt_t a;

        a.dev = NULL;
        if (OMPI_SUCCESS == local_rc) {
            /* reports its own failure, as the node step did */
            local_rc = mca_coll_gpu_adapt_in(m, comm, what, 0, buf, count, dtype, root_node,
                                             false, &a);
        }
        rc = mca_coll_gpu_hier_leaders_bcast(m, comm, what, a.dev, bytes, whole, 1, root_leader,
                                             &local_rc);
        if (OMPI_SUCCESS == rc && OMPI_SUCCESS == local_rc) {
            rc = mca_coll_gpu_adapt_out(m, comm, what, &a, !root_node);
        }
        rc = mca_coll_gpu_first_error(local_rc, rc);
    }
    /* 3. the outcome to every node, and the data to every other node, from its leader */
    return mca_coll_gpu_hier_node_finish(h, rc, !root_node, buf, count, dtype);
}
