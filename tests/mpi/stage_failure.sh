#!/bin/sh
# stage_failure.sh - a rank whose host staging fails still takes part in the collective
# (test_lifecycle stagefail), on 4 ranks: the test switch COLL_GPU_TEST_FAIL_STAGE=2 makes
# every staging copy of rank 2 fail; allreduce, bcast, allgather(v) and alltoall(v) are forced
# onto the staged path.  That rank must get an error and its peers must return; a hang fails
# through COLL_GPU_TEST_TIMEOUT.
. "$(dirname "$0")/mpitest.sh"
COLL_GPU_TEST_FAIL_STAGE=2
OMPI_MCA_coll_gpu_allreduce_algorithm=staged
OMPI_MCA_coll_gpu_bcast_algorithm=staged
OMPI_MCA_coll_gpu_exchange_algorithm=staged
COLL_GPU_TEST_TIMEOUT=120
export COLL_GPU_TEST_FAIL_STAGE OMPI_MCA_coll_gpu_allreduce_algorithm \
    OMPI_MCA_coll_gpu_bcast_algorithm OMPI_MCA_coll_gpu_exchange_algorithm COLL_GPU_TEST_TIMEOUT
run_tap 4 "$MPI_TESTS/test_lifecycle" stagefail "$@"
