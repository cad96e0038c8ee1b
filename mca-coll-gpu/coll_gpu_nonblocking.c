/*
 * coll_gpu_nonblocking.c - MPI_Iallreduce and MPI_Ibcast, and their persistent forms
 * MPI_Allreduce_init and MPI_Bcast_init (Open MPI 5.0's MPI-4 calls; 4.1's MPIX_ ones) on the
 * node team's allreduce and bcast algorithms.
 *
 * On device buffers of a communicator with a node team they take the team's algorithms,
 * started here and completed by progress (coll_gpu_engine.c), when their plan has a
 * nonblocking form and every rank of the call passes device memory: a nonblocking call learns
 * that after it returned (coll_gpu_defer.c), and once one call had device memory on every
 * rank, every later one takes the team whatever its kinds (mca_coll_gpu_nb_team_path).  A
 * persistent call decides once, at init, from what is equal on every rank (the blocking calls'
 * kinds history or coll_gpu_uniform_buffers, count, signature, op, the team's plan): the
 * request is then that path's own, and each MPI_Start queues one call on the team.
 * Everything else (no team, host or mixed buffers, types or ops the team cannot take, a plan
 * without a nonblocking form, forced staging) goes through the staged path, as every other
 * nonblocking and persistent collective does (coll_gpu_staged_colls.c: bounce memory owned by
 * the request, copied back at completion); host buffers there go straight to the saved module
 * at the cost of the classification and the note.
 */
#include "ompi_config.h"

#include "coll_gpu.h"

/* The node team's algorithms when they take the call, else the staged path. */
static int allreduce_run(coll_gpu_staged_call_t *c)
{
    bool taken = false;
    int rc;

    /* once some allreduce, bcast or reduce of the communicator had device memory on every rank
     * (mca_coll_gpu_nb_team_path): the node team's algorithms, when the plan has a nonblocking
     * form (coll_gpu_engine.c decides); persistent: each MPI_Start runs one MPI_Iallreduce's
     * worth on the team */
    rc = mca_coll_gpu_async_allreduce(c->gpu, c->sbuf, c->rbuf, c->scount, c->sdtype, c->op,
                                      c->comm, COLL_GPU_PERSISTENT == c->mode, c->request,
                                      &taken);
    if (taken || OMPI_SUCCESS != rc) {
        return rc;
    }
    return mca_coll_gpu_staged(c);
}

static int allreduce_async(coll_gpu_staged_call_t *c)
{
    coll_gpu_kinds_call_t k;

    if (COLL_GPU_NONBLOCKING != c->mode || !mca_coll_gpu_defer_on(c->gpu, c->comm)) {
        return allreduce_run(c);
    }
    /* decided per call (coll_gpu_defer.c): this rank's note of it */
    k = (coll_gpu_kinds_call_t){
        .coll = TOPO_COLL_ALLREDUCE,
        .device = !mca_coll_gpu_data_host(c->sbuf, c->sdtype, c->scount)
                  || !mca_coll_gpu_data_host(c->rbuf, c->sdtype, c->scount),
        .bytes = mca_coll_gpu_call_bytes(c->sdtype, (size_t) c->scount),
        .op = c->op};
    if (k.device) {
        mca_coll_gpu_kinds_reduction(&k, c->sdtype, (size_t) c->scount, c->op);
    }
    return mca_coll_gpu_defer_call(c, allreduce_run, &k);
}

static int bcast_run(coll_gpu_staged_call_t *c)
{
    bool taken = false;
    int rc;

    /* the node team's algorithms once an allreduce, bcast or reduce had device memory on every
     * rank, whatever this rank's kind (mca_coll_gpu_nb_team_path; coll_gpu_engine.c decides
     * the plan); else host memory to the saved module at once */
    if (mca_coll_gpu_nb_team_path(c->gpu, !c->host, COLL_GPU_PERSISTENT == c->mode)) {
        rc = mca_coll_gpu_async_bcast(c->gpu, c->rbuf, c->rcount, c->rdtype, c->root, c->comm,
                                      COLL_GPU_PERSISTENT == c->mode, c->request, &taken);
        if (taken || OMPI_SUCCESS != rc) {
            return rc;
        }
    }
    return mca_coll_gpu_staged(c);
}

static int bcast_async(coll_gpu_staged_call_t *c)
{
    coll_gpu_dir_t dir = mca_coll_gpu_is_root(c->comm, c->root) ? COLL_GPU_READ
                         : mca_coll_gpu_is_idle(c->root)          ? COLL_GPU_NONE
                                                                  : COLL_GPU_WRITE;

    /* the kind of the memory the elements occupy, not of buf (as MPI_Bcast) */
    c->host = COLL_GPU_NONE == dir || mca_coll_gpu_data_host(c->rbuf, c->rdtype, c->rcount);
    if (COLL_GPU_NONBLOCKING != c->mode || !mca_coll_gpu_defer_on(c->gpu, c->comm)) {
        return bcast_run(c);
    }
    return mca_coll_gpu_defer_call(
        c, bcast_run,
        &(coll_gpu_kinds_call_t){.coll = TOPO_COLL_BCAST,
                                 .device = !c->host,
                                 .bytes = mca_coll_gpu_call_bytes(c->rdtype, (size_t) c->rcount),
                                 .root = c->root});
}

/* MPI_Iallreduce and MPI_Ibcast with host buffers: the hot path of the nonblocking calls
 * decided per call (mca_coll_gpu_nb_host_pass_quick), with this rank's note. */
COLL_GPU_ENTRY_NB_QUICK(allreduce, ALLREDUCE, allreduce_async, (COLL_GPU_P_REDUCTION),
                        (COLL_GPU_F_REDUCTION), (sbuf, rbuf, count, dtype, op),
                        mca_coll_gpu_data_host_quick(sbuf, dtype, count)
                            && mca_coll_gpu_data_host_quick(rbuf, dtype, count)
                            && mca_coll_gpu_nb_host_pass_quick(m, true, &tag_rule))
COLL_GPU_ENTRY_INIT(allreduce, ALLREDUCE, allreduce_async, (COLL_GPU_P_REDUCTION),
                    (COLL_GPU_F_REDUCTION))

COLL_GPU_ENTRY_NB_QUICK(bcast, BCAST, bcast_async,
                        (void *buf, int count, struct ompi_datatype_t *dtype, int root),
                        (.rbuf = buf, COLL_GPU_ONE_TYPE(dtype, count), .root = root),
                        (buf, count, dtype, root),
                        mca_coll_gpu_data_host_quick(buf, dtype, count)
                            && mca_coll_gpu_nb_host_pass_quick(m, true, &tag_rule))
COLL_GPU_ENTRY_INIT(bcast, BCAST, bcast_async,
                    (void *buf, int count, struct ompi_datatype_t *dtype, int root),
                    (.rbuf = buf, COLL_GPU_ONE_TYPE(dtype, count), .root = root))
