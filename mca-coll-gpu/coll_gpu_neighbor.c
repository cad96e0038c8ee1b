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
#include "coll_gpu_persistent.h"

int mca_coll_gpu_neighbor_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                    void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                    struct ompi_communicator_t *comm,
                                    mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLGATHER, BLOCKING, neighbor_allgather), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype,
        .comm = comm});
}

int mca_coll_gpu_ineighbor_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                     void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                     struct ompi_communicator_t *comm, ompi_request_t **request,
                                     mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLGATHER, NONBLOCKING, ineighbor_allgather), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype,
        .comm = comm, .request = request});
}

int mca_coll_gpu_neighbor_allgather_init(const void *sbuf, int scount,
                                         struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                         struct ompi_datatype_t *rdtype,
                                         struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLGATHER, PERSISTENT, neighbor_allgather_init),
        .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,
        .rdtype = rdtype, .comm = comm, .info = info, .request = request});
}

int mca_coll_gpu_neighbor_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                     void *rbuf, const int *rcounts, const int *disps,
                                     struct ompi_datatype_t *rdtype,
                                     struct ompi_communicator_t *comm,
                                     mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLGATHERV, BLOCKING, neighbor_allgatherv), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps,
        .rdtype = rdtype, .comm = comm});
}

int mca_coll_gpu_ineighbor_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                      void *rbuf, const int *rcounts, const int *disps,
                                      struct ompi_datatype_t *rdtype,
                                      struct ompi_communicator_t *comm, ompi_request_t **request,
                                      mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLGATHERV, NONBLOCKING, ineighbor_allgatherv),
        .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts,
        .rdispls = disps, .rdtype = rdtype, .comm = comm, .request = request});
}

int mca_coll_gpu_neighbor_allgatherv_init(
    const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
    const int *disps, struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
    struct ompi_info_t *info, ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLGATHERV, PERSISTENT, neighbor_allgatherv_init),
        .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts,
        .rdispls = disps, .rdtype = rdtype, .comm = comm, .info = info, .request = request});
}

int mca_coll_gpu_neighbor_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                   void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                   struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLTOALL, BLOCKING, neighbor_alltoall), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype,
        .comm = comm});
}

int mca_coll_gpu_ineighbor_alltoall(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                    void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                    struct ompi_communicator_t *comm, ompi_request_t **request,
                                    mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLTOALL, NONBLOCKING, ineighbor_alltoall), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype,
        .comm = comm, .request = request});
}

int mca_coll_gpu_neighbor_alltoall_init(const void *sbuf, int scount,
                                        struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                        struct ompi_datatype_t *rdtype,
                                        struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                        ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLTOALL, PERSISTENT, neighbor_alltoall_init),
        .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,
        .rdtype = rdtype, .comm = comm, .info = info, .request = request});
}

int mca_coll_gpu_neighbor_alltoallv(const void *sbuf, const int *scounts, const int *sdisps,
                                    struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                                    const int *rdisps, struct ompi_datatype_t *rdtype,
                                    struct ompi_communicator_t *comm,
                                    mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLTOALLV, BLOCKING, neighbor_alltoallv), .sbuf = sbuf,
        .scounts = scounts, .sdispls = sdisps, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts,
        .rdispls = rdisps, .rdtype = rdtype, .comm = comm});
}

int mca_coll_gpu_ineighbor_alltoallv(const void *sbuf, const int *scounts, const int *sdisps,
                                     struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                                     const int *rdisps, struct ompi_datatype_t *rdtype,
                                     struct ompi_communicator_t *comm, ompi_request_t **request,
                                     mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLTOALLV, NONBLOCKING, ineighbor_alltoallv), .sbuf = sbuf,
        .scounts = scounts, .sdispls = sdisps, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts,
        .rdispls = rdisps, .rdtype = rdtype, .comm = comm, .request = request});
}

int mca_coll_gpu_neighbor_alltoallv_init(const void *sbuf, const int *scounts, const int *sdisps,
                                         struct ompi_datatype_t *sdtype, void *rbuf,
                                         const int *rcounts, const int *rdisps,
                                         struct ompi_datatype_t *rdtype,
                                         struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLTOALLV, PERSISTENT, neighbor_alltoallv_init),
        .sbuf = sbuf, .scounts = scounts, .sdispls = sdisps, .sdtype = sdtype, .rbuf = rbuf,
        .rcounts = rcounts, .rdispls = rdisps, .rdtype = rdtype, .comm = comm, .info = info,
        .request = request});
}

int mca_coll_gpu_neighbor_alltoallw(const void *sbuf, const int *scounts, const MPI_Aint *sdisps,
                                    struct ompi_datatype_t *const *sdtypes, void *rbuf,
                                    const int *rcounts, const MPI_Aint *rdisps,
                                    struct ompi_datatype_t *const *rdtypes,
                                    struct ompi_communicator_t *comm,
                                    mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLTOALLW, BLOCKING, neighbor_alltoallw), .sbuf = sbuf,
        .scounts = scounts, .sadispls = sdisps, .sdtypes = sdtypes, .rbuf = rbuf,
        .rcounts = rcounts, .radispls = rdisps, .rdtypes = rdtypes, .comm = comm});
}

int mca_coll_gpu_ineighbor_alltoallw(const void *sbuf, const int *scounts, const MPI_Aint *sdisps,
                                     struct ompi_datatype_t *const *sdtypes, void *rbuf,
                                     const int *rcounts, const MPI_Aint *rdisps,
                                     struct ompi_datatype_t *const *rdtypes,
                                     struct ompi_communicator_t *comm, ompi_request_t **request,
                                     mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLTOALLW, NONBLOCKING, ineighbor_alltoallw), .sbuf = sbuf,
        .scounts = scounts, .sadispls = sdisps, .sdtypes = sdtypes, .rbuf = rbuf,
        .rcounts = rcounts, .radispls = rdisps, .rdtypes = rdtypes, .comm = comm,
        .request = request});
}

int mca_coll_gpu_neighbor_alltoallw_init(const void *sbuf, const int *scounts,
                                         const MPI_Aint *sdisps,
                                         struct ompi_datatype_t *const *sdtypes, void *rbuf,
                                         const int *rcounts, const MPI_Aint *rdisps,
                                         struct ompi_datatype_t *const *rdtypes,
                                         struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, NEIGHBOR_ALLTOALLW, PERSISTENT, neighbor_alltoallw_init),
        .sbuf = sbuf, .scounts = scounts, .sadispls = sdisps, .sdtypes = sdtypes, .rbuf = rbuf,
        .rcounts = rcounts, .radispls = rdisps, .rdtypes = rdtypes, .comm = comm, .info = info,
        .request = request});
}
