/*
 * coll_gpu_allreduce.c - MPI_Allreduce.
 *
 *   host buffers on this rank          -> the saved module, untouched (the hot path)
 *   device buffers, GPU-capable call   -> the node team: one-shot or two-shot (coll_gpu_nvl.c)
 *   anything else                      -> host staging (coll_gpu_stage.c)
 *
 * "Every rank takes the same path": the decision uses only what all ranks share (count, type,
 * op, communicator, parameters, the team) and the buffers' kind.  With the default
 * coll_gpu_uniform_buffers=true the kind is assumed the same on all ranks of a call, as NCCL
 * requires; with false, one host allreduce agrees on it first, so that programs mixing host and
 * device buffers across ranks in one call are served correctly at that price.
 */
#include "ompi_config.h"

#include "coll_gpu.h"

static const char *const allreduce_name = "allreduce";

/* The device path: the node team when every rank's buffers are device memory (all_device) and
 * the call suits it, else staging. */
static int allreduce_device(const void *sbuf, void *rbuf, int count,
                            struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                            struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                            bool all_device)
{
    size_t bytes = mca_coll_gpu_call_bytes(dtype, (size_t) count);
    coll_gpu_team_t *team;
    topo_plan_t plan;
    dev_dtype_t dt;
    dev_op_t dop;
    bool capable;

    capable = all_device && mca_coll_gpu_map_type(dtype, &dt) && mca_coll_gpu_map_op(op, &dop)
              && dev_op_valid(dop, dt);
    team = mca_coll_gpu_select(m, comm, TOPO_COLL_ALLREDUCE, bytes, capable, &plan);
    mca_coll_gpu_log_plan(allreduce_name, comm, bytes, dtype, op, TOPO_COLL_ALLREDUCE, team,
                          &plan);
    if (NULL != team) {
        return mca_coll_gpu_nvl_allreduce(team, &plan, sbuf, rbuf, (size_t) count, dt, dop,
                                          comm);
    }
    return mca_coll_gpu_reduce_like_staged(allreduce_name, m->prev_allreduce.fn,
                                           m->prev_allreduce.module, sbuf, rbuf, count, dtype, op,
                                           comm, m);
}

int mca_coll_gpu_allreduce(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool host, all_device;
    int rc;

    /* an intercommunicator: every rank stages its own buffers (no team spans the two groups,
     * and staging needs no agreement) */
    if (m->inter) {
        if (mca_coll_gpu_both_host(sbuf, rbuf)) {
            return m->prev_allreduce.fn(sbuf, rbuf, count, dtype, op, comm,
                                        m->prev_allreduce.module);
        }
        mca_coll_gpu_log_call(allreduce_name, comm,
                              mca_coll_gpu_call_bytes(dtype, (size_t) count), dtype, op,
                              "staged (intercommunicator)");
        return mca_coll_gpu_reduce_like_staged(allreduce_name, m->prev_allreduce.fn,
                                               m->prev_allreduce.module, sbuf, rbuf, count,
                                               dtype, op, comm, m);
    }
    if (!m->in_agreed_call && mca_coll_gpu_component.uniform_buffers) {
        if (mca_coll_gpu_both_host(sbuf, rbuf)) {
            return m->prev_allreduce.fn(sbuf, rbuf, count, dtype, op, comm,
                                        m->prev_allreduce.module);
        }
        return allreduce_device(sbuf, rbuf, count, dtype, op, comm, m,
                                mca_coll_gpu_both_device(sbuf, rbuf));
    }
    if (m->in_agreed_call) {
        return m->prev_allreduce.fn(sbuf, rbuf, count, dtype, op, comm, m->prev_allreduce.module);
    }
    /* mixed kinds allowed: agree first, then take the agreed path */
    m->in_agreed_call = true;
    host = mca_coll_gpu_both_host(sbuf, rbuf);
    rc = mca_coll_gpu_agree(m, comm, mca_coll_gpu_both_device(sbuf, rbuf), &all_device);
    if (OMPI_SUCCESS == rc) {
        rc = host ? m->prev_allreduce.fn(sbuf, rbuf, count, dtype, op, comm,
                                         m->prev_allreduce.module)
                  : allreduce_device(sbuf, rbuf, count, dtype, op, comm, m, all_device);
    }
    m->in_agreed_call = false;
    return rc;
}
