#!/bin/sh
# erroneous.sh - test_erroneous on 2, 3 and 4 ranks under coll/gpu's defaults: erroneous
# allreduces, bcasts, allgathers, allgathervs, alltoallvs and reduces (blocking and nonblocking),
# reduce_scatters and reduce_scatter_blocks on device memory (counts, ops, types, roots that
# differ across ranks) return the error class on every rank, write no byte outside their
# buffers, hang nowhere, and the lowest rank's message names what differed; the communicator
# goes on.  Then every pattern where the communicators agree by host collectives (as across
# hosts), and the blocking patterns across 2 emulated nodes.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_erroneous.$$
trap 'rm -f "$out"' EXIT
: "${COLL_GPU_TEST_TIMEOUT:=180}"
export COLL_GPU_TEST_TIMEOUT
for np in 2 3 4; do
    "$RUN_MPI" "$np" "$MPI_TESTS/test_erroneous" >"$out" 2>&1
    rc=$?
    tap=$(grep -E '^(ok|not ok|1\.\.)' "$out")
    ! echo "$tap" | grep -q '^not ok' && echo "$tap" | grep -q '^1\.\.[1-9]'
    ok=$?
    [ "$rc" -eq 0 ] || ok=1
    t_ok "$ok" "$np ranks: exit $rc, $(echo "$tap" | grep -c '^ok') patterns right, \
$(echo "$tap" | grep -c '^not ok') wrong"
    [ "$ok" -eq 0 ] || t_diag "$out" 40
    # the agreement's line, or the node team's records' (where no agreement ran: the promise of
    # mpi_assert_memory_alloc_kinds)
    n=$(grep -cE 'coll/gpu: (erroneous MPI_|MPI_[A-Za-z_]+ on communicator .* is erroneous)' "$out")
    want=$(echo "$tap" | grep -cE '^(not )?ok ')
    [ "$n" -eq "$want" ] && [ "$want" -eq 17 ]
    t_ok $? "$np ranks: one message per erroneous call naming what differed ($n of $want, 17 patterns)"
    [ "$n" -eq "$want" ] || t_diag "$out" 20
done
# The agreement of communicators that span hosts (host collectives: rank 0's shared block made
# to fail, coll_gpu_test_fail_alloc_site=kinds_board), 2 and 3 ranks: every pattern right, one
# message each (the details compared through one host allgather; without it a user op that
# differs hung)
for np in 2 3; do
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_test_fail_alloc 0 --mca coll_gpu_test_fail_alloc_site \
kinds_board --mca coll_gpu_verbose 5 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$np" "$MPI_TESTS/test_erroneous" >"$out" 2>&1
    rc=$?
    right=$(grep -c '^ok' "$out")
    n=$(grep -cE 'coll/gpu: (erroneous MPI_|MPI_[A-Za-z_]+ on communicator .* is erroneous)' "$out")
    a=$(grep -c 'memory kinds agreed per call by a host allreduce' "$out")
    [ "$rc" -eq 0 ] && [ "$right" -eq 17 ] && [ "$n" -eq 17 ] && [ "$a" -gt 0 ]
    t_ok $? "$np ranks agreeing by host collectives (as across hosts): exit $rc, $right of 17 \
patterns right, $n messages naming what differed ($a communicators agreeing so)"
    [ "$rc" -eq 0 ] && [ "$right" -eq 17 ] || t_diag "$out" 40
done
# Across 2 emulated nodes (the hierarchical path, or staged between nodes), 1 + 1 and 2 + 2
# ranks: the blocking patterns.  Under the promise of device memory no per-call agreement ran
# and the leaders' chains hung on counts that differ; a staged alltoallv hung in the component
# below.  The nonblocking ones across nodes are staged where nothing can compare them before
# they start (a nonblocking call does not wait for its peers): Open MPI's own behaviour.
blocking="count op user-op type type-kernel root bcast-count allgather-count rsb-count rsb-op \
allgatherv-count alltoallv-count rs-count reduce-count reduce-count-promise"
for np in 2 4; do
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_emulate_nodes 2 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$np" "$MPI_TESTS/test_erroneous" $blocking >"$out" 2>&1
    rc=$?
    tap=$(grep -E '^(ok|not ok|1\.\.)' "$out")
    right=$(echo "$tap" | grep -c '^ok')
    n=$(grep -cE 'coll/gpu: (erroneous MPI_|MPI_[A-Za-z_]+ on communicator .* is erroneous)' "$out")
    [ "$rc" -eq 0 ] && [ "$right" -eq 15 ] && [ "$n" -eq 15 ]
    t_ok $? "$np ranks across 2 nodes: exit $rc, $right of 15 blocking patterns right, \
$n messages naming what differed"
    [ "$rc" -eq 0 ] && [ "$right" -eq 15 ] || t_diag "$out" 40
done
t_done
