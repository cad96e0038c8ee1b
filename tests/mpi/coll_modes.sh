#!/bin/sh
# coll_modes.sh - the MPI correctness matrix (test_coll.c), section modes, on 4 ranks:
# every collective x buffer mode (host, dev, mixed, root-dev, root-host, send-dev/recv-host,
# send-host/recv-dev) x in-place x communicator (world, odd/even split, uneven split, dup,
# self)
. "$(dirname "$0")/mpitest.sh"
# coll/gpu's default configuration: every rank of a call passes the same kind of memory
# (the cases that mix kinds across ranks are coll_mixed.sh's)
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
run_tap 4 "$MPI_TESTS/test_coll" --kinds=uniform --sections=modes "$@"
