/*
 * coll_gpu_exchange.c - blocking MPI_Allgather, MPI_Allgatherv, MPI_Alltoall and MPI_Alltoallv
 * on device memory: one exchange on the node team (coll_gpu_nvl.c), in which every rank lends
 * its send bytes and pulls its piece of every peer's, GPU to GPU.
 *
 *   host buffers on this rank        -> the saved module, after a note of the kind (the hot
 *                                       path, coll_gpu_kinds.c)
 *   device buffers, agreed on every  -> the exchange on the node team
 *   rank, one node, a team
 *   MPI_Allgather(v) so, across      -> node steps and the node leaders over UCX
 *   nodes                               (coll_gpu_hier_exchange.c)
 *   anything else                    -> staged (coll_gpu_staged_colls.c)
 *
 * The exchange's layout and schedule are the engine's (xcall_layout, xcall_begin in
 * coll_gpu_engine.c), the same for the nonblocking and persistent calls.
 *
 * Which path a call takes is decided from what every rank shares: the agreement on the kinds
 * (which also compares the block sizes where they must be equal: allgather, alltoall, the
 * total of allgatherv), the communicator and its team.  The exchange itself checks each piece's
 * length against its receiver's count, so an erroneous alltoallv fails on every rank and no
 * byte is written outside a buffer.
 */
#include "ompi_config.h"

#include <inttypes.h>
#include <string.h>

#include "coll_gpu.h"

/* What the ranks compare, in elements of the receive type: the block where every rank's must
 * be equal (allgather, alltoall), the whole receive side of allgatherv; nothing for alltoallv,
 * whose pieces the exchange checks one by one.  The agreement's code of the collective. */
static size_t call_compared(const coll_gpu_staged_call_t *c, int n, int *coll)
{
    size_t total = 0;

    switch (c->coll) {
    case COLL_GPU_SC_ALLGATHERV:
        for (int i = 0; i < n; ++i) {
            total += (size_t) c->rcounts[i];
        }
        *coll = COLL_GPU_KINDS_ALLGATHERV;
        return total;
    case COLL_GPU_SC_ALLTOALL:
        *coll = COLL_GPU_KINDS_ALLTOALL;
        return (size_t) c->rcount;
    case COLL_GPU_SC_ALLTOALLV:
        *coll = COLL_GPU_KINDS_ALLTOALLV;
        return 0;
    default:
        *coll = COLL_GPU_KINDS_ALLGATHER;
        return (size_t) c->rcount;
    }
}

/*
 * An alltoallv that every rank passes device memory to but that is staged (across nodes, or
 * with no node team): no exchange checks its pieces there, and the component below may hang on
 * counts that disagree.  Each rank tells each peer, in one host alltoall, the bytes it will
 * send it, and compares them with the bytes it expects; the lowest rank that found a pair that
 * disagrees names it, and every rank returns MPI_ERR_TRUNCATE before a byte moves.
 */
static int alltoallv_check(coll_gpu_staged_call_t *c)
{
    mca_coll_gpu_module_t *m = c->gpu;
    int n = ompi_comm_size(c->comm), me = ompi_comm_rank(c->comm), bad = -1, first = n, rc;
    int64_t *sends = malloc(sizeof(int64_t) * 2 * (size_t) n), *told = NULL;
    bool in_place = (MPI_IN_PLACE == c->sbuf);
    size_t ssize, rsize;

    ompi_datatype_type_size(in_place ? c->rdtype : c->sdtype, &ssize);
    ompi_datatype_type_size(c->rdtype, &rsize);
    rc = mca_coll_gpu_agree_memory(m, c->comm, NULL != sends);
    if (OMPI_SUCCESS == rc) {
        told = sends + n;
        for (int j = 0; j < n; ++j) {
            sends[j] = (int64_t) ssize * (in_place ? c->rcounts[j] : c->scounts[j]);
        }
        rc = m->prev_alltoall.fn(sends, 1, MPI_INT64_T, told, 1, MPI_INT64_T, c->comm,
                                 m->prev_alltoall.module);
        for (int j = 0; OMPI_SUCCESS == rc && j < n && 0 > bad; ++j) {
            bad = (told[j] != (int64_t) rsize * c->rcounts[j]) ? j : -1;
        }
    }
    if (OMPI_SUCCESS == rc) {
        int mine = (0 <= bad) ? me : n;
        rc = m->prev_allreduce.fn(&mine, &first, 1, MPI_INT, MPI_MIN, c->comm,
                                  m->prev_allreduce.module);
    }
    if (OMPI_SUCCESS == rc && first < n) {
        if (first == me) {
            opal_output(0, "coll/gpu: erroneous MPI_Alltoallv on communicator %d: rank %d sends "
                        "%" PRId64 " B to rank %d, which expects %" PRId64 " B; the call "
                        "returns MPI_ERR_TRUNCATE on every rank and moves no data",
                        coll_gpu_comm_cid(c->comm), bad, told[bad], me,
                        (int64_t) rsize * c->rcounts[bad]);
        }
        rc = MPI_ERR_TRUNCATE;
    }
    free(sends);
    return rc;
}

int mca_coll_gpu_exchange(coll_gpu_staged_call_t *c)
{
    mca_coll_gpu_module_t *m = c->gpu;
    struct ompi_communicator_t *comm = c->comm;
    int n = ompi_comm_size(comm), coll, rc;
    coll_gpu_team_t *team = NULL;
    bool host, all_device, spans;
    size_t total = 0, dsize, compared;

    /* an intercommunicator (no team spans its groups), or a call the saved module makes on
     * our communicator from inside one of ours */
    if (m->inter || m->in_agreed_call) {
        return mca_coll_gpu_staged(c);
    }
    host = mca_coll_gpu_xcall_host(c);
    compared = call_compared(c, n, &coll);
    rc = mca_coll_gpu_entry_agree(m, comm, c->what, coll, host, c->rdtype, compared, NULL, 0,
                                  &all_device);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    if (host && !all_device) {
        c->host = true;
        return mca_coll_gpu_staged(c);
    }
    ompi_datatype_type_size(c->rdtype, &dsize);
    for (int p = 0; p < n; ++p) {
        total += dsize * (size_t) (NULL != c->rcounts ? c->rcounts[p] : c->rcount);
    }
    spans = all_device && mca_coll_gpu_spans_nodes(m, comm); /* asked only where it matters */
    /* across nodes: node steps and the leaders over UCX (coll_gpu_hier_exchange.c) */
    if (spans && (COLL_GPU_SC_ALLGATHER == c->coll || COLL_GPU_SC_ALLGATHERV == c->coll)
        && 0 == mca_coll_gpu_component.exchange_algorithm) {
        return mca_coll_gpu_hier_allgather(c);
    }
    if (all_device && 2 <= n && 0 == mca_coll_gpu_component.exchange_algorithm && !spans) {
        team = mca_coll_gpu_team_get(m, comm, c->what);
    }
    if (NULL == team && all_device && COLL_GPU_SC_ALLTOALLV == c->coll) {
        rc = alltoallv_check(c);
        if (OMPI_SUCCESS != rc) {
            return rc;
        }
    }
    if (NULL == team) {
        mca_coll_gpu_log_call(c->what, comm, total, c->rdtype, NULL,
                              !all_device ? "staged (memory kind: host memory on some rank)"
                              : 2 > n     ? "staged (nothing to exchange between GPUs)"
                              : 0 != mca_coll_gpu_component.exchange_algorithm
                                  ? "staged (forced by coll_gpu_exchange_algorithm)"
                                  : "staged (spans nodes, or no node team)");
        c->decided = true;
        return mca_coll_gpu_staged(c);
    }
    mca_coll_gpu_log_call(c->what, comm, total, c->rdtype, NULL, "exchange on the node team");
    return mca_coll_gpu_team_xcall(team, c);
}

static int exchange_run(coll_gpu_staged_call_t *c)
{
    bool taken = false;
    int rc = mca_coll_gpu_async_xcall(c, &taken);

    return (taken || OMPI_SUCCESS != rc) ? rc : mca_coll_gpu_staged(c);
}

int mca_coll_gpu_exchange_async(coll_gpu_staged_call_t *c)
{
    /* behind the nonblocking allreduces and bcasts deferred on the communicator, in call order
     * (coll_gpu_defer.c: the team's order, the kinds history) */
    if (COLL_GPU_NONBLOCKING == c->mode && mca_coll_gpu_defer_on(c->gpu, c->comm)) {
        return mca_coll_gpu_defer_call(c, exchange_run, NULL);
    }
    return exchange_run(c);
}
