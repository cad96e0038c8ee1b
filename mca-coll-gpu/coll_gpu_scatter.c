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
#include "coll_gpu_persistent.h"

int mca_coll_gpu_scatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(
        &(coll_gpu_staged_call_t){COLL_GPU_STAGED(module, SCATTER, BLOCKING, scatter), .sbuf = sbuf,
                                  .scount = scount, .sdtype = sdtype, .rbuf = rbuf,
                                  .rcount = rcount, .rdtype = rdtype, .root = root, .comm = comm});
}

int mca_coll_gpu_iscatter(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                          int rcount, struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, SCATTER, NONBLOCKING, iscatter), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
        .comm = comm, .request = request});
}

int mca_coll_gpu_scatter_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, SCATTER, PERSISTENT, scatter_init), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
        .comm = comm, .info = info, .request = request});
}

int mca_coll_gpu_scatterv(const void *sbuf, const int *scounts, const int *disps,
                          struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                          struct ompi_datatype_t *rdtype, int root,
                          struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, SCATTERV, BLOCKING, scatterv), .sbuf = sbuf, .scounts = scounts,
        .sdispls = disps, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype,
        .root = root, .comm = comm});
}

int mca_coll_gpu_iscatterv(const void *sbuf, const int *scounts, const int *disps,
                           struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                           struct ompi_datatype_t *rdtype, int root,
                           struct ompi_communicator_t *comm, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, SCATTERV, NONBLOCKING, iscatterv), .sbuf = sbuf, .scounts = scounts,
        .sdispls = disps, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype,
        .root = root, .comm = comm, .request = request});
}

int mca_coll_gpu_scatterv_init(const void *sbuf, const int *scounts, const int *disps,
                               struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                               struct ompi_datatype_t *rdtype, int root,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, SCATTERV, PERSISTENT, scatterv_init), .sbuf = sbuf,
        .scounts = scounts, .sdispls = disps, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,
        .rdtype = rdtype, .root = root, .comm = comm, .info = info, .request = request});
}
