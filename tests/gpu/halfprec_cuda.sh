#!/bin/sh
# halfprec_cuda.sh - mpi/halfprec.sh with the cuda backend: libcollgpu's float16 and bfloat16
# reduced by the GPU kernels under every allreduce algorithm, staged, and mixed across ranks.
. "$(dirname "$0")/gputest.sh"
exec "$top_srcdir/tests/mpi/halfprec.sh" "$@"
