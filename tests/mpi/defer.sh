#!/bin/sh
# defer.sh - test_defer on 2, 3 and 4 ranks under coll/gpu's defaults: programs whose device
# calls are all nonblocking, on communicators made by MPI_Comm_split_type (coll_gpu_defer.c).
# Every case right and none hung: device memory on every rank, kinds drawn per call and rank
# with libnbc's calls in flight between, 100 calls outstanding before the first wait, a
# nonblocking start before a blocking call of another communicator on half the ranks, and an
# erroneous count (MPI_ERR_COUNT on every rank, nothing written).  And the logs show what the
# calls decided: some device rank deferred a call and read every rank's note, calls found device
# memory on every rank, then took the node team (before, no nonblocking call took the team in a
# program without a blocking device call), and calls with host memory on some rank were staged.
# Then the hang watch of that wait: a rank late to a deferred call is reported
# (coll_gpu_hang_warn_seconds), and past coll_gpu_hang_error_seconds every rank's call fails.
# COLL_GPU_DEFER_SEED repeats a run (the seed is printed).
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_defer.$$
logs=${TMPDIR:-/tmp}/coll_gpu_defer_logs.$$
trap 'rm -rf "$out" "$logs"' EXIT
# each rank's log apart: lines of several ranks through one pipe may run into each other
ranklogs() { cat "$logs"/*/rank.*/stderr 2>/dev/null; }
seed=${COLL_GPU_DEFER_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
for np in 2 3 4; do
    rm -rf "$logs"
    COLL_GPU_TEST_RANK_LOGS="$logs" \
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$np" "$MPI_TESTS/test_defer" "$((seed + np))" >"$out" 2>&1
    rc=$?
    tap=$(grep -E '^(ok|not ok|1\.\.)' "$out")
    ! echo "$tap" | grep -q '^not ok' && echo "$tap" | grep -q '^1\.\.[1-9]'
    ok=$?
    [ "$rc" -eq 0 ] || ok=1
    t_ok "$ok" "$np ranks, seed $((seed + np)): exit $rc, $(echo "$tap" | grep -c '^ok') cases \
right, $(echo "$tap" | grep -c '^not ok') wrong"
    [ "$ok" -eq 0 ] || t_diag "$out" 40
    deferred=$(ranklogs | grep -c 'deferred (device memory here)')
    alldev=$(ranklogs | grep -c 'decided: device memory on every rank')
    mixed=$(ranklogs | grep -c 'decided: host memory on some rank')
    wrong=$(ranklogs | grep -c 'decided: erroneous')
    team=$(ranklogs | grep -E 'coll:gpu:i(allreduce|bcast) \(cid [0-9]+\): rank [0-9]+: .* -> ' \
        | grep -vc 'staged')
    [ "$deferred" -gt 0 ] && [ "$alldev" -ge "$np" ] && [ "$mixed" -ge $((100 * (np - 1))) ] \
        && [ "$wrong" -eq "$np" ] && [ "$team" -gt 0 ]
    t_ok $? "$np ranks: calls deferred ($deferred), decided device on every rank ($alldev, at \
least $np), host on some rank ($mixed, at least $((100 * (np - 1)))), erroneous on every \
rank ($wrong of $np); \
nonblocking calls on the node team ($team)"
    [ "$wrong" -eq "$np" ] || ranklogs | grep -E 'erroneous|decided' | head -20 | sed 's/^/# /'
    msg='erroneous MPI_Allreduce on communicator [0-9]* (call [0-9]*): the ranks. byte count'
    n=$(ranklogs | grep -c "$msg")
    [ "$n" -eq 1 ]
    t_ok $? "$np ranks: one message for the erroneous iallreduce naming the byte counts ($n)"
done
# the hang watch on a deferred call's wait for its peers' notes (2 ranks, the last one late)
for late in "2.5:--mca coll_gpu_hang_warn_seconds 1:" \
    "4:--mca coll_gpu_hang_warn_seconds 1 --mca coll_gpu_hang_error_seconds 2:error"; do
    secs=${late%%:*} rest=${late#*:} mca=${rest%:*} mode=${rest##*:}
    COLL_GPU_MPIRUN_ARGS="$mca ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" 2 "$MPI_TESTS/test_defer" 1 late "$secs" $mode >"$out" 2>&1
    rc=$?
    warned=$(grep -c 'rank 0 has waited [0-9]* s in MPI_Iallreduce .*memory-kind agreement' "$out")
    gave=$(grep -c 'rank 0 gave up after [0-9]* s in MPI_Iallreduce' "$out")
    want_gave=0
    [ "$mode" = error ] && want_gave=1
    [ "$rc" -eq 0 ] && grep -q '^ok 1' "$out" && [ "$warned" -eq 1 ] && [ "$gave" -eq "$want_gave" ]
    t_ok $? "a rank ${secs} s late to a deferred iallreduce (${mode:-warn}): exit $rc, warned \
($warned), gave up ($gave of $want_gave)"
    [ $? -eq 0 ] || t_diag "$out" 20
done
t_done
