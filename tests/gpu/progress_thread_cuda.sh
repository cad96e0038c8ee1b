#!/bin/sh
# progress_thread_cuda.sh - mpi/progress_thread.sh with the cuda backend: a node team's requests
# completed by a thread with no CUDA context, and (on a machine with two GPUs or more) by a
# thread on another GPU; each thread keeps its own device.
. "$(dirname "$0")/gputest.sh"
exec "$top_srcdir/tests/mpi/progress_thread.sh" "$@"
