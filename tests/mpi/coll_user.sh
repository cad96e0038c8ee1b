#!/bin/sh
# coll_user.sh - the MPI correctness matrix (test_coll.c), section user, on 4 ranks:
# user-defined ops, commutative and not, on predefined and derived (vector, negative lower
# bound) types, through every reduction
. "$(dirname "$0")/mpitest.sh"
run_tap 4 "$MPI_TESTS/test_coll" --sections=user "$@"
