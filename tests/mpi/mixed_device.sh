#!/bin/sh
# mixed_device.sh - one rank without a device among ranks with one (test_lifecycle mixed), on 4
# ranks, with coll_gpu_uniform_buffers=false: coll/gpu must be active on every rank, the
# deviceless one included, so that each agreement allreduce of its peers meets one of its own.
# Rank 1 is made deviceless by the test switch COLL_GPU_TEST_NO_DEVICE and, where there is no
# GPU (CI), also by asking it for coll_gpu_device=cuda, which a process cannot have here: so
# the case also runs on code that predates the switch.  A hang fails through
# COLL_GPU_TEST_TIMEOUT.
. "$(dirname "$0")/mpitest.sh"
COLL_GPU_TEST_UNIFORM=false
COLL_GPU_TEST_NO_DEVICE=1
COLL_GPU_TEST_TIMEOUT=120
export COLL_GPU_TEST_UNIFORM COLL_GPU_TEST_NO_DEVICE COLL_GPU_TEST_TIMEOUT
run_tap 4 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = "$COLL_GPU_TEST_NO_DEVICE" ]; then
    OMPI_MCA_coll_gpu_device=cuda; export OMPI_MCA_coll_gpu_device; fi; exec "$@"' sh \
    "$MPI_TESTS/test_lifecycle" mixed "$@"
