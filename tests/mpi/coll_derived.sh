#!/bin/sh
# coll_derived.sh - the MPI correctness matrix (test_coll.c), section derived, on 4 ranks:
# derived and non-contiguous types (vector, struct resized to a positive and a negative lower
# bound) through the data-movement collectives, host/device/mixed
. "$(dirname "$0")/mpitest.sh"
# coll/gpu's default configuration: every rank of a call passes the same kind of memory
# (the cases that mix kinds across ranks are coll_mixed.sh's)
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
run_tap 4 "$MPI_TESTS/test_coll" --kinds=uniform --sections=derived "$@"
