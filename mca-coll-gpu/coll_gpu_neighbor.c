/*
 * coll_gpu_neighbor.c - the neighborhood collectives on device buffers: MPI_Neighbor_allgather(v)
 * and MPI_Neighbor_alltoall(v,w).
 *
 * Host buffers go straight to the saved module (coll/basic in 4.1).  Device and managed buffers
 * are staged like the all-to-all ones, with the communicator's topology deciding the number of
 * blocks instead of its size: a rank receives one block from each of its indegree sources and
 * sends to each of its outdegree destinations (allgather: the same block to all of them).
 *
 *   call          send buffer                        receive buffer
 *   ------------  ---------------------------------  -----------------------------------------
 *   allgather     scount                             indegree x rcount
 *   allgatherv    scount                             indegree blocks rcounts[i] at displs[i]
 *   alltoall      outdegree x scount                 indegree x rcount
 *   alltoallv     outdegree blocks (extents)         indegree blocks (extents)
 *   alltoallw     outdegree blocks, types, bytes     indegree blocks, types, bytes
 *
 * A cartesian topology counts 2 x ndims neighbours whatever the boundaries; the blocks of an
 * MPI_PROC_NULL neighbour are neither sent nor written.  So the receive range is always copied
 * in as well as out: what the call does not write goes back as it was.  MPI_IN_PLACE does not
 * exist for these calls.  A communicator without a topology is passed to the saved function,
 * which reports MPI's error.
 */
#include "ompi_config.h"

#include "ompi/mca/topo/base/base.h"

#include "coll_gpu.h"

/* The number of blocks a rank receives (indegree) and sends (outdegree) on comm; false when
 * comm has no topology. */
static bool neighbor_degrees(struct ompi_communicator_t *comm, int *indegree, int *outdegree)
{
    *indegree = 0;
    *outdegree = 0;
    return OMPI_COMM_IS_TOPO(comm)
           && OMPI_SUCCESS == mca_topo_base_neighbor_count(comm, indegree, outdegree);
}

int mca_coll_gpu_neighbor_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                    void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                    struct ompi_communicator_t *comm,
                                    mca_coll_base_module_t *module)
{
    static const char *const name = "neighbor_allgather";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_staged_t s, r;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !neighbor_degrees(comm, &indeg, &outdeg)) {
        return m->prev_neighbor_allgather.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                             m->prev_neighbor_allgather.module);
    }
    mca_coll_gpu_log_call(name, comm,
                          mca_coll_gpu_call_bytes(rdtype, (size_t) rcount * (size_t) indeg),
                          rdtype, NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount),
                                 COLL_GPU_READ, rbuf,
                                 COLL_GPU_LAYOUT(rdtype, (size_t) rcount * (size_t) indeg),
                                 COLL_GPU_READWRITE, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_neighbor_allgather.fn(mca_coll_gpu_view(&s), scount, sdtype,
                                       mca_coll_gpu_view(&r), rcount, rdtype, comm,
                                       m->prev_neighbor_allgather.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r,
                                     COLL_GPU_READWRITE);
}

int mca_coll_gpu_neighbor_allgatherv(const void *sbuf, int scount,
                                     struct ompi_datatype_t *sdtype, void *rbuf,
                                     const int *rcounts, const int *disps,
                                     struct ompi_datatype_t *rdtype,
                                     struct ompi_communicator_t *comm,
                                     mca_coll_base_module_t *module)
{
    static const char *const name = "neighbor_allgatherv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_staged_t s, r;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !neighbor_degrees(comm, &indeg, &outdeg)) {
        return m->prev_neighbor_allgatherv.fn(sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype,
                                              comm, m->prev_neighbor_allgatherv.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype,
                          NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount),
                                 COLL_GPU_READ, rbuf,
                                 COLL_GPU_LAYOUT_V(rdtype, indeg, rcounts, disps),
                                 COLL_GPU_READWRITE, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_neighbor_allgatherv.fn(mca_coll_gpu_view(&s), scount, sdtype,
                                        mca_coll_gpu_view(&r), rcounts, disps, rdtype, comm,
                                        m->prev_neighbor_allgatherv.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r,
                                     COLL_GPU_READWRITE);
}

int mca_coll_gpu_neighbor_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                   void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                   struct ompi_communicator_t *comm,
                                   mca_coll_base_module_t *module)
{
    static const char *const name = "neighbor_alltoall";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_staged_t s, r;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !neighbor_degrees(comm, &indeg, &outdeg)) {
        return m->prev_neighbor_alltoall.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                            m->prev_neighbor_alltoall.module);
    }
    mca_coll_gpu_log_call(name, comm,
                          mca_coll_gpu_call_bytes(rdtype, (size_t) rcount * (size_t) indeg),
                          rdtype, NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf,
                                 COLL_GPU_LAYOUT(sdtype, (size_t) scount * (size_t) outdeg),
                                 COLL_GPU_READ, rbuf,
                                 COLL_GPU_LAYOUT(rdtype, (size_t) rcount * (size_t) indeg),
                                 COLL_GPU_READWRITE, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_neighbor_alltoall.fn(mca_coll_gpu_view(&s), scount, sdtype,
                                      mca_coll_gpu_view(&r), rcount, rdtype, comm,
                                      m->prev_neighbor_alltoall.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r,
                                     COLL_GPU_READWRITE);
}

int mca_coll_gpu_neighbor_alltoallv(const void *sbuf, const int *scounts, const int *sdisps,
                                    struct ompi_datatype_t *sdtype, void *rbuf,
                                    const int *rcounts, const int *rdisps,
                                    struct ompi_datatype_t *rdtype,
                                    struct ompi_communicator_t *comm,
                                    mca_coll_base_module_t *module)
{
    static const char *const name = "neighbor_alltoallv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_staged_t s, r;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !neighbor_degrees(comm, &indeg, &outdeg)) {
        return m->prev_neighbor_alltoallv.fn(sbuf, scounts, sdisps, sdtype, rbuf, rcounts, rdisps,
                                             rdtype, comm, m->prev_neighbor_alltoallv.module);
    }
    mca_coll_gpu_log_call(name, comm, 0, rdtype, NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf,
                                 COLL_GPU_LAYOUT_V(sdtype, outdeg, scounts, sdisps),
                                 COLL_GPU_READ, rbuf,
                                 COLL_GPU_LAYOUT_V(rdtype, indeg, rcounts, rdisps),
                                 COLL_GPU_READWRITE, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_neighbor_alltoallv.fn(mca_coll_gpu_view(&s), scounts, sdisps, sdtype,
                                       mca_coll_gpu_view(&r), rcounts, rdisps, rdtype, comm,
                                       m->prev_neighbor_alltoallv.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r,
                                     COLL_GPU_READWRITE);
}

/* Per-block types rule out a single layout: the union of the blocks is staged, holes included,
 * and copied both ways (the holes go back unchanged). */
int mca_coll_gpu_neighbor_alltoallw(const void *sbuf, const int *scounts, const MPI_Aint *sdisps,
                                    struct ompi_datatype_t *const *sdtypes, void *rbuf,
                                    const int *rcounts, const MPI_Aint *rdisps,
                                    struct ompi_datatype_t *const *rdtypes,
                                    struct ompi_communicator_t *comm,
                                    mca_coll_base_module_t *module)
{
    static const char *const name = "neighbor_alltoallw";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    dev_mem_kind_t skind = mca_coll_gpu_classify(sbuf), rkind = mca_coll_gpu_classify(rbuf);
    coll_gpu_staged_t s, r;
    int indeg, outdeg, rc;
    ptrdiff_t lo;
    size_t len;

    if ((mca_coll_gpu_is_host(skind) && mca_coll_gpu_is_host(rkind))
        || !neighbor_degrees(comm, &indeg, &outdeg)) {
        return m->prev_neighbor_alltoallw.fn(sbuf, scounts, sdisps, sdtypes, rbuf, rcounts,
                                             rdisps, rdtypes, comm,
                                             m->prev_neighbor_alltoallw.module);
    }
    mca_coll_gpu_log_call(name, comm, 0, NULL, NULL, "staged");
    mca_coll_gpu_span_w_aint(outdeg, scounts, sdisps, sdtypes, &lo, &len);
    rc = mca_coll_gpu_stage_in(m, 0, sbuf, skind, lo, len, true, comm, name, &s);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    mca_coll_gpu_span_w_aint(indeg, rcounts, rdisps, rdtypes, &lo, &len);
    rc = mca_coll_gpu_stage_in(m, 1, rbuf, rkind, lo, len, true, comm, name, &r);
    if (OMPI_SUCCESS != rc) {
        (void) mca_coll_gpu_stage_out(m, &s, false, comm, name);
        return rc;
    }
    rc = m->prev_neighbor_alltoallw.fn(mca_coll_gpu_view(&s), scounts, sdisps, sdtypes,
                                       mca_coll_gpu_view(&r), rcounts, rdisps, rdtypes, comm,
                                       m->prev_neighbor_alltoallw.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r,
                                     COLL_GPU_READWRITE);
}

/* ---- nonblocking: bounce memory owned by the request (coll_gpu_nonblocking.c) -------------- */

int mca_coll_gpu_ineighbor_allgather(const void *sbuf, int scount,
                                     struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                     struct ompi_datatype_t *rdtype,
                                     struct ompi_communicator_t *comm, ompi_request_t **request,
                                     mca_coll_base_module_t *module)
{
    static const char *const name = "ineighbor_allgather";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_nb_t *x;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !neighbor_degrees(comm, &indeg, &outdeg)) {
        return m->prev_ineighbor_allgather.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                              request, m->prev_ineighbor_allgather.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount * (size_t) indeg), rdtype,
           NULL);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), COLL_GPU_READ, rbuf,
                  COLL_GPU_LAYOUT(rdtype, (size_t) rcount * (size_t) indeg), COLL_GPU_READWRITE,
                  &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ineighbor_allgather.fn(nb_sview(x), scount, sdtype, nb_rview(x), rcount, rdtype,
                                        comm, request, m->prev_ineighbor_allgather.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_ineighbor_allgatherv(const void *sbuf, int scount,
                                      struct ompi_datatype_t *sdtype, void *rbuf,
                                      const int *rcounts, const int *disps,
                                      struct ompi_datatype_t *rdtype,
                                      struct ompi_communicator_t *comm, ompi_request_t **request,
                                      mca_coll_base_module_t *module)
{
    static const char *const name = "ineighbor_allgatherv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_nb_t *x;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !neighbor_degrees(comm, &indeg, &outdeg)) {
        return m->prev_ineighbor_allgatherv.fn(sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype,
                                               comm, request,
                                               m->prev_ineighbor_allgatherv.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype, NULL);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), COLL_GPU_READ, rbuf,
                  COLL_GPU_LAYOUT_V(rdtype, indeg, rcounts, disps), COLL_GPU_READWRITE, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ineighbor_allgatherv.fn(nb_sview(x), scount, sdtype, nb_rview(x), rcounts, disps,
                                         rdtype, comm, request,
                                         m->prev_ineighbor_allgatherv.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_ineighbor_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                    void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                    struct ompi_communicator_t *comm, ompi_request_t **request,
                                    mca_coll_base_module_t *module)
{
    static const char *const name = "ineighbor_alltoall";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_nb_t *x;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !neighbor_degrees(comm, &indeg, &outdeg)) {
        return m->prev_ineighbor_alltoall.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                             request, m->prev_ineighbor_alltoall.module);
    }
    nb_log(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount * (size_t) indeg), rdtype,
           NULL);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, (size_t) scount * (size_t) outdeg),
                  COLL_GPU_READ, rbuf, COLL_GPU_LAYOUT(rdtype, (size_t) rcount * (size_t) indeg),
                  COLL_GPU_READWRITE, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ineighbor_alltoall.fn(nb_sview(x), scount, sdtype, nb_rview(x), rcount, rdtype,
                                       comm, request, m->prev_ineighbor_alltoall.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_ineighbor_alltoallv(const void *sbuf, const int *scounts, const int *sdisps,
                                     struct ompi_datatype_t *sdtype, void *rbuf,
                                     const int *rcounts, const int *rdisps,
                                     struct ompi_datatype_t *rdtype,
                                     struct ompi_communicator_t *comm, ompi_request_t **request,
                                     mca_coll_base_module_t *module)
{
    static const char *const name = "ineighbor_alltoallv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_nb_t *x;
    int indeg, outdeg, rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf) || !neighbor_degrees(comm, &indeg, &outdeg)) {
        return m->prev_ineighbor_alltoallv.fn(sbuf, scounts, sdisps, sdtype, rbuf, rcounts,
                                              rdisps, rdtype, comm, request,
                                              m->prev_ineighbor_alltoallv.module);
    }
    nb_log(name, comm, 0, rdtype, NULL);
    rc = nb_stage(m, comm, name, sbuf, COLL_GPU_LAYOUT_V(sdtype, outdeg, scounts, sdisps),
                  COLL_GPU_READ, rbuf, COLL_GPU_LAYOUT_V(rdtype, indeg, rcounts, rdisps),
                  COLL_GPU_READWRITE, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ineighbor_alltoallv.fn(nb_sview(x), scounts, sdisps, sdtype, nb_rview(x),
                                        rcounts, rdisps, rdtype, comm, request,
                                        m->prev_ineighbor_alltoallv.module);
    return nb_attach(x, rc, request);
}

int mca_coll_gpu_ineighbor_alltoallw(const void *sbuf, const int *scounts,
                                     const MPI_Aint *sdisps,
                                     struct ompi_datatype_t *const *sdtypes, void *rbuf,
                                     const int *rcounts, const MPI_Aint *rdisps,
                                     struct ompi_datatype_t *const *rdtypes,
                                     struct ompi_communicator_t *comm, ompi_request_t **request,
                                     mca_coll_base_module_t *module)
{
    static const char *const name = "ineighbor_alltoallw";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    dev_mem_kind_t skind = mca_coll_gpu_classify(sbuf), rkind = mca_coll_gpu_classify(rbuf);
    coll_gpu_nb_t *x;
    int indeg, outdeg, rc;
    ptrdiff_t slo, rlo;
    size_t slen, rlen;

    if ((mca_coll_gpu_is_host(skind) && mca_coll_gpu_is_host(rkind))
        || !neighbor_degrees(comm, &indeg, &outdeg)) {
        return m->prev_ineighbor_alltoallw.fn(sbuf, scounts, sdisps, sdtypes, rbuf, rcounts,
                                              rdisps, rdtypes, comm, request,
                                              m->prev_ineighbor_alltoallw.module);
    }
    nb_log(name, comm, 0, NULL, NULL);
    mca_coll_gpu_span_w_aint(outdeg, scounts, sdisps, sdtypes, &slo, &slen);
    mca_coll_gpu_span_w_aint(indeg, rcounts, rdisps, rdtypes, &rlo, &rlen);
    rc = nb_stage_spans(m, comm, name, sbuf, skind, slo, slen, rbuf, rkind, rlo, rlen, &x);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_ineighbor_alltoallw.fn(nb_sview(x), scounts, sdisps, sdtypes, nb_rview(x),
                                        rcounts, rdisps, rdtypes, comm, request,
                                        m->prev_ineighbor_alltoallw.module);
    return nb_attach(x, rc, request);
}
