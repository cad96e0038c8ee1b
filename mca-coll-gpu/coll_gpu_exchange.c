/*
 * coll_gpu_exchange.c - blocking MPI_Allgather, MPI_Allgatherv, MPI_Alltoall and MPI_Alltoallv
 * on device memory: one exchange on the node team (coll_gpu_nvl.c), in which every rank lends
 * its send bytes and pulls its piece of every peer's, GPU to GPU.
 *
 *   host buffers on this rank        -> the saved module, after a note of the kind (the hot
 *                                       path, coll_gpu_kinds.c)
 *   device buffers, agreed on every  -> the exchange on the node team
 *   rank, one node, a team
 *   MPI_Allgather so, across nodes   -> node steps and the node leaders over UCX
 *                                       (coll_gpu_hier_exchange.c)
 *   anything else                    -> staged (coll_gpu_staged_colls.c)
 *
 * The four collectives differ only in which bytes each rank offers to which peer and where each
 * piece lands (their "sides", call_sides):
 *
 *   collective   sends to every rank q                  receives from rank p into
 *   allgather    its block (scount)                     rbuf block p (rcount at p x rcount)
 *   allgatherv   its block (scount)                     rcounts[p] at rdispls[p]
 *   alltoall     sbuf block q (scount at q x scount)    rbuf block p
 *   alltoallv    scounts[q] at sdispls[q]               rcounts[p] at rdispls[p]
 *
 * In place, allgather(v) lends the rank's own block of rbuf and alltoall(v) the whole of rbuf,
 * copied first (its peers read it while this rank overwrites it), and no rank copies its own
 * block.  Each rank adapts its own buffers (the only thing that may differ between ranks): a
 * dense type in device memory is lent and written as it is; anything else (gaps, managed or
 * host memory under a device promise, memory the team cannot export) goes through the module's
 * device temporaries, packed before the exchange and unpacked after it (coll_gpu_adapt.c).
 *
 * Which path a call takes is decided from what every rank shares: the agreement on the kinds
 * (which also compares the block sizes where they must be equal: allgather, alltoall, the
 * total of allgatherv), the communicator and its team.  The exchange itself checks each piece's
 * length against its receiver's count, so an erroneous alltoallv fails on every rank and no
 * byte is written outside a buffer.
 */
#include "ompi_config.h"

#include <string.h>

#include "coll_gpu.h"

/* One side of a call: block i is counts[i] (else count) elements of dtype at displs[i] (else
 * i x count; single: 0, the one block offered to every rank) extents from buf. */
typedef struct {
    char *buf;
    struct ompi_datatype_t *dtype;
    int count;
    const int *counts, *displs;
    bool single;
} xside_t;

static void xblock(const xside_t *s, int i, ptrdiff_t *disp, int *count)
{
    if (s->single) {
        *disp = 0;
        *count = s->count;
    } else if (NULL != s->counts) {
        *disp = s->displs[i];
        *count = s->counts[i];
    } else {
        *disp = (ptrdiff_t) i * s->count;
        *count = s->count;
    }
}

/* The layout of a side, for its memory kind. */
static coll_gpu_layout_t xlayout(const xside_t *s, int n)
{
    if (NULL != s->counts && !s->single) {
        return COLL_GPU_LAYOUT_V(s->dtype, n, s->counts, s->displs);
    }
    return COLL_GPU_LAYOUT(s->dtype, (size_t) s->count * (s->single ? 1 : (size_t) n));
}

/* The sides of c (the table at the top of the file); in place, the send side is in rbuf. */
static void call_sides(const coll_gpu_staged_call_t *c, int me, xside_t *s, xside_t *r)
{
    ptrdiff_t lb, extent;

    *r = (xside_t){.buf = c->rbuf, .dtype = c->rdtype, .count = c->rcount,
                   .counts = c->rcounts, .displs = c->rdispls};
    *s = (xside_t){.buf = (char *) c->sbuf, .dtype = c->sdtype, .count = c->scount,
                   .counts = c->scounts, .displs = c->sdispls,
                   .single = (COLL_GPU_SC_ALLGATHER == c->coll
                              || COLL_GPU_SC_ALLGATHERV == c->coll)};
    if (MPI_IN_PLACE != c->sbuf) {
        return;
    }
    if (s->single) {
        ptrdiff_t disp;
        ompi_datatype_get_extent(c->rdtype, &lb, &extent);
        xblock(r, me, &disp, &s->count);
        *s = (xside_t){.buf = (char *) c->rbuf + disp * extent, .dtype = c->rdtype,
                       .count = s->count, .single = true};
    } else {
        *s = *r;
    }
}

/* Are all the bytes this rank's call touches host memory (MPI_IN_PLACE is)? */
static bool call_host(const coll_gpu_staged_call_t *c, const xside_t *s, const xside_t *r, int n)
{
    return (MPI_IN_PLACE == c->sbuf
            || mca_coll_gpu_is_host(mca_coll_gpu_layout_kind(s->buf, xlayout(s, n))))
           && mca_coll_gpu_is_host(mca_coll_gpu_layout_kind(r->buf, xlayout(r, n)));
}

/* What the ranks compare: the block size where every rank's must be equal (allgather,
 * alltoall), the whole receive size of allgatherv; nothing for alltoallv, whose pieces the
 * exchange checks one by one. */
static void call_record(const coll_gpu_staged_call_t *c, int n, bool host,
                        coll_gpu_kinds_call_t *call)
{
    size_t dsize, total = 0;

    ompi_datatype_type_size(c->rdtype, &dsize);
    *call = (coll_gpu_kinds_call_t){.device = !host, .bytes = dsize * (size_t) c->rcount};
    switch (c->coll) {
    case COLL_GPU_SC_ALLGATHERV:
        for (int i = 0; i < n; ++i) {
            total += (size_t) c->rcounts[i];
        }
        call->coll = COLL_GPU_KINDS_ALLGATHERV;
        call->bytes = dsize * total;
        break;
    case COLL_GPU_SC_ALLTOALL:
        call->coll = COLL_GPU_KINDS_ALLTOALL;
        break;
    case COLL_GPU_SC_ALLTOALLV:
        call->coll = COLL_GPU_KINDS_ALLTOALLV;
        call->bytes = 0;
        break;
    default:
        call->coll = COLL_GPU_KINDS_ALLGATHER;
        break;
    }
}

int mca_coll_gpu_exchange(coll_gpu_staged_call_t *c)
{
    mca_coll_gpu_module_t *m = c->gpu;
    struct ompi_communicator_t *comm = c->comm;
    int n = ompi_comm_size(comm), rc;
    coll_gpu_kinds_call_t call;
    coll_gpu_team_t *team = NULL;
    bool host, all_device, spans;
    xside_t s, r;
    size_t total = 0, dsize;

    /* an intercommunicator (no team spans its groups), or a call the saved module makes on
     * our communicator from inside one of ours */
    if (m->inter || m->in_agreed_call) {
        return mca_coll_gpu_staged(c);
    }
    call_sides(c, ompi_comm_rank(comm), &s, &r);
    host = call_host(c, &s, &r, n);
    if (mca_coll_gpu_host_noted(m, host)) { /* the hot path: a note, no wait */
        c->host = true;
        return mca_coll_gpu_staged(c);
    }
    call_record(c, n, host, &call);
    rc = mca_coll_gpu_kinds_agree(m, comm, c->what, &call, &all_device);
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
    spans = all_device && mca_coll_gpu_hier_spans(m, comm); /* asked only where it matters */
    /* across nodes: node steps and the leaders over UCX (coll_gpu_hier_exchange.c) */
    if (spans && COLL_GPU_SC_ALLGATHER == c->coll
        && 0 == mca_coll_gpu_component.exchange_algorithm) {
        return mca_coll_gpu_hier_allgather(c);
    }
    if (all_device && 2 <= n && 0 == mca_coll_gpu_component.exchange_algorithm && !spans) {
        team = mca_coll_gpu_team_get(m, comm, c->what);
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

int mca_coll_gpu_exchange_async(coll_gpu_staged_call_t *c)
{
    bool taken = false;
    int rc = mca_coll_gpu_async_xcall(c, &taken);

    return (taken || OMPI_SUCCESS != rc) ? rc : mca_coll_gpu_staged(c);
}
