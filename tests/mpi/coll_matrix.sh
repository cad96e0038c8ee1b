#!/bin/sh
# coll_matrix.sh - the whole MPI correctness matrix (test_coll.c) in one mpirun, on NP ranks
# (default 4).  make check runs it section by section (coll_types.sh ... coll_sizes.sh, so that
# a crash hides nothing else); this script is for running it by hand or on a GPU machine:
#   COLL_GPU_TEST_DEVICE=cuda tests/mpi/coll_matrix.sh
#   NP=2 COLL_GPU_TEST_FILTER='allreduce*dev*' tests/mpi/coll_matrix.sh --sections=types,sizes
. "$(dirname "$0")/mpitest.sh"
run_tap "${NP:-4}" "$MPI_TESTS/test_coll" "$@"
