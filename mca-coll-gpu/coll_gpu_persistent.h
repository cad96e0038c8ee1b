/*
 * coll_gpu_persistent.h - the persistent collectives of coll/gpu (each in its collective's file;
 * MPI_Allreduce_init and MPI_Bcast_init in coll_gpu_nonblocking.c): the coll module's _init
 * slots they fill take MPI-4's MPI_<coll>_init calls on Open MPI 5.0 and the MPIX_<coll>_init
 * calls of 4.1's pcollreq extension (coll_gpu_compat.h: COLL_GPU_FOREACH_INTERCEPTED_INIT).
 */
#ifndef MCA_COLL_GPU_PERSISTENT_H
#define MCA_COLL_GPU_PERSISTENT_H

#include "coll_gpu.h"

BEGIN_C_DECLS

int mca_coll_gpu_allreduce_init(const void *sbuf, void *rbuf, int count,
                                struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_scan_init(const void *sbuf, void *rbuf, int count,
                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                           struct ompi_communicator_t *comm, struct ompi_info_t *info,
                           ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_exscan_init(const void *sbuf, void *rbuf, int count,
                             struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                             struct ompi_communicator_t *comm, struct ompi_info_t *info,
                             ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_reduce_init(const void *sbuf, void *rbuf, int count,
                             struct ompi_datatype_t *dtype, struct ompi_op_t *op, int root,
                             struct ompi_communicator_t *comm, struct ompi_info_t *info,
                             ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_reduce_scatter_init(const void *sbuf, void *rbuf, const int *rcounts,
                                     struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                     struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                     ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_reduce_scatter_block_init(const void *sbuf, void *rbuf, int rcount,
                                           struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                           struct ompi_communicator_t *comm,
                                           struct ompi_info_t *info, ompi_request_t **request,
                                           mca_coll_base_module_t *module);
int mca_coll_gpu_bcast_init(void *buf, int count, struct ompi_datatype_t *dtype, int root,
                            struct ompi_communicator_t *comm, struct ompi_info_t *info,
                            ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_gather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                             void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                             struct ompi_communicator_t *comm, struct ompi_info_t *info,
                             ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_gatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, const int *rcounts, const int *disps,
                              struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_allgather_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_allgatherv_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                                 void *rbuf, const int *rcounts, const int *disps,
                                 struct ompi_datatype_t *rdtype,
                                 struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                 ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_scatter_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                              void *rbuf, int rcount, struct ompi_datatype_t *rdtype, int root,
                              struct ompi_communicator_t *comm, struct ompi_info_t *info,
                              ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_scatterv_init(const void *sbuf, const int *scounts, const int *disps,
                               struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                               struct ompi_datatype_t *rdtype, int root,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_alltoall_init(const void *sbuf, int scount, struct ompi_datatype_t *sdtype,
                               void *rbuf, int rcount, struct ompi_datatype_t *rdtype,
                               struct ompi_communicator_t *comm, struct ompi_info_t *info,
                               ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_alltoallv_init(const void *sbuf, const int *scounts, const int *sdisps,
                                struct ompi_datatype_t *sdtype, void *rbuf, const int *rcounts,
                                const int *rdisps, struct ompi_datatype_t *rdtype,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_alltoallw_init(const void *sbuf, const int *scounts, const int *sdisps,
                                struct ompi_datatype_t *const *sdtypes, void *rbuf,
                                const int *rcounts, const int *rdisps,
                                struct ompi_datatype_t *const *rdtypes,
                                struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                ompi_request_t **request, mca_coll_base_module_t *module);
int mca_coll_gpu_neighbor_allgather_init(const void *sbuf, int scount,
                                         struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                         struct ompi_datatype_t *rdtype,
                                         struct ompi_communicator_t *comm,
                                         struct ompi_info_t *info, ompi_request_t **request,
                                         mca_coll_base_module_t *module);
int mca_coll_gpu_neighbor_allgatherv_init(const void *sbuf, int scount,
                                          struct ompi_datatype_t *sdtype, void *rbuf,
                                          const int *rcounts, const int *disps,
                                          struct ompi_datatype_t *rdtype,
                                          struct ompi_communicator_t *comm,
                                          struct ompi_info_t *info, ompi_request_t **request,
                                          mca_coll_base_module_t *module);
int mca_coll_gpu_neighbor_alltoall_init(const void *sbuf, int scount,
                                        struct ompi_datatype_t *sdtype, void *rbuf, int rcount,
                                        struct ompi_datatype_t *rdtype,
                                        struct ompi_communicator_t *comm,
                                        struct ompi_info_t *info, ompi_request_t **request,
                                        mca_coll_base_module_t *module);
int mca_coll_gpu_neighbor_alltoallv_init(const void *sbuf, const int *scounts,
                                         const int *sdisps, struct ompi_datatype_t *sdtype,
                                         void *rbuf, const int *rcounts, const int *rdisps,
                                         struct ompi_datatype_t *rdtype,
                                         struct ompi_communicator_t *comm,
                                         struct ompi_info_t *info, ompi_request_t **request,
                                         mca_coll_base_module_t *module);
int mca_coll_gpu_neighbor_alltoallw_init(const void *sbuf, const int *scounts,
                                         const MPI_Aint *sdisps,
                                         struct ompi_datatype_t *const *sdtypes, void *rbuf,
                                         const int *rcounts, const MPI_Aint *rdisps,
                                         struct ompi_datatype_t *const *rdtypes,
                                         struct ompi_communicator_t *comm,
                                         struct ompi_info_t *info, ompi_request_t **request,
                                         mca_coll_base_module_t *module);

END_C_DECLS

#endif /* MCA_COLL_GPU_PERSISTENT_H */
