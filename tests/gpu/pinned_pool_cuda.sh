#!/bin/sh
# pinned_pool_cuda.sh - mpi/pinned_pool.sh with the cuda backend: staged nonblocking and
# persistent calls pin no host memory per call once the pool is warm (each pinned two buffers
# with cudaHostAlloc before it), the pool keeps its bound, everything pinned is freed at
# MPI_Finalize, and a failing copy back completes its request with an error.  The copies back
# are asynchronous on a GPU anyway: COLL_GPU_EMULATED_ASYNC, which the script also sets for the
# emulated device, changes nothing here.
. "$(dirname "$0")/gputest.sh"
exec "$top_srcdir/tests/mpi/pinned_pool.sh" "$@"
