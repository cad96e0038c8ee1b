/*
 * coll_gpu_neighbor.c - the neighborhood collectives on device buffers: MPI_Neighbor_allgather(v)
 * and MPI_Neighbor_alltoall(v,w), blocking, nonblocking and persistent: thin entries of the
 * staged path (coll_gpu_staged_colls.c).
 *
 * Host buffers go straight to the saved module (coll/basic, libnbc in 4.1).  Device and managed
 * buffers are staged like the all-to-all ones, with the communicator's topology deciding the
 * number of blocks instead of its size: a rank receives one block from each of its indegree
 * sources and sends to each of its outdegree destinations (allgather: the same block to all).
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

#include "coll_gpu.h"

COLL_GPU_ENTRIES_STAGED(neighbor_allgather, NEIGHBOR_ALLGATHER,
                        (COLL_GPU_P_EACH), (COLL_GPU_F_EACH),
                        (sbuf, scount, sdtype, rbuf, rcount, rdtype),
                        mca_coll_gpu_ptr_host_quick(sbuf) && mca_coll_gpu_ptr_host_quick(rbuf))

COLL_GPU_ENTRIES_STAGED(neighbor_allgatherv, NEIGHBOR_ALLGATHERV,
                        (const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                         void *rbuf, const int *rcounts, const int *disps,
                         struct ompi_datatype_t *rdtype),
                        (.sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf,
                         .rcounts = rcounts, .rdispls = disps, .rdtype = rdtype),
                        (sbuf, scount, sdtype, rbuf, rcounts, disps, rdtype),
                        mca_coll_gpu_ptr_host_quick(sbuf) && mca_coll_gpu_ptr_host_quick(rbuf))

COLL_GPU_ENTRIES_STAGED(neighbor_alltoall, NEIGHBOR_ALLTOALL, (COLL_GPU_P_EACH), (COLL_GPU_F_EACH),
                        (sbuf, scount, sdtype, rbuf, rcount, rdtype),
                        mca_coll_gpu_ptr_host_quick(sbuf) && mca_coll_gpu_ptr_host_quick(rbuf))

COLL_GPU_ENTRIES_STAGED(neighbor_alltoallv, NEIGHBOR_ALLTOALLV,
                        (const void *sbuf, const int *scounts, const int *sdisps,
                         struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                         const int *rdisps, struct ompi_datatype_t *rdtype),
                        (.sbuf = sbuf, .scounts = scounts, .sdispls = sdisps, .sdtype = sdtype,
                         .rbuf = rbuf, .rcounts = rcounts, .rdispls = rdisps, .rdtype = rdtype),
                        (sbuf, scounts, sdisps, sdtype, rbuf, rcounts, rdisps, rdtype),
                        mca_coll_gpu_ptr_host_quick(sbuf) && mca_coll_gpu_ptr_host_quick(rbuf))

COLL_GPU_ENTRIES_STAGED(neighbor_alltoallw, NEIGHBOR_ALLTOALLW,
                        (const void *sbuf, const int *scounts, const MPI_Aint *sdisps,
                         struct ompi_datatype_t *const *sdtypes, void *rbuf, const int *rcounts,
                         const MPI_Aint *rdisps, struct ompi_datatype_t *const *rdtypes),
                        (.sbuf = sbuf, .scounts = scounts, .sadispls = sdisps, .sdtypes = sdtypes,
                         .rbuf = rbuf, .rcounts = rcounts, .radispls = rdisps, .rdtypes = rdtypes),
                        (sbuf, scounts, sdisps, sdtypes, rbuf, rcounts, rdisps, rdtypes),
                        mca_coll_gpu_ptr_host_quick(sbuf) && mca_coll_gpu_ptr_host_quick(rbuf))
