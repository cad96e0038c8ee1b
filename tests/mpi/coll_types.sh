#!/bin/sh
# coll_types.sh - the MPI correctness matrix (test_coll.c), section types, on 4 ranks:
# every predefined type with every predefined op valid for it through every reduction, every
# type through every data-movement collective; and the self-checks of the comparison
. "$(dirname "$0")/mpitest.sh"
# coll/gpu's default configuration: every rank of a call passes the same kind of memory
# (the cases that mix kinds across ranks are coll_mixed.sh's)
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
run_tap 4 "$MPI_TESTS/test_coll" --kinds=uniform --sections=selfcheck,types "$@"
