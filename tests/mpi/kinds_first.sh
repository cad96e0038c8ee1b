#!/bin/sh
# kinds_first.sh - test_kinds_first on 4 ranks under coll/gpu's defaults: even and odd ranks
# keep different kinds of memory for the whole run, as MPICH's test suite does with
# -evenmemtype/-oddmemtype.  Every blocking allreduce and bcast agrees on its ranks' kinds
# (coll_gpu_kinds.c), finds them mixed and is staged on every rank; the nonblocking ones are
# staged too (no blocking call had device memory on every rank): every case right, none hung,
# and no allreduce or bcast took a GPU path.  The same program with one kind on every rank
# takes the fast path for every blocking call.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_kinds_first.$$
logs=${TMPDIR:-/tmp}/coll_gpu_kinds_first_logs.$$
trap 'rm -rf "$out" "$logs"' EXIT

# run EVEN ODD: the program, its TAP checked, each rank's log apart under $logs
run() {
    rm -rf "$logs"
    COLL_GPU_TEST_RANK_LOGS="$logs" COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 \
${COLL_GPU_MPIRUN_ARGS:-}" "$RUN_MPI" 4 "$MPI_TESTS/test_kinds_first" "$1" "$2" >"$out" 2>&1
    rc=$?
    tap=$(grep -E '^(ok|not ok|1\.\.)' "$out")
    ! echo "$tap" | grep -q '^not ok' && echo "$tap" | grep -q '^1\.\.[1-9]'
    ok=$?
    [ "$rc" -eq 0 ] || ok=1
    t_ok "$ok" "even ranks $1, odd ranks $2: exit $rc, $(echo "$tap" | grep -c '^ok') cases \
right, $(echo "$tap" | grep -c '^not ok') wrong"
    [ "$ok" -eq 0 ] || t_diag "$out" 40
}
ranklogs() { cat "$logs"/*/rank.*/stderr 2>/dev/null; }

for pair in "device host" "host device" "managed host" "device pinned"; do
    # shellcheck disable=SC2086
    run $pair
    staged=$(ranklogs | grep -E 'coll:gpu:(allreduce|bcast) ' | grep -c 'host memory on some rank')
    fast=$(ranklogs | grep -E 'coll:gpu:i?(allreduce|bcast) .* -> ' | grep -vc 'staged')
    [ "$staged" -gt 0 ] && [ "$fast" -eq 0 ]
    t_ok $? "even ranks ${pair% *}, odd ranks ${pair#* }: the device ranks' allreduces and \
bcasts were staged for host memory on some rank ($staged lines), none took a GPU path ($fast)"
done
run device device
fast=$(ranklogs | grep -E 'coll:gpu:(allreduce|bcast) .* -> ' | grep -vc 'staged')
staged=$(ranklogs | grep -E 'coll:gpu:(allreduce|bcast) .*staged' | grep -vc 'intercommunicator')
[ "$fast" -ge 60 ] && [ "$staged" -eq 0 ]
t_ok $? "device on every rank: every blocking allreduce and bcast took a GPU path ($fast lines, \
at least 60), none staged ($staged)"
t_done
