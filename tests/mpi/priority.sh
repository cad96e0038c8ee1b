#!/bin/sh
# priority.sh - a coll_gpu_priority at or below another selected component's (tuned: 30) would
# let that component take MPI_Allreduce and MPI_Bcast, which then crash on device buffers
# (SIGSEGV inside tuned).  coll/gpu runs just above it instead and says so in one line naming
# coll_gpu_priority.  test_smoke device (allreduce, bcast, allgather on device buffers), 2
# ranks, with coll_gpu_priority 20, abc (which Open MPI reads as 0), 0, and the default 80 below
# a coll_tuned_priority of 90; with the default settings no such line is printed.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_priority.$$
trap 'rm -f "$out"' EXIT
COLL_GPU_TEST_TIMEOUT=120
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_TIMEOUT COLL_GPU_TEST_UNIFORM

# run NAME MCA-ARGS: test_smoke device on 2 ranks; one TAP line for the exit and the checks
run() {
    COLL_GPU_MPIRUN_ARGS="$2 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" 2 "$MPI_TESTS/test_smoke" device >"$out" 2>&1
    rc=$?
    n=$(grep -c '^ok' "$out")
    ! grep -q '^not ok' "$out" && [ "$rc" -eq 0 ] && [ "$n" -eq 3 ]
    r=$?
    t_ok $r "$1: device allreduce, bcast, allgather right, no crash ($n of 3, exit $rc)"
    [ "$r" -eq 0 ] || t_diag "$out" 20
}

for v in 20 abc 0; do
    run "coll_gpu_priority $v" "--mca coll_gpu_priority $v"
    n=$(grep -c 'coll:gpu: coll_gpu_priority.*runs with priority 31\|coll_gpu_priority=abc' "$out")
    t_ok $((n != 1)) "coll_gpu_priority $v: one line names coll_gpu_priority and what happens ($n)"
done
run "coll_tuned_priority 90" "--mca coll_tuned_priority 90"
n=$(grep -c "coll_gpu_priority 80 is not above coll/tuned's priority 90.*priority 91" "$out")
t_ok $((n != 1)) "coll_tuned_priority 90: one line says coll/gpu runs with priority 91 ($n)"
run "default priority" ""
n=$(grep -c 'coll_gpu_priority' "$out")
t_ok $((n != 0)) "default priority: no line about coll_gpu_priority ($n)"
t_done
