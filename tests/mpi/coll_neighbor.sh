#!/bin/sh
# coll_neighbor.sh - the MPI correctness matrix (test_coll.c), section neighbor, on 4 ranks:
# MPI_Neighbor_allgather(v), MPI_Neighbor_alltoall(v,w) and their MPI_Ineighbor_... twins on a
# periodic 1-D ring (MPI_Cart_create), a non-periodic 2x2 grid (MPI_PROC_NULL neighbours leave
# their receive blocks untouched) and a distributed graph with uneven in- and out-degrees
# (MPI_Dist_graph_create_adjacent), x buffer mode (host, dev, mixed across ranks,
# send-dev/recv-host, send-host/recv-dev) x counts 0, 1, 1023 x a predefined and derived types.
. "$(dirname "$0")/mpitest.sh"
# the matrix mixes kinds across the ranks of one call: coll_gpu_uniform_buffers=false
COLL_GPU_TEST_UNIFORM=false
export COLL_GPU_TEST_UNIFORM
run_tap 4 "$MPI_TESTS/test_coll" --kinds=all --sections=neighbor "$@"
