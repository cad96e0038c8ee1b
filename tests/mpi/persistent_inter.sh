#!/bin/sh
# persistent_inter.sh - test_persistent inter, 4 ranks split 2+2 into an intercommunicator:
# persistent collectives on device buffers across the two groups (Open MPI 5.0; on 4.1 as its MPIX_ calls).
. "$(dirname "$0")/mpitest.sh"
run_tap 4 "$MPI_TESTS/test_persistent" inter "$@"
