#!/bin/sh
# exchange_failure.sh - a rank that cannot pack its part of an exchange (allgather and alltoall
# of a send type with gaps on device memory, coll_gpu_exchange.c) still takes part, on 3 ranks
# under the defaults (test_lifecycle exchfail): the test switch COLL_GPU_TEST_FAIL_STAGE=1 makes
# every staging copy of rank 1 fail; every rank must return an error, none hang (a hang fails
# through COLL_GPU_TEST_TIMEOUT), and the communicator must go on.
. "$(dirname "$0")/mpitest.sh"
COLL_GPU_TEST_FAIL_STAGE=1
COLL_GPU_TEST_TIMEOUT=120
export COLL_GPU_TEST_FAIL_STAGE COLL_GPU_TEST_TIMEOUT
run_tap 3 "$MPI_TESTS/test_lifecycle" exchfail "$@"
