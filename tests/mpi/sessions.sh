#!/bin/sh
# sessions.sh - Open MPI 5.0: collectives on a communicator made from an MPI-4 session, in a
# program that never calls MPI_Init (test_sessions: no MPI_COMM_WORLD exists there), 3 ranks,
# on one node and across 2 emulated nodes; device memory on every rank and mixed with host
# memory, and a second session after the first.  Before coll/gpu stopped reading
# MPI_COMM_WORLD's size, every device call crashed.  COLL_GPU_TEST_SYNC_DIR is where the ranks
# meet between the two sessions (test_sessions.c, epoch_barrier: Open MPI 5.0's shared-memory
# BTL races a peer still finalizing, about one run in ten without it, and rarely with it).
# The ranks talk over TCP on the loopback interface here, not shared memory: under load the
# shared-memory BTL of the second session still failed to open a segment of the first, about
# one run in 60 on a loaded 2-core machine (and this test failed once in CI); over TCP, 0 in
# 60.  The BTL is not what this test is about.  A run that fails in that way only is run once
# more, and says so.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_sessions.$$
trap 'rm -rf "$out" "$out".*' EXIT
COLL_GPU_TEST_DEVICE=${COLL_GPU_TEST_DEVICE:-emulated}
export COLL_GPU_TEST_DEVICE
base=${COLL_GPU_MPIRUN_ARGS:-}
for nodes in 1 2; do
    COLL_GPU_MPIRUN_ARGS="$base --mca coll_gpu_emulate_nodes $nodes --mca btl self,tcp"
    COLL_GPU_MPIRUN_ARGS="$COLL_GPU_MPIRUN_ARGS --mca btl_tcp_if_include lo"
    export COLL_GPU_MPIRUN_ARGS
    COLL_GPU_TEST_SYNC_DIR=$out.sync.$nodes
    export COLL_GPU_TEST_SYNC_DIR
    again=
    for try in 1 2; do
        rm -rf "$COLL_GPU_TEST_SYNC_DIR" && mkdir "$COLL_GPU_TEST_SYNC_DIR" || exit 99
        "$RUN_MPI" 3 "$MPI_TESTS/test_sessions" >"$out" 2>"$out.err"
        rc=$?
        passed=$(grep -c '^ok ' "$out")
        # Open MPI's own race even so (the meeting makes it rare, not impossible): the first 12
        # cases right, and the second session's communicator not made because the BTL found a
        # peer unreachable.  Run once more then; any other failure, or this one twice, counts.
        if [ "$try" -eq 1 ] && [ "$rc" -ne 0 ] && [ "$passed" -eq 12 ] \
            && ! grep -q '^not ok' "$out" \
            && grep -q 'could not make a communicator from a second session' "$out.err" \
            && grep -q 'unable to reach each other' "$out.err"; then
            again=", run twice: Open MPI's sessions race (open-mpi/ompi issue 14125) the first time"
            continue
        fi
        break
    done
    ! grep -q '^not ok' "$out" && [ "$passed" -eq 13 ] && [ "$rc" -eq 0 ]
    t_ok $? "$nodes emulated node(s): $passed of 13 cases right on every rank (exit $rc$again)"
    [ "$passed" -eq 13 ] && [ "$rc" -eq 0 ] || { t_diag "$out"; t_diag "$out.err"; }
done
t_done
