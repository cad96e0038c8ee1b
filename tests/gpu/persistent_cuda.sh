#!/bin/sh
# persistent_cuda.sh - fastpath/persistent.sh with the cuda backend (Open MPI 5.0; on 4.1 as its MPIX_ calls):
# MPI_Allreduce_init and MPI_Bcast_init on device buffers through the node team's nonblocking
# path on the machine's GPUs, 2 and 3 ranks: every forced algorithm on every start, results
# right, and a rank failing locally in every start (3 ranks sharing one GPU with fused starts
# hung before a rank that sits out released its peers' kernels itself).
. "$(dirname "$0")/gputest.sh"
exec "$top_srcdir/tests/fastpath/persistent.sh" "$@"
