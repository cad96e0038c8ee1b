/*
 * coll_gpu_module.c - module lifecycle of coll/gpu: init_query, comm_query, enable, disable.
 *
 * Whether coll/gpu is active on a communicator never depends on the local device: a rank that
 * stood aside while its peers intercept would miss their per-call agreement on memory kinds
 * (coll_gpu_kinds.c: its setup's host collectives, and the notes device ranks wait for) and
 * hang them or mix up the calls.  So every rank installs the module on every communicator,
 * intra and inter, whenever the component is selected with a priority >= 0:
 *
 *   init_query   opens the device backend once per process.  Without a usable device (no
 *                driver, no GPU, or coll_gpu_device=cuda that cannot be had, which is said on
 *                stderr) the process goes on with dev_opened false: every buffer is host memory
 *                to it, so every call goes to the saved module at the cost of one branch, and it
 *                still takes part in every agreement its peers make.  It also settles the
 *                priority comm_query hands out (gpu_settle_priority).
 *   comm_query   hands out a module for every communicator.  On an intercommunicator only the
 *                collectives MPI defines there are taken, and only through host staging (no
 *                team, no fast path, no agreement).
 *   enable       fills the slots no other component provides (coll_gpu_gapfill.c: self, inter,
 *                basic, libnbc, as if they had been listed), so `--mca coll gpu,tuned` works
 *                on intercommunicators and on machines without a GPU; then saves the function
 *                that held each slot we take, with a reference on its module, before it can no
 *                longer fail.
 *
 * Test only: COLL_GPU_TEST_NO_DEVICE=<rank in MPI_COMM_WORLD> makes that process behave as one
 * without a device (the backend is not opened), so that tests can mix such ranks with ranks on
 * the emulated device.  Unset in production.
 */
#include "ompi_config.h"

#include <stdlib.h>
#include <string.h>

#include "opal/mca/base/mca_base_var.h"
#include "opal/util/show_help.h"
#include "ompi/mca/coll/base/base.h"

#include "coll_gpu.h"

/* The priority comm_query hands out: coll_gpu_priority, raised by gpu_settle_priority. */
static int gpu_priority = -1;

/* Every slot coll/gpu takes on an intracommunicator but MPI_Reduce_local's (which it takes only
 * over a function to fall back on: gpu_module_enable). */
#define COLL_GPU_FOREACH_TAKEN(X)                                                            \
    COLL_GPU_FOREACH_INTERCEPTED(X) COLL_GPU_FOREACH_INTERCEPTED_NB(X)                       \
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR(X) COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_NB(X)     \
    COLL_GPU_FOREACH_INTERCEPTED_INIT(X) COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_INIT(X)

static int gpu_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);
static int gpu_module_disable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);

static void gpu_module_construct(mca_coll_gpu_module_t *module)
{
    memset((char *) module + sizeof(module->super), 0, sizeof(*module) - sizeof(module->super));
}

/* Drop the references enable() took (disable, and the destructor).  Safe to call any number of
 * times. */
static void gpu_module_release(mca_coll_gpu_module_t *module)
{
    if (module->released) {
        return;
    }
    module->released = true;
#define COLL_GPU_RELEASE_SAVED(name)              \
    if (NULL != module->prev_##name.module) {     \
        OBJ_RELEASE(module->prev_##name.module);  \
        module->prev_##name.module = NULL;        \
        module->prev_##name.fn = NULL;            \
    }
    COLL_GPU_FOREACH_TAKEN(COLL_GPU_RELEASE_SAVED)
    COLL_GPU_RELEASE_SAVED(reduce_local)
#undef COLL_GPU_RELEASE_SAVED
    for (int i = 0; i < module->n_gap_modules; ++i) {
        OBJ_RELEASE(module->gap_modules[i]);
        module->gap_modules[i] = NULL;
    }
    module->n_gap_modules = 0;
    mca_coll_gpu_async_destroy_team(module);
    mca_coll_gpu_hier_release(module);
    mca_coll_gpu_bounce_release(module);
    /* a communicator's end is when a phase of the program may have ended: the pool's blocks
     * nobody used for a while go back too */
    mca_coll_gpu_pinned_trim(COLL_GPU_PINNED_IDLE_SECONDS);
    mca_coll_gpu_adapt_release(module);
    mca_coll_gpu_kinds_release(module);
    mca_coll_gpu_defer_forget(module);
}

static OBJ_CLASS_INSTANCE(mca_coll_gpu_module_t, mca_coll_base_module_t, gpu_module_construct,
                          gpu_module_release);

/* Does the test-only switch COLL_GPU_TEST_NO_DEVICE name this process?  mpirun tells each
 * process its rank in MPI_COMM_WORLD through OMPI_COMM_WORLD_RANK before MPI_Init. */
static bool test_hides_device(void)
{
    const char *hide = getenv("COLL_GPU_TEST_NO_DEVICE");
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");

    return NULL != hide && '\0' != hide[0] && NULL != rank && atoi(hide) == atoi(rank);
}

/*
 * The priority to hand out.  coll/gpu needs every slot it takes: a component above it takes a
 * slot over, and its functions (tuned, basic, self, han, ...) treat device buffers as host
 * memory and crash.  coll/gpu loses nothing by being on top, since it hands host buffers to
 * the component below it.  So a coll_gpu_priority at or below the priority of another
 * selected component is raised just above it, with one line that says so (a priority parameter
 * that silently breaks device buffers would be worse).  Components that handle device buffers
 * themselves may stay above coll/gpu: Open MPI's cuda and accelerator (staging), hcoll and
 * ucc.  A negative coll_gpu_priority still leaves coll/gpu out, as for every component.
 */
static void gpu_settle_priority(void)
{
    static const char *const device_aware[] = {"gpu", "cuda", "accelerator", "hcoll", "ucc"};
    static bool said = false;
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    const char *above = NULL;
    int top = -1;
    mca_base_component_list_item_t *cli;

    gpu_priority = mca_coll_gpu_component.priority;
    if (0 > gpu_priority) {
        return;
    }
    OPAL_LIST_FOREACH (cli, &ompi_coll_base_framework.framework_components,
                       mca_base_component_list_item_t) {
        const char *name = cli->cli_component->mca_component_name;
        const int *value = NULL;
        bool skip = false;
        int index;

        for (size_t i = 0; i < sizeof(device_aware) / sizeof(device_aware[0]); ++i) {
            skip = skip || 0 == strcmp(name, device_aware[i]);
        }
        index = skip ? -1 : mca_base_var_find("ompi", "coll", name, "priority");
        if (0 > index || OPAL_SUCCESS != mca_base_var_get_value(index, &value, NULL, NULL)
            || NULL == value || *value <= top) {
            continue;
        }
        top = *value;
        above = name;
    }
    if (NULL == above || gpu_priority > top) {
        return;
    }
    gpu_priority = top + 1;
    /* one plain line, from one process (4.1's mpirun garbles help messages sent in MPI_Init) */
    if (!said && (NULL == rank || 0 == strcmp(rank, "0"))) {
        opal_output(0,
                    "coll:gpu: coll_gpu_priority %d is not above coll/%s's priority %d: %s "
                    "would take MPI_Allreduce, MPI_Bcast and the other collectives coll/gpu "
                    "serves device buffers in, and fail on device buffers; coll/gpu runs with "
                    "priority %d instead (host buffers still go to the components below it; "
                    "a negative coll_gpu_priority leaves coll/gpu out)",
                    mca_coll_gpu_component.priority, above, top, above, gpu_priority);
    }
    said = true;
}

/* Open the backend the user asked for.  Always succeeds (the top of the file). */
int mca_coll_gpu_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    dev_backend_t backend;
    int rc;

    (void) enable_progress_threads;
    (void) enable_mpi_threads;

    gpu_settle_priority();
    if (c->dev_tried) {
        return OMPI_SUCCESS;
    }
    c->dev_tried = true;
    backend = (COLL_GPU_DEVICE_EMULATED == c->device_choice) ? DEV_BACKEND_EMULATED
                                                              : DEV_BACKEND_CUDA;
    if (test_hides_device()) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:init_query: no device in this process "
                         "(COLL_GPU_TEST_NO_DEVICE, test only): host buffers only");
        return OMPI_SUCCESS;
    }
    rc = dev_open(backend);
    if (DEV_OK == rc) {
        c->dev_opened = true;
        mca_coll_gpu_memhooks_init();
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:init_query: %s backend ready",
                         dev_backend_name(backend));
        return OMPI_SUCCESS;
    }
    if (COLL_GPU_DEVICE_AUTO == c->device_choice) {
        /* no GPU here: serve host buffers and fill gaps, quietly */
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY,
                         "coll:gpu:init_query: no usable CUDA device (%s): host buffers only",
                         dev_error_string());
    } else {
        /* a plain line on stderr: Open MPI 4.1's mpirun intermittently garbles help messages
         * that several ranks send during MPI_Init ("Data unpack would read past end of buffer") */
        opal_output(0,
                    "coll:gpu: the %s device backend (coll_gpu_device) cannot be used in this "
                    "process: %s; coll/gpu serves host buffers only: device-buffer collectives "
                    "will reach components that cannot handle them (coll_gpu_device=auto does "
                    "the same silently where there is no GPU)",
                    dev_backend_name(backend), dev_error_string());
    }
    return OMPI_SUCCESS;
}

mca_coll_base_module_t *mca_coll_gpu_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    mca_coll_gpu_module_t *module;

    if (0 > gpu_priority) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY,
                         "coll:gpu:comm_query (cid %d): disqualifying: negative priority",
                         coll_gpu_comm_cid(comm));
        return NULL;
    }

    module = OBJ_NEW(mca_coll_gpu_module_t);
    if (NULL == module) {
        return NULL;
    }
    module->super.coll_module_enable = gpu_module_enable;
    module->super.coll_module_disable = gpu_module_disable;
    module->inter = OMPI_COMM_IS_INTER(comm);
#define COLL_GPU_SET_ENTRY(name) module->super.coll_##name = mca_coll_gpu_##name;
    if (module->inter) {
        COLL_GPU_FOREACH_INTER(COLL_GPU_SET_ENTRY)
        COLL_GPU_FOREACH_INTER_INIT(COLL_GPU_SET_ENTRY)
    } else {
        COLL_GPU_FOREACH_TAKEN(COLL_GPU_SET_ENTRY)
        COLL_GPU_SET_ENTRY(reduce_local)
    }
#undef COLL_GPU_SET_ENTRY

    *priority = gpu_priority;
    COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY,
                     "coll:gpu:comm_query (cid %d): %s%d ranks, priority %d, %s",
                     coll_gpu_comm_cid(comm),
                     module->inter ? "intercommunicator, staging only, " : "",
                     ompi_comm_size(comm), *priority,
                     mca_coll_gpu_component.dev_opened ? dev_backend_name(dev_backend())
                                                       : "no device (host buffers only)");
    return &module->super;
}

/*
 * Called with the lower-priority components already installed in comm->c_coll: fill what
 * nobody provides, then save every slot we are about to take.  Fails (and so withdraws from
 * this communicator) only when a slot we take has no function to fall back on.
 */
static int gpu_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;

    mca_coll_gpu_gapfill(m, comm);
    /* every slot we take needs a function to hand host buffers to */
#define COLL_GPU_CHECK_SAVED(name)                                                           \
    if (NULL != m->super.coll_##name && NULL == comm->c_coll->coll_##name) {                 \
        opal_show_help("help-coll-gpu.txt", "no-fallback", true, #name,                      \
                       coll_gpu_comm_cid(comm));                                             \
        return OMPI_ERR_NOT_AVAILABLE;                                                       \
    }
    COLL_GPU_FOREACH_TAKEN(COLL_GPU_CHECK_SAVED)
#undef COLL_GPU_CHECK_SAVED

#define COLL_GPU_SAVE(name)                                           \
    if (NULL != m->super.coll_##name) {                               \
        m->prev_##name.fn = comm->c_coll->coll_##name;                \
        m->prev_##name.module = comm->c_coll->coll_##name##_module;   \
        OBJ_RETAIN(m->prev_##name.module);                            \
    }
    COLL_GPU_FOREACH_TAKEN(COLL_GPU_SAVE)
    /* MPI_Reduce_local's slot is taken only over a function to hand host buffers to (the gap
     * filling provides one whenever Open MPI has any); else it stays as it is */
    if (NULL == comm->c_coll->coll_reduce_local) {
        m->super.coll_reduce_local = NULL;
    }
    COLL_GPU_SAVE(reduce_local)
#undef COLL_GPU_SAVE

    m->released = false;
    return OMPI_SUCCESS;
}

/* Called once for every slot this module holds when the communicator goes away. */
static int gpu_module_disable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    (void) comm;
    gpu_module_release((mca_coll_gpu_module_t *) module);
    return OMPI_SUCCESS;
}
