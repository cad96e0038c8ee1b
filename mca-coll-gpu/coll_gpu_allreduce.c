/*
 * coll_gpu_allreduce.c - MPI_Allreduce.
 *
 * Host buffers on this rank go to the saved module untouched.  Device (or managed) buffers go
 * through host staging; the NVLink fast path plugs in here when the team supports the call.
 */
#include "ompi_config.h"

#include "coll_gpu.h"

int mca_coll_gpu_allreduce(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;

    if (mca_coll_gpu_both_host(sbuf, rbuf)) {
        return m->prev_allreduce.fn(sbuf, rbuf, count, dtype, op, comm, m->prev_allreduce.module);
    }
    return mca_coll_gpu_reduce_like_staged("allreduce", m->prev_allreduce.fn,
                                           m->prev_allreduce.module, sbuf, rbuf, count, dtype, op,
                                           comm, m);
}
