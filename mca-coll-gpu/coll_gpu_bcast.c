/*
 * coll_gpu_bcast.c - MPI_Bcast.
 *
 *   host buffer on this rank              -> the saved module, untouched
 *   device (or managed) buffer, a team    -> the node team: push, chain or tree from the root
 *                                            (coll_gpu_engine.c); a rank whose layout has gaps, or
 *                                            whose memory the team cannot map, packs into a
 *                                            device temporary first (coll_gpu_adapt.c); on a
 *                                            communicator across nodes, the node teams and
 *                                            UCX between them (coll_gpu_hier.c)
 *   anything else                         -> host staging: the root copies its data in, the
 *                                            others copy the result out
 * The path is agreed per call as for MPI_Allreduce (coll_gpu_kinds.c).  On an
 * intercommunicator every rank stages its own buffer (no team, no agreement): the root passes
 * MPI_ROOT and reads its buffer, the rest of its group passes MPI_PROC_NULL and touches nothing,
 * and the remote group receives.  Ranks may pass different datatypes of one type signature (MPI
 * allows it): the decision never looks at the layout.
 */
#include "ompi_config.h"

#include <string.h>

#include "coll_gpu.h"

static const char *const bcast_name = "bcast";

/* Staging (coll_gpu_staged_colls.c), once the caller has classified and logged the call. */
static int bcast_staged(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(m, BCAST, BLOCKING, bcast), .decided = true, .rbuf = buf,
        COLL_GPU_ONE_TYPE(dtype, count), .root = root, .comm = comm});
}

/*
 * The device path: the node team when every rank is on it (all_device: uniform kinds assumed,
 * or agreed) and the communicator has one, else staging.  The choice uses nothing a rank may
 * hold differently from another: not the layout (ranks may pass different datatypes of one
 * signature), not the byte count (different on the ranks of an erroneous call, which must
 * fail, not hang: the team path compares it with the root's, coll_gpu_engine.c).  The byte count
 * only picks the algorithm, and the root's pick is the one every rank runs.  A rank whose buffer
 * the team cannot use in place goes through a device temporary (coll_gpu_adapt.c).
 */
static int bcast_device(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                        bool all_device)
{
    size_t bytes = mca_coll_gpu_call_bytes(dtype, (size_t) count);
    coll_gpu_team_t *team;
    topo_plan_t plan;

    /* a communicator across nodes: the node team inside each node, UCX between them */
    if (all_device && mca_coll_gpu_hier_usable(m, comm, TOPO_COLL_BCAST)) {
        return mca_coll_gpu_hier_bcast(m, comm, buf, count, dtype, root);
    }
    team = mca_coll_gpu_select(m, comm, TOPO_COLL_BCAST, bytes,
                               all_device ? NULL : "memory kind: host memory on some rank",
                               &plan);
    mca_coll_gpu_log_plan(bcast_name, comm, bytes, dtype, NULL, TOPO_COLL_BCAST, team, &plan);
    if (NULL == team) {
        return bcast_staged(buf, count, dtype, root, comm, m);
    }
    /* a rank that cannot prepare its buffer still takes part (its peers fail, not wait) */
    return mca_coll_gpu_team_bcast(team, m, comm, &plan, buf, count, dtype, root, OMPI_SUCCESS,
                                   mca_coll_gpu_kinds_compared(m));
}

/* The entry past its hot path (as allreduce_agreed). */
static __attribute__((noinline)) int bcast_agreed(void *buf, int count,
                                                  struct ompi_datatype_t *dtype, int root,
                                                  struct ompi_communicator_t *comm,
                                                  mca_coll_gpu_module_t *m, bool host)
{
    bool all_device;
    int rc;

    if (m->inter && !host) {
        mca_coll_gpu_log_call(bcast_name, comm, mca_coll_gpu_call_bytes(dtype, (size_t) count),
                              dtype, NULL, "staged (intercommunicator)");
        return bcast_staged(buf, count, dtype, root, comm, m);
    }
    rc = mca_coll_gpu_entry_agree(m, comm, bcast_name, TOPO_COLL_BCAST, host, dtype,
                                  (size_t) count, NULL, root, &all_device);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    /* a host rank goes below unless the agreement put every rank on the device path */
    if (host && !all_device) {
        return m->prev_bcast.fn(buf, count, dtype, root, comm, m->prev_bcast.module);
    }
    return bcast_device(buf, count, dtype, root, comm, m, all_device);
}

/* The entry past what the hot path knows without a call (as allreduce_classified). */
static __attribute__((noinline)) int bcast_classified(void *buf, int count,
                                                      struct ompi_datatype_t *dtype, int root,
                                                      struct ompi_communicator_t *comm,
                                                      mca_coll_gpu_module_t *m)
{
    /* the kind of the memory the elements occupy, not of buf (which may lie outside it); a
     * device block anywhere makes this a device rank */
    bool host = (m->inter && mca_coll_gpu_is_idle(root))
                || mca_coll_gpu_data_host(buf, dtype, count);

    if (mca_coll_gpu_host_pass(m, host)) {
        return m->prev_bcast.fn(buf, count, dtype, root, comm, m->prev_bcast.module);
    }
    return bcast_agreed(buf, count, dtype, root, comm, m, host);
}

int mca_coll_gpu_bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                       struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;

    /* the hot path (as in mca_coll_gpu_allreduce) */
    if (mca_coll_gpu_data_host_quick(buf, dtype, count) && mca_coll_gpu_host_pass_quick(m)) {
        return m->prev_bcast.fn(buf, count, dtype, root, comm, m->prev_bcast.module);
    }
    return bcast_classified(buf, count, dtype, root, comm, m);
}
