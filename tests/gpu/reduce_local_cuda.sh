#!/bin/sh
# reduce_local_cuda.sh - mpi/reduce_local.sh with the cuda backend: MPI_Reduce_local on every
# pair of kinds (cudaMalloc, plain, pinned, managed, cudaMallocAsync), from threads too.
. "$(dirname "$0")/gputest.sh"
exec "$top_srcdir/tests/mpi/reduce_local.sh" "$@"
