/*
 * coll_gpu_alltoall.c - MPI_Alltoall, MPI_Alltoallv, MPI_Alltoallw, blocking, nonblocking and
 * persistent: thin entries of the staged path (coll_gpu_staged_colls.c).
 *
 * The send buffer is read (ignored with MPI_IN_PLACE, where the receive buffer holds the data
 * to send); the receive buffer is written, and read as well in place.  Host buffers go to the
 * saved module; anything else is staged.  On an intercommunicator both buffers hold one block
 * per rank of the REMOTE group.  Per-peer types (alltoallw) rule out a single layout: the union
 * of the blocks is staged, holes included, and copied both ways (the holes go back unchanged).
 */
#include "ompi_config.h"

#include "coll_gpu.h"
#include "coll_gpu_persistent.h"

int mca_coll_gpu_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdtype,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLTOALL, BLOCKING, alltoall), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .comm = comm});
}

int mca_coll_gpu_ialltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLTOALL, NONBLOCKING, ialltoall), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .comm = comm,
        .request = request});
}

int mca_coll_gpu_alltoall_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLTOALL, PERSISTENT, alltoall_init), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype,
        .comm = comm, .info = info, .request = request});
}

int mca_coll_gpu_alltoallv(const void *sbuf, const int *scounts, const int *sdisps,
                           struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                           const int *rdisps, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLTOALLV, BLOCKING, alltoallv), .sbuf = sbuf, .scounts = scounts,
        .sdispls = sdisps, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdisps,
        .rdtype = rdtype, .comm = comm});
}

int mca_coll_gpu_ialltoallv(const void *sbuf, const int *scounts, const int *sdisps,
                            struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                            const int *rdisps, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLTOALLV, NONBLOCKING, ialltoallv), .sbuf = sbuf,
        .scounts = scounts, .sdispls = sdisps, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts,
        .rdispls = rdisps, .rdtype = rdtype, .comm = comm, .request = request});
}

int mca_coll_gpu_alltoallv_init(const void *sbuf, const int *scounts, const int *sdisps,
                                struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                                const int *rdisps, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLTOALLV, PERSISTENT, alltoallv_init), .sbuf = sbuf,
        .scounts = scounts, .sdispls = sdisps, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts,
        .rdispls = rdisps, .rdtype = rdtype, .comm = comm, .info = info, .request = request});
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
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    int size = mca_coll_gpu_peers(comm);

    /* Alone, the one block goes from the send layout to the receive layout.  Done here for
     * host and device buffers alike: coll/self 4.1 takes alltoallw's byte displacements for
     * counts of extents and writes in the wrong place.  (An intercommunicator whose remote
     * group has one rank is no such case: that block travels between processes.) */
    if (1 == size && !OMPI_COMM_IS_INTER(comm)) {
        return alltoallw_alone(sbuf, mca_coll_gpu_classify(sbuf), scounts[0], sdisps[0], sdtypes[0],
                               rbuf, mca_coll_gpu_classify(rbuf), rcounts[0], rdisps[0], rdtypes[0],
                               comm, m);
    }
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLTOALLW, BLOCKING, alltoallw), .sbuf = sbuf, .scounts = scounts,
        .sdispls = sdisps, .sdtypes = sdtypes, .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdisps,
        .rdtypes = rdtypes, .comm = comm});
}

int mca_coll_gpu_ialltoallw(const void *sbuf, const int *scounts, const int *sdisps,
                            struct ompi_datatype_t *const *sdtypes, void *rbuf, const int *rcounts,
                            const int *rdisps, struct ompi_datatype_t *const *rdtypes,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLTOALLW, NONBLOCKING, ialltoallw), .sbuf = sbuf,
        .scounts = scounts, .sdispls = sdisps, .sdtypes = sdtypes, .rbuf = rbuf, .rcounts = rcounts,
        .rdispls = rdisps, .rdtypes = rdtypes, .comm = comm, .request = request});
}

int mca_coll_gpu_alltoallw_init(const void *sbuf, const int *scounts, const int *sdisps,
                                struct ompi_datatype_t *const *sdtypes, void *rbuf,
                                const int *rcounts, const int *rdisps,
                                struct ompi_datatype_t *const *rdtypes,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLTOALLW, PERSISTENT, alltoallw_init), .sbuf = sbuf,
        .scounts = scounts, .sdispls = sdisps, .sdtypes = sdtypes, .rbuf = rbuf, .rcounts = rcounts,
        .rdispls = rdisps, .rdtypes = rdtypes, .comm = comm, .info = info, .request = request});
}
