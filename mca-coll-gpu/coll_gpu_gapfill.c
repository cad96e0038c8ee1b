/*
 * coll_gpu_gapfill.c - make `mpirun --mca coll gpu,tuned ./app` work.
 *
 * Open MPI 4.1 fails MPI_Init (or MPI_Intercomm_create, ...) unless every slot of a
 * communicator's collective table is filled, and tuned provides neither nonblocking nor
 * neighborhood collectives, nor anything on a one-process communicator or an intercommunicator.
 * When the user's component list leaves such gaps, coll/gpu loads Open MPI's own providers of
 * those functions (provider_names) from the component repository, as the framework would have
 * had they been listed, and installs their functions in the empty slots.  Nothing is loaded
 * when no slot is empty (the default component list).
 *
 * Open MPI 4.1 and 5.0 let the framework copy a module's pointers after enable; a slot that our
 * own module leaves NULL is not touched by it, so the provider's function and module are written
 * into the empty slot directly, with one reference per slot, which the framework's teardown
 * releases slot by slot exactly as for modules it installed itself.
 */
#include "ompi_config.h"

#include <dlfcn.h>
#include <string.h>

#include "opal/mca/base/base.h"
#include "opal/mca/base/mca_base_component_repository.h"
#include "opal/util/show_help.h"

#include "ompi/mca/coll/base/base.h"

#include "coll_gpu.h"

/* Every slot of the collective table, for the gap scan, but those MPI leaves empty on an
 * intercommunicator (below: Open MPI checks them on intracommunicators only). */
#define COLL_GPU_FOREACH_SLOT(X)                                                             \
    COLL_GPU_FOREACH_INTER(X) COLL_GPU_FOREACH_INTER_INIT(X)                                 \
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR(X) COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_NB(X)     \
    COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_INIT(X)                                            \
    X(barrier) X(ibarrier) X(barrier_init) X(reduce_local)
#define COLL_GPU_FOREACH_INTRA_ONLY_SLOT(X) \
    X(exscan) X(scan) X(iexscan) X(iscan) X(exscan_init) X(scan_init)

/* The providers, in the order they are asked (module->gap_modules has room for each):
 *   self     one-process communicators (where some of basic's algorithms are broken in 4.1,
 *            e.g. MPI_Exscan);
 *   inter    the blocking intercommunicator collectives, built on the local group's intra
 *            collectives (ahead of basic, as its higher priority would put it);
 *   ftagree  on 5.0 with fault tolerance enabled (mpirun --with-ft ulfm), the agreement slots
 *            (MPIX_Comm_agree, MPIX_Comm_iagree), which nothing else provides (ahead of basic,
 *            whose agreement ignores failures; it declines where fault tolerance is off);
 *   basic    blocking and neighborhood collectives, and the intercommunicator ones inter lacks;
 *   libnbc   nonblocking ones, intercommunicators included, with its progress engine. */
static const char *const provider_names[] = {"self", "inter" COLL_GPU_FT_PROVIDERS, "basic",
                                             "libnbc"};
#define N_PROVIDERS (int) (sizeof(provider_names) / sizeof(provider_names[0]))
_Static_assert(N_PROVIDERS <= sizeof(((mca_coll_gpu_module_t *) 0)->gap_modules)
                                 / sizeof(((mca_coll_gpu_module_t *) 0)->gap_modules[0]),
               "one gap_modules entry per provider");

typedef struct gap_provider_t {
    bool tried;
    void *dl;                                   /* the provider's DSO */
    const coll_gpu_base_component_t *component;
    const coll_gpu_base_component_t *opened; /* open_component succeeded: close it at the end */
} gap_provider_t;

static gap_provider_t providers[N_PROVIDERS];
static opal_mutex_t gapfill_lock = OPAL_MUTEX_STATIC_INIT;

/* Is any slot of the table empty that must not stay so? */
static bool has_gap(struct ompi_communicator_t *comm)
{
#define COLL_GPU_GAP(name) if (NULL == comm->c_coll->coll_##name) { return true; }
    COLL_GPU_FOREACH_SLOT(COLL_GPU_GAP)
    if (!OMPI_COMM_IS_INTER(comm)) {
        COLL_GPU_FOREACH_INTRA_ONLY_SLOT(COLL_GPU_GAP)
    }
    /* 5.0 with fault tolerance enabled: MPIX_Comm_agree calls its slot unchecked */
    if (COLL_GPU_FT_ENABLED()) {
        COLL_GPU_FOREACH_FT_SLOT(COLL_GPU_GAP)
    }
#undef COLL_GPU_GAP
    return false;
}

/* Is the named component already part of this process' coll framework? */
static bool framework_has(const char *name)
{
    mca_base_component_list_item_t *cli;

    OPAL_LIST_FOREACH (cli, &ompi_coll_base_framework.framework_components,
                       mca_base_component_list_item_t) {
        if (0 == strcmp(cli->cli_component->mca_component_name, name)) {
            return true;
        }
    }
    return false;
}

/* The provider when it is built into libmpi (Debian's 5.0 packages build every coll component
 * in; 4.1's are DSOs): the framework's static list holds every built-in component, also those
 * the user's component list left out. */
static const coll_gpu_base_component_t *provider_static(const char *name)
{
    const mca_base_component_t **sc = ompi_coll_base_framework.framework_static_components;

    for (int i = 0; NULL != sc && NULL != sc[i]; ++i) {
        if (0 == strcmp(sc[i]->mca_component_name, name)) {
            return (const coll_gpu_base_component_t *) sc[i];
        }
    }
    return NULL;
}

/* Find the provider among the built-in components, else its DSO in the component repository
 * (then load it), register its parameters, open it and run its init_query.  Leaves
 * p->component NULL when that is not possible. */
static void provider_load(gap_provider_t *p, const char *name)
{
    opal_list_t *items = NULL;
    mca_base_component_repository_item_t *ri, *found = NULL;
    const coll_gpu_base_component_t *component;
    char symbol[128];
    char path[4096];

    p->tried = true;
    component = provider_static(name);
    if (NULL != component) {
        goto check;
    }
    if (OPAL_SUCCESS != mca_base_component_repository_get_components(&ompi_coll_base_framework,
                                                                     &items)
        || NULL == items) {
        return;
    }
    OPAL_LIST_FOREACH (ri, items, mca_base_component_repository_item_t) {
        if (0 == strcmp(ri->ri_name, name)) {
            found = ri;
            break;
        }
    }
    if (NULL == found || NULL == found->ri_path) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:gapfill: coll/%s not in the repository",
                         name);
        return;
    }
    /* The repository keeps the path without its extension (the loader tries each one).  The
     * providers resolve their Open MPI symbols against the already-loaded libmpi. */
    snprintf(path, sizeof(path), "%s.so", found->ri_path);
    p->dl = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (NULL == p->dl) {
        p->dl = dlopen(found->ri_path, RTLD_NOW | RTLD_GLOBAL);
    }
    if (NULL == p->dl) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR, "coll:gpu:gapfill: cannot load %s: %s",
                         found->ri_path, dlerror());
        return;
    }
    snprintf(symbol, sizeof(symbol), "mca_coll_%s_component", name);
    component = (const coll_gpu_base_component_t *) dlsym(p->dl, symbol);
check:
    if (NULL == component
        || 0 != strcmp(component->collm_version.mca_type_name, "coll")
        || component->collm_version.mca_type_major_version
               != mca_coll_gpu_component.super.collm_version.mca_type_major_version
        || component->collm_version.mca_type_minor_version
               != mca_coll_gpu_component.super.collm_version.mca_type_minor_version
        || NULL == component->collm_comm_query) {
        COLL_GPU_VERBOSE(COLL_GPU_LOG_ERROR,
                         "coll:gpu:gapfill: coll/%s (%s) is not a usable coll component", name,
                         NULL != found ? found->ri_path : "built in");
        if (NULL != p->dl) {
            dlclose(p->dl);
            p->dl = NULL;
        }
        return;
    }
    if (NULL != component->collm_version.mca_register_component_params
        && OPAL_SUCCESS != component->collm_version.mca_register_component_params()) {
        return;
    }
    if (NULL != component->collm_version.mca_open_component
        && OPAL_SUCCESS != component->collm_version.mca_open_component()) {
        return;
    }
    p->opened = component;
    if (NULL != component->collm_init_query
        && OMPI_SUCCESS != component->collm_init_query(opal_using_threads(),
                                                       opal_using_threads())) {
        return;
    }
    p->component = component;
    COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:gapfill: loaded coll/%s to fill empty slots",
                     name);
}

/* A slot left empty (no provider, or one that declines) is found by enable, which then
 * withdraws coll/gpu from the communicator. */
void mca_coll_gpu_gapfill(mca_coll_gpu_module_t *module, struct ompi_communicator_t *comm)
{
    for (int i = 0; i < N_PROVIDERS && has_gap(comm); ++i) {
        gap_provider_t *p = &providers[i];
        mca_coll_base_module_t *pm;
        int prio = 0, filled = 0;

        if (framework_has(provider_names[i])) {
            continue; /* the framework already asked it; it declined this communicator */
        }
        OPAL_THREAD_LOCK(&gapfill_lock);
        if (!p->tried) {
            provider_load(p, provider_names[i]);
        }
        OPAL_THREAD_UNLOCK(&gapfill_lock);
        if (NULL == p->component) {
            continue;
        }
        pm = p->component->collm_comm_query(comm, &prio);
        if (NULL == pm) {
            continue;
        }
        if (NULL != pm->coll_module_enable && OMPI_SUCCESS != pm->coll_module_enable(pm, comm)) {
            OBJ_RELEASE(pm);
            continue;
        }
#define COLL_GPU_FILL(name)                                         \
    if (NULL == comm->c_coll->coll_##name && NULL != pm->coll_##name) { \
        comm->c_coll->coll_##name = pm->coll_##name;                \
        comm->c_coll->coll_##name##_module = pm;                    \
        OBJ_RETAIN(pm);                                             \
        ++filled;                                                   \
    }
        COLL_GPU_FOREACH_SLOT(COLL_GPU_FILL)
        COLL_GPU_FOREACH_INTRA_ONLY_SLOT(COLL_GPU_FILL)
        COLL_GPU_FOREACH_FT_SLOT(COLL_GPU_FILL)
#undef COLL_GPU_FILL
        COLL_GPU_VERBOSE(COLL_GPU_LOG_QUERY, "coll:gpu:gapfill (cid %d): coll/%s fills %d slots",
                         coll_gpu_comm_cid(comm), provider_names[i], filled);
        /* keep the creation reference until our module goes: the provider's module may keep
         * state that its functions use */
        module->gap_modules[module->n_gap_modules++] = pm;
    }
}

void mca_coll_gpu_gapfill_finalize(void)
{
    for (int i = 0; i < N_PROVIDERS; ++i) {
        gap_provider_t *p = &providers[i];
        if (NULL != p->opened && NULL != p->opened->collm_version.mca_close_component) {
            (void) p->opened->collm_version.mca_close_component();
        }
        /* the DSO stays mapped: a provider may have registered variables or callbacks that
         * Open MPI tears down after us */
        memset(p, 0, sizeof(*p));
    }
}
