/*
 * coll_gpu_gather.c - MPI_Gather, MPI_Gatherv, MPI_Allgather, MPI_Allgatherv.
 *
 * The send buffer is read (it is MPI_IN_PLACE at a gathering root or in an in-place
 * allgather, where the contribution already sits in the receive buffer); the receive buffer is
 * written where it is significant (the root; every rank for the all- variants) and read as
 * well in place.  Host buffers go to the saved module; anything else is staged.
 *
 * On an intercommunicator the receive buffers hold one block per rank of the REMOTE group; a
 * gathering root passes MPI_ROOT and only receives, the other ranks of its group pass
 * MPI_PROC_NULL and take no part, and the remote group only sends.
 */
#include "ompi_config.h"

#include "coll_gpu.h"

/* Is the send buffer of a gather significant here?  Not at an intercommunicator's root nor at
 * the idle ranks of its group (an in-place intracommunicator root passes MPI_IN_PLACE, which
 * staging leaves alone). */
static coll_gpu_dir_t gather_sdir(struct ompi_communicator_t *comm, int root)
{
    return (mca_coll_gpu_is_idle(root) || (OMPI_COMM_IS_INTER(comm) && MPI_ROOT == root))
               ? COLL_GPU_NONE
               : COLL_GPU_READ;
}

int mca_coll_gpu_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                        void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                        struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    static const char *const name = "gather";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = gather_sdir(comm, root);
    coll_gpu_dir_t rdir = !is_root ? COLL_GPU_NONE
                          : (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t rtotal = (size_t) rcount * (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_both_host(sdir ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_gather.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, root, comm,
                                 m->prev_gather.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype,
                          NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), sdir,
                                 rbuf, COLL_GPU_LAYOUT(rdtype, rtotal), rdir, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_gather.fn(mca_coll_gpu_view(&s), scount, sdtype, mca_coll_gpu_view(&r), rcount,
                           rdtype, root, comm, m->prev_gather.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, sdir, &r, rdir);
}

int mca_coll_gpu_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                         void *rbuf, const int *rcounts, const int *disps,
                         struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    static const char *const name = "gatherv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    coll_gpu_dir_t sdir = gather_sdir(comm, root);
    coll_gpu_dir_t rdir = !is_root ? COLL_GPU_NONE
                          : (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_both_host(sdir ? sbuf : MPI_IN_PLACE, rdir ? rbuf : MPI_IN_PLACE)) {
        return m->prev_gatherv.fn(sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype, root, comm,
                                  m->prev_gatherv.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype,
                          NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount), sdir,
                                 rbuf,
                                 COLL_GPU_LAYOUT_V(rdtype, is_root ? mca_coll_gpu_peers(comm) : 0,
                                                   rcounts, disps),
                                 rdir, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_gatherv.fn(mca_coll_gpu_view(&s), scount, sdtype, mca_coll_gpu_view(&r),
                            rcounts, disps, rdtype, root, comm, m->prev_gatherv.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, sdir, &r, rdir);
}

int mca_coll_gpu_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                           void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    static const char *const name = "allgather";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t rtotal = (size_t) rcount * (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_allgather.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                    m->prev_allgather.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(rdtype, rtotal), rdtype, NULL,
                          "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount),
                                 COLL_GPU_READ, rbuf, COLL_GPU_LAYOUT(rdtype, rtotal), rdir, &s,
                                 &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_allgather.fn(mca_coll_gpu_view(&s), scount, sdtype, mca_coll_gpu_view(&r),
                              rcount, rdtype, comm, m->prev_allgather.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r, rdir);
}

int mca_coll_gpu_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, const int *rcounts, const int *disps,
                            struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                            mca_coll_base_module_t *module)
{
    static const char *const name = "allgatherv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_allgatherv.fn(sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype, comm,
                                     m->prev_allgatherv.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(sdtype, (size_t) scount), sdtype,
                          NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount),
                                 COLL_GPU_READ, rbuf,
                                 COLL_GPU_LAYOUT_V(rdtype, mca_coll_gpu_peers(comm), rcounts,
                                                   disps),
                                 rdir, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_allgatherv.fn(mca_coll_gpu_view(&s), scount, sdtype, mca_coll_gpu_view(&r),
                               rcounts, disps, rdtype, comm, m->prev_allgatherv.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r, rdir);
}
