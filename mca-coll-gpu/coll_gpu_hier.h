/*
 * coll_gpu_hier.h - the hierarchical path's state, shared by the files that compose it:
 * coll_gpu_hier.c (setup, the leaders' and the rails' UCX pipelines, MPI_Allreduce and
 * MPI_Bcast) and coll_gpu_hier_exchange.c (MPI_Allgather and the reduce-scatters).  Private to
 * coll/gpu; coll_gpu.h declares the entry points.
 */
#ifndef MCA_COLL_GPU_HIER_H
#define MCA_COLL_GPU_HIER_H

#include "coll_gpu.h"
#include "coll_gpu_ucx.h"

#define HIER_DEPTH_MAX 16

typedef enum { HIER_UNTRIED = 0, HIER_READY = 1, HIER_FAILED = -1 } hier_state_t;

struct coll_gpu_hier_t {
    int nnodes;                        /* for the log line */
    hier_state_t state;
    bool ucx_broken;                   /* a call's UCX step failed (agreed): staged from now */
    bool direct;                       /* device memory straight to UCX (agreed at setup) */
    struct ompi_communicator_t *node_comm, *leader_comm;
    /* comm rank -> the leader-comm rank of its node's leader, its rank in its node, and the id
     * its process gives comm in UCX tags (its local cid: on Open MPI 5.0 the local cids of one
     * communicator may differ between processes, and a message must carry its receiver's);
     * these, node_first and byte_first are one allocation, leader_of's */
    int *leader_of, *node_rank_of, *tag_cid_of;
    /* node-major order (the nodes in the leaders' order, each node's ranks in node rank order):
     * node j's ranks hold slots node_first[j] .. node_first[j + 1] - 1; node_major: that order
     * is comm's own; max_node: the largest node's ranks.  From the membership: the same on
     * every rank. */
    int *node_first;
    /* an allgatherv's chains: node j's bytes from byte_first[j] in node-major order (made
     * anew by each call, whose unpacking then walks it; nnodes + 1 entries, allocated with
     * the tables so that a call never lacks it) */
    int *byte_first;
    bool node_major;
    int max_node;
    int node_rank;                     /* this rank's */
    /* the rails: as many as the smallest node has ranks (1: none), set up on first use */
    int rails;
    hier_state_t rails_state;
    bool rails_direct;                 /* device memory straight to UCX on every rail (agreed) */
    struct ompi_communicator_t *rail_comm; /* node ranks 1 .. rails - 1: their rail's */
    /* this rank's chain between nodes (leader_comm on node rank 0, rail_comm once the rails are
     * set up, else NULL), its UCX endpoints and the calls it ran on it */
    struct ompi_communicator_t *chain_comm;
    coll_gpu_ucx_comm_t *ucx;
    uint64_t seq;
    bool test_failed;                  /* coll_gpu_test_fail_ucx has fired on this communicator */
    /* the pipeline's slots: depth x chunk of pinned host and of device memory, a stream and an
     * event each; and the node result kept for an allreduce's fallback */
    int depth;
    size_t chunk;
    char *host, *dtmp;
    dev_stream_t *stream[HIER_DEPTH_MAX];
    dev_event_t *event[HIER_DEPTH_MAX];
    void *saved;
    size_t saved_bytes;
};

/* Is the hierarchical path set up on comm (collective on the first call, as
 * mca_coll_gpu_hier_usable; what names the call in the setup's log lines)?  The same answer on
 * every rank.  For the collectives whose forced algorithms the caller checks itself. */
bool mca_coll_gpu_hier_ready(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                             const char *what);

/* The leaders' chain bcasts (node leaders only; MPI_Bcast's step 2, and MPI_Allgather's with a
 * chain per node): chain j moves blocks first[j] .. first[j + 1] - 1 of block bytes of buf
 * (dense device memory) from leader root + j to the others over UCX; then one agreement of the
 * leaders, and when a UCX transfer failed anywhere, every chain again through the host (Open
 * MPI's point-to-point layer), UCX off on comm from then on.  A leader whose data failed
 * (*local_rc) keeps to the message schedule without it, and then the call fails on every
 * leader.  Returns the step's outcome, the same on every leader. */
int mca_coll_gpu_hier_leaders_bcast(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                    const char *what, char *buf, size_t block, const int *first,
                                    int nchains, int root, int *local_rc);

/* The last node step: the leader's outcome to the rest of its node (a host bcast of one int:
 * an error on every rank of a node whose leader failed), then, when it succeeded and data,
 * count x dtype at buf from the leader (the node communicator's bcast).  Returns this rank's
 * outcome of the call (rc: so far). */
int mca_coll_gpu_hier_node_finish(coll_gpu_hier_t *h, int rc, bool data, void *buf, int count,
                                  struct ompi_datatype_t *dtype);

/* The log line of a hierarchical call (at COLL_GPU_LOG_CALL): "hierarchical: N nodes, <steps>
 * on K rank(s), leaders <how this rank's part of the leaders' step moves its data: via UCX/...,
 * staged ... (UCX failed earlier), or that it is not a leader>"; steps NULL: the rails' line. */
void mca_coll_gpu_hier_log(const char *what, struct ompi_communicator_t *comm, size_t bytes,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op, coll_gpu_hier_t *h,
                           const char *steps);

#endif /* MCA_COLL_GPU_HIER_H */
