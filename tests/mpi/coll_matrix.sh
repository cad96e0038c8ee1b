#!/bin/sh
# coll_matrix.sh - the MPI correctness matrix (test_coll.c) on 4 ranks: every collective x
# types x ops x sizes x in-place x communicators x host/device/mixed buffers.
# Arguments go to test_coll (--sections=..., --list); COLL_GPU_TEST_FILTER picks cases.
. "$(dirname "$0")/mpitest.sh"
run_tap 4 "$MPI_TESTS/test_coll" "$@"
