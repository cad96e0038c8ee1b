/*
 * coll_gpu_nonblocking.c - MPI_Iallreduce and MPI_Ibcast, the nonblocking collectives with a
 * path on the GPU.
 *
 * On device buffers of a communicator with a node team they take the team's algorithms,
 * started here and completed by progress (coll_gpu_nvl_async.c), when their plan has a
 * nonblocking form.  Everything else (host buffers, which go straight to the saved module at
 * the cost of the classification, and the device buffers the team does not take) goes through
 * the staged path, as every other nonblocking collective does (coll_gpu_staged_colls.c: bounce
 * memory owned by the request, copy back at its completion).
 */
#include "ompi_config.h"

#include "coll_gpu.h"

int mca_coll_gpu_iallreduce(const void *sbuf, void *rbuf, int count,
                            struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool taken = false;
    int rc;

    /* device buffers on every rank (coll_gpu_uniform_buffers, unless the communicator's first
     * blocking allreduce or bcast found kinds mixed): the node team's algorithms, when the plan
     * has a nonblocking form (coll_gpu_nvl_async.c decides) */
    rc = mca_coll_gpu_async_allreduce(m, sbuf, rbuf, count, dtype, op, comm, false, request,
                                      &taken);
    if (taken || OMPI_SUCCESS != rc) {
        return rc;
    }
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(m, ALLREDUCE, NONBLOCKING, iallreduce), .sbuf = sbuf, .rbuf = rbuf,
        COLL_GPU_ONE_TYPE(dtype, count), .op = op, .comm = comm, .request = request});
}

int mca_coll_gpu_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, ompi_request_t **request,
                        mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t dir = mca_coll_gpu_is_root(comm, root) ? COLL_GPU_READ
                         : mca_coll_gpu_is_idle(root)       ? COLL_GPU_NONE
                                                            : COLL_GPU_WRITE;
    bool taken = false;
    /* the kind of the memory the elements occupy, not of buf (as MPI_Bcast) */
    bool host = COLL_GPU_NONE == dir || mca_coll_gpu_data_host(buf, dtype, count);
    int rc;

    /* the node team's algorithms once a blocking allreduce, bcast or reduce had
     * device memory on every rank, whatever this rank's kind (mca_coll_gpu_nb_team_path;
     * coll_gpu_nvl_async.c decides the plan); else host memory to the saved module at once */
    if (mca_coll_gpu_nb_team_path(m, !host)) {
        rc = mca_coll_gpu_async_bcast(m, buf, count, dtype, root, comm, false, request, &taken);
        if (taken || OMPI_SUCCESS != rc) {
            return rc;
        }
    }
    if (host) {
        return m->prev_ibcast.fn(buf, count, dtype, root, comm, request, m->prev_ibcast.module);
    }
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(m, BCAST, NONBLOCKING, ibcast), .rbuf = buf,
        COLL_GPU_ONE_TYPE(dtype, count), .root = root, .comm = comm, .request = request});
}
