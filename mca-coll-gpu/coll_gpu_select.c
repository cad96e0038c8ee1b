/*
 * coll_gpu_select.c - the plans of device-buffer MPI_Allreduce and MPI_Bcast calls.
 *
 * The GPU path needs an element type and op it has a kernel for (allreduce), a communicator
 * whose ranks all sit on this node and can map each other's memory (the team), and peer access
 * allowed by the node model under coll_gpu_p2p_level / coll_gpu_p2p_disable.  Given all that,
 * the one decision table of topo_select() picks the algorithm and its kernel launch shape,
 * overridden by coll_gpu_{allreduce,bcast}_algorithm, coll_gpu_nblocks, coll_gpu_nthreads,
 * coll_gpu_chunk_bytes (all of scope ALL_EQ).  Every input is the same on all ranks of a call:
 * the type's signature (never its handle or layout, which may differ between ranks), count,
 * op, communicator, parameters, the team's model; so all ranks choose the same path, and each
 * rank then adapts its own buffers to it (coll_gpu_adapt.c).  Waiting for the team (a blocking
 * call) or queueing on it while its setup is in flight (a nonblocking one) is the engine's
 * (mca_coll_gpu_select, select_nb: coll_gpu_engine.c).
 */
#include "ompi_config.h"

#include <string.h>

#include "coll_gpu.h"
#include "collgpu.h"

_Static_assert(sizeof(long) == 8 && sizeof(int) == 4 && sizeof(short) == 2,
               "coll/gpu maps C integer types for an LP64 platform");

/* The device-layer op of a predefined MPI op; false when the GPU path has no kernel for it. */
static bool map_op(struct ompi_op_t *op, dev_op_t *out)
{
    static const struct {
        struct ompi_op_t *mpi;
        dev_op_t dev;
    } table[] = {
        {MPI_SUM, DEV_OP_SUM},   {MPI_PROD, DEV_OP_PROD}, {MPI_MIN, DEV_OP_MIN},
        {MPI_MAX, DEV_OP_MAX},   {MPI_LAND, DEV_OP_LAND}, {MPI_LOR, DEV_OP_LOR},
        {MPI_LXOR, DEV_OP_LXOR}, {MPI_BAND, DEV_OP_BAND}, {MPI_BOR, DEV_OP_BOR},
        {MPI_BXOR, DEV_OP_BXOR}, {MPI_MINLOC, DEV_OP_MINLOC}, {MPI_MAXLOC, DEV_OP_MAXLOC},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i) {
        if (op == table[i].mpi) {
            *out = table[i].dev;
            return true;
        }
    }
    return false;
}

/*
 * The element type of a reduction, from the type's signature: the set of basic types it is made
 * of (the opal description's bdt_used mask) and its size.  Ranks may pass different datatypes
 * of one signature (MPI_INT on one, a dup of it or a contiguous type of ints on another), so
 * the handle, the layout or a cache of either would split them across paths; the signature is
 * the same on every rank.  A type made of one basic type is count x size / element size
 * elements of it; each rank packs its own layout into that dense form when it is not already
 * (coll_gpu_adapt.c).
 *
 * MPI_MINLOC and MPI_MAXLOC reduce (value, index) pairs.  The kernels take the pairs in their C
 * layout; the dense form of a signature drops padding, so only the pairs whose C layout has none
 * map: (int, int) (MPI_2INT and anything of ints) and (float, int) (MPI_FLOAT_INT).  The padded
 * pairs (double/long with int, short with int) are staged whatever the layout of a rank: a rule
 * on the signature and op, the same on every rank.
 */
const char *mca_coll_gpu_map_reduction(struct ompi_datatype_t *dtype, size_t count,
                                       struct ompi_op_t *op, dev_dtype_t *dt, dev_op_t *dop,
                                       size_t *nelems)
{
    static const struct {
        struct ompi_datatype_t *basic; /* a predefined type of the basic type: its mask */
        dev_dtype_t dev;
    } table[] = {
        {MPI_INT8_T, DEV_T_INT8},     {MPI_UINT8_T, DEV_T_UINT8},
        {MPI_INT16_T, DEV_T_INT16},   {MPI_UINT16_T, DEV_T_UINT16},
        {MPI_INT32_T, DEV_T_INT32},   {MPI_UINT32_T, DEV_T_UINT32},
        {MPI_INT64_T, DEV_T_INT64},   {MPI_LONG, DEV_T_INT64},
        {MPI_UINT64_T, DEV_T_UINT64}, {MPI_UNSIGNED_LONG, DEV_T_UINT64},
        {MPI_FLOAT, DEV_T_FLOAT},     {MPI_DOUBLE, DEV_T_DOUBLE},
        {MPI_C_FLOAT_COMPLEX, DEV_T_CFLOAT}, {MPI_C_DOUBLE_COMPLEX, DEV_T_CDOUBLE},
        {MPI_C_BOOL, DEV_T_BOOL},
    };
    uint32_t mask = dtype->super.bdt_used;
    size_t size = 0, esize;
    bool found = false;

    ompi_datatype_type_size(dtype, &size);
    if (!map_op(op, dop)) {
        /* libcollgpu's float16 and bfloat16 ops (api/collgpu.h): the op names the format, the
         * type only carries 16-bit elements (its signature: 16-bit integers, on every rank) */
        struct ompi_op_t *base = NULL;
        int format = ompi_op_is_intrinsic(op) ? 0 : collgpu_op_query(op, &base);
        if (0 == format || !map_op(base, dop)) {
            return "op without a GPU kernel";
        }
        if (mask != MPI_UINT16_T->super.bdt_used && mask != MPI_INT16_T->super.bdt_used) {
            return "a 16-bit floating-point op on a type not made of 16-bit elements";
        }
        *dt = COLLGPU_BFLOAT16 == format ? DEV_T_BFLOAT16 : DEV_T_FLOAT16;
        found = true;
    } else if (DEV_OP_MINLOC == *dop || DEV_OP_MAXLOC == *dop) {
        if (MPI_2INT->super.bdt_used == mask) {
            *dt = DEV_T_2INT;
        } else if (MPI_FLOAT_INT->super.bdt_used == mask) {
            *dt = DEV_T_FLOAT_INT;
        } else {
            return "MINLOC/MAXLOC pair type without a GPU kernel (padded, or not a pair)";
        }
        found = true;
    }
    for (size_t i = 0; !found && i < sizeof(table) / sizeof(table[0]); ++i) {
        if (mask == table[i].basic->super.bdt_used && dev_dtype_size(table[i].dev)
                                                          == table[i].basic->super.size) {
            *dt = table[i].dev;
            found = true;
        }
    }
    if (!found) {
        return "type without a GPU kernel (mixed or unsupported basic types)";
    }
    esize = dev_dtype_size(*dt);
    if (0 == esize || 0 != size % esize) {
        return "type without a GPU kernel (size not a whole number of elements)";
    }
    if (!dev_op_valid(*dop, *dt)) {
        return "op not defined on the type";
    }
    *nelems = count * (size / esize);
    return NULL;
}

void mca_coll_gpu_kinds_reduction(coll_gpu_kinds_call_t *call, struct ompi_datatype_t *dtype,
                                  size_t count, struct ompi_op_t *op)
{
    dev_dtype_t dt = DEV_T_UINT8;
    dev_op_t dop = DEV_OP_SUM;
    size_t nelems = 0;

    call->capable = (NULL == mca_coll_gpu_map_reduction(dtype, count, op, &dt, &dop, &nelems));
    call->dt = (int) dt;
}

/* ---- the node model ------------------------------------------------------------------------- */

static topo_t *node_model;
static bool node_model_tried;
static opal_mutex_t node_model_lock = OPAL_MUTEX_STATIC_INIT;

static void topo_log(void *ctx, int level, const char *msg)
{
    (void) ctx;
    COLL_GPU_VERBOSE(TOPO_LOG_WARN >= level ? COLL_GPU_LOG_ERROR : COLL_GPU_LOG_QUERY,
                     "coll:gpu:topo: %s", msg);
}

static int probe_uuid(int ordinal, uint8_t uuid[TOPO_UUID_BYTES])
{
    dev_uuid_t u;
    int rc = dev_device_uuid(ordinal, &u);
    memcpy(uuid, u.bytes, TOPO_UUID_BYTES);
    return rc;
}

const topo_t *mca_coll_gpu_topo(void)
{
    static const topo_gpu_probe_ops_t ops = {
        .device_count = dev_device_count,
        .device_uuid = probe_uuid,
        .device_pci_bus_id = dev_device_pci_bus_id,
        .device_can_access_peer = dev_device_can_access_peer,
    };
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    char err[TOPO_ERR_LEN] = "";

    OPAL_THREAD_LOCK(&node_model_lock);
    if (!node_model_tried) {
        node_model_tried = true;
        if (NULL != c->topo_file && '\0' != c->topo_file[0]) {
            if (TOPO_OK != topo_load_file(c->topo_file, &node_model, err, sizeof(err))) {
                opal_output(0, "coll:gpu: cannot load coll_gpu_topo_file: %s", err);
                node_model = NULL;
            }
        } else {
            topo_probe_opts_t opts = {
                .gpu_ops = &ops,
                .log = topo_log,
                /* the emulated device has no NVML; its GPUs come from the device layer */
                .no_nvml = (DEV_BACKEND_EMULATED == dev_backend()),
            };
            if (TOPO_OK != topo_probe(&opts, &node_model)) {
                node_model = NULL;
            }
        }
        if (NULL != node_model) {
            COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:topo: %d GPU(s), %d NIC(s); %s",
                             node_model->ngpus, node_model->nnics, node_model->source);
        }
        if (NULL != node_model && NULL != c->topo_dump_file && '\0' != c->topo_dump_file[0]
            && TOPO_OK != topo_dump_file(node_model, c->topo_dump_file, err, sizeof(err))) {
            opal_output(0, "coll:gpu: cannot write coll_gpu_topo_dump_file: %s", err);
        }
    }
    OPAL_THREAD_UNLOCK(&node_model_lock);
    return node_model;
}

void mca_coll_gpu_topo_finalize(void)
{
    if (NULL != node_model) {
        topo_free(node_model);
        node_model = NULL;
    }
    node_model_tried = false;
}

/* The algorithm coll_gpu_{allreduce,bcast}_algorithm forces on coll, and coll's staged one. */
static int forced_alg(topo_coll_t coll, int *staged)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;

    *staged = (TOPO_COLL_ALLREDUCE == coll) ? TOPO_AR_STAGED : TOPO_BC_STAGED;
    return (TOPO_COLL_ALLREDUCE == coll) ? c->allreduce_algorithm : c->bcast_algorithm;
}

bool mca_coll_gpu_select_needs_team(mca_coll_gpu_module_t *m, struct ompi_communicator_t *comm,
                                    topo_coll_t coll, size_t bytes, const char *not_capable,
                                    topo_plan_t *plan)
{
    int staged, forced = forced_alg(coll, &staged);

    memset(plan, 0, sizeof(*plan));
    plan->alg = staged;
    plan->forced = (staged == forced);
    if (NULL != not_capable) {
        snprintf(plan->reason, sizeof(plan->reason), "%s", not_capable);
        return false;
    }
    if (staged == forced) {
        snprintf(plan->reason, sizeof(plan->reason), "forced by coll_gpu_%s_algorithm",
                 topo_coll_name(coll));
        return false;
    }
    /* A bcast's byte count may differ between ranks (an erroneous program that must fail, not
     * hang): it never decides between the team and staging; the team path checks it. */
    if (2 > ompi_comm_size(comm) || (0 == bytes && TOPO_COLL_ALLREDUCE == coll)) {
        snprintf(plan->reason, sizeof(plan->reason), "nothing to exchange between GPUs");
        return false;
    }
    /* a team serves one node: a communicator across nodes (real or emulated) never gets one
     * (coll_gpu_hier.c takes it when UCX is there) */
    if (mca_coll_gpu_spans_nodes(m, comm)) {
        snprintf(plan->reason, sizeof(plan->reason), "spans nodes, no UCX path (not built, not "
                                                     "set up, or staging forced)");
        return false;
    }
    return true;
}

void mca_coll_gpu_select_no_team(topo_plan_t *plan)
{
    snprintf(plan->reason, sizeof(plan->reason), "no node team (ranks off node, or IPC "
                                                 "mapping refused)");
}

bool mca_coll_gpu_select_plan(coll_gpu_team_t *t, topo_coll_t coll, size_t bytes,
                              topo_plan_t *plan)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    int staged, forced = forced_alg(coll, &staged);
    topo_select_in_t in;

    memset(&in, 0, sizeof(in));
    topo_select_in_from_team(&in, &t->info, 1);
    in.coll = coll;
    in.bytes = bytes;
    in.forced_alg = forced;
    in.nblocks = c->nblocks;
    in.nthreads = c->nthreads;
    in.chunk_bytes = c->chunk_bytes;
    /* the reason is for the call's log line (mca_coll_gpu_log_plan) alone */
    in.quiet = opal_output_get_verbosity(c->output) < COLL_GPU_LOG_CALL;
    topo_select(&in, plan);
    /* the fused allreduce needs room for every rank's piece in a slot (it cuts larger messages
     * into pieces); too small a slot (coll_gpu_oneshot_slot_bytes) leaves it to one-shot */
    if (TOPO_COLL_ALLREDUCE == coll && TOPO_AR_FUSED == plan->alg
        && 0 == mca_coll_gpu_nvl_fused_cap(t)) {
        plan->alg = TOPO_AR_ONESHOT;
        snprintf(plan->reason, sizeof(plan->reason),
                 "the scratch slot has no room for the fused allreduce: one-shot");
    }
    /* one-shot stages through the team's scratch: it cannot take more than a slot (after the
     * fused allreduce's head) */
    if (TOPO_COLL_ALLREDUCE == coll && TOPO_AR_ONESHOT == plan->alg
        && (t->slot_bytes <= COLL_GPU_SLOT_RESERVED(t->size)
            || bytes > t->slot_bytes - COLL_GPU_SLOT_RESERVED(t->size))) {
        plan->alg = TOPO_AR_TWOSHOT;
        snprintf(plan->reason, sizeof(plan->reason), "%zu B exceed the one-shot slot: two-shot",
                 bytes);
    }
    return staged != plan->alg;
}

/*
 * The plan of one allreduce, after the decision table, from what the table does not see (the
 * same on every rank: whether the call is in place, the element type of the signature and op).
 *
 * In place.  One-shot reads every peer's whole input and writes only its own output.  In place
 * a peer's input is its output, which that peer overwrites while the others may still read it,
 * so an in-place one-shot had to copy its input into the team's scratch and synchronise before
 * the reduction: two GPU steps, about twice the time of the out-of-place call where GPU steps
 * dominate (ranks sharing one GPU: 485 against 255 us at 8 B).  Two-shot reads and writes each
 * element on one rank only (the owner of its chunk, in every rank's buffer), so in place it
 * needs no copy: one GPU step, as the out-of-place one-shot (266 against 258 us measured
 * after).  (The fused kernel, which takes small calls between NVLink peers, works in place as
 * it is.)
 *
 * 16-bit floats.  The table's launch shapes were measured on 4- and 8-byte types; a 16-bit
 * float element costs a conversion each way per 2 bytes moved, and at the table's 32 blocks the
 * bfloat16 two-shot moved 191 GB/s where float32 moves 302 (one shared H200, 256 Mi elements):
 * the SM algorithms take the device layer's whole-GPU launch for them instead (0 blocks: as
 * many as fit), unless coll_gpu_nblocks says otherwise.
 */
void mca_coll_gpu_plan_for_call(topo_plan_t *plan, bool in_place, dev_dtype_t dt)
{
    if (in_place && TOPO_AR_ONESHOT == plan->alg) {
        plan->alg = TOPO_AR_TWOSHOT;
        snprintf(plan->reason, sizeof(plan->reason),
                 "in place: two-shot, one GPU step (one-shot would copy its input first)");
    }
    if ((DEV_T_FLOAT16 == dt || DEV_T_BFLOAT16 == dt) && 0 == mca_coll_gpu_component.nblocks
        && (TOPO_AR_ONESHOT == plan->alg || TOPO_AR_TWOSHOT == plan->alg
            || TOPO_AR_RING == plan->alg)) {
        plan->nblocks = 0;
    }
}
