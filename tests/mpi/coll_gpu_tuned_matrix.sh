#!/bin/sh
# coll_gpu_tuned_matrix.sh - the matrix's modes section (every collective x buffer mode x
# in-place x communicator, MPI_COMM_SELF and 1-rank groups included) under the design card's
# `--mca coll gpu,tuned`, where coll/gpu itself fills in what tuned lacks; 4 ranks, every
# buffer-kind mix (coll_gpu_uniform_buffers=false).
. "$(dirname "$0")/mpitest.sh"
COLL_GPU_TEST_COLL=gpu,tuned
COLL_GPU_TEST_UNIFORM=false
export COLL_GPU_TEST_COLL COLL_GPU_TEST_UNIFORM
run_tap 4 "$MPI_TESTS/test_coll" --sections=modes --kinds=all "$@"
