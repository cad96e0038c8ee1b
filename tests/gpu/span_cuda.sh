#!/bin/sh
# span_cuda.sh - tests/mpi/span.sh with the cuda backend, 4 ranks: MPI_BOTTOM types whose
# blocks lie in several cudaMalloc allocations, or in device and host memory (plain and
# cudaMallocHost) in either order.  Skips where nvidia-smi lists no GPU.
. "$(dirname "$0")/gputest.sh"
exec sh "$top_srcdir/tests/mpi/span.sh" "$@"
