/*
 * coll_gpu_bcast.c - MPI_Bcast.
 *
 *   host buffer on this rank              -> the saved module, untouched
 *   device buffer, contiguous layout      -> the node team: push from the root (coll_gpu_nvl.c)
 *   anything else                         -> host staging: the root copies its data in, the
 *                                            others copy the result out
 * The path decision follows coll_gpu_allreduce.c (coll_gpu_uniform_buffers).  On an
 * intercommunicator every rank stages its own buffer (no team, no agreement): the root passes
 * MPI_ROOT and reads its buffer, the rest of its group passes MPI_PROC_NULL and touches nothing,
 * and the remote group receives.
 */
#include "ompi_config.h"

#include "coll_gpu.h"

static const char *const bcast_name = "bcast";

static int bcast_staged(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m)
{
    coll_gpu_dir_t dir = mca_coll_gpu_is_root(comm, root) ? COLL_GPU_READ
                         : mca_coll_gpu_is_idle(root)       ? COLL_GPU_NONE
                                                            : COLL_GPU_WRITE;
    coll_gpu_staged_t none, b;
    int rc;

    rc = mca_coll_gpu_stage_pair(m, comm, bcast_name, NULL, COLL_GPU_LAYOUT(dtype, 0),
                                 COLL_GPU_NONE, buf, COLL_GPU_LAYOUT(dtype, count), dir, &none,
                                 &b);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_bcast.fn(mca_coll_gpu_view(&b), count, dtype, root, comm, m->prev_bcast.module);
    return mca_coll_gpu_unstage_pair(m, comm, bcast_name, rc, &none, COLL_GPU_NONE, &b, dir);
}

/* The device path: the node team when the call suits it, else staging. */
static int bcast_device(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                        bool all_device)
{
    coll_gpu_team_t *team;
    topo_plan_t plan;
    ptrdiff_t lo;
    size_t len;
    bool capable;

    /* the fast path moves the bytes of a contiguous layout: [buf + lo, buf + lo + len) */
    mca_coll_gpu_span(dtype, (size_t) count, &lo, &len);
    capable = all_device && 0 < count
              && ompi_datatype_is_contiguous_memory_layout(dtype, (int32_t) count);
    team = mca_coll_gpu_select(m, comm, TOPO_COLL_BCAST, len, capable, &plan);
    mca_coll_gpu_log_plan(bcast_name, comm, len, dtype, NULL, TOPO_COLL_BCAST, team, &plan);
    if (NULL != team) {
        return mca_coll_gpu_nvl_bcast(team, &plan, (char *) buf + lo, len, root, comm);
    }
    return bcast_staged(buf, count, dtype, root, comm, m);
}

int mca_coll_gpu_bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                       struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool host, all_device;
    int rc;

    if (m->inter) {
        if (mca_coll_gpu_is_idle(root) || mca_coll_gpu_is_host(mca_coll_gpu_classify(buf))) {
            return m->prev_bcast.fn(buf, count, dtype, root, comm, m->prev_bcast.module);
        }
        mca_coll_gpu_log_call(bcast_name, comm, mca_coll_gpu_call_bytes(dtype, (size_t) count),
                              dtype, NULL, "staged (intercommunicator)");
        return bcast_staged(buf, count, dtype, root, comm, m);
    }
    if (!m->in_agreed_call && mca_coll_gpu_component.uniform_buffers) {
        if (mca_coll_gpu_is_host(mca_coll_gpu_classify(buf))) {
            return m->prev_bcast.fn(buf, count, dtype, root, comm, m->prev_bcast.module);
        }
        return bcast_device(buf, count, dtype, root, comm, m,
                            DEV_MEM_DEVICE == mca_coll_gpu_classify(buf));
    }
    if (m->in_agreed_call) {
        return m->prev_bcast.fn(buf, count, dtype, root, comm, m->prev_bcast.module);
    }
    /* mixed kinds allowed: agree first, then take the agreed path */
    m->in_agreed_call = true;
    host = mca_coll_gpu_is_host(mca_coll_gpu_classify(buf));
    rc = mca_coll_gpu_agree(m, comm, DEV_MEM_DEVICE == mca_coll_gpu_classify(buf), &all_device);
    if (OMPI_SUCCESS == rc) {
        rc = host ? m->prev_bcast.fn(buf, count, dtype, root, comm, m->prev_bcast.module)
                  : bcast_device(buf, count, dtype, root, comm, m, all_device);
    }
    m->in_agreed_call = false;
    return rc;
}
