/*
 * coll_gpu_allreduce.c - MPI_Allreduce.
 *
 *   host buffers on this rank          -> the saved module, untouched (the hot path)
 *   device buffers, GPU-capable call   -> the node team: one-shot, two-shot or ring
 *                                         (coll_gpu_engine.c); on a communicator across nodes,
 *                                         the node teams and UCX between them (coll_gpu_hier.c)
 *   anything else                      -> host staging (coll_gpu_stage.c)
 *
 * "Every rank takes the same path": the decision uses only what all ranks share (count, the
 * type's signature, op, communicator, parameters, the team) and what the ranks of this call
 * agreed on their buffers' kinds (coll_gpu_kinds.c): a rank with host memory goes to the saved
 * module at once, after a note of its kind in a block it shares with its peers; a rank with
 * device memory reads its peers' notes of this call and takes the GPU path only where every
 * rank passes device memory.  Device and managed memory, dense or not, take the same path;
 * each rank adapts its own buffers to it (coll_gpu_adapt.c).
 */
#include "ompi_config.h"

#include <string.h>

#include "coll_gpu.h"

static const char *const allreduce_name = "allreduce";

/* Staging (coll_gpu_staged_colls.c), once the caller has classified and logged the call. */
static int allreduce_staged(const void *sbuf, void *rbuf, int count,
                            struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                            struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(m, ALLREDUCE, BLOCKING, allreduce), .decided = true, .sbuf = sbuf,
        .rbuf = rbuf, COLL_GPU_ONE_TYPE(dtype, count), .op = op, .comm = comm});
}

/*
 * The device path: the node team when every rank is on it (all_device: uniform kinds assumed,
 * or agreed), the kernels take the signature and op, and the communicator has a team; else
 * staging.  The element type comes from the datatype's signature, not its handle or layout
 * (MPI_INT here and a dup of it, or a contiguous type of ints, on another rank are one call);
 * a rank whose buffers the team cannot use in place (gaps, managed or host memory, memory the
 * team cannot export) goes through device temporaries (coll_gpu_adapt.c).
 */
int mca_coll_gpu_allreduce_device(const void *sbuf, void *rbuf, int count,
                                  struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                  struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                                  bool all_device, int prior_rc)
{
    size_t bytes = mca_coll_gpu_call_bytes(dtype, (size_t) count);
    bool in_place = (MPI_IN_PLACE == sbuf);
    const char *not_capable = "memory kind: host memory on some rank";
    coll_gpu_team_t *team;
    topo_plan_t plan;
    size_t nelems = 0;
    dev_dtype_t dt = DEV_T_UINT8;
    dev_op_t dop = DEV_OP_SUM;
    int rc;

    if (all_device) {
        not_capable = mca_coll_gpu_map_reduction(dtype, (size_t) count, op, &dt, &dop, &nelems);
    }
    /* a communicator across nodes: the node team inside each node, UCX between them */
    if (NULL == not_capable && 0 < nelems
        && mca_coll_gpu_hier_usable(m, comm, TOPO_COLL_ALLREDUCE)) {
        return mca_coll_gpu_hier_allreduce(m, comm, sbuf, rbuf, count, dtype, op, dt, dop,
                                           nelems, OMPI_SUCCESS);
    }
    team = mca_coll_gpu_select(m, comm, TOPO_COLL_ALLREDUCE, bytes, not_capable, &plan);
    if (NULL != team) {
        mca_coll_gpu_plan_for_call(&plan, in_place, dt);
    }
    mca_coll_gpu_log_plan(allreduce_name, comm, bytes, dtype, op, TOPO_COLL_ALLREDUCE, team,
                          &plan);
    if (NULL == team) {
        rc = allreduce_staged(sbuf, rbuf, count, dtype, op, comm, m);
        return (OMPI_SUCCESS != prior_rc) ? prior_rc : rc;
    }
    rc = mca_coll_gpu_team_allreduce(team, m, comm, &plan, sbuf, rbuf, count, dtype, nelems, dt,
                                     dop, prior_rc);
    return (OMPI_SUCCESS != prior_rc) ? prior_rc : rc;
}

int mca_coll_gpu_entry_agree(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                             const char *what, int coll, bool host, struct ompi_datatype_t *dtype,
                             size_t count, struct ompi_op_t *op, int root, bool *all_device)
{
    coll_gpu_kinds_call_t call;

    *all_device = false;
    /* nothing to agree on an intercommunicator (no team spans its groups) or inside an
     * agreement (the saved module's own calls on our communicator, on host memory); the hot
     * path: a note, no wait, before anything else */
    if (m->inter || m->in_agreed_call || mca_coll_gpu_host_noted(m, host)) {
        return OMPI_SUCCESS;
    }
    call = (coll_gpu_kinds_call_t){.coll = coll,
                                   .device = !host,
                                   .bytes = mca_coll_gpu_call_bytes(dtype, count),
                                   .op = op,
                                   .root = root};
    /* (a host rank's too: under the promise of device memory, or across hosts, its details
     * are compared with its peers' as a device rank's, and must name the same element type) */
    if (NULL != op) {
        mca_coll_gpu_kinds_reduction(&call, dtype, count, op);
    }
    return mca_coll_gpu_kinds_agree(m, comm, what, &call, all_device);
}

/* The entry past its hot path: an intercommunicator's device rank, the agreement, then the
 * component below or the device path. */
static __attribute__((noinline)) int allreduce_agreed(const void *sbuf, void *rbuf, int count,
                                                      struct ompi_datatype_t *dtype,
                                                      struct ompi_op_t *op,
                                                      struct ompi_communicator_t *comm,
                                                      mca_coll_gpu_module_t *m, bool host)
{
    bool all_device;
    int rc;

    /* an intercommunicator: every rank stages its own buffers (no team spans the two groups,
     * and staging needs no agreement) */
    if (m->inter && !host) {
        mca_coll_gpu_log_call(allreduce_name, comm,
                              mca_coll_gpu_call_bytes(dtype, (size_t) count), dtype, op,
                              "staged (intercommunicator)");
        return allreduce_staged(sbuf, rbuf, count, dtype, op, comm, m);
    }
    rc = mca_coll_gpu_entry_agree(m, comm, allreduce_name, TOPO_COLL_ALLREDUCE, host, dtype,
                                  (size_t) count, op, 0, &all_device);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    /* a host rank goes below unless the agreement put every rank on the device path (a
     * communicator's device promise): then through a device temporary (coll_gpu_adapt.c) */
    if (host && !all_device) {
        return m->prev_allreduce.fn(sbuf, rbuf, count, dtype, op, comm, m->prev_allreduce.module);
    }
    return mca_coll_gpu_allreduce_device(sbuf, rbuf, count, dtype, op, comm, m, all_device,
                                         OMPI_SUCCESS);
}

/* The entry past what the hot path knows without a call: the full classification of the
 * buffers (a page the cache does not hold, gaps, deferred calls to settle first). */
static __attribute__((noinline)) int allreduce_classified(const void *sbuf, void *rbuf,
                                                          int count,
                                                          struct ompi_datatype_t *dtype,
                                                          struct ompi_op_t *op,
                                                          struct ompi_communicator_t *comm,
                                                          mca_coll_gpu_module_t *m)
{
    /* the kind of the memory the elements occupy, not of the pointers (which may lie outside);
     * a rank with a device block anywhere in a buffer is a device rank */
    bool host = mca_coll_gpu_data_host(sbuf, dtype, count)
                && mca_coll_gpu_data_host(rbuf, dtype, count);

    if (mca_coll_gpu_host_pass(m, host)) {
        return m->prev_allreduce.fn(sbuf, rbuf, count, dtype, op, comm, m->prev_allreduce.module);
    }
    return allreduce_agreed(sbuf, rbuf, count, dtype, op, comm, m, host);
}

int mca_coll_gpu_allreduce(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;

    /* the hot path: host memory by the cache, a note, one jump below (no frame of its own) */
    if (mca_coll_gpu_data_host_quick(sbuf, dtype, count)
        && mca_coll_gpu_data_host_quick(rbuf, dtype, count) && mca_coll_gpu_host_pass_quick(m)) {
        return m->prev_allreduce.fn(sbuf, rbuf, count, dtype, op, comm, m->prev_allreduce.module);
    }
    return allreduce_classified(sbuf, rbuf, count, dtype, op, comm, m);
}
