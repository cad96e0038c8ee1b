#!/bin/sh
# big_count_cuda.sh - mpi/big_count.sh (bcast and allreduce of more than 2 GiB on device
# buffers, 2 ranks) with the cuda backend.
. "$(dirname "$0")/gputest.sh"
exec "$top_srcdir/tests/mpi/big_count.sh" "$@"
