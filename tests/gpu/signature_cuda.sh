#!/bin/sh
# signature_cuda.sh - tests/mpi/signature.sh with the cuda backend on 2 ranks: ranks passing
# different datatypes of one signature to bcast, gather, scatter, allgather, alltoall,
# allreduce and reduce under the default and each forced algorithm, buffers drawn per rank from
# cudaMalloc, cudaMallocAsync (not exportable through the legacy IPC) and managed memory, the
# erroneous bcast that must fail on every rank without a hang, MPI_INT against its dup.  Skips
# where nvidia-smi lists no GPU.
. "$(dirname "$0")/gputest.sh"
COLL_GPU_SIGNATURE_NP=${COLL_GPU_SIGNATURE_NP:-2}
export COLL_GPU_SIGNATURE_NP
exec sh "$top_srcdir/tests/mpi/signature.sh" "$@"
