#!/bin/sh
# coll_user.sh - the MPI correctness matrix (test_coll.c), section user, on 4 ranks:
# user-defined ops, commutative and not, on predefined and derived (vector, negative lower
# bound) types, through every reduction
. "$(dirname "$0")/mpitest.sh"
# coll/gpu's default configuration: every rank of a call passes the same kind of memory
# (the cases that mix kinds across ranks are coll_mixed.sh's)
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
run_tap 4 "$MPI_TESTS/test_coll" --kinds=uniform --sections=user "$@"
