#!/bin/sh
# kinds_sweep_cuda.sh - tests/mpi/kinds_sweep.sh with the cuda backend (2, 3 and 4 ranks on however many GPUs
# there are).  Skips where nvidia-smi lists no GPU.
. "$(dirname "$0")/gputest.sh"
exec sh "$top_srcdir/tests/mpi/kinds_sweep.sh" "$@"
