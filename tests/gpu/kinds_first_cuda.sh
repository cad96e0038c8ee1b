#!/bin/sh
# kinds_first_cuda.sh - tests/mpi/kinds_first.sh with the cuda backend, 4 ranks (on however many
# GPUs there are): even and odd ranks keep different kinds of memory for the whole run
# (cudaMalloc, managed, cudaMallocHost, plain host), each communicator's first allreduce or bcast
# finds the kinds mixed and every later call there agrees first; every call right, none hung.
# Skips where nvidia-smi lists no GPU.
. "$(dirname "$0")/gputest.sh"
exec sh "$top_srcdir/tests/mpi/kinds_first.sh" "$@"
