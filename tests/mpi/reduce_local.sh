#!/bin/sh
# reduce_local.sh - MPI_Reduce_local on every pair of memory kinds, four reductions (a user op
# that does not commute, a type with gaps), three counts, and from 4 threads at once
# (test_reduce_local.c); 2 ranks, each on its own.  Open MPI's own MPI_Reduce_local reads
# device memory on the host: a segfault before coll/gpu took the call.
. "$(dirname "$0")/mpitest.sh"
: "${COLL_GPU_TEST_TIMEOUT:=300}"
export COLL_GPU_TEST_TIMEOUT
run_tap 2 "$MPI_TESTS/test_reduce_local" "$@"
