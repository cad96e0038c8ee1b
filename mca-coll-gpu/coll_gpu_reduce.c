/*
 * coll_gpu_reduce.c - the reductions other than allreduce: MPI_Reduce, MPI_Reduce_scatter,
 * MPI_Reduce_scatter_block, MPI_Scan, MPI_Exscan (blocking, nonblocking and persistent), and
 * MPI_Reduce_local.
 *
 * Each reads a send buffer and writes a receive buffer (reads and writes it with MPI_IN_PLACE).
 * Host buffers go to the saved module.  The blocking MPI_Reduce and reduce-scatters on an
 * intracommunicator agree on their ranks' memory kinds per call (coll_gpu_kinds.c); with device
 * memory on every rank inside one node they run as the node team's reduce-scatter step
 * (coll_gpu_xstep_t, coll_gpu_nvl.c): each rank reduces its own piece of every rank's input
 * with one kernel, and a reduce's one piece, the whole input, is the root's (as MPI_Ireduce's,
 * coll_gpu_engine.c).  For the types and ops the kernels do not take (user-defined ops), or
 * with an allreduce algorithm forced, they are the team's allreduce into a device scratch, of
 * which each rank keeps its piece.  Across nodes the reduce-scatters and MPI_Reduce take the
 * hierarchical allreduce (coll_gpu_hier_exchange.c); anything else is staged
 * (coll_gpu_staged_colls.c).
 *
 * On an intercommunicator MPI_Reduce's root passes MPI_ROOT and only receives, the other ranks
 * of its group pass MPI_PROC_NULL and take no part, and the remote group only sends; the
 * reduce-scatters count the LOCAL group (each group's result is scattered over the other).
 */
#include "ompi_config.h"

#include <limits.h>

#include "coll_gpu.h"

/* ---- on the node team: the reduce-scatter step, or an allreduce ---------------------------- */

/*
 * The node team on which a reduction of total elements of dtype with op (a reduce-scatter's
 * whole input, a reduce's count) runs as the team's reduce-scatter step
 * (mca_coll_gpu_team_xcall: each rank reduces its own piece of every rank's input with one
 * kernel; a reduce's one piece, the whole input, is the root's), or NULL where that step cannot
 * serve: a type or op the kernels do not take (user-defined ops), an allreduce algorithm forced
 * (coll_gpu_allreduce_algorithm), no team or no team plan for the call's bytes.  Decided from
 * what every rank of the call shares alone: the signature and op (compared by the agreement),
 * total, the parameters, the communicator.  Not across nodes (the callers ask before).
 */
static coll_gpu_team_t *reduce_step_team(mca_coll_gpu_module_t *m,
                                         struct ompi_communicator_t *comm, size_t total,
                                         struct ompi_datatype_t *dtype, struct ompi_op_t *op)
{
    dev_dtype_t dt;
    dev_op_t dop;
    size_t nelems = 0;
    topo_plan_t plan;

    if (TOPO_AR_AUTO != mca_coll_gpu_component.allreduce_algorithm
        || NULL != mca_coll_gpu_map_reduction(dtype, total, op, &dt, &dop, &nelems)
        || 0 == nelems || 0 != nelems % total) {
        return NULL;
    }
    return mca_coll_gpu_select(m, comm, TOPO_COLL_ALLREDUCE,
                               mca_coll_gpu_call_bytes(dtype, total), NULL, &plan);
}

/*
 * Where the reduce step cannot serve (reduce_step_team: user-defined ops, a forced allreduce
 * algorithm): the allreduce of the whole input (total elements, at most INT_MAX) into the
 * module's device scratch (the node team's algorithms, the GPU kernels), then this rank's piece
 * (mine elements at element offset before) from the scratch into its receive buffer; in place
 * the input is rbuf and the piece lands at its start.  Every rank's allreduce is out of place
 * (MPI_IN_PLACE on some ranks alone would make the ranks' plans differ).  A rank without its
 * scratch takes part without data (its peers fail).  Ranks whose counts differ but whose totals
 * agree read and write only inside the scratch and their own buffers.
 */
static int reduce_composed(const char *what, const void *sbuf, void *rbuf, size_t total,
                           size_t before, int mine, struct ompi_datatype_t *dtype,
                           struct ompi_op_t *op, struct ompi_communicator_t *comm,
                           mca_coll_gpu_module_t *m)
{
    ptrdiff_t lb, extent, lo;
    void *scratch = NULL;
    size_t len;
    int rc, local_rc;

    /* the scratch holds the whole input's layout (total elements of dtype) */
    ompi_datatype_get_extent(dtype, &lb, &extent);
    mca_coll_gpu_span(dtype, total, &lo, &len);
    local_rc = mca_coll_gpu_adapt_scratch(m, comm, what, len, &scratch);
    rc = mca_coll_gpu_allreduce_device(MPI_IN_PLACE == sbuf ? rbuf : sbuf,
                                       NULL == scratch ? NULL : (char *) scratch - lo,
                                       (int) total, dtype, op, comm, m, true, local_rc);
    if (OMPI_SUCCESS == rc) {
        rc = mca_coll_gpu_adapt_copy(m, comm, what,
                                     (char *) scratch - lo + (ptrdiff_t) before * extent, mine,
                                     dtype, rbuf, mine, dtype);
    }
    return rc;
}

/*
 * A reduction on device memory, agreed on every rank, that its caller let through (a
 * reduce-scatter, or a reduce: the one piece, the whole input, is the root's): across nodes the
 * hierarchical path, else the team's reduce-scatter step where it serves (reduce_step_team),
 * else the allreduce composition; each logged as its caller names it.  Decided from what every
 * rank shares: the signature and op (compared by the agreement), the whole input's size, the
 * parameters.
 */
static int reduce_run(const coll_gpu_staged_call_t *c, const char *on_step, const char *composed,
                      size_t total, size_t before, int mine)
{
    struct ompi_datatype_t *dtype = c->sdtype;
    size_t bytes = mca_coll_gpu_call_bytes(dtype, total);
    coll_gpu_team_t *team;

    /* across nodes: the callers let through only what the hierarchical allreduce takes
     * (coll_gpu_hier_exchange.c) */
    if (mca_coll_gpu_hier_usable(c->gpu, c->comm, TOPO_COLL_ALLREDUCE)) {
        return mca_coll_gpu_hier_reduce_scatter(c->gpu, c->comm, c->what, c->sbuf, c->rbuf,
                                                total, before, mine, dtype, c->op);
    }
    team = reduce_step_team(c->gpu, c->comm, total, dtype, c->op);
    if (NULL != team) {
        mca_coll_gpu_log_call(c->what, c->comm, bytes, dtype, c->op, on_step);
        return mca_coll_gpu_team_xcall(team, c);
    }
    mca_coll_gpu_log_call(c->what, c->comm, bytes, dtype, c->op, composed);
    return reduce_composed(c->what, c->sbuf, c->rbuf, total, before, mine, dtype, c->op, c->comm,
                           c->gpu);
}

/*
 * Why a reduce-scatter or reduce does not take the node team or the hierarchical path
 * (reduce_run), or NULL when it does: from what every rank of the call shares alone (the
 * agreement, the whole input's count and bytes, its type's signature and op, the
 * communicator).  Every such path takes the whole input with an int count: a whole input of
 * more than INT_MAX elements is staged (the component below takes it, or says why not).
 */
static const char *reduction_staged_why(mca_coll_gpu_module_t *m,
                                        struct ompi_communicator_t *comm, bool all_device,
                                        size_t total, size_t bytes,
                                        struct ompi_datatype_t *dtype, struct ompi_op_t *op)
{
    dev_dtype_t dt;
    dev_op_t dop;
    size_t nelems = 0;

    if (!all_device) {
        return "staged (memory kind: host memory on some rank)";
    }
    if (0 == bytes) {
        return "staged (empty)";
    }
    if ((size_t) INT_MAX < total) {
        return "staged (more than INT_MAX elements in all: not one allreduce)";
    }
    /* across nodes (set up on the first such call, on every rank): the hierarchical allreduce
     * takes what its kernels take */
    if (mca_coll_gpu_hier_usable(m, comm, TOPO_COLL_ALLREDUCE)
        && (NULL != mca_coll_gpu_map_reduction(dtype, total, op, &dt, &dop, &nelems)
            || 0 == nelems)) {
        return "staged (across nodes: a type or op the kernels do not take)";
    }
    return NULL;
}

/* ---- MPI_Reduce ------------------------------------------------------------------------------ */

/*
 * MPI_Reduce on device memory, agreed on every rank, with a valid root (the component below
 * tells an invalid one): inside one node on the node team (reduce_run: the root's piece is the
 * whole input, and only the root writes a result, where an allreduce writes one on every rank),
 * across nodes as the hierarchical allreduce whose result the root keeps; staged otherwise.  Every choice is the same on every rank: the agreement compared the kinds,
 * count, op, type and root (under mpi_assert_memory_alloc_kinds, where none runs, the reduce
 * step compares the counts itself: its inputs' sizes); the agreement's mode (m->kmode) was
 * itself agreed when it was set up; the rest is the communicator and the parameters.
 */
static int reduce_device(coll_gpu_staged_call_t *c, bool all_device)
{
    mca_coll_gpu_module_t *m = c->gpu;
    struct ompi_communicator_t *comm = c->comm;
    size_t bytes = mca_coll_gpu_call_bytes(c->sdtype, (size_t) c->scount);
    bool is_root = (ompi_comm_rank(comm) == c->root);
    const char *why = NULL;

    /* under coll_gpu_uniform_buffers each rank answers for itself, and a reduce's ranks do not
     * all have the same buffers (the root's receive buffer alone counts): staged, as on every
     * rank that promise gives the same answer only for the send buffers */
    if (all_device && (0 > c->root || c->root >= ompi_comm_size(comm))) {
        why = "staged (no such root: the component below tells it)";
    } else if (all_device && mca_coll_gpu_component.uniform_buffers
               && COLL_GPU_KMODE_PROMISE_DEVICE != m->kmode) {
        why = "staged (under coll_gpu_uniform_buffers)";
    } else {
        /* across nodes too: the hierarchical allreduce, whose result the root keeps */
        why = reduction_staged_why(m, comm, all_device, (size_t) c->scount, bytes, c->sdtype,
                                   c->op);
    }
    if (NULL != why) {
        mca_coll_gpu_log_call(c->what, comm, bytes, c->sdtype, c->op, why);
        c->decided = true; /* logged: the staged path logs nothing more */
        return mca_coll_gpu_staged(c);
    }
    return reduce_run(c, "a reduce on the node team, the root reading every rank's input",
                      "an allreduce on the node team (the root keeps the result)",
                      (size_t) c->scount, 0, is_root ? c->scount : 0);
}

/* MPI_Reduce: on an intracommunicator agreed per call as MPI_Allreduce is (coll_gpu_kinds.c),
 * on the buffers this rank uses (the send buffer, and the root's receive buffer); staged on an
 * intercommunicator. */
static int reduce_blocking(coll_gpu_staged_call_t *c)
{
    bool host, all_device;
    int rc;

    if (c->gpu->inter) {
        return mca_coll_gpu_staged(c);
    }
    host = (mca_coll_gpu_is_idle(c->root) || mca_coll_gpu_data_host(c->sbuf, c->sdtype, c->scount))
           && (ompi_comm_rank(c->comm) != c->root
               || mca_coll_gpu_data_host(c->rbuf, c->rdtype, c->rcount));
    rc = mca_coll_gpu_entry_agree(c->gpu, c->comm, c->what, COLL_GPU_KINDS_REDUCE, host,
                                  c->sdtype, (size_t) c->scount, c->op, c->root, &all_device);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    if (host && !all_device) {
        c->host = true; /* the saved function */
        return mca_coll_gpu_staged(c);
    }
    return reduce_device(c, all_device);
}

/* nonblocking and persistent: the team's reduce step where every rank takes it
 * (coll_gpu_exchange.c), else staged */
COLL_GPU_ENTRIES_AGREED_QUICK(
    reduce, REDUCE, reduce_blocking, mca_coll_gpu_exchange_async,
    (COLL_GPU_P_REDUCTION, int root), (COLL_GPU_F_REDUCTION, .root = root),
    (sbuf, rbuf, count, dtype, op, root),
    mca_coll_gpu_data_host_quick(sbuf, dtype, count)
        && mca_coll_gpu_data_host_quick(rbuf, dtype, count))

/* ---- MPI_Reduce_scatter and MPI_Reduce_scatter_block ------------------------------------- */

/*
 * MPI_Reduce_scatter (c->rcounts: rank i's piece is rcounts[i] elements after those of the
 * ranks below it) and MPI_Reduce_scatter_block (c->rcounts NULL: c->rcount elements at
 * i x rcount).  On an intracommunicator agreed per call as MPI_Allreduce is (coll_gpu_kinds.c),
 * on the whole input (reduce_scatter: the same on every rank of a correct call; the counts
 * themselves are not compared) or the block: host ranks note their kind and go below at once.
 * Then, where every rank passes device memory inside one node, reduce_run; else staged.  The
 * whole input may pass INT_MAX elements.
 */
static int reduce_scatter_blocking(coll_gpu_staged_call_t *c)
{
    struct ompi_communicator_t *comm = c->comm;
    struct ompi_datatype_t *dtype = c->sdtype;
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm), mine = c->rcount, rc;
    size_t total = (size_t) mine * (size_t) n, before = (size_t) me * (size_t) mine, bytes;
    const char *why;
    bool host, all_device;

    if (c->gpu->inter) {
        return mca_coll_gpu_staged(c);
    }
    if (NULL != c->rcounts) {
        total = before = 0;
        for (int i = 0; i < n; ++i) {
            total += (size_t) c->rcounts[i];
            before += (i < me) ? (size_t) c->rcounts[i] : 0;
        }
        mine = c->rcounts[me];
    }
    host = (MPI_IN_PLACE == c->sbuf || mca_coll_gpu_data_host_c(c->sbuf, dtype, total))
           && (MPI_IN_PLACE == c->sbuf ? mca_coll_gpu_data_host_c(c->rbuf, dtype, total)
                                       : mca_coll_gpu_data_host(c->rbuf, dtype, mine));
    rc = mca_coll_gpu_entry_agree(c->gpu, comm, c->what,
                                  (NULL != c->rcounts) ? COLL_GPU_KINDS_REDUCE_SCATTERV
                                                       : COLL_GPU_KINDS_REDUCE_SCATTER,
                                  host, dtype, (NULL != c->rcounts) ? total : (size_t) mine,
                                  c->op, 0, &all_device);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    if (host && !all_device) {
        c->host = true; /* the saved function */
        return mca_coll_gpu_staged(c);
    }
    bytes = mca_coll_gpu_call_bytes(dtype, total);
    why = reduction_staged_why(c->gpu, comm, all_device, total, bytes, dtype, c->op);
    if (NULL != why) {
        mca_coll_gpu_log_call(c->what, comm, bytes, dtype, c->op, why);
        c->decided = true;
        return mca_coll_gpu_staged(c);
    }
    return reduce_run(c, "a reduce-scatter on the node team, each rank reducing its own",
                      (NULL != c->rcounts)
                          ? "an allreduce into a device scratch, then this rank's piece"
                          : "an allreduce into a device scratch, then this rank's block",
                      total, before, mine);
}

/* nonblocking and persistent: the team's reduce-scatter step where every rank takes it
 * (coll_gpu_exchange.c), else staged */
COLL_GPU_ENTRIES(reduce_scatter, REDUCE_SCATTER, reduce_scatter_blocking,
                 mca_coll_gpu_exchange_async,
                 (const void *sbuf, void *rbuf, const int *rcounts,
                  struct ompi_datatype_t *dtype, struct ompi_op_t *op),
                 (.sbuf = sbuf, .rbuf = rbuf, COLL_GPU_ONE_TYPE(dtype, 0), .scounts = rcounts,
                  .rcounts = rcounts, .op = op))

COLL_GPU_ENTRIES_AGREED_QUICK(
    reduce_scatter_block, REDUCE_SCATTER_BLOCK, reduce_scatter_blocking,
    mca_coll_gpu_exchange_async,
    (const void *sbuf, void *rbuf, int rcount, struct ompi_datatype_t *dtype,
     struct ompi_op_t *op),
    (.sbuf = sbuf, .rbuf = rbuf, COLL_GPU_ONE_TYPE(dtype, rcount), .op = op),
    (sbuf, rbuf, rcount, dtype, op),
    mca_coll_gpu_data_host_quick_c(sbuf, dtype, mca_coll_gpu_blocks(rcount, ompi_comm_size(comm)))
        && mca_coll_gpu_data_host_quick_c(
            rbuf, dtype,
            mca_coll_gpu_blocks(rcount, MPI_IN_PLACE == sbuf ? ompi_comm_size(comm) : 1)))

/* ---- MPI_Scan, MPI_Exscan (staged; their buffers are those of MPI_Allreduce) ---------------- */

COLL_GPU_ENTRIES_STAGED(scan, ALLREDUCE,
                        (COLL_GPU_P_REDUCTION), (COLL_GPU_F_REDUCTION),
                        (sbuf, rbuf, count, dtype, op),
                        mca_coll_gpu_data_host_quick(sbuf, dtype, count)
                            && mca_coll_gpu_data_host_quick(rbuf, dtype, count))

int mca_coll_gpu_exscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                        struct ompi_op_t *op, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    /* alone, rank 0's result is undefined: nothing to do (and coll/basic 4.1 sends to a rank
     * that does not exist there) */
    if (1 == ompi_comm_size(comm)) {
        return OMPI_SUCCESS;
    }
    if (mca_coll_gpu_data_host_quick(sbuf, dtype, count)
        && mca_coll_gpu_data_host_quick(rbuf, dtype, count)) {
        mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
        return m->prev_exscan.fn(sbuf, rbuf, count, dtype, op, comm, m->prev_exscan.module);
    }
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLREDUCE, BLOCKING, exscan), .sbuf = sbuf, .rbuf = rbuf,
        COLL_GPU_ONE_TYPE(dtype, count), .op = op, .comm = comm});
}

COLL_GPU_ENTRY_NB_QUICK(exscan, ALLREDUCE, mca_coll_gpu_staged, (COLL_GPU_P_REDUCTION),
                        (COLL_GPU_F_REDUCTION), (sbuf, rbuf, count, dtype, op),
                        mca_coll_gpu_data_host_quick(sbuf, dtype, count)
                            && mca_coll_gpu_data_host_quick(rbuf, dtype, count))
COLL_GPU_ENTRY_INIT(exscan, ALLREDUCE, mca_coll_gpu_staged, (COLL_GPU_P_REDUCTION),
                    (COLL_GPU_F_REDUCTION))

/* MPI_Reduce_local (inoutbuf = inbuf op inoutbuf), which Open MPI routes through
 * MPI_COMM_SELF's table: host buffers to the saved function, anything else staged.  A local
 * call that threads may make at the same time on the same communicator: each call stages
 * through memory of its own, never the module's bounce buffers (the table's "own"). */
int mca_coll_gpu_reduce_local(const void *inbuf, void *inoutbuf, int count,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, REDUCE_LOCAL, BLOCKING, reduce_local), .sbuf = inbuf,
        .rbuf = inoutbuf, COLL_GPU_ONE_TYPE(dtype, count), .op = op,
        .comm = &ompi_mpi_comm_self.comm});
}
