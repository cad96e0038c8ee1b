#!/bin/sh
# coll_sizes.sh - the MPI correctness matrix (test_coll.c), section sizes, on 4 ranks:
# every collective at counts 0, 1, 7, 1023, 4099, 65537 and around the 1 MiB and 4 MiB
# staging chunks up to ~8 MiB
. "$(dirname "$0")/mpitest.sh"
# coll/gpu's default configuration: every rank of a call passes the same kind of memory
# (the cases that mix kinds across ranks are coll_mixed.sh's)
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
run_tap 4 "$MPI_TESTS/test_coll" --kinds=uniform --sections=sizes "$@"
