/*
 * coll_gpu_alltoall.c - MPI_Alltoall, MPI_Alltoallv, MPI_Alltoallw.
 *
 * The send buffer is read (ignored with MPI_IN_PLACE, where the receive buffer holds the data
 * to send); the receive buffer is written, and read as well in place.  Host buffers go to the
 * saved module; anything else is staged.  On an intercommunicator both buffers hold one block
 * per rank of the REMOTE group.
 */
#include "ompi_config.h"

#include "coll_gpu.h"

int mca_coll_gpu_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                          void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    static const char *const name = "alltoall";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    size_t size = (size_t) mca_coll_gpu_peers(comm);
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_alltoall.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                   m->prev_alltoall.module);
    }
    mca_coll_gpu_log_call(name, comm, mca_coll_gpu_call_bytes(rdtype, (size_t) rcount * size),
                          rdtype, NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf, COLL_GPU_LAYOUT(sdtype, scount * size),
                                 COLL_GPU_READ, rbuf, COLL_GPU_LAYOUT(rdtype, rcount * size),
                                 rdir, &s, &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_alltoall.fn(mca_coll_gpu_view(&s), scount, sdtype, mca_coll_gpu_view(&r),
                             rcount, rdtype, comm, m->prev_alltoall.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r, rdir);
}

int mca_coll_gpu_alltoallv(const void *sbuf, const int *scounts, const int *sdisps,
                           struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                           const int *rdisps, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    static const char *const name = "alltoallv";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t rdir = (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    int size = mca_coll_gpu_peers(comm);
    coll_gpu_staged_t s, r;
    int rc;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_alltoallv.fn(sbuf, scounts, sdisps, sdtype, rbuf, rcounts, rdisps, rdtype,
                                    comm, m->prev_alltoallv.module);
    }
    mca_coll_gpu_log_call(name, comm, 0, rdtype, NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, name, sbuf,
                                 COLL_GPU_LAYOUT_V(sdtype, size, scounts, sdisps), COLL_GPU_READ,
                                 rbuf, COLL_GPU_LAYOUT_V(rdtype, size, rcounts, rdisps), rdir, &s,
                                 &r);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_alltoallv.fn(mca_coll_gpu_view(&s), scounts, sdisps, sdtype,
                              mca_coll_gpu_view(&r), rcounts, rdisps, rdtype, comm,
                              m->prev_alltoallv.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r, rdir);
}

/* MPI_Alltoallw on a one-process communicator: a local copy between two layouts, through
 * bounce buffers where either side is device memory. */
static int alltoallw_alone(const void *sbuf, dev_mem_kind_t skind, int scount, int sdisp,
                           struct ompi_datatype_t *sdtype, void *rbuf, dev_mem_kind_t rkind,
                           int rcount, int rdisp, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m)
{
    static const char *const name = "alltoallw";
    coll_gpu_staged_t s, r;
    ptrdiff_t lo;
    size_t len;
    int rc;

    if (MPI_IN_PLACE == sbuf) {
        return OMPI_SUCCESS; /* the data is where it must be */
    }
    mca_coll_gpu_span_w(1, &scount, &sdisp, &sdtype, &lo, &len);
    rc = mca_coll_gpu_stage_in(m, 0, sbuf, skind, lo, len, true, comm, name, &s);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    mca_coll_gpu_span_w(1, &rcount, &rdisp, &rdtype, &lo, &len);
    rc = mca_coll_gpu_stage_in(m, 1, rbuf, rkind, lo, len, true, comm, name, &r);
    if (OMPI_SUCCESS != rc) {
        (void) mca_coll_gpu_stage_out(m, &s, false, comm, name);
        return rc;
    }
    rc = ompi_datatype_sndrcv((char *) mca_coll_gpu_view(&s) + sdisp, scount, sdtype,
                              (char *) mca_coll_gpu_view(&r) + rdisp, rcount, rdtype);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r,
                                     COLL_GPU_READWRITE);
}

int mca_coll_gpu_alltoallw(const void *sbuf, const int *scounts, const int *sdisps,
                           struct ompi_datatype_t *const *sdtypes, void *rbuf, const int *rcounts,
                           const int *rdisps, struct ompi_datatype_t *const *rdtypes,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    static const char *const name = "alltoallw";
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool in_place = (MPI_IN_PLACE == sbuf);
    int size = mca_coll_gpu_peers(comm);
    dev_mem_kind_t skind = mca_coll_gpu_classify(sbuf), rkind = mca_coll_gpu_classify(rbuf);
    coll_gpu_staged_t s, r;
    ptrdiff_t lo;
    size_t len;
    int rc;

    /* Alone, the one block goes from the send layout to the receive layout.  Done here for
     * host and device buffers alike: coll/self 4.1 takes alltoallw's byte displacements for
     * counts of extents and writes in the wrong place.  (An intercommunicator whose remote
     * group has one rank is no such case: that block travels between processes.) */
    if (1 == size && !OMPI_COMM_IS_INTER(comm)) {
        return alltoallw_alone(sbuf, skind, scounts[0], sdisps[0], sdtypes[0], rbuf, rkind,
                               rcounts[0], rdisps[0], rdtypes[0], comm, m);
    }
    if (mca_coll_gpu_is_host(skind) && mca_coll_gpu_is_host(rkind)) {
        return m->prev_alltoallw.fn(sbuf, scounts, sdisps, sdtypes, rbuf, rcounts, rdisps,
                                    rdtypes, comm, m->prev_alltoallw.module);
    }
    mca_coll_gpu_log_call(name, comm, 0, NULL, NULL, "staged");
    /* per-peer types rule out a single layout: stage the union of the blocks, holes included */
    if (in_place) {
        skind = DEV_MEM_HOST;
    }
    mca_coll_gpu_span_w(size, scounts, sdisps, sdtypes, &lo, &len);
    rc = mca_coll_gpu_stage_in(m, 0, sbuf, skind, lo, len, true, comm, name, &s);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    mca_coll_gpu_span_w(size, rcounts, rdisps, rdtypes, &lo, &len);
    rc = mca_coll_gpu_stage_in(m, 1, rbuf, rkind, lo, len, true, comm, name, &r);
    if (OMPI_SUCCESS != rc) {
        (void) mca_coll_gpu_stage_out(m, &s, false, comm, name);
        return rc;
    }
    rc = m->prev_alltoallw.fn(in_place ? MPI_IN_PLACE : mca_coll_gpu_view(&s), scounts, sdisps,
                              sdtypes, mca_coll_gpu_view(&r), rcounts, rdisps, rdtypes, comm,
                              m->prev_alltoallw.module);
    return mca_coll_gpu_unstage_pair(m, comm, name, rc, &s, COLL_GPU_READ, &r,
                                     COLL_GPU_READWRITE);
}
