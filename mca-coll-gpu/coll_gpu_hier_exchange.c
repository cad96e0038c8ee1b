/*
 * coll_gpu_hier_exchange.c - MPI_Allgather(v), MPI_Reduce_scatter(_block) and MPI_Reduce on
 * device buffers of a communicator that spans nodes: compositions of the node communicator's
 * own collectives (coll/gpu's, on the node team) and the leaders' UCX chains of
 * coll_gpu_hier.c, which also sets them up and owns their agreement and fallback.  The entries
 * (coll_gpu_exchange.c, coll_gpu_reduce.c) come here once every rank agreed on device memory.
 *
 * MPI_Allgather (b bytes per block):
 *
 *   1. node allgatherv (the node team's exchange): every rank's block lands in its own place
 *      of the receive buffer, at its rank in comm (a node's ranks need not be contiguous)
 *   2. leaders: the receive buffer as dense device bytes; when the nodes are not contiguous in
 *      comm, its node's blocks copied into a scratch in node-major order; one chain bcast per
 *      node from its leader (mca_coll_gpu_hier_leaders_bcast: agreement and fallback
 *      included); the other nodes' blocks copied back to their ranks' places
 *   3. the leader's outcome, then the whole receive buffer, to its node (node team's bcast)
 *
 * The node steps take the user's buffers and types, so that each rank adapts its own and a
 * rank that fails there takes part without data (the node team's flags); only the leader
 * needs dense device bytes.  Node-major order makes the step between nodes MPI_Bcast's, a
 * chain per node, rather than a second pipeline (a ring) of its own.
 *
 * MPI_Allgatherv: the same three steps, with blocks of their own sizes at their own places.
 * The leader packs its node's blocks into the module's device scratch in node-major order
 * (node j's from byte_first[j]: one chain of bytes per node), and unpacks
 * the other nodes' blocks to their places after the chains; the last node step carries an
 * indexed view of every block, so that no byte between blocks is written on any rank.
 *
 * MPI_Reduce_scatter(_block), and MPI_Reduce (whose one piece, the whole input, is the
 * root's): the hierarchical allreduce of the whole input into the module's device scratch, then
 * this rank's piece copied from it.  The network carries the whole input
 * twice where a reduce-scatter proper would carry each node's share; but it is the allreduce's
 * pipeline with its agreement, fallbacks and bitwise-identical results, on the GPU.  Only what
 * the kernels take (coll_gpu_reduce.c checks) comes here; user ops stay staged.
 *
 * Whether a call comes here is decided from what every rank shares (the agreement, the
 * membership, the sizes, the parameters).
 */
#include "ompi_config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpu.h"
#include "coll_gpu_hier.h"
#include "coll_gpu_team.h"

/* Why an allgather(v) on a spanning communicator is staged, or NULL: from what every rank
 * shares (the setup's agreed outcome, the membership, the call's agreed counts).  bytes: the
 * call's whole receive side. */
static const char *hier_allgather_staged_why(mca_coll_gpu_module_t *m,
                                             const coll_gpu_staged_call_t *c, size_t bytes)
{
    struct ompi_communicator_t *comm = c->comm;
    int n = ompi_comm_size(comm);

    if (0 == bytes) {
        return "staged (empty)";
    }
    if (!mca_coll_gpu_hier_ready(m, comm, c->what)) {
        return "staged (spans nodes; no hierarchical path on this communicator)";
    }
    if (m->hier->max_node > COLL_GPU_TEAM_MAX) {
        return "staged (spans nodes; a node has more ranks than a node team serves)";
    }
    if (NULL == c->rcounts) {
        if ((size_t) n * (size_t) c->rcount > (size_t) INT_MAX) {
            return "staged (spans nodes; more than INT_MAX elements in all, not one node bcast)";
        }
        return NULL;
    }
    /* allgatherv: the leaders' chains count bytes in ints, and the blocks lie after rbuf */
    if (bytes > (size_t) INT_MAX) {
        return "staged (spans nodes; an allgatherv of more than INT_MAX bytes)";
    }
    for (int r = 0; r < n; ++r) {
        if (0 > c->rdispls[r]) {
            return "staged (spans nodes; an allgatherv block before the receive buffer)";
        }
    }
    return NULL;
}

/* Copy the blocks between their ranks' places in dev and node-major order in w: into w this
 * node's blocks, or back out of w every other node's.  Sets *local_rc on failure. */
static void reorder(coll_gpu_hier_t *h, struct ompi_communicator_t *comm, const char *what,
                    char *dev, char *w, size_t block, bool into, int *local_rc)
{
    int node = h->leader_of[ompi_comm_rank(comm)];

    for (int r = 0; r < ompi_comm_size(comm) && OMPI_SUCCESS == *local_rc; ++r) {
        char *placed = dev + (size_t) r * block;
        char *ordered = w + ((size_t) h->node_first[h->leader_of[r]]
                             + (size_t) h->node_rank_of[r]) * block;

        if ((h->leader_of[r] == node) == into
            && DEV_OK != dev_memcpy(into ? ordered : placed, into ? placed : ordered, block)) {
            mca_coll_gpu_report_failure(what, comm, "copy of a %zu B block %s node-major "
                                        "order: %s", block, into ? "into" : "out of",
                                        dev_error_string());
            *local_rc = OMPI_ERROR;
        }
    }
}

/* MPI_Allgather's step 2 on a node leader (file header): the receive buffer in dense device
 * memory (a), its node's blocks in node-major order in w (a's own memory when comm is in that
 * order), the leaders' chains, and every block back in place. */
static int leaders_allgather(mca_coll_gpu_module_t *m, coll_gpu_staged_call_t *c, size_t block,
                             int rc)
{
    coll_gpu_hier_t *h = m->hier;
    int n = ompi_comm_size(c->comm), local_rc = rc;
    coll_gpu_adapt_t a;
    char *w = NULL;

    memset(&a, 0, sizeof(a));
    if (OMPI_SUCCESS == local_rc) {
        local_rc = mca_coll_gpu_adapt_in(m, c->comm, c->what, 1, c->rbuf, n * c->rcount,
                                         c->rdtype, true, false, &a);
    }
    if (OMPI_SUCCESS == local_rc) {
        w = a.dev;
        if (!h->node_major) {
            local_rc = mca_coll_gpu_adapt_scratch(m, c->comm, c->what, (size_t) n * block,
                                                  (void **) &w);
            reorder(h, c->comm, c->what, a.dev, w, block, true, &local_rc);
        }
    }
    rc = mca_coll_gpu_hier_leaders_bcast(m, c->comm, c->what,
                                         (OMPI_SUCCESS == local_rc) ? w : NULL, block,
                                         h->node_first, h->nnodes, 0, &local_rc);
    if (OMPI_SUCCESS == rc && !h->node_major) {
        reorder(h, c->comm, c->what, a.dev, w, block, false, &local_rc);
    }
    if (OMPI_SUCCESS == rc && OMPI_SUCCESS == local_rc) {
        local_rc = mca_coll_gpu_adapt_out(m, c->comm, c->what, &a, true);
    }
    return mca_coll_gpu_first_error(local_rc, rc);
}

/* MPI_Allgatherv's step 2 on a node leader (file header): its node's blocks packed in
 * node-major order into the module's device scratch (node j's from first[j] bytes), one chain
 * of bytes per node, and the other nodes' blocks unpacked to their places (the receive
 * buffer's holes are never touched). */
static int leaders_allgatherv(mca_coll_gpu_module_t *m, coll_gpu_staged_call_t *c, int rc)
{
    coll_gpu_hier_t *h = m->hier;
    int node = h->leader_of[ompi_comm_rank(c->comm)], local_rc = rc, *first = h->byte_first;
    ptrdiff_t lb, extent;
    size_t dsize, total = 0, own;
    char *w = NULL;

    ompi_datatype_type_size(c->rdtype, &dsize);
    ompi_datatype_get_extent(c->rdtype, &lb, &extent);
    /* first[j]: the bytes of the nodes before j, from what every leader shares */
    for (int j = 0; j <= h->nnodes; ++j) {
        first[j] = 0;
    }
    for (int r = 0; r < ompi_comm_size(c->comm); ++r) {
        first[h->leader_of[r] + 1] += (int) (dsize * (size_t) c->rcounts[r]);
    }
    for (int j = 0; j < h->nnodes; ++j) {
        first[j + 1] += first[j];
    }
    total = (size_t) first[h->nnodes];
    if (OMPI_SUCCESS == local_rc) {
        local_rc = mca_coll_gpu_adapt_scratch(m, c->comm, c->what, total, (void **) &w);
    }
    /* pack (into) this node's blocks before the chains, unpack the others' after them.  A
     * node's ranks come in comm order in node-rank order (hier_setup splits the node
     * communicator keyed by comm rank), so each node's blocks follow one another as r meets
     * them: own walks this node's, and, once the chains have read it, first[j] walks node
     * j's. */
    own = (size_t) first[node];
    for (int into = 1; into >= 0; --into) {
        for (int r = 0; r < ompi_comm_size(c->comm) && OMPI_SUCCESS == local_rc; ++r) {
            char *placed = (char *) c->rbuf + (ptrdiff_t) c->rdispls[r] * extent, *packed;
            int j = h->leader_of[r], k = c->rcounts[r], bytes = (int) ((size_t) k * dsize);

            if ((j == node) != into) {
                continue;
            }
            packed = w + (into ? own : (size_t) first[j]);
            if (into) {
                own += (size_t) bytes;
            } else {
                first[j] += bytes;
            }
            if (0 < k) {
                local_rc = into ? mca_coll_gpu_adapt_copy(m, c->comm, c->what, placed, k,
                                                          c->rdtype, packed, bytes, MPI_BYTE)
                                : mca_coll_gpu_adapt_copy(m, c->comm, c->what, packed, bytes,
                                                          MPI_BYTE, placed, k, c->rdtype);
            }
        }
        if (into) {
            rc = mca_coll_gpu_hier_leaders_bcast(m, c->comm, c->what,
                                                 (OMPI_SUCCESS == local_rc) ? w : NULL, 1, first,
                                                 h->nnodes, 0, &local_rc);
            if (OMPI_SUCCESS != rc) {
                break;
            }
        }
    }
    return mca_coll_gpu_first_error(local_rc, rc);
}

int mca_coll_gpu_hier_allgather(coll_gpu_staged_call_t *c)
{
    mca_coll_gpu_module_t *m = c->gpu;
    struct ompi_communicator_t *comm = c->comm;
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    bool in_place = (MPI_IN_PLACE == c->sbuf), v = (NULL != c->rcounts);
    int counts[COLL_GPU_TEAM_MAX], displs[COLL_GPU_TEAM_MAX];
    struct ompi_datatype_t *view = NULL;
    size_t dsize, block, bytes = 0;
    ptrdiff_t lb, extent;
    const char *why;
    coll_gpu_hier_t *h;
    int rc = OMPI_SUCCESS;

    ompi_datatype_type_size(c->rdtype, &dsize);
    ompi_datatype_get_extent(c->rdtype, &lb, &extent);
    block = dsize * (size_t) c->rcount;
    for (int r = 0; r < n; ++r) {
        bytes += v ? dsize * (size_t) c->rcounts[r] : block;
    }
    why = hier_allgather_staged_why(m, c, bytes);
    if (NULL != why) {
        mca_coll_gpu_log_call(c->what, comm, bytes, c->rdtype, NULL, why);
        c->decided = true;
        return mca_coll_gpu_staged(c);
    }
    h = m->hier;
    mca_coll_gpu_hier_log(
        c->what, comm, bytes, c->rdtype, NULL, h,
        v              ? "node allgatherv and bcast (blocks packed node-major)"
        : h->node_major ? "node allgather and bcast"
                        : "node allgather and bcast (nodes not contiguous: blocks reordered)");
    /* 1. the node's blocks, each at its rank's place in comm (node rank q is comm rank r) */
    for (int r = 0; r < n; ++r) {
        if (h->leader_of[r] == h->leader_of[me]) {
            counts[h->node_rank_of[r]] = v ? c->rcounts[r] : c->rcount;
            displs[h->node_rank_of[r]] = v ? c->rdispls[r] : r * c->rcount;
        }
    }
    if (1 < ompi_comm_size(h->node_comm)) {
        rc = h->node_comm->c_coll->coll_allgatherv(c->sbuf, c->scount, c->sdtype, c->rbuf,
                                                   counts, displs, c->rdtype, h->node_comm,
                                                   h->node_comm->c_coll->coll_allgatherv_module);
    } else if (!in_place) {
        /* a node of one rank: its block, a local copy */
        rc = mca_coll_gpu_adapt_copy(m, comm, c->what, c->sbuf, c->scount, c->sdtype,
                                     (char *) c->rbuf + (ptrdiff_t) displs[0] * extent,
                                     counts[0], c->rdtype);
    }
    /* an allgatherv: the view of every block in the receive buffer that the node's last
     * step carries */
    if (v && (OMPI_SUCCESS != ompi_datatype_create_indexed(n, c->rcounts, c->rdispls, c->rdtype,
                                                           &view)
              || OMPI_SUCCESS != ompi_datatype_commit(&view))) {
        mca_coll_gpu_report_failure(c->what, comm, "no memory for an allgatherv's view");
        rc = mca_coll_gpu_first_error(rc, OMPI_ERR_OUT_OF_RESOURCE);
    }
    /* 2. the leaders' chains (this may fail on one leader only: its node learns it in 3) */
    if (NULL != h->leader_comm) {
        rc = v ? leaders_allgatherv(m, c, rc) : leaders_allgather(m, c, block, rc);
    }
    /* 3. the outcome, then every block, from the leader to its node (its own node's blocks
     * too: one bcast of the whole buffer, whose type may have gaps, rather than one per run of
     * other nodes' blocks) */
    if (!v) {
        rc = mca_coll_gpu_hier_node_finish(h, rc, true, c->rbuf, n * c->rcount, c->rdtype);
    } else {
        /* (a rank without the view still takes part: with no data, which its node's bcast
         * tells as a count that differs, failing the call there rather than hanging it) */
        rc = mca_coll_gpu_hier_node_finish(h, rc, true, c->rbuf, NULL != view ? 1 : 0,
                                           NULL != view ? view : MPI_BYTE);
    }
    if (NULL != view) {
        ompi_datatype_destroy(&view);
    }
    return rc;
}

/*
 * The reduce-scatter composition (file header): total elements of input (sbuf, or rbuf in
 * place) reduced across nodes into the module's device scratch, then this rank's piece (mine
 * elements after before others) into rbuf.  The caller checked that the kernels take dtype and
 * op for total elements and that total is at most INT_MAX.  A rank without the device scratch
 * reduces into host memory instead (the node steps of its node then stage that call): slower,
 * still right.  A rank without either still takes part, without data: its node learns it in
 * one host allreduce of an int (its ranks then skip their node step together), and the step
 * between nodes fails the call on every rank.
 */
int mca_coll_gpu_hier_reduce_scatter(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                     const char *what, const void *sbuf, void *rbuf,
                                     size_t total, size_t before, int mine,
                                     struct ompi_datatype_t *dtype, struct ompi_op_t *op)
{
    struct ompi_communicator_t *node = m->hier->node_comm;
    size_t bytes = mca_coll_gpu_call_bytes(dtype, total), nelems = 0, len;
    bool fail = mca_coll_gpu_test_fail_alloc("hier_scratch");
    dev_dtype_t dt = DEV_T_UINT8;
    dev_op_t dop = DEV_OP_SUM;
    ptrdiff_t lb, extent, lo;
    char *scratch = NULL, *host = NULL;
    int rc = OMPI_SUCCESS, local_rc = OMPI_SUCCESS, failed = 0;

    (void) mca_coll_gpu_map_reduction(dtype, total, op, &dt, &dop, &nelems);
    mca_coll_gpu_hier_log(what, comm, bytes, dtype, op, m->hier,
             "an allreduce into a device scratch, then this rank's piece; node steps");
    ompi_datatype_get_extent(dtype, &lb, &extent);
    mca_coll_gpu_span(dtype, total, &lo, &len);
    if (fail
        || OMPI_SUCCESS != mca_coll_gpu_adapt_scratch(m, comm, what, len, (void **) &scratch)) {
        scratch = host = fail ? NULL : malloc(0 < len ? len : 1);
        if (NULL == host) {
            mca_coll_gpu_report_failure(what, comm, "no memory for the %zu B the reduction "
                                        "across nodes needs%s", len,
                                        fail ? " (coll_gpu_test_fail_alloc, test only)" : "");
            local_rc = OMPI_ERR_OUT_OF_RESOURCE;
        } else {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:%s (cid %d): rank %d: the reduction "
                             "across nodes goes into host memory (no device scratch)", what,
                             coll_gpu_comm_cid(comm), ompi_comm_rank(comm));
        }
    }
    if (1 < ompi_comm_size(node)) {
        int mine_failed = (OMPI_SUCCESS != local_rc);

        rc = node->c_coll->coll_allreduce(&mine_failed, &failed, 1, MPI_INT, MPI_MAX, node,
                                          node->c_coll->coll_allreduce_module);
    }
    rc = mca_coll_gpu_first_error(rc, (failed || OMPI_SUCCESS != local_rc) ? OMPI_ERROR
                                                                            : OMPI_SUCCESS);
    rc = mca_coll_gpu_hier_allreduce(m, comm, MPI_IN_PLACE == sbuf ? rbuf : sbuf,
                                     (NULL == scratch) ? NULL : scratch - lo, (int) total, dtype,
                                     op, dt, dop, nelems, rc);
    if (OMPI_SUCCESS == rc && 0 < mine) { /* (a reduce's other ranks keep nothing) */
        rc = mca_coll_gpu_adapt_copy(m, comm, what, scratch - lo + (ptrdiff_t) before * extent,
                                     mine, dtype, rbuf, mine, dtype);
    }
    free(host);
    return mca_coll_gpu_first_error(local_rc, rc);
}
