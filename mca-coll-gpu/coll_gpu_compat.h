/*
 * coll_gpu_compat.h - every Open MPI version switch of coll/gpu, and nothing else.
 *
 * One source builds against two series; configure reads the series from the installed headers
 * and builds the matching module (one binary serves one series: the framework accepts exactly
 * one coll API version per series).  The differences the code sees:
 *
 *                         4.1.x                            5.0.x
 *   coll component        2.0.0                            2.4.0
 *   module struct         2.3.0 (ft_event)                 2.4.0 (coll_agree, coll_iagree;
 *                                                          coll_revoke_local from 5.0.10)
 *   communicator id       ompi_comm_get_cid                ompi_comm_get_local_cid
 *   function pointers     the framework copies them after enable, in both series
 *   persistent colls      MPIX_*_init (mpiext pcollreq)    MPI_*_init, with their own requests
 *
 * 5.0.10 inserted coll_revoke_local before base_data without a version bump: a module built
 * against 5.0.0-5.0.9 headers and loaded by 5.0.10 or later (or the other way round) would
 * disagree with the library on where base_data lies.  configure reads the member from the
 * header (COLL_GPU_OMPI_HAS_REVOKE_LOCAL) and coll_gpu_runtime_mismatch() below refuses to
 * open the component when the running library differs.
 */
#ifndef MCA_COLL_GPU_COMPAT_H
#define MCA_COLL_GPU_COMPAT_H

#include "ompi_config.h"

#include <stdio.h>
#include <string.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/proc/proc.h"
#include "opal/util/proc.h"
#include "opal/util/info.h"
#include "ompi/mca/coll/coll.h"

/* set by configure (OMPI_DEFS in mca-coll-gpu/Makefile.am) */
#if !defined(COLL_GPU_OMPI_BUILT_MAJOR) || OMPI_MAJOR_VERSION != COLL_GPU_OMPI_BUILT_MAJOR \
    || OMPI_MINOR_VERSION != COLL_GPU_OMPI_BUILT_MINOR
#error "these Open MPI headers are not the ones configure found"
#endif

#if OMPI_MAJOR_VERSION == 4 && OMPI_MINOR_VERSION == 1
#define COLL_GPU_OMPI_5 0
#define COLL_GPU_COMPONENT_VERSION MCA_COLL_BASE_VERSION_2_0_0
typedef mca_coll_base_component_2_0_0_t coll_gpu_base_component_t;
#elif OMPI_MAJOR_VERSION == 5 && OMPI_MINOR_VERSION == 0
#define COLL_GPU_OMPI_5 1
#define COLL_GPU_COMPONENT_VERSION MCA_COLL_BASE_VERSION_2_4_0
typedef mca_coll_base_component_2_4_0_t coll_gpu_base_component_t;
/* 5.0 has no separate declaration macro for components */
#    ifndef OMPI_MODULE_DECLSPEC
#        define OMPI_MODULE_DECLSPEC OMPI_DECLSPEC
#    endif
#else
#error "coll/gpu supports the Open MPI 4.1 and 5.0 series (see configure)"
#endif

/* The persistent collectives coll/gpu takes (declared in coll_gpu.h from these lists): MPI-4's
 * MPI_<coll>_init on 5.0, and 4.1's MPIX_<coll>_init (its pcollreq extension, <mpi-ext.h>),
 * which fill the same slots with the same function types.  On an intercommunicator all but the
 * scans, which MPI defines on intracommunicators only. */
#define COLL_GPU_FOREACH_INTER_INIT(X)                                                 \
    X(allgather_init) X(allgatherv_init) X(allreduce_init) X(alltoall_init)            \
    X(alltoallv_init) X(alltoallw_init) X(bcast_init) X(gather_init) X(gatherv_init)   \
    X(reduce_init) X(reduce_scatter_init) X(reduce_scatter_block_init) X(scatter_init) \
    X(scatterv_init)
#define COLL_GPU_FOREACH_INTERCEPTED_INIT(X) \
    COLL_GPU_FOREACH_INTER_INIT(X) X(exscan_init) X(scan_init)
/* the neighborhood ones (intracommunicators with a topology); their slots share the function
 * types of the plain ones but alltoallw's, as for the blocking neighborhood collectives */
#define COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_INIT(X)                                 \
    X(neighbor_allgather_init) X(neighbor_allgatherv_init) X(neighbor_alltoall_init) \
    X(neighbor_alltoallv_init) X(neighbor_alltoallw_init)
typedef mca_coll_base_module_allgather_init_fn_t coll_gpu_neighbor_allgather_init_fn_t;
typedef mca_coll_base_module_allgatherv_init_fn_t coll_gpu_neighbor_allgatherv_init_fn_t;
typedef mca_coll_base_module_alltoall_init_fn_t coll_gpu_neighbor_alltoall_init_fn_t;
typedef mca_coll_base_module_alltoallv_init_fn_t coll_gpu_neighbor_alltoallv_init_fn_t;
typedef mca_coll_base_module_neighbor_alltoallw_init_fn_t coll_gpu_neighbor_alltoallw_init_fn_t;

/* The fault-tolerance agreement slots (ULFM's MPIX_Comm_agree, MPIX_Comm_iagree) of 5.0 builds
 * with FT support: filled by coll/ftagree, and needed only while FT is enabled at run time
 * (mpirun --with-ft ulfm); coll_gpu_gapfill.c fills them when the component list leaves them
 * empty, as it does the other slots.  None on 4.1. */
#if COLL_GPU_OMPI_5 && OPAL_ENABLE_FT_MPI
#    include "ompi/runtime/params.h"
#    define COLL_GPU_FOREACH_FT_SLOT(X) X(agree) X(iagree)
#    define COLL_GPU_FT_ENABLED() (ompi_ftmpi_enabled)
#    define COLL_GPU_FT_PROVIDERS , "ftagree"
#else
#    define COLL_GPU_FOREACH_FT_SLOT(X)
#    define COLL_GPU_FT_ENABLED() (false)
#    define COLL_GPU_FT_PROVIDERS
#endif

/* The value of key in comm's info as the program set it (MPI_Comm_set_info,
 * MPI_Comm_dup_with_info ...); false when it is not there.  Read from the communicator's own info
 * object: Open MPI 5.0 keeps a key no component subscribed to as an internal entry, which
 * MPI_Comm_get_info does not return (4.1 returns it). */
static inline bool coll_gpu_comm_info_get(ompi_communicator_t *comm, const char *key, char *out,
                                          size_t len)
{
    opal_info_t *info = comm->super.s_info;
    int flag = 0;

    if (NULL == info || 2 > len) {
        return false;
    }
#if COLL_GPU_OMPI_5
    {
        opal_cstring_t *value = NULL;
        if (OPAL_SUCCESS != opal_info_get(info, key, &value, &flag) || !flag || NULL == value) {
            return false;
        }
        snprintf(out, len, "%s", value->string);
        OBJ_RELEASE(value);
    }
#else
    if (OPAL_SUCCESS != opal_info_get(info, key, (int) len - 1, out, &flag) || !flag) {
        return false;
    }
    out[len - 1] = '\0';
#endif
    return true;
}

/* The communicator id printed in log lines (4.1: the context id; 5.0: the local cid). */
static inline int coll_gpu_comm_cid(ompi_communicator_t *comm)
{
#if COLL_GPU_OMPI_5
    return (int) ompi_comm_get_local_cid(comm);
#else
    return (int) ompi_comm_get_cid(comm);
#endif
}

/*
 * This process's rank in MPI_COMM_WORLD and the world's size, for the testing parameters that
 * name a process by that rank and for the emulated nodes.  Not through MPI_COMM_WORLD itself:
 * a program of MPI-4 sessions never makes it (5.0 leaves its group unset, and its size would
 * crash), so from the process's name (its rank in the job: the same number) and the job's
 * size, which 4.1, without sessions, has only in MPI_COMM_WORLD.
 */
static inline int coll_gpu_world_rank(void)
{
    return (int) ompi_proc_local()->super.proc_name.vpid;
}

static inline int coll_gpu_world_size(void)
{
#if COLL_GPU_OMPI_5
    return (int) opal_process_info.num_procs;
#else
    return ompi_comm_size(&ompi_mpi_comm_world.comm);
#endif
}

/*
 * NULL when the running Open MPI lays out the coll module as the headers coll/gpu was built
 * against did, else why not (for the message that refuses to open the component).  The series
 * itself needs no check (the framework already refuses a component of another coll API
 * version); within 5.0 the layout changed at 5.0.10.  MPI_Get_library_version may be called
 * before MPI_Init.
 */
static inline const char *coll_gpu_runtime_mismatch(char *why, size_t len)
{
#if COLL_GPU_OMPI_5
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0, major = 0, minor = 0, release = 0;
    const char *v;
    bool built_revoke, run_revoke;

    if (MPI_SUCCESS != MPI_Get_library_version(version, &n)
        || NULL == (v = strstr(version, "Open MPI v"))
        || 3 != sscanf(v, "Open MPI v%d.%d.%d", &major, &minor, &release)) {
        return NULL; /* not readable: nothing to compare (the framework checked the series) */
    }
#    ifdef COLL_GPU_OMPI_HAS_REVOKE_LOCAL
    built_revoke = true;
#    else
    built_revoke = false;
#    endif
    run_revoke = 5 < major || (5 == major && (0 < minor || 10 <= release));
    if (built_revoke != run_revoke) {
        snprintf(why, len,
                 "built against Open MPI %d.%d.%d, whose coll module %s coll_revoke_local, "
                 "but running on %d.%d.%d, whose module %s it (the member was added in "
                 "5.0.10): rebuild coll/gpu against the running Open MPI's headers",
                 COLL_GPU_OMPI_BUILT_MAJOR, COLL_GPU_OMPI_BUILT_MINOR,
                 COLL_GPU_OMPI_BUILT_RELEASE, built_revoke ? "has" : "lacks", major, minor,
                 release, run_revoke ? "has" : "lacks");
        return why;
    }
#else
    (void) why;
    (void) len;
#endif
    return NULL;
}

#endif /* MCA_COLL_GPU_COMPAT_H */
