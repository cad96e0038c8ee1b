#!/bin/sh
# kinds_uniform.sh - test_kinds on 4 ranks, every rank passing the same kind of memory in a call
# (the default coll_gpu_uniform_buffers=true), the kind changing from call to call with address
# reuse across kinds; the classification cache must be on (Open MPI's memory hooks see munmap).
. "$(dirname "$0")/mpitest.sh"
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
run_tap 4 "$MPI_TESTS/test_kinds" --expect-cache=on "$@"
