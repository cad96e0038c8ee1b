/*
 * coll_gpu_persistent.h - the persistent collectives of coll/gpu (each in its collective's file;
 * MPI_Allreduce_init and MPI_Bcast_init in coll_gpu_nonblocking.c): the coll module's _init
 * slots they fill take MPI-4's MPI_<coll>_init calls on Open MPI 5.0 and the MPIX_<coll>_init
 * calls of 4.1's pcollreq extension (coll_gpu_compat.h: COLL_GPU_FOREACH_INTERCEPTED_INIT).
 *
 * Each is declared from its slot's own function type, over the lists that fill the slots: the
 * prototypes cannot drift from the slots (or from each other), and a new _init is one name in
 * a list.  All of them are thin entries of the one staged path (coll_gpu_staged_colls.c).
 */
#ifndef MCA_COLL_GPU_PERSISTENT_H
#define MCA_COLL_GPU_PERSISTENT_H

#include "coll_gpu.h"

BEGIN_C_DECLS

/* int mca_coll_gpu_<name>(the arguments of the slot <name>) */
#define COLL_GPU_DECLARE_INIT(name) \
    __typeof__(*(mca_coll_base_module_##name##_fn_t) 0) mca_coll_gpu_##name;
#define COLL_GPU_DECLARE_NEIGHBOR_INIT(name) \
    __typeof__(*(coll_gpu_##name##_fn_t) 0) mca_coll_gpu_##name;
COLL_GPU_FOREACH_INTERCEPTED_INIT(COLL_GPU_DECLARE_INIT)
COLL_GPU_FOREACH_INTERCEPTED_NEIGHBOR_INIT(COLL_GPU_DECLARE_NEIGHBOR_INIT)
#undef COLL_GPU_DECLARE_INIT
#undef COLL_GPU_DECLARE_NEIGHBOR_INIT

END_C_DECLS

#endif /* MCA_COLL_GPU_PERSISTENT_H */
