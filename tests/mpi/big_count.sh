#!/bin/sh
# big_count.sh - bcast and allreduce of more than 2 GiB, and a reduce_scatter_block of more than
# INT_MAX elements in all, on device buffers, 2 ranks (test_big.c).
# Skips itself when the machine lacks the memory.
. "$(dirname "$0")/mpitest.sh"
run_tap 2 "$MPI_TESTS/test_big" "$@"
