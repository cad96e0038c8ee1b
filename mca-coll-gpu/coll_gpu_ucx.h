/*
 * coll_gpu_ucx.h - coll/gpu's own UCX (UCP) layer: the transport between node leaders of the
 * hierarchical collectives (coll_gpu_hier.c, coll_gpu_hier_exchange.c).
 *
 * One UCP context and worker per process, made on first use (the worker's thread mode follows
 * the MPI thread level), released at component close.  A "UCX communicator" is the set of
 * endpoints to the ranks of one MPI communicator (the node leaders of a spanning one), made by
 * exchanging worker addresses over that communicator (collective); the endpoints themselves
 * are the process', one per peer process, reused by later communicators, closed at finalize.
 * Messages are tagged: communicator id, call number, phase and chunk (mca_coll_gpu_ucx_tag), so
 * that collectives in flight on different communicators, or consecutive calls on one, never
 * match each other's messages.
 *
 * Built without UCX (configure --without-ucx, or no UCX found), every entry reports
 * OMPI_ERR_NOT_AVAILABLE and the hierarchical path is never taken.
 */
#ifndef MCA_COLL_GPU_UCX_H
#define MCA_COLL_GPU_UCX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ompi_communicator_t;

typedef struct coll_gpu_ucx_comm_t coll_gpu_ucx_comm_t;

/* One outstanding send or receive; done (req NULL, status set) once complete. */
typedef struct coll_gpu_ucx_req_t {
    void *req;          /* the UCP request, NULL when none is outstanding */
    size_t expect;      /* a receive: the bytes that must arrive */
    int status;         /* OMPI_SUCCESS or the failure, once complete */
} coll_gpu_ucx_req_t;

/* Was coll/gpu built with UCX? */
bool mca_coll_gpu_ucx_built(void);
/* Make the endpoints to every rank of comm (collective over comm: every rank calls it, even one
 * whose UCX failed locally, so that no rank waits for it).  Returns OMPI_SUCCESS with *out set,
 * or an error (then *out is NULL), the same on every rank: any rank's failure fails them all. */
int mca_coll_gpu_ucx_comm_create(struct ompi_communicator_t *comm, coll_gpu_ucx_comm_t **out);
/* Free the state.  The endpoints stay: they are the process', one per peer process, shared by
 * every communicator that reaches it, and closed at finalize.  NULL is a no-op. */
void mca_coll_gpu_ucx_comm_destroy(coll_gpu_ucx_comm_t *uc);
/* The tag of a message: 24 bits of the communicator id, 16 of the call number, 2 of the phase,
 * 22 of the chunk number (wrapping: receives are posted in order within a phase). */
uint64_t mca_coll_gpu_ucx_tag(uint32_t cid, uint64_t seq, int phase, uint64_t chunk);
/* Start a send to peer (a rank of the UCX communicator's MPI communicator) or, peer -1, a
 * receive of exactly len bytes (from the only peer that sends with that tag).  Host memory, or
 * (device true) CUDA device memory where mca_coll_gpu_ucx_device_memory() says UCX handles it. */
int mca_coll_gpu_ucx_start(coll_gpu_ucx_comm_t *uc, int peer, void *buf, size_t len,
                           uint64_t tag, bool device, coll_gpu_ucx_req_t *r);
/* OMPI_SUCCESS once complete (r->status holds the outcome, returned too when it failed), 1
 * while in flight.  Does not progress: see mca_coll_gpu_ucx_progress. */
int mca_coll_gpu_ucx_test(coll_gpu_ucx_req_t *r);
/* Give up a request (cancel a receive; wait a bounded time for a send) and release it. */
void mca_coll_gpu_ucx_abandon(coll_gpu_ucx_req_t *r);
/* One turn of the worker's progress. */
void mca_coll_gpu_ucx_progress(void);
/* Can UCX move CUDA device memory itself (ucp_context_query: UCS_MEMORY_TYPE_CUDA)? */
bool mca_coll_gpu_ucx_device_memory(void);
/* One line for the log: UCX version and transports asked for. */
const char *mca_coll_gpu_ucx_describe(void);
/* The transports and devices UCX uses to reach uc's peers, as UCX reports them (ucp_ep_query,
 * or ucp_ep_print_info before UCX 1.14): "tcp:lo,tcp:eth0"; "?" when UCX says nothing.  For
 * the log; valid until the next call on uc. */
const char *mca_coll_gpu_ucx_transports(coll_gpu_ucx_comm_t *uc);
/* Release the process' endpoints, context and worker (component close). */
void mca_coll_gpu_ucx_finalize(void);

#endif /* MCA_COLL_GPU_UCX_H */
