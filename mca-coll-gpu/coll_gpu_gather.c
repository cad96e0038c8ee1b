/*
 * coll_gpu_gather.c - MPI_Gather, MPI_Gatherv, MPI_Allgather, MPI_Allgatherv, blocking,
 * nonblocking (MPI_I...) and persistent (..._init): thin entries of the staged path
 * (coll_gpu_staged_colls.c), and the blocking MPI_Allgather on device memory, which runs on
 * the node team as one bcast per rank (below).
 *
 * The send buffer is read (it is MPI_IN_PLACE at a gathering root or in an in-place
 * allgather, where the contribution already sits in the receive buffer); the receive buffer is
 * written where it is significant (the root; every rank for the all- variants) and read as
 * well in place.  Host buffers go to the saved module; anything else is staged.
 *
 * On an intercommunicator the receive buffers hold one block per rank of the REMOTE group; a
 * gathering root passes MPI_ROOT and only receives, the other ranks of its group pass
 * MPI_PROC_NULL and take no part, and the remote group only sends.
 */
#include "ompi_config.h"

#include "coll_gpu.h"
#include "coll_gpu_persistent.h"

int mca_coll_gpu_gather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                        int rcount, struct ompi_datatype_t *rdtype, int root,
                        struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(
        &(coll_gpu_staged_call_t){COLL_GPU_STAGED(module, GATHER, BLOCKING, gather), .sbuf = sbuf,
                                  .scount = scount, .sdtype = sdtype, .rbuf = rbuf,
                                  .rcount = rcount, .rdtype = rdtype, .root = root, .comm = comm});
}

int mca_coll_gpu_igather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                         int rcount, struct ompi_datatype_t *rdtype, int root,
                         struct ompi_communicator_t *comm, ompi_request_t **request,
                         mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, GATHER, NONBLOCKING, igather), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
        .comm = comm, .request = request});
}

int mca_coll_gpu_gather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                             struct ompi_communicator_t *comm, struct ompi_info_t *info,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, GATHER, PERSISTENT, gather_init), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .root = root,
        .comm = comm, .info = info, .request = request});
}

int mca_coll_gpu_gatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                         const int *rcounts, const int *disps, struct ompi_datatype_t *rdtype,
                         int root, struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, GATHERV, BLOCKING, gatherv), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps, .rdtype = rdtype,
        .root = root, .comm = comm});
}

int mca_coll_gpu_igatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                          const int *rcounts, const int *disps, struct ompi_datatype_t *rdtype,
                          int root, struct ompi_communicator_t *comm, ompi_request_t **request,
                          mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, GATHERV, NONBLOCKING, igatherv), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps, .rdtype = rdtype,
        .root = root, .comm = comm, .request = request});
}

int mca_coll_gpu_gatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, const int *rcounts, const int *disps,
                              struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, GATHERV, PERSISTENT, gatherv_init), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps, .rdtype = rdtype,
        .root = root, .comm = comm, .info = info, .request = request});
}

static const char *const allgather_name = "allgather";
/* The most ranks whose allgather runs as bcasts on the team: each bcast is a step of its own */
#define ALLGATHER_BCAST_RANKS_MAX 8

static int allgather_staged(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, mca_coll_base_module_t *module,
                            bool decided)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHER, BLOCKING, allgather), .decided = decided,
        .sbuf = sbuf, .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount,
        .rdtype = rdtype, .comm = comm});
}

/*
 * MPI_Allgather on device memory, agreed on every rank: one bcast per rank on the node team,
 * root r sending its block of the receive buffer (filled first from its send buffer), so each
 * rank receives every other block by the team's bcast algorithms (copy-engine pushes or pulls,
 * the pipelined chain) and nothing passes through host memory.  The steps run one after the
 * other (n team calls; the best a GPU-resident allgather could do moves the same bytes in one
 * step: issue 22).  Whether it runs so is decided from what every rank shares: the agreement,
 * the communicator's size and team, the block's byte count (equal on every rank of a correct
 * call, checked by the agreement); else the whole call is staged.  A rank that cannot fill its
 * own block still takes part in every bcast, as a root without data: its peers fail too.
 */
static int allgather_device(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                            bool all_device)
{
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm), rc = OMPI_SUCCESS, own_rc;
    size_t block = mca_coll_gpu_call_bytes(rdtype, (size_t) rcount);
    ptrdiff_t lb, extent;
    topo_plan_t plan;
    coll_gpu_team_t *team = NULL;

    ompi_datatype_get_extent(rdtype, &lb, &extent);
    if (all_device && 0 < block && n <= ALLGATHER_BCAST_RANKS_MAX
        && !mca_coll_gpu_hier_usable(m, comm, TOPO_COLL_BCAST)) {
        team = mca_coll_gpu_select(m, comm, TOPO_COLL_BCAST, block, NULL, &plan);
    }
    if (NULL == team) {
        mca_coll_gpu_log_call(allgather_name, comm, block * (size_t) n, rdtype, NULL,
                              !all_device ? "staged (memory kind: host memory on some rank)"
                              : n > ALLGATHER_BCAST_RANKS_MAX
                                  ? "staged (more ranks than its bcasts on the team serve)"
                                  : "staged (no node team for its bcasts)");
        return allgather_staged(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                &m->super, true);
    }
    mca_coll_gpu_log_call(allgather_name, comm, block * (size_t) n, rdtype, NULL,
                          "a bcast per rank on the node team");
    own_rc = (MPI_IN_PLACE == sbuf)
                 ? OMPI_SUCCESS
                 : mca_coll_gpu_adapt_copy(m, comm, allgather_name, sbuf, scount, sdtype,
                                           (char *) rbuf + (ptrdiff_t) me * rcount * extent,
                                           rcount, rdtype);
    for (int r = 0; r < n; ++r) {
        int rc_r = mca_coll_gpu_bcast_device((char *) rbuf + (ptrdiff_t) r * rcount * extent,
                                             rcount, rdtype, r, comm, m, true,
                                             r == me ? own_rc : OMPI_SUCCESS);
        rc = (OMPI_SUCCESS == rc) ? rc_r : rc;
    }
    return (OMPI_SUCCESS != own_rc) ? own_rc : rc;
}

int mca_coll_gpu_allgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype, void *rbuf,
                           int rcount, struct ompi_datatype_t *rdtype,
                           struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_kinds_call_t call;
    bool host, all_device;
    int rc;

    if (m->inter || m->in_agreed_call) {
        return allgather_staged(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, module, false);
    }
    /* the kinds of the memory the elements occupy; the ranks agree on them as for
     * MPI_Allreduce (coll_gpu_kinds.c): host ranks note theirs and go below at once */
    host = (MPI_IN_PLACE == sbuf || mca_coll_gpu_data_host(sbuf, sdtype, scount))
           && mca_coll_gpu_data_host(rbuf, rdtype, rcount * ompi_comm_size(comm));
    if (mca_coll_gpu_host_noted(m, host)) { /* the hot path: a note, no wait */
        return m->prev_allgather.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                    m->prev_allgather.module);
    }
    call = (coll_gpu_kinds_call_t){.coll = COLL_GPU_KINDS_ALLGATHER,
                                   .device = !host,
                                   .bytes = mca_coll_gpu_call_bytes(rdtype, (size_t) rcount)};
    rc = mca_coll_gpu_kinds_agree(m, comm, allgather_name, &call, &all_device);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    if (host && !all_device) {
        return m->prev_allgather.fn(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm,
                                    m->prev_allgather.module);
    }
    return allgather_device(sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, m, all_device);
}

int mca_coll_gpu_iallgather(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                            struct ompi_communicator_t *comm, ompi_request_t **request,
                            mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHER, NONBLOCKING, iallgather), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype, .comm = comm,
        .request = request});
}

int mca_coll_gpu_allgather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHER, PERSISTENT, allgather_init), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcount = rcount, .rdtype = rdtype,
        .comm = comm, .info = info, .request = request});
}

int mca_coll_gpu_allgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                            void *rbuf, const int *rcounts, const int *disps,
                            struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                            mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHERV, BLOCKING, allgatherv), .sbuf = sbuf, .scount = scount,
        .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps, .rdtype = rdtype,
        .comm = comm});
}

int mca_coll_gpu_iallgatherv(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, const int *rcounts, const int *disps,
                             struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                             ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHERV, NONBLOCKING, iallgatherv), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps,
        .rdtype = rdtype, .comm = comm, .request = request});
}

int mca_coll_gpu_allgatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                 void *rbuf, const int *rcounts, const int *disps,
                                 struct ompi_datatype_t *rdtype, struct ompi_communicator_t *comm,
                                 struct ompi_info_t *info, ompi_request_t **request,
                                 mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLGATHERV, PERSISTENT, allgatherv_init), .sbuf = sbuf,
        .scount = scount, .sdtype = sdtype, .rbuf = rbuf, .rcounts = rcounts, .rdispls = disps,
        .rdtype = rdtype, .comm = comm, .info = info, .request = request});
}
