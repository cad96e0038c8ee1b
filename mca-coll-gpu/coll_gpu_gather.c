/*
 * coll_gpu_gather.c - MPI_Gather, MPI_Gatherv, MPI_Allgather, MPI_Allgatherv, blocking,
 * nonblocking (MPI_I...) and persistent (..._init): thin entries of the staged path
 * (coll_gpu_staged_colls.c), but the blocking MPI_Allgather and MPI_Allgatherv, which run on
 * device memory as an exchange on the node team (coll_gpu_exchange.c).
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
#include "coll_gpu_persistent.h"

int mca_coll_gpu_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                        int rcount, struct ompi_datatype_t *rdtype, int root,
                        struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(
        &(coll_gpu_staged_call_t){COLL_GPU_STAGED(module, GATHER, BLOCKING, gather), .sbuf = sbuf,
                                  .scount = scount, .sdtype = sdtype, .rbuf = rbuf,
                                  .rcount = rcount, .rdtype = rdtype, .root = root, .comm = comm});
}

int mca_coll_gpu_igather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, GATHER, NONBLOCKING, igather), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
        .comm = comm, .request = request});
}

int mca_coll_gpu_gather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                             struct ompi_communicator_t *comm, struct ompi_info_t *info,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, GATHER, PERSISTENT, gather_init), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
        .comm = comm, .info = info, .request = request});
}

int mca_coll_gpu_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                         const int *rcounts, const int *disps, struct ompi_datatype_t *rdtype,
                         int root, struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, GATHERV, BLOCKING, gatherv), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps, .rdtype = rdtype,
        .root = root, .comm = comm});
}

int mca_coll_gpu_igatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                          const int *rcounts, const int *disps, struct ompi_datatype_t *rdtype,
                          int root, struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, GATHERV, NONBLOCKING, igatherv), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps, .rdtype = rdtype,
        .root = root, .comm = comm, .request = request});
}

int mca_coll_gpu_gatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, const int *rcounts, const int *disps,
                              struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, GATHERV, PERSISTENT, gatherv_init), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps, .rdtype = rdtype,
        .root = root, .comm = comm, .info = info, .request = request});
}

int mca_coll_gpu_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHER, BLOCKING, allgather), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .comm = comm});
}

int mca_coll_gpu_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHER, NONBLOCKING, iallgather), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .comm = comm,
        .request = request});
}

int mca_coll_gpu_allgather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHER, PERSISTENT, allgather_init), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype,
        .comm = comm, .info = info, .request = request});
}

int mca_coll_gpu_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, const int *rcounts, const int *disps,
                            struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                            mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHERV, BLOCKING, allgatherv), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps, .rdtype = rdtype,
        .comm = comm});
}

int mca_coll_gpu_iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, const int *rcounts, const int *disps,
                             struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHERV, NONBLOCKING, iallgatherv), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps,
        .rdtype = rdtype, .comm = comm, .request = request});
}

int mca_coll_gpu_allgatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                 void *rbuf, const int *rcounts, const int *disps,
                                 struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                                 struct ompi_info_t *info, ompi_request_t **request,
                                 mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHERV, PERSISTENT, allgatherv_init), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps,
        .rdtype = rdtype, .comm = comm, .info = info, .request = request});
}
