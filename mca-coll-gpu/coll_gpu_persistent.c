/*
 * coll_gpu_persistent.c - MPI_Allreduce_init and MPI_Bcast_init, the persistent collectives
 * with a path on the GPU (Open MPI 5.0's MPI-4 calls; 4.1's MPIX_ ones).
 *
 * On device buffers they take the node team's path of MPI_Iallreduce and MPI_Ibcast when that
 * path takes the call (the same decision, made once at init from what is equal on every rank:
 * coll_gpu_uniform_buffers, count, signature, op, the team's plan; coll_gpu_nvl_async.c): the
 * request is then that path's own, and each MPI_Start queues one call on the team.
 * Everything else (no team, host or mixed buffers without coll_gpu_uniform_buffers, types or
 * ops the team cannot take, a plan without a nonblocking form, forced staging) takes the
 * staged path, as every other persistent collective does (coll_gpu_staged_colls.c: bounce
 * memory owned by the request, copied in at every MPI_Start, back at each completion).
 */
#include "ompi_config.h"

#include "coll_gpu.h"
#include "coll_gpu_persistent.h"

int mca_coll_gpu_allreduce_init(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool taken = false;
    int rc;

    /* the nonblocking call's decision and algorithms (coll_gpu_nvl_async.c): each MPI_Start
     * runs one MPI_Iallreduce's worth on the team */
    rc = mca_coll_gpu_async_allreduce(m, sbuf, rbuf, count, dtype, op, comm, true, request,
                                      &taken);
    if (taken || OMPI_SUCCESS != rc) {
        return rc;
    }
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(m, ALLREDUCE, PERSISTENT, allreduce_init), .sbuf = sbuf, .rbuf = rbuf,
        COLL_GPU_ONE_TYPE(dtype, count), .op = op, .comm = comm, .info = info,
        .request = request});
}

int mca_coll_gpu_bcast_init(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                            struct ompi_communicator_t *comm, struct ompi_info_t *info,
                            ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t dir = mca_coll_gpu_is_root(comm, root) ? COLL_GPU_READ
                         : mca_coll_gpu_is_idle(root)       ? COLL_GPU_NONE
                                                            : COLL_GPU_WRITE;
    bool taken = false;
    /* the kind of the memory the elements occupy, not of buf (as MPI_Bcast, MPI_Ibcast) */
    bool host = COLL_GPU_NONE == dir || mca_coll_gpu_data_host(buf, dtype, count);
    int rc;

    /* the nonblocking call's decision and algorithms (MPI_Ibcast) */
    if (mca_coll_gpu_nb_team_path(m, !host)) {
        rc = mca_coll_gpu_async_bcast(m, buf, count, dtype, root, comm, true, request, &taken);
        if (taken || OMPI_SUCCESS != rc) {
            return rc;
        }
    }
    if (host) {
        return m->prev_bcast_init.fn(buf, count, dtype, root, comm, info, request,
                                     m->prev_bcast_init.module);
    }
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(m, BCAST, PERSISTENT, bcast_init), .rbuf = buf,
        COLL_GPU_ONE_TYPE(dtype, count), .root = root, .comm = comm, .info = info,
        .request = request});
}
