#!/bin/sh
# defer_cuda.sh - tests/mpi/defer.sh with the cuda backend (2, 3 and 4 ranks on however many
# GPUs there are): nonblocking calls that decide their path per call.  Skips where nvidia-smi
# lists no GPU.
. "$(dirname "$0")/gputest.sh"
exec sh "$top_srcdir/tests/mpi/defer.sh" "$@"
