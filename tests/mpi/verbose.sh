#!/bin/sh
# verbose.sh - with `--mca coll_gpu_verbose 10`, a device-buffer MPI_Allreduce logs its
# decision on a line containing "coll:gpu:allreduce" (and the data are still right), and a
# staged device MPI_Reduce logs its path once per rank.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_verbose.$$
trap 'rm -f "$out"' EXIT

COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 ${COLL_GPU_MPIRUN_ARGS:-}" \
    "$RUN_MPI" 2 "$MPI_TESTS/test_smoke" device >"$out" 2>&1
rc=$?
why=$(t_skipped "$out")
if [ "$rc" -eq 0 ] && [ -n "$why" ]; then
    echo "1..0 # SKIP $why"
    exit 0
fi
t_ok "$rc" "device-buffer collectives with coll_gpu_verbose 10 (exit $rc)"
[ "$rc" -eq 0 ] || t_diag "$out"
! grep -q '^not ok' "$out" && grep -q '^1\.\.3$' "$out"
t_ok $? "3 of 3 device-buffer checks pass"
grep -q 'coll:gpu:allreduce' "$out"
found=$?
t_ok "$found" "the log has a line with coll:gpu:allreduce"
if [ "$found" -eq 0 ]; then
    grep 'coll:gpu:allreduce' "$out" | head -2 | sed 's/^/#   log: /'
else
    t_diag "$out" 20
fi

# one log line per decision: a staged device MPI_Reduce (host memory at the root) names its path
# once per rank, not once at the decision and again in the staged path
COLL_GPU_TEST_FILTER='reduce MPI_INT8_T MPI_SUM count=1023 root-host(others dev) world root=0' \
COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 ${COLL_GPU_MPIRUN_ARGS:-}" \
    "$RUN_MPI" 2 "$MPI_TESTS/test_coll" --kinds=all >"$out" 2>&1
rc=$?
grep -q '^ok 1 ' "$out"
t_ok $? "a device MPI_Reduce with a host-memory root is right (exit $rc)"
n=$(grep -c 'coll:gpu:reduce (cid [0-9]*): rank 1: .*-> staged' "$out")
[ "$n" -eq 1 ]
t_ok $? "rank 1 logs its staged MPI_Reduce on one line ($n)"
[ "$n" -eq 1 ] || grep 'coll:gpu:reduce' "$out" | head -4 | sed 's/^/#   log: /'
t_done
