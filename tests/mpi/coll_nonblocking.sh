#!/bin/sh
# coll_nonblocking.sh - the MPI correctness matrix (test_coll.c), section nonblocking, on 4
# ranks: every nonblocking collective (MPI_Iallreduce ... MPI_Iscatterv) x buffer mode (host,
# dev, mixed across ranks, root-dev, root-host, send-dev/recv-host, send-host/recv-dev) x in-place
# x communicator (world, odd/even split, self), completed by MPI_Wait or by polling MPI_Test;
# derived types; several requests in flight at once (MPI_Waitall, MPI_Testall).  Device
# buffers are staged through bounce memory owned by each request.
. "$(dirname "$0")/mpitest.sh"
# the matrix mixes kinds across the ranks of one call: coll_gpu_uniform_buffers=false
COLL_GPU_TEST_UNIFORM=false
export COLL_GPU_TEST_UNIFORM
run_tap 4 "$MPI_TESTS/test_coll" --kinds=all --sections=nonblocking "$@"
