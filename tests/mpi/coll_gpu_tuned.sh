#!/bin/sh
# coll_gpu_tuned.sh - the design card's command line: `--mca coll gpu,tuned`.  Blocking,
# nonblocking, neighborhood and MPI_COMM_SELF collectives must all work although tuned
# provides only the blocking ones (test_tuned.c), on 4 ranks.
. "$(dirname "$0")/mpitest.sh"
COLL_GPU_TEST_COLL=gpu,tuned
export COLL_GPU_TEST_COLL
run_tap 4 "$MPI_TESTS/test_tuned" "$@"
