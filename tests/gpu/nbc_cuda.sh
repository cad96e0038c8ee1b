#!/bin/sh
# nbc_cuda.sh - fastpath/nbc.sh with the cuda backend: MPI_Iallreduce and MPI_Ibcast on device
# buffers through the node team's nonblocking path on the machine's GPUs, 2 and 3 ranks (3 share
# a GPU on a 2-GPU machine): every forced algorithm taken by every call, results right with
# several calls outstanding on two communicators, calls that return before a late rank
# arrives, errors on every rank when one fails locally.
. "$(dirname "$0")/gputest.sh"
exec "$top_srcdir/tests/fastpath/nbc.sh" "$@"
