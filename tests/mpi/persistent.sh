#!/bin/sh
# persistent.sh - MPI-4's persistent collectives on device buffers (Open MPI 5.0 only):
# test_persistent, 4 ranks, every rank's buffers in device memory; each request started three
# times with fresh data and a poisoned output.
. "$(dirname "$0")/mpitest.sh"
run_tap 4 "$MPI_TESTS/test_persistent" dev "$@"
