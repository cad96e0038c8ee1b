/*
 * coll_gpu_gather.c - MPI_Gather, MPI_Gatherv, MPI_Allgather, MPI_Allgatherv, blocking,
 * nonblocking (MPI_I...) and persistent (..._init): thin entries of the staged path
 * (coll_gpu_staged_colls.c), but MPI_Allgather and MPI_Allgatherv, which run on device memory
 * as an exchange on the node team (coll_gpu_exchange.c).
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

COLL_GPU_ENTRIES_STAGED(gather, GATHER,
                        (COLL_GPU_P_EACH, int root), (COLL_GPU_F_EACH, .root = root),
                        (sbuf, scount, sdtype, rbuf, rcount, rdtype, root),
                        mca_coll_gpu_ptr_host_quick(sbuf) && mca_coll_gpu_ptr_host_quick(rbuf))

COLL_GPU_ENTRIES_STAGED(gatherv, GATHERV,
                        (const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                         void *rbuf, const int *rcounts, const int *disps,
                         struct ompi_datatype_t *rdtype, int root),
                        (.sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf,
                         .rcounts = rcounts, .rdispls = disps, .rdtype = rdtype, .root = root),
                        (sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype, root),
                        mca_coll_gpu_ptr_host_quick(sbuf) && mca_coll_gpu_ptr_host_quick(rbuf))

COLL_GPU_ENTRIES_AGREED_QUICK(
    allgather, ALLGATHER, mca_coll_gpu_exchange, mca_coll_gpu_exchange_async, (COLL_GPU_P_EACH),
    (COLL_GPU_F_EACH), (sbuf, scount, sdtype, rbuf, rcount, rdtype),
    mca_coll_gpu_data_host_quick(sbuf, sdtype, scount)
        && mca_coll_gpu_data_host_quick_c(rbuf, rdtype,
                                          mca_coll_gpu_blocks(rcount, mca_coll_gpu_peers(comm))))

COLL_GPU_ENTRIES(allgatherv, ALLGATHERV, mca_coll_gpu_exchange, mca_coll_gpu_exchange_async,
                 (const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                  const int *rcounts, const int *disps, struct ompi_datatype_t *rdtype),
                 (.sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf,
                  .rcounts = rcounts, .rdispls = disps, .rdtype = rdtype))
