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

#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/runtime/mpiruntime.h"

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

/*
 * The hot path of MPI_Iallreduce and MPI_Ibcast for a rank whose buffers are host memory by
 * what is known without a call (mca_coll_gpu_data_host_quick): true where the call goes to the
 * component below at once, as the paths above would send it; false: ask them.
 *   - every rank takes the node team (mca_coll_gpu_nb_team_path, this rank through a device
 *     temporary): false;
 *   - no per-call decision here (mca_coll_gpu_defer_on would say no without asking anything):
 *     the kinds history, which says below;
 *   - per call through the board, nothing deferred (mca_coll_gpu_defer_call decides at the
 *     call): this rank's note, *noted, and below;
 *   - anything else (the board's setup, a first call, deferred calls): false.
 */
static bool nb_host_pass_quick(mca_coll_gpu_module_t *m, bool *noted)
{
    *noted = false;
    if (mca_coll_gpu_nb_team_path(m, false, false)) {
        return false;
    }
    if (m->inter || mca_coll_gpu_component.uniform_buffers || ompi_mpi_thread_multiple
        || 0 > m->defer_ok
        || (COLL_GPU_KMODE_BOARD != m->kmode && COLL_GPU_KMODE_PENDING != m->kmode
            && COLL_GPU_KMODE_UNSET != m->kmode)) {
        return true;
    }
    if (COLL_GPU_KMODE_BOARD != m->kmode || 0 == m->defer_ok || NULL != m->defer) {
        return false;
    }
    mca_coll_gpu_kinds_publish(m, ++m->kinds_seq, 0);
    *noted = true;
    return true;
}

/* After a noted call went below: it took one tag of the component below's counter, as every
 * call that a peer may defer must (coll_gpu_defer.c); one that took none (an empty call) takes
 * one now, as mca_coll_gpu_defer_call does. */
static int nb_one_tag(struct ompi_communicator_t *comm, int32_t before, bool noted, int rc)
{
    if (noted && comm->c_nbc_tag == before) {
        (void) ompi_coll_base_nbc_reserve_tags(comm, 1);
    }
    return rc;
}

int mca_coll_gpu_iallreduce(COLL_GPU_P_REDUCTION, struct ompi_communicator_t *comm,
                            ompi_request_t **request, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    int32_t tag = comm->c_nbc_tag;
    bool noted;

    if (mca_coll_gpu_data_host_quick(sbuf, dtype, count)
        && mca_coll_gpu_data_host_quick(rbuf, dtype, count) && nb_host_pass_quick(m, &noted)) {
        return nb_one_tag(comm, tag, noted,
                          m->prev_iallreduce.fn(sbuf, rbuf, count, dtype, op, comm, request,
                                                m->prev_iallreduce.module));
    }
    return allreduce_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLREDUCE, NONBLOCKING, iallreduce), COLL_GPU_F_REDUCTION,
        .comm = comm, .request = request});
}

COLL_GPU_ENTRY_INIT(allreduce, ALLREDUCE, allreduce_async, (COLL_GPU_P_REDUCTION),
                    (COLL_GPU_F_REDUCTION))

int mca_coll_gpu_ibcast(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                        struct ompi_communicator_t *comm, ompi_request_t **request,
                        mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    int32_t tag = comm->c_nbc_tag;
    bool noted;

    if (mca_coll_gpu_data_host_quick(buf, dtype, count) && nb_host_pass_quick(m, &noted)) {
        return nb_one_tag(comm, tag, noted,
                          m->prev_ibcast.fn(buf, count, dtype, root, comm, request,
                                            m->prev_ibcast.module));
    }
    return bcast_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, BCAST, NONBLOCKING, ibcast), .rbuf = buf,
        COLL_GPU_ONE_TYPE(dtype, count), .root = root, .comm = comm, .request = request});
}

COLL_GPU_ENTRY_INIT(bcast, BCAST, bcast_async,
                    (void *buf, int count, struct ompi_datatype_t *dtype, int root),
                    (.rbuf = buf, COLL_GPU_ONE_TYPE(dtype, count), .root = root))
