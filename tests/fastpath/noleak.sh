#!/bin/sh
# noleak.sh - teams release their device scratch and control blocks with the communicator and at
# MPI_Finalize (test_noleak.c), 3 ranks, emulated device, every rank checking its own files; so
# do persistent team requests freed unstarted, freed while active, or outliving their
# communicator.
. "$(dirname "$0")/../mpi/mpitest.sh"
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
run_tap 3 "$top_builddir/tests/fastpath/test_noleak"
