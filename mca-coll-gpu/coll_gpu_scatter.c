/*
 * coll_gpu_scatter.c - MPI_Scatter and MPI_Scatterv.
 *
 * The send buffer is read at the root only; the receive buffer is written everywhere except at
 * a root that passes MPI_IN_PLACE (its block stays in the send buffer).  Host buffers go to the
 * saved module; anything else is staged.
 */
#include "ompi_config.h"

#include "coll_gpu.h"

int mca_coll_gpu_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                         void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    static const char *const name = "scatter";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = (ompi_comm_rank(comm) == root);
    coll_gpu_dir_t sdir = is_root ? COLL_GPU_READ : COLL_GPU_NONE;
    size_t stotal = (size_t) scount * (size_t) ompi_comm_size(comm);
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_both_host(is_root ? sbuf : NULL, rbuf)) {
        return m->prev_scatter.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, root, comm,
                                  m->prev_scatter.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount), rdtype,
                          NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, stotal), sdir, rbuf,
                                 COLL_GPU_LAYOUT(rdtype, rcount), COLL_GPU_WRITE, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_scatter.fn(mca_coll_gpu_view(&s), scount, sdtype, mca_coll_gpu_view(&r), rcount,
                            rdtype, root, comm, m->prev_scatter.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, sdir, &r, COLL_GPU_WRITE);
}

int mca_coll_gpu_scatterv(const void *sbuf, const int *scounts, const int *disps,
                          struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                          struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    static const char *const name = "scatterv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = (ompi_comm_rank(comm) == root);
    coll_gpu_dir_t sdir = is_root ? COLL_GPU_READ : COLL_GPU_NONE;
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_both_host(is_root ? sbuf : NULL, rbuf)) {
        return m->prev_scatterv.fn(sbuf, scounts, disps, sdtype, rbuf, rcount, rdtype, root, comm,
                                   m->prev_scatterv.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount), rdtype,
                          NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf,
                                 COLL_GPU_LAYOUT_V(sdtype, is_root ? ompi_comm_size(comm) : 0,
                                                   scounts, disps),
                                 sdir, rbuf, COLL_GPU_LAYOUT(rdtype, rcount), COLL_GPU_WRITE, &s,
                                 &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_scatterv.fn(mca_coll_gpu_view(&s), scounts, disps, sdtype, mca_coll_gpu_view(&r),
                             rcount, rdtype, root, comm, m->prev_scatterv.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, sdir, &r, COLL_GPU_WRITE);
}
