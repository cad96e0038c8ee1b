/*
 * coll_gpu_compat.h - every Open MPI version switch of coll/gpu, and nothing else.
 *
 * configure accepts only the 4.1 series (coll component 2.0.0, module 2.3.0); this header keeps
 * the accessors that differ between series in one place so that a port touches one file.
 */
#ifndef MCA_COLL_GPU_COMPAT_H
#define MCA_COLL_GPU_COMPAT_H

#include "ompi_config.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"

#if OMPI_MAJOR_VERSION != 4 || OMPI_MINOR_VERSION != 1
#error "coll/gpu supports the Open MPI 4.1 series only (see configure)"
#endif

#define COLL_GPU_COMPONENT_VERSION MCA_COLL_BASE_VERSION_2_0_0
typedef mca_coll_base_component_2_0_0_t coll_gpu_base_component_t;
typedef mca_coll_base_module_2_3_0_t coll_gpu_base_module_t;

/* The communicator id printed in log lines (4.1: the context id; 5.0: the local cid). */
static inline int coll_gpu_comm_cid(ompi_communicator_t *comm)
{
    return (int) ompi_comm_get_cid(comm);
}

#endif /* MCA_COLL_GPU_COMPAT_H */
