#!/bin/sh
# persistent_mixed.sh - test_persistent on 3 ranks whose buffers differ in kind: even ranks
# device, odd ranks host memory (the persistent path stages each rank's buffers on its own).
. "$(dirname "$0")/mpitest.sh"
run_tap 3 "$MPI_TESTS/test_persistent" mixed "$@"
