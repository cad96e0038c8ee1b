#!/bin/sh
# regcache_oneshot.sh - no stale IPC mapping after free and re-allocation; LRU eviction (test_regcache.c),
# one-shot allreduce forced (zero-copy from the peers' send buffers), 3 ranks, emulated device.
. "$(dirname "$0")/../mpi/mpitest.sh"
COLL_GPU_TEST_UNIFORM=true
COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_allreduce_algorithm oneshot"
export COLL_GPU_TEST_UNIFORM COLL_GPU_MPIRUN_ARGS
run_tap "${COLL_GPU_TEST_NP:-3}" "$top_builddir/tests/fastpath/test_regcache"
