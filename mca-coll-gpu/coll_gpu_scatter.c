/*
 * coll_gpu_scatter.c - MPI_Scatter and MPI_Scatterv, blocking, nonblocking and persistent: thin
 * entries of the staged path (coll_gpu_staged_colls.c).
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

COLL_GPU_ENTRIES_STAGED(scatter, SCATTER,
                        (COLL_GPU_P_EACH, int root), (COLL_GPU_F_EACH, .root = root),
                        (sbuf, scount, sdtype, rbuf, rcount, rdtype, root),
                        mca_coll_gpu_ptr_host_quick(sbuf) && mca_coll_gpu_ptr_host_quick(rbuf))

COLL_GPU_ENTRIES_STAGED(scatterv, SCATTERV,
                        (const void *sbuf, const int *scounts, const int *disps,
                         struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                         struct ompi_datatype_t *rdtype, int root),
                        (.sbuf = sbuf, .scounts = scounts, .sdispls = disps, .sdtype = sdtype,
                         .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root),
                        (sbuf, scounts, disps, sdtype, rbuf, rcount, rdtype, root),
                        mca_coll_gpu_ptr_host_quick(sbuf) && mca_coll_gpu_ptr_host_quick(rbuf))
