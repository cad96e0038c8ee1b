#!/bin/sh
# kinds_cuda.sh - test_kinds_cuda on 2 ranks with the cuda backend: every kind of memory a CUDA
# program allocates (pinned, plain, registered, cudaMallocAsync pool, cuMemCreate + cuMemMap,
# managed), addresses passing from pinned to device memory, ranks mixing kinds
# (coll_gpu_uniform_buffers=false).  Skips where nvidia-smi lists no GPU; where it lists one,
# a missing program or an unusable CUDA is a failure.
. "$(dirname "$0")/gputest.sh"
prog="$top_builddir/tests/gpu/test_kinds_cuda"
if [ ! -x "$prog" ]; then
    echo "1..1"
    echo "not ok 1 - test_kinds_cuda is not built (configure found no CUDA) on a machine with a GPU"
    exit 1
fi
COLL_GPU_TEST_UNIFORM=false
export COLL_GPU_TEST_UNIFORM
run_tap 2 "$prog" "$@"
