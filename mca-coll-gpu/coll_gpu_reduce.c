/*
 * coll_gpu_reduce.c - the reductions other than allreduce: MPI_Reduce, MPI_Reduce_scatter,
 * MPI_Reduce_scatter_block, MPI_Scan, MPI_Exscan (blocking, nonblocking and persistent), and the
 * local one, MPI_Reduce_local.
 *
 * Each has one shape: a send buffer read, a receive buffer written (read and written with
 * MPI_IN_PLACE).  Host buffers go to the saved module.  The blocking MPI_Reduce,
 * MPI_Reduce_scatter and MPI_Reduce_scatter_block on an intracommunicator agree on their ranks'
 * memory kinds per call (coll_gpu_kinds.c); with device memory on every rank inside one node
 * they run on the node team as its reduce-scatter step (coll_gpu_xstep_t, coll_gpu_nvl.c): every
 * rank lends its whole input, and each rank reduces its own piece of every rank's with one
 * kernel; a reduce is the step whose whole result is the root's piece (the root reads every
 * rank's input, the others reduce nothing), as MPI_Ireduce is (coll_gpu_engine.c).  Where the
 * kernels do not take the type and op (user-defined ops) or an allreduce algorithm is forced,
 * they are composed of the team's allreduce (coll_gpu_allreduce.c): MPI_Reduce as an allreduce
 * whose result the root keeps, the reduce-scatters as an allreduce into a device scratch from
 * which each rank takes its piece.  Across nodes the reduce-scatters are the hierarchical
 * allreduce into a device scratch and the rank's piece (coll_gpu_hier_exchange.c), for the
 * types and ops its kernels take; MPI_Reduce there is staged.  Anything else is staged
 * (coll_gpu_staged_colls.c).
 *
 * On an intercommunicator MPI_Reduce's root passes MPI_ROOT and only receives, the other ranks
 * of its group pass MPI_PROC_NULL and take no part, and the remote group only sends; the
 * reduce-scatters count the LOCAL group (each group's result is scattered over the other).
 */
#include "ompi_config.h"

#include <limits.h>

#include "coll_gpu.h"
#include "coll_gpu_persistent.h"

/* ---- the team's reduce-scatter step: MPI_Reduce and the reduce-scatters -------------------- */

/*
 * The node team on which a reduction of total elements of dtype with op (a reduce-scatter's
 * whole input, a reduce's count) runs as the team's reduce-scatter step, or NULL where that step
 * cannot serve: a type or op the kernels do not take (user-defined ops), an allreduce algorithm
 * forced (coll_gpu_allreduce_algorithm), no team or no team plan for the call's bytes.  Decided
 * from what every rank of the call shares alone: the signature and op (compared by the
 * agreement), total, the parameters, the communicator.  *dt, *dop: the kernels' type and op;
 * *per: elements of *dt per element of dtype.  Not across nodes (the callers ask before).
 */
static coll_gpu_team_t *reduce_step_team(mca_coll_gpu_module_t *m,
                                         struct ompi_communicator_t *comm, size_t total,
                                         struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                         dev_dtype_t *dt, dev_op_t *dop, size_t *per)
{
    size_t nelems = 0;
    topo_plan_t plan;

    if (TOPO_AR_AUTO != mca_coll_gpu_component.allreduce_algorithm
        || NULL != mca_coll_gpu_map_reduction(dtype, total, op, dt, dop, &nelems)
        || 0 == nelems || 0 != nelems % total) {
        return NULL;
    }
    *per = nelems / total;
    return mca_coll_gpu_select(m, comm, TOPO_COLL_ALLREDUCE,
                               mca_coll_gpu_call_bytes(dtype, total), NULL, &plan);
}

/*
 * The team's reduce-scatter step (coll_gpu_xstep_t) on team t, which reduce_step_team chose:
 * every rank lends its whole input (total elements) and reduces its own piece (mine elements at
 * element offset before) from every rank's, one kernel, nothing else moved.  A reduce-scatter's
 * pieces tile the input; a reduce's piece is the whole input at the root (before 0, mine the
 * count) and empty elsewhere, so the root reads every rank's input and the others only lend
 * theirs.  A rank adapts its own buffers (coll_gpu_adapt.c): an input the team cannot lend as it
 * is goes through a device temporary, and so does a piece that is not dense device memory.  In
 * place the input is rbuf, which peers read until the call ends: the piece is reduced into the
 * module's scratch and copied to the start of rbuf afterwards.  per: elements of the kernels'
 * type per element of dtype.
 */
static int reduce_scatter_native(const char *what, coll_gpu_team_t *t, const void *sbuf,
                                 void *rbuf, size_t total, size_t before, int mine,
                                 struct ompi_datatype_t *dtype, dev_dtype_t dt, dev_op_t dop,
                                 size_t per, struct ompi_communicator_t *comm,
                                 mca_coll_gpu_module_t *m)
{
    bool in_place = (MPI_IN_PLACE == sbuf);
    size_t esize = dev_dtype_size(dt) * per, pbytes = (size_t) mine * esize;
    coll_gpu_adapt_t in, out;
    void *dst = NULL;
    int rc, local_rc = (DEV_OK == dev_default_stream_settle()) ? OMPI_SUCCESS : OMPI_ERROR;

    memset(&in, 0, sizeof(in));
    memset(&out, 0, sizeof(out));
    if (OMPI_SUCCESS == local_rc) {
        local_rc = mca_coll_gpu_adapt_in(m, comm, what, in_place ? 1 : 0, in_place ? rbuf : sbuf,
                                         (int) total, dtype, true, true, &in);
    }
    if (OMPI_SUCCESS == local_rc) {
        local_rc = in_place ? mca_coll_gpu_adapt_scratch(m, comm, what, pbytes, &dst)
                            : mca_coll_gpu_adapt_in(m, comm, what, 1, rbuf, mine, dtype, false,
                                                    false, &out);
        dst = in_place ? dst : out.dev;
    }
    rc = mca_coll_gpu_team_xstep(t, comm, what,
                                 &(coll_gpu_xstep_t){.reduce = true, .src = in.dev,
                                                     .src_bytes = total * esize,
                                                     .off = before * esize,
                                                     .count = (size_t) mine * per,
                                                     .dst = {dst}, .dt = dt, .op = dop,
                                                     .local_rc = local_rc});
    if (OMPI_SUCCESS != rc || 0 == pbytes) {
        return rc;
    }
    if (!in_place) {
        return mca_coll_gpu_adapt_out(m, comm, what, &out, true);
    }
    if (DEV_OK != dev_memcpy(in.dev, dst, pbytes)) {
        mca_coll_gpu_report_failure(what, comm, "copy of %zu B from the scratch: %s", pbytes,
                                    dev_error_string());
        return OMPI_ERROR;
    }
    return mca_coll_gpu_adapt_out(m, comm, what, &in, true);
}

/* ---- MPI_Reduce ------------------------------------------------------------------------------ */

static const char *const reduce_name = "reduce";

/* MPI_Reduce once the path is known: host buffers to the saved module, anything else staged. */
static int reduce_body(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                       struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                       mca_coll_gpu_module_t *m)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(m, REDUCE, BLOCKING, reduce), .sbuf = sbuf, .rbuf = rbuf,
        COLL_GPU_ONE_TYPE(dtype, count), .op = op, .root = root, .comm = comm});
}

/*
 * MPI_Reduce on device memory where the reduce step cannot serve (reduce_step_team): an
 * allreduce on the node team (its algorithms and kernels) whose result the root keeps and the
 * others leave in the module's device scratch.  Every rank's allreduce is out of place
 * (MPI_IN_PLACE at the root alone would make the ranks' plans differ): an in-place root first
 * copies its input into the scratch.  A rank without its scratch takes part without data (its
 * peers fail).
 */
static int reduce_composed(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                           struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m)
{
    bool is_root = (ompi_comm_rank(comm) == root);
    size_t len;
    ptrdiff_t lo;
    void *scratch = NULL;
    int local_rc;

    mca_coll_gpu_span(dtype, (size_t) count, &lo, &len);
    local_rc = (is_root && MPI_IN_PLACE != sbuf)
                   ? OMPI_SUCCESS
                   : mca_coll_gpu_adapt_scratch(m, comm, reduce_name, len, &scratch);
    if (OMPI_SUCCESS == local_rc && is_root && MPI_IN_PLACE == sbuf) { /* its input */
        local_rc = mca_coll_gpu_adapt_copy(m, comm, reduce_name, rbuf, count, dtype,
                                           (char *) scratch - lo, count, dtype);
    }
    if (is_root) {
        return mca_coll_gpu_allreduce_device(MPI_IN_PLACE == sbuf ? (char *) scratch - lo : sbuf,
                                             rbuf, count, dtype, op, comm, m, true, local_rc);
    }
    return mca_coll_gpu_allreduce_device(sbuf, NULL == scratch ? NULL : (char *) scratch - lo,
                                         count, dtype, op, comm, m, true, local_rc);
}

/*
 * MPI_Reduce on device memory, agreed on every rank: inside one node, with a valid root (the
 * component below tells an invalid one), the team's reduce step where the kernels take the type
 * and op (reduce_scatter_native: the root reduces every rank's whole input into its receive
 * buffer with one kernel, and only the root writes a result, where an allreduce writes one on
 * every rank), else the allreduce composition (reduce_composed); staged otherwise.  Every choice
 * is the same on every rank: the agreement compared the kinds, count, op, type and root (under
 * mpi_assert_memory_alloc_kinds, where none runs, the reduce step compares the counts itself);
 * the agreement's mode (m->kmode) was itself agreed when it was set up; the rest is the
 * communicator and the parameters.
 */
static int reduce_device(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                         mca_coll_gpu_module_t *m, bool all_device)
{
    size_t bytes = mca_coll_gpu_call_bytes(dtype, (size_t) count), per = 1;
    dev_dtype_t dt = DEV_T_UINT8;
    dev_op_t dop = DEV_OP_SUM;
    coll_gpu_team_t *team;

    /* under coll_gpu_uniform_buffers each rank answers for itself, and a reduce's ranks do not
     * all have the same buffers (the root's receive buffer alone counts): staged, as on every
     * rank that promise gives the same answer only for the send buffers */
    if (!all_device || 0 == bytes || 0 > root || root >= ompi_comm_size(comm)
        || (mca_coll_gpu_component.uniform_buffers && COLL_GPU_KMODE_PROMISE_DEVICE != m->kmode)
        || mca_coll_gpu_hier_usable(m, comm, TOPO_COLL_ALLREDUCE)) {
        mca_coll_gpu_log_call(reduce_name, comm, bytes, dtype, op,
                              !all_device ? "staged (memory kind: host memory on some rank)"
                                          : "staged (across nodes, empty, no such root, or "
                                            "under coll_gpu_uniform_buffers)");
        return reduce_body(sbuf, rbuf, count, dtype, op, root, comm, m);
    }
    /* counts that differ (an erroneous call that no agreement compared: under
     * mpi_assert_memory_alloc_kinds) fail on every rank in the step (its inputs' sizes) */
    team = reduce_step_team(m, comm, (size_t) count, dtype, op, &dt, &dop, &per);
    if (NULL != team) {
        mca_coll_gpu_log_call(reduce_name, comm, bytes, dtype, op,
                              "a reduce on the node team, the root reading every rank's input");
        return reduce_scatter_native(reduce_name, team, sbuf, rbuf, (size_t) count, 0,
                                     ompi_comm_rank(comm) == root ? count : 0, dtype, dt, dop,
                                     per, comm, m);
    }
    mca_coll_gpu_log_call(reduce_name, comm, bytes, dtype, op,
                          "an allreduce on the node team (the root keeps the result)");
    return reduce_composed(sbuf, rbuf, count, dtype, op, root, comm, m);
}

int mca_coll_gpu_reduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                        struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    bool is_root = mca_coll_gpu_is_root(comm, root);
    /* an intercommunicator's root and its idle group send nothing */
    coll_gpu_dir_t sdir = (mca_coll_gpu_is_idle(root) || (OMPI_COMM_IS_INTER(comm) && is_root))
                              ? COLL_GPU_NONE
                              : COLL_GPU_READ;
    coll_gpu_dir_t rdir = !is_root ? COLL_GPU_NONE
                          : (MPI_IN_PLACE == sbuf) ? COLL_GPU_READWRITE : COLL_GPU_WRITE;
    coll_gpu_kinds_call_t call;
    bool host, all_device;
    int rc;

    if (m->inter || m->in_agreed_call) {
        return reduce_body(sbuf, rbuf, count, dtype, op, root, comm, m);
    }
    /* On an intracommunicator the ranks agree on their kinds per call as for MPI_Allreduce
     * (coll_gpu_kinds.c); device memory on every rank takes the GPU (reduce_device).  Nested
     * calls of the saved module go straight through. */
    host = (!sdir || mca_coll_gpu_data_host(sbuf, dtype, count))
           && (!rdir || mca_coll_gpu_data_host(rbuf, dtype, count));
    if (mca_coll_gpu_host_noted(m, host)) { /* the hot path: a note, no wait */
        return m->prev_reduce.fn(sbuf, rbuf, count, dtype, op, root, comm, m->prev_reduce.module);
    }
    call = (coll_gpu_kinds_call_t){.coll = COLL_GPU_KINDS_REDUCE,
                                   .device = !host,
                                   .bytes = mca_coll_gpu_call_bytes(dtype, (size_t) count),
                                   .op = op,
                                   .root = root};
    if (!host) {
        mca_coll_gpu_kinds_reduction(&call, dtype, (size_t) count, op);
    }
    rc = mca_coll_gpu_kinds_agree(m, comm, reduce_name, &call, &all_device);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    if (host && !all_device) {
        return m->prev_reduce.fn(sbuf, rbuf, count, dtype, op, root, comm, m->prev_reduce.module);
    }
    return reduce_device(sbuf, rbuf, count, dtype, op, root, comm, m, all_device);
}

int mca_coll_gpu_ireduce(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, REDUCE, NONBLOCKING, ireduce), .sbuf = sbuf, .rbuf = rbuf,
        COLL_GPU_ONE_TYPE(dtype, count), .op = op, .root = root, .comm = comm, .request = request});
}

int mca_coll_gpu_reduce_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                             struct ompi_op_t *op, int root, struct ompi_communicator_t *comm,
                             struct ompi_info_t *info, ompi_request_t **request,
                             mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, REDUCE, PERSISTENT, reduce_init), .sbuf = sbuf, .rbuf = rbuf,
        COLL_GPU_ONE_TYPE(dtype, count), .op = op, .root = root, .comm = comm, .info = info,
        .request = request});
}

/* ---- the reduce-scatters on device memory ------------------------------------------------- */

/*
 * Why a reduce-scatter does not take the node team or the hierarchical path
 * (reduce_scatter_run), or NULL when it does: from what every rank of the call shares alone
 * (the agreement, the whole input's count and bytes, its type's signature and op, the
 * communicator).  Every such path takes the whole input with an int count: a whole input of
 * more than INT_MAX elements is staged (the component below takes it, or says why not).
 */
static const char *reduce_scatter_staged_why(mca_coll_gpu_module_t *m,
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

/*
 * A reduce-scatter on device memory, agreed on every rank, that reduce_scatter_staged_why lets
 * through: the allreduce of the whole input (total elements, at most INT_MAX) into the module's
 * device scratch (the node team's algorithms, the GPU kernels), then this rank's piece (mine
 * elements at element offset before) from the scratch into its receive buffer.  In place the
 * input is rbuf and the piece lands at its start.  Twice the bytes of a reduce-scatter proper
 * (reduce_scatter_native), all on the GPU; it serves only what the reduce step cannot
 * (user-defined ops, a forced allreduce algorithm).  A rank without its scratch takes part
 * without data (its peers fail).  Ranks whose counts differ but whose totals agree read and
 * write only inside the scratch and their own buffers.
 */
static int reduce_scatter_composed(const char *what, const void *sbuf, void *rbuf, size_t total,
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
 * A reduce-scatter that reduce_scatter_staged_why let through: across nodes the hierarchical
 * path, else the team's reduce-scatter step where it serves (reduce_step_team), else (user ops,
 * a forced allreduce algorithm) the allreduce composition.  Decided from what every rank
 * shares: the signature and op (compared by the agreement), the whole input's size, the
 * parameters.  piece names this rank's part in the log ("piece", "block").
 */
static int reduce_scatter_run(const char *what, const char *piece, const void *sbuf, void *rbuf,
                              size_t total, size_t before, int mine,
                              struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                              struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m)
{
    size_t bytes = mca_coll_gpu_call_bytes(dtype, total), per = 1;
    coll_gpu_team_t *team;
    dev_dtype_t dt = DEV_T_UINT8;
    dev_op_t dop = DEV_OP_SUM;
    char why[96];

    /* across nodes: reduce_scatter_staged_why let through only what the hierarchical allreduce
     * takes (coll_gpu_hier_exchange.c) */
    if (mca_coll_gpu_hier_usable(m, comm, TOPO_COLL_ALLREDUCE)) {
        return mca_coll_gpu_hier_reduce_scatter(m, comm, what, sbuf, rbuf, total, before, mine,
                                                dtype, op);
    }
    team = reduce_step_team(m, comm, total, dtype, op, &dt, &dop, &per);
    if (NULL != team) {
        mca_coll_gpu_log_call(what, comm, bytes, dtype, op,
                              "a reduce-scatter on the node team, each rank reducing its own");
        return reduce_scatter_native(what, team, sbuf, rbuf, total, before, mine, dtype, dt, dop,
                                     per, comm, m);
    }
    snprintf(why, sizeof(why), "an allreduce into a device scratch, then this rank's %s", piece);
    mca_coll_gpu_log_call(what, comm, bytes, dtype, op, why);
    return reduce_scatter_composed(what, sbuf, rbuf, total, before, mine, dtype, op, comm, m);
}

static const char *const rs_name = "reduce_scatter";

static int reduce_scatter_staged(const void *sbuf, void *rbuf, const int *rcounts,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, mca_coll_base_module_t *module,
                                 bool decided)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, REDUCE_SCATTER, BLOCKING, reduce_scatter), .decided = decided,
        .sbuf = sbuf, .rbuf = rbuf, COLL_GPU_ONE_TYPE(dtype, 0), .scounts = rcounts,
        .rcounts = rcounts, .op = op, .comm = comm});
}

/* MPI_Reduce_scatter once the ranks agreed: the composition where every rank passes device
 * memory inside one node (rank i's piece: rcounts[i] elements after those of the ranks below
 * it), else staged.  total: the sum of rcounts. */
static int reduce_scatter_device(const void *sbuf, void *rbuf, const int *rcounts,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, mca_coll_gpu_module_t *m,
                                 bool all_device, size_t total)
{
    int me = ompi_comm_rank(comm);
    size_t bytes = mca_coll_gpu_call_bytes(dtype, total), before = 0;
    const char *why = reduce_scatter_staged_why(m, comm, all_device, total, bytes, dtype, op);

    if (NULL != why) {
        mca_coll_gpu_log_call(rs_name, comm, bytes, dtype, op, why);
        return reduce_scatter_staged(sbuf, rbuf, rcounts, dtype, op, comm, &m->super, true);
    }
    for (int i = 0; i < me; ++i) {
        before += (size_t) rcounts[i];
    }
    return reduce_scatter_run(rs_name, "piece", sbuf, rbuf, total, before, rcounts[me], dtype,
                              op, comm, m);
}

int mca_coll_gpu_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_kinds_call_t call;
    bool host, all_device;
    size_t total = 0;
    int n, me, rc;

    if (m->inter || m->in_agreed_call) {
        return reduce_scatter_staged(sbuf, rbuf, rcounts, dtype, op, comm, module, false);
    }
    /* agreed per call as MPI_Allreduce is (coll_gpu_kinds.c), on the whole input's bytes (the
     * same on every rank of a correct call; the counts themselves are not compared): host ranks
     * note their kind and go below at once */
    n = ompi_comm_size(comm);
    me = ompi_comm_rank(comm);
    for (int i = 0; i < n; ++i) {
        total += (size_t) rcounts[i];
    }
    host = (MPI_IN_PLACE == sbuf || mca_coll_gpu_data_host_c(sbuf, dtype, total))
           && (MPI_IN_PLACE == sbuf ? mca_coll_gpu_data_host_c(rbuf, dtype, total)
                                    : mca_coll_gpu_data_host(rbuf, dtype, rcounts[me]));
    if (mca_coll_gpu_host_noted(m, host)) { /* the hot path: a note, no wait */
        return m->prev_reduce_scatter.fn(sbuf, rbuf, rcounts, dtype, op, comm,
                                         m->prev_reduce_scatter.module);
    }
    call = (coll_gpu_kinds_call_t){.coll = COLL_GPU_KINDS_REDUCE_SCATTERV,
                                   .device = !host,
                                   .bytes = mca_coll_gpu_call_bytes(dtype, total),
                                   .op = op};
    if (!host) {
        mca_coll_gpu_kinds_reduction(&call, dtype, total, op);
    }
    rc = mca_coll_gpu_kinds_agree(m, comm, rs_name, &call, &all_device);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    if (host && !all_device) {
        return m->prev_reduce_scatter.fn(sbuf, rbuf, rcounts, dtype, op, comm,
                                         m->prev_reduce_scatter.module);
    }
    return reduce_scatter_device(sbuf, rbuf, rcounts, dtype, op, comm, m, all_device, total);
}

int mca_coll_gpu_ireduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                 struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                 struct ompi_communicator_t *comm, ompi_request_t **request,
                                 mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, REDUCE_SCATTER, NONBLOCKING, ireduce_scatter), .sbuf = sbuf,
        .rbuf = rbuf, COLL_GPU_ONE_TYPE(dtype, 0), .scounts = rcounts, .rcounts = rcounts, .op = op,
        .comm = comm, .request = request});
}

int mca_coll_gpu_reduce_scatter_init(const void *sbuf, void *rbuf, const int *rcounts,
                                     struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                     struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                     ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, REDUCE_SCATTER, PERSISTENT, reduce_scatter_init), .sbuf = sbuf,
        .rbuf = rbuf, COLL_GPU_ONE_TYPE(dtype, 0), .scounts = rcounts, .rcounts = rcounts, .op = op,
        .comm = comm, .info = info, .request = request});
}

static const char *const rsb_name = "reduce_scatter_block";

static int reduce_scatter_block_staged(const void *sbuf, void *rbuf, int rcount,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       mca_coll_base_module_t *module, bool decided)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, REDUCE_SCATTER_BLOCK, BLOCKING, reduce_scatter_block),
        .decided = decided, .sbuf = sbuf, .rbuf = rbuf, COLL_GPU_ONE_TYPE(dtype, rcount),
        .op = op, .comm = comm});
}

/* MPI_Reduce_scatter_block once the ranks agreed: the composition (rank i's block: rcount
 * elements at element offset i x rcount) where every rank passes device memory inside one
 * node, else staged. */
static int reduce_scatter_block_device(const void *sbuf, void *rbuf, int rcount,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm,
                                       mca_coll_gpu_module_t *m, bool all_device)
{
    int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    size_t total = (size_t) rcount * (size_t) n, bytes = mca_coll_gpu_call_bytes(dtype, total);
    const char *why = reduce_scatter_staged_why(m, comm, all_device, total, bytes, dtype, op);

    if (NULL != why) {
        mca_coll_gpu_log_call(rsb_name, comm, bytes, dtype, op, why);
        return reduce_scatter_block_staged(sbuf, rbuf, rcount, dtype, op, comm, &m->super, true);
    }
    return reduce_scatter_run(rsb_name, "block", sbuf, rbuf, total,
                              (size_t) me * (size_t) rcount, rcount, dtype, op, comm, m);
}

int mca_coll_gpu_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                      struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                      struct ompi_communicator_t *comm,
                                      mca_coll_base_module_t *module)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;
    coll_gpu_kinds_call_t call;
    bool host, all_device;
    size_t total;
    int rc;

    if (m->inter || m->in_agreed_call) {
        return reduce_scatter_block_staged(sbuf, rbuf, rcount, dtype, op, comm, module, false);
    }
    /* agreed per call as MPI_Allreduce is (coll_gpu_kinds.c): host ranks note their kind and go
     * below at once.  The whole input, n x rcount elements, may pass INT_MAX. */
    total = (size_t) rcount * (size_t) ompi_comm_size(comm);
    host = (MPI_IN_PLACE == sbuf || mca_coll_gpu_data_host_c(sbuf, dtype, total))
           && (MPI_IN_PLACE == sbuf ? mca_coll_gpu_data_host_c(rbuf, dtype, total)
                                    : mca_coll_gpu_data_host(rbuf, dtype, rcount));
    if (mca_coll_gpu_host_noted(m, host)) { /* the hot path: a note, no wait */
        return m->prev_reduce_scatter_block.fn(sbuf, rbuf, rcount, dtype, op, comm,
                                               m->prev_reduce_scatter_block.module);
    }
    call = (coll_gpu_kinds_call_t){.coll = COLL_GPU_KINDS_REDUCE_SCATTER,
                                   .device = !host,
                                   .bytes = mca_coll_gpu_call_bytes(dtype, (size_t) rcount),
                                   .op = op};
    if (!host) {
        mca_coll_gpu_kinds_reduction(&call, dtype, (size_t) rcount, op);
    }
    rc = mca_coll_gpu_kinds_agree(m, comm, rsb_name, &call, &all_device);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }
    if (host && !all_device) {
        return m->prev_reduce_scatter_block.fn(sbuf, rbuf, rcount, dtype, op, comm,
                                               m->prev_reduce_scatter_block.module);
    }
    return reduce_scatter_block_device(sbuf, rbuf, rcount, dtype, op, comm, m, all_device);
}

int mca_coll_gpu_ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                       struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm, ompi_request_t **request,
                                       mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, REDUCE_SCATTER_BLOCK, NONBLOCKING, ireduce_scatter_block),
        .sbuf = sbuf, .rbuf = rbuf, COLL_GPU_ONE_TYPE(dtype, rcount), .op = op, .comm = comm,
        .request = request});
}

int mca_coll_gpu_reduce_scatter_block_init(const void *sbuf, void *rbuf, int rcount,
                                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                           struct ompi_communicator_t *comm,
                                           struct ompi_info_t *info, ompi_request_t **request,
                                           mca_coll_base_module_t *module)
{
    return mca_coll_gpu_exchange_async(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, REDUCE_SCATTER_BLOCK, PERSISTENT, reduce_scatter_block_init),
        .sbuf = sbuf, .rbuf = rbuf, COLL_GPU_ONE_TYPE(dtype, rcount), .op = op, .comm = comm,
        .info = info, .request = request});
}

int mca_coll_gpu_scan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                      struct ompi_op_t *op, struct ompi_communicator_t *comm,
                      mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(
        &(coll_gpu_staged_call_t){COLL_GPU_STAGED(module, ALLREDUCE, BLOCKING, scan), .sbuf = sbuf,
                           .rbuf = rbuf, COLL_GPU_ONE_TYPE(dtype, count), .op = op, .comm = comm});
}

int mca_coll_gpu_iscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                       struct ompi_op_t *op, struct ompi_communicator_t *comm,
                       ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLREDUCE, NONBLOCKING, iscan), .sbuf = sbuf, .rbuf = rbuf,
        COLL_GPU_ONE_TYPE(dtype, count), .op = op, .comm = comm, .request = request});
}

int mca_coll_gpu_scan_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                           struct ompi_op_t *op, struct ompi_communicator_t *comm,
                           struct ompi_info_t *info, ompi_request_t **request,
                           mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLREDUCE, PERSISTENT, scan_init), .sbuf = sbuf, .rbuf = rbuf,
        COLL_GPU_ONE_TYPE(dtype, count), .op = op, .comm = comm, .info = info, .request = request});
}

int mca_coll_gpu_exscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                        struct ompi_op_t *op, struct ompi_communicator_t *comm,
                        mca_coll_base_module_t *module)
{
    /* alone, rank 0's result is undefined: nothing to do (and coll/basic 4.1 sends to a rank
     * that does not exist there) */
    if (1 == ompi_comm_size(comm)) {
        return OMPI_SUCCESS;
    }
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLREDUCE, BLOCKING, exscan), .sbuf = sbuf, .rbuf = rbuf,
        COLL_GPU_ONE_TYPE(dtype, count), .op = op, .comm = comm});
}

int mca_coll_gpu_iexscan(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                         struct ompi_op_t *op, struct ompi_communicator_t *comm,
                         ompi_request_t **request, mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLREDUCE, NONBLOCKING, iexscan), .sbuf = sbuf, .rbuf = rbuf,
        COLL_GPU_ONE_TYPE(dtype, count), .op = op, .comm = comm, .request = request});
}

int mca_coll_gpu_exscan_init(const void *sbuf, void *rbuf, int count, struct ompi_datatype_t *dtype,
                             struct ompi_op_t *op, struct ompi_communicator_t *comm,
                             struct ompi_info_t *info, ompi_request_t **request,
                             mca_coll_base_module_t *module)
{
    return mca_coll_gpu_staged(&(coll_gpu_staged_call_t){
        COLL_GPU_STAGED(module, ALLREDUCE, PERSISTENT, exscan_init), .sbuf = sbuf, .rbuf = rbuf,
        COLL_GPU_ONE_TYPE(dtype, count), .op = op, .comm = comm, .info = info, .request = request});
}

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
