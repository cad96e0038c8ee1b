#!/bin/sh
# mpi4py_device_cuda.sh - tests/mpi/mpi4py_device.sh with the cuda backend: mpi4py with
# __cuda_array_interface__ objects over cudaMalloc'd memory (2, 3 and 4 ranks on however many
# GPUs there are).  Skips where nvidia-smi lists no GPU, or where no python3 has mpi4py.
. "$(dirname "$0")/gputest.sh"
exec sh "$top_srcdir/tests/mpi/mpi4py_device.sh" "$@"
