/*
 * coll_gpu_module.c - module lifecycle of coll/gpu: init_query, comm_query, enable, disable.
 *
 * init_query opens the device backend once per process; when it cannot (no driver, no GPU)
 * and the user left coll_gpu_device at auto, the component withdraws silently, so a machine
 * without GPUs pays nothing.  comm_query disqualifies what coll/gpu does not serve
 * (intercommunicators) and hands out a module; enable fills the slots no other component
 * provides (coll_gpu_gapfill.c) and saves the function that held each slot we take, with a
 * reference on its module, before it can no longer fail.
 */
#include "ompi_config.h"

#include "opal/util/show_help.h"

#include "coll_gpu.h"

static int gpu_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);
static int gpu_module_disable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);

static void gpu_module_construct(mca_coll_gpu_module_t *module)
{
    memset((char *) module + sizeof(module->super), 0, sizeof(*module) - sizeof(module->super));
}

/* Drop the references enable() took.  Safe to call any number of times. */
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
    COLL_GPU_FOREACH_INTERCEPTED(COLL_GPU_RELEASE_SAVED)
    COLL_GPU_FOREACH_INTERCEPTED_NB(COLL_GPU_RELEASE_SAVED)
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR(COLL_GPU_RELEASE_SAVED)
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_NB(COLL_GPU_RELEASE_SAVED)
#undef COLL_GPU_RELEASE_SAVED
    for (int i = 0; i < module->n_gap_modules; ++i) {
        OBJ_RELEASE(module->gap_modules[i]);
        module->gap_modules[i] = NULL;
    }
    module->n_gap_modules = 0;
    mca_coll_gpu_team_destroy(module);
    mca_coll_gpu_bounce_release(module);
    mca_coll_gpu_adapt_release(module);
}

static void gpu_module_destruct(mca_coll_gpu_module_t *module)
{
    gpu_module_release(module);
}

OBJ_CLASS_INSTANCE(mca_coll_gpu_module_t, mca_coll_base_module_t, gpu_module_construct,
                   gpu_module_destruct);

/* Open the backend the user asked for.  Returns OMPI_SUCCESS when coll/gpu can serve device
 * buffers in this process. */
int mca_coll_gpu_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    mca_coll_gpu_component_t *c = &mca_coll_gpu_component;
    dev_backend_t backend;
    int rc;

    (void) enable_progress_threads;
    (void) enable_mpi_threads;

    if (c->dev_tried) {
        return c->dev_opened ? OMPI_SUCCESS : OMPI_ERR_NOT_AVAILABLE;
    }
    c->dev_tried = true;
    backend = (COLL_GPU_DEVICE_EMULATED == c->device_choice) ? DEV_BACKEND_EMULATED
                                                              : DEV_BACKEND_CUDA;
    rc = dev_open(backend);
    c->dev_status = rc;
    if (DEV_OK == rc) {
        c->dev_opened = true;
        mca_coll_gpu_memhooks_init();
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:init_query: %s backend ready",
                         dev_backend_name(backend));
        return OMPI_SUCCESS;
    }
    if (COLL_GPU_DEVICE_AUTO == c->device_choice) {
        /* no GPU here: stay out of the way, quietly */
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY,
                         "coll:gpu:init_query: disqualifying: no usable CUDA device (%s)",
                         dev_error_string());
    } else {
        /* a plain line on stderr: Open MPI 4.1's mpirun intermittently garbles help messages
         * that several ranks send during MPI_Init ("Data unpack would read past end of buffer") */
        opal_output(0,
                    "coll:gpu: the %s device backend (coll_gpu_device) cannot be used in this "
                    "process: %s; coll/gpu withdraws: host-buffer collectives work as before, "
                    "device-buffer collectives will reach components that cannot handle them "
                    "(coll_gpu_device=auto stays out of the way silently where there is no GPU)",
                    dev_backend_name(backend), dev_error_string());
    }
    return OMPI_ERR_NOT_AVAILABLE;
}

mca_coll_base_module_t *mca_coll_gpu_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    mca_coll_gpu_module_t *module;

    if (!mca_coll_gpu_component.dev_opened) {
        return NULL;
    }
    if (OMPI_COMM_IS_INTER(comm)) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY,
                         "coll:gpu:comm_query (cid %d): disqualifying: intercommunicator",
                         coll_gpu_comm_cid(comm));
        return NULL;
    }
    if (0 > mca_coll_gpu_component.priority) {
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
#define COLL_GPU_SET_ENTRY(name) module->super.coll_##name = mca_coll_gpu_##name;
    COLL_GPU_FOREACH_INTERCEPTED(COLL_GPU_SET_ENTRY)
    COLL_GPU_FOREACH_INTERCEPTED_NB(COLL_GPU_SET_ENTRY)
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR(COLL_GPU_SET_ENTRY)
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_NB(COLL_GPU_SET_ENTRY)
#undef COLL_GPU_SET_ENTRY

    *priority = mca_coll_gpu_component.priority;
    COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY,
                     "coll:gpu:comm_query (cid %d): %d ranks, priority %d, %s backend",
                     coll_gpu_comm_cid(comm), ompi_comm_size(comm), *priority,
                     dev_backend_name(dev_backend()));
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
    int rc;

    rc = mca_coll_gpu_gapfill(m, comm);
    if (OMPI_SUCCESS != rc) {
        return rc;
    }

#define COLL_GPU_CHECK_SAVED(name)                                                           \
    if (NULL == comm->c_coll->coll_##name) {                                                 \
        opal_show_help("help-coll-gpu.txt", "no-fallback", true, #name,                      \
                       coll_gpu_comm_cid(comm));                                             \
        return OMPI_ERR_NOT_AVAILABLE;                                                       \
    }
    COLL_GPU_FOREACH_INTERCEPTED(COLL_GPU_CHECK_SAVED)
    COLL_GPU_FOREACH_INTERCEPTED_NB(COLL_GPU_CHECK_SAVED)
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR(COLL_GPU_CHECK_SAVED)
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_NB(COLL_GPU_CHECK_SAVED)
#undef COLL_GPU_CHECK_SAVED

#define COLL_GPU_SAVE(name)                                           \
    m->prev_##name.fn = comm->c_coll->coll_##name;                    \
    m->prev_##name.module = comm->c_coll->coll_##name##_module;       \
    OBJ_RETAIN(m->prev_##name.module);
    COLL_GPU_FOREACH_INTERCEPTED(COLL_GPU_SAVE)
    COLL_GPU_FOREACH_INTERCEPTED_NB(COLL_GPU_SAVE)
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR(COLL_GPU_SAVE)
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_NB(COLL_GPU_SAVE)
#undef COLL_GPU_SAVE

    m->enabled = true;
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
