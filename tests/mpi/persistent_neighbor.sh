#!/bin/sh
# persistent_neighbor.sh - test_persistent neighbor, 4 ranks: the persistent neighborhood
# collectives on device buffers, on a periodic and a non-periodic ring (Open MPI 5.0; on 4.1 as its MPIX_ calls).
. "$(dirname "$0")/mpitest.sh"
run_tap 4 "$MPI_TESTS/test_persistent" neighbor "$@"
