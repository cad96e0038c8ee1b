#!/bin/sh
# coll_matrix_cuda.sh - the MPI correctness matrix (tests/mpi/test_coll.c) with the cuda
# backend, 2 ranks: one GPU each when there are two, else both on one GPU.
. "$(dirname "$0")/gputest.sh"
# COLL_GPU_MATRIX_ARGS (e.g. --quick) trims the matrix where device time is short.
run_tap "${COLL_GPU_TEST_NP:-2}" "$MPI_TESTS/test_coll" ${COLL_GPU_MATRIX_ARGS:-} "$@"
