/*
 * coll_gpu_alltoall.c - MPI_Alltoall, MPI_Alltoallv, MPI_Alltoallw, blocking, nonblocking and
 * persistent: thin entries of the staged path (coll_gpu_staged_colls.c), but MPI_Alltoall and
 * MPI_Alltoallv, which run on device memory as an exchange on the node team
 * (coll_gpu_exchange.c).
 *
 * The send buffer is read (ignored with MPI_IN_PLACE, where the receive buffer holds the data
 * to send); the receive buffer is written, and read as well in place.  Host buffers go to the
 * saved module; anything else is staged.  On an intercommunicator both buffers hold one block
 * per rank of the REMOTE group.  Per-peer types (alltoallw) rule out a single layout: the union
 * of the blocks is staged, holes included, and copied both ways (the holes go back unchanged).
 */
#include "ompi_config.h"

#include "coll_gpu.h"

COLL_GPU_ENTRIES_AGREED_QUICK(
    alltoall, ALLTOALL, mca_coll_gpu_exchange, mca_coll_gpu_exchange_async, (COLL_GPU_P_EACH),
    (COLL_GPU_F_EACH), (sbuf, scount, sdtype, rbuf, rcount, rdtype),
    mca_coll_gpu_data_host_quick_c(sbuf, sdtype,
                                   mca_coll_gpu_blocks(scount, mca_coll_gpu_peers(comm)))
        && mca_coll_gpu_data_host_quick_c(rbuf, rdtype,
                                          mca_coll_gpu_blocks(rcount, mca_coll_gpu_peers(comm))))

COLL_GPU_ENTRIES(alltoallv, ALLTOALLV, mca_coll_gpu_exchange, mca_coll_gpu_exchange_async,
                 (const void *sbuf, const int *scounts, const int *sdisps,
                  struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                  const int *rdisps, struct ompi_datatype_t *rdtype),
                 (.sbuf = sbuf, .scounts = scounts, .sdispls = sdisps, .sdtype = sdtype,
                  .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdisps, .rdtype = rdtype))

/* MPI_Alltoallw on a one-process communicator, as a saved function of the staged path (which
 * stages the one block of each side): a local copy between two layouts. */
static int alltoallw_alone(const void *sbuf, const int *scounts, const int *sdisps,
                           struct ompi_datatype_t *const *sdtypes, void *rbuf, const int *rcounts,
                           const int *rdisps, struct ompi_datatype_t *const *rdtypes,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    (void) comm;
    (void) module;
    return ompi_datatype_sndrcv((const char *) sbuf + sdisps[0], scounts[0], sdtypes[0],
                                (char *) rbuf + rdisps[0], rcounts[0], rdtypes[0]);
}

int mca_coll_gpu_alltoallw(const void *sbuf, const int *scounts, const int *sdisps,
                           struct ompi_datatype_t *const *sdtypes, void *rbuf, const int *rcounts,
                           const int *rdisps, struct ompi_datatype_t *const *rdtypes,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    coll_gpu_staged_call_t c = {
        COLL_GPU_STAGED(module, ALLTOALLW, BLOCKING, alltoallw), .sbuf = sbuf, .scounts = scounts,
        .sdispls = sdisps, .sdtypes = sdtypes, .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdisps,
        .rdtypes = rdtypes, .comm = comm};

    /* Alone, the one block goes from the send layout to the receive layout.  Done here for
     * host and device buffers alike: coll/self 4.1 takes alltoallw's byte displacements for
     * counts of extents and writes in the wrong place.  (An intercommunicator whose remote
     * group has one rank is no such case: that block travels between processes.) */
    if (1 == ompi_comm_size(comm) && !OMPI_COMM_IS_INTER(comm)) {
        if (MPI_IN_PLACE == sbuf) {
            return OMPI_SUCCESS; /* the data is where it must be */
        }
        c.fn = (coll_gpu_saved_fn_t) alltoallw_alone;
    }
    return mca_coll_gpu_staged(&c);
}

COLL_GPU_ENTRIES_ASYNC(alltoallw, ALLTOALLW, mca_coll_gpu_staged,
                       (const void *sbuf, const int *scounts, const int *sdisps,
                        struct ompi_datatype_t *const *sdtypes, void *rbuf, const int *rcounts,
                        const int *rdisps, struct ompi_datatype_t *const *rdtypes),
                       (.sbuf = sbuf, .scounts = scounts, .sdispls = sdisps, .sdtypes = sdtypes,
                        .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdisps, .rdtypes = rdtypes))
