/*
 * coll_gpu_scatter.c - MPI_Scatter and MPI_Scatterv.
 *
 * The send buffer is read at the root only; the receive buffer is written everywhere except at
 * a root that passes MPI_IN_PLACE (its block stays in the send buffer).  Host buffers go to the
 * saved module; anything else is staged.
 *
 * On an intercommunicator the root passes MPI_ROOT and only sends, one block per rank of the
 * REMOTE group; the other ranks of its group pass MPI_PROC_NULL and take no part; the remote
 * group only receives.
 */
#include "ompi_config.h"

#include "coll_gpu.h"

/* Is the receive buffer of a scatter significant here?  Not at an intercommunicator's root nor
 * at the idle ranks of its group (an in-place intracommunicator root passes MPI_IN_PLACE, which
 * staging leaves alone). */
static coll_gpu_dir_t scatter_rdir(struct ompi_communicator_t *comm, int root)
{
    return (mca_coll_gpu_is_idle(root) || (OMPI_COMM_IS_INTER(comm) && MPI_ROOT == root))
               ? COLL_GPU_NONE
               : COLL_GPU_WRITE;
}

int mca_coll_gpu_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                         void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    static const char *const name = "scatter";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = is_root ? COLL_GPU_READ : COLL_GPU_NONE;
    coll_gpu_dir_t rdir = scatter_rdir(comm, root);
    size_t stotal = (size_t) scount * (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_both_host(is_root ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_scatter.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, root, comm,
                                  m->prev_scatter.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount), rdtype,
                          NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, stotal), sdir, rbuf,
                                 COLL_GPU_LAYOUT(rdtype, rcount), rdir, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_scatter.fn(mca_coll_gpu_view(&s), scount, sdtype, mca_coll_gpu_view(&r), rcount,
                            rdtype, root, comm, m->prev_scatter.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, sdir, &r, rdir);
}

int mca_coll_gpu_scatterv(const void *sbuf, const int *scounts, const int *disps,
                          struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                          struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    static const char *const name = "scatterv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = is_root ? COLL_GPU_READ : COLL_GPU_NONE;
    coll_gpu_dir_t rdir = scatter_rdir(comm, root);
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_both_host(is_root ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_scatterv.fn(sbuf, scounts, disps, sdtype, rbuf, rcount, rdtype, root, comm,
                                   m->prev_scatterv.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount), rdtype,
                          NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf,
                                 COLL_GPU_LAYOUT_V(sdtype, is_root ? mca_coll_gpu_peers(comm) : 0,
                                                   scounts, disps),
                                 sdir, rbuf, COLL_GPU_LAYOUT(rdtype, rcount), rdir, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_scatterv.fn(mca_coll_gpu_view(&s), scounts, disps, sdtype, mca_coll_gpu_view(&r),
                             rcount, rdtype, root, comm, m->prev_scatterv.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, sdir, &r, rdir);
}
