#!/bin/sh
# coll_types.sh - the MPI correctness matrix (test_coll.c), section types, on 4 ranks:
# every predefined type with every predefined op valid for it through every reduction, every
# type through every data-movement collective; and the self-checks of the comparison
. "$(dirname "$0")/mpitest.sh"
run_tap 4 "$MPI_TESTS/test_coll" --sections=selfcheck,types "$@"
