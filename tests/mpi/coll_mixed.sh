#!/bin/sh
# coll_mixed.sh - the matrix's cases (every section) in which the ranks of one call pass
# different kinds of memory (modes mixed, root-dev, root-host), on 4 ranks, with
# coll_gpu_uniform_buffers=false as the README asks of programs that do that.
. "$(dirname "$0")/mpitest.sh"
COLL_GPU_TEST_UNIFORM=false
export COLL_GPU_TEST_UNIFORM
run_tap 4 "$MPI_TESTS/test_coll" --kinds=mixed "$@"
