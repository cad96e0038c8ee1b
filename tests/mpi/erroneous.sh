#!/bin/sh
# erroneous.sh - test_erroneous on 2, 3 and 4 ranks under coll/gpu's defaults: erroneous
# allreduces, bcasts, allgathers, allgathervs, alltoallvs and reduces (blocking and nonblocking),
# reduce_scatters and reduce_scatter_blocks on device memory (counts, ops, types, roots that
# differ across ranks) return the error class on every rank, write no byte outside their
# buffers, hang nowhere, and the lowest rank's message names what differed; the communicator
# goes on.
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
t_done
