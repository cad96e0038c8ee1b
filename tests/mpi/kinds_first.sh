#!/bin/sh
# kinds_first.sh - test_kinds_first on 4 ranks under coll/gpu's defaults
# (coll_gpu_uniform_buffers=true): even and odd ranks keep different kinds of memory for the
# whole run, as MPICH's test suite does with -evenmemtype/-oddmemtype.  Each communicator's first
# blocking allreduce or bcast agrees on the kind, finds them mixed, and every later blocking call
# there agrees too (the nonblocking ones are staged, also those before that first blocking
# call, as on two of the five kinds of communicator): every case right, none hung, and the log
# says the kinds were found mixed.  The same program with one kind on every rank finds them
# uniform and takes the fast path.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_kinds_first.$$
logs=${TMPDIR:-/tmp}/coll_gpu_kinds_first_logs.$$
trap 'rm -rf "$out" "$logs"' EXIT
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM

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
    n=$(ranklogs | grep -c 'first call: host memory on some ranks')
    # 15 communicators, each rank's line: 60 in all
    [ "$n" -eq 60 ]
    t_ok $? "even ranks ${pair% *}, odd ranks ${pair#* }: every rank found the kinds mixed on \
each of the 15 communicators ($n lines of 60)"
done
run device device
n=$(ranklogs | grep -c 'first call: one memory kind on every rank')
staged=$(ranklogs | grep -E 'coll:gpu:(allreduce|bcast).*staged' | grep -vc 'intercommunicator')
[ "$n" -ge 60 ] && [ "$staged" -eq 0 ]
t_ok $? "device on every rank: one kind found on every communicator ($n lines, at least 60), \
no allreduce or bcast staged ($staged)"
t_done
