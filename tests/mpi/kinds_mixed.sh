#!/bin/sh
# kinds_mixed.sh - test_kinds on 4 ranks that pass different kinds of memory in one call, with
# coll_gpu_uniform_buffers=false, the kinds changing from call to call with address reuse.
. "$(dirname "$0")/mpitest.sh"
COLL_GPU_TEST_UNIFORM=false
export COLL_GPU_TEST_UNIFORM
run_tap 4 "$MPI_TESTS/test_kinds" --mixed --expect-cache=on "$@"
