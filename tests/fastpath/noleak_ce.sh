#!/bin/sh
# noleak_ce.sh - test_noleak.c with the allreduce forced onto the copy-engine two-shot, whose
# staging buffer (device memory made on first use, a /dev/shm/collgpu-<pid>-<n> file on the
# emulated device) must be released with the team like its scratch.
. "$(dirname "$0")/../mpi/mpitest.sh"
COLL_GPU_TEST_UNIFORM=true
COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_allreduce_algorithm twoshot_ce"
export COLL_GPU_TEST_UNIFORM COLL_GPU_MPIRUN_ARGS
run_tap 3 "$top_builddir/tests/fastpath/test_noleak"
