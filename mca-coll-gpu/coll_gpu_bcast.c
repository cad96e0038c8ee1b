/*
 * coll_gpu_bcast.c - MPI_Bcast.
 *
 * Host buffers go to the saved module; device buffers are staged (the root copies its data in,
 * the others copy the result out).  The NVLink push/chain paths plug in here.
 */
#include "ompi_config.h"

#include "coll_gpu.h"

static const char *const bcast_name = "bcast";

int mca_coll_gpu_bcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                       struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_dir_t dir = (ompi_comm_rank(comm) == root) ? COLL_GPU_READ : COLL_GPU_WRITE;
    coll_gpu_staged_t none, b;
    size_t dsize;
    int rc;

    if (mca_coll_gpu_is_host(mca_coll_gpu_classify(buf))) {
        return m->prev_bcast.fn(buf, count, dtype, root, comm, m->prev_bcast.module);
    }
    ompi_datatype_type_size(dtype, &dsize);
    mca_coll_gpu_log_call(bcast_name, comm, dsize * (size_t) count, dtype, NULL, "staged");
    rc = mca_coll_gpu_stage_pair(m, comm, bcast_name, NULL, COLL_GPU_LAYOUT(dtype, 0), COLL_GPU_NONE, buf,
                                 COLL_GPU_LAYOUT(dtype, count), dir, &none, &b);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    rc = m->prev_bcast.fn(mca_coll_gpu_view(&b), count, dtype, root, comm, m->prev_bcast.module);
    return mca_coll_gpu_unstage_pair(m, comm, bcast_name, rc, &none, COLL_GPU_NONE, &b, dir);
}
