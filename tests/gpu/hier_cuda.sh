#!/bin/sh
# hier_cuda.sh - tests/mpi/hier.sh with the cuda backend: MPI_Allreduce and MPI_Bcast on
# cudaMalloc buffers across emulated nodes (coll_gpu_emulate_nodes; 2 ranks as 2 nodes is 2
# GPUs as 2 nodes), node teams inside the nodes, UCX between the node leaders (device chunks
# staged through pinned host memory: cudaMemcpyAsync and the reduction kernel on the GPU), the
# path checked in every rank's log, and the two UCX failures falling back with right results.
# COLL_GPU_HIER_CHUNK (default here 1 MiB) sizes the chunks and the cases.
. "$(dirname "$0")/gputest.sh"
: "${COLL_GPU_HIER_CHUNK:=1048576}"
export COLL_GPU_HIER_CHUNK
exec "$top_srcdir/tests/mpi/hier.sh" "$@"
