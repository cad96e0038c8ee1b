#!/bin/sh
# coll_derived.sh - the MPI correctness matrix (test_coll.c), section derived, on 4 ranks:
# derived and non-contiguous types (vector, struct resized to a positive and a negative lower
# bound) through the data-movement collectives, host/device/mixed
. "$(dirname "$0")/mpitest.sh"
run_tap 4 "$MPI_TESTS/test_coll" --sections=derived "$@"
