#!/bin/sh
# coll_matrix_np3.sh - the matrix's quick subset on 3 ranks: a communicator size that is not a
# power of two, and an odd/even split into 2 and 1 ranks; every buffer-kind mix, with
# coll_gpu_uniform_buffers=false.
. "$(dirname "$0")/mpitest.sh"
COLL_GPU_TEST_UNIFORM=false
export COLL_GPU_TEST_UNIFORM
run_tap 3 "$MPI_TESTS/test_coll" --quick --kinds=all "$@"
