#!/bin/sh
# teamfail.sh - the node team's setup fails on one rank (coll_gpu_test_fail_team=1, its scratch
# allocation refused): every rank goes through both setup rounds, agrees there is no team and
# keeps the staged path for that communicator for good (announced once, by the failing rank);
# every answer is right; nothing is left behind (allocations, control block, mappings).
# 3 ranks, world and a dup, forced one-shot allreduce and push bcast (test_faults teamfail).
. "$(dirname "$0")/../mpi/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_teamfail.$$
trap 'rm -f "$out"' EXIT
COLL_GPU_TEST_UNIFORM=true
COLL_GPU_TEST_TIMEOUT=120
export COLL_GPU_TEST_UNIFORM COLL_GPU_TEST_TIMEOUT

COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_test_fail_team 1 --mca coll_gpu_verbose 10 \
--mca coll_gpu_allreduce_algorithm oneshot --mca coll_gpu_bcast_algorithm push \
${COLL_GPU_MPIRUN_ARGS:-}" "$RUN_MPI" 3 "$top_builddir/tests/fastpath/test_faults" teamfail \
    >"$out" 2>&1
rc=$?
# a skip is the program's only plan, from a clean exit (tap.h); anything else is checked below
if [ "$rc" -eq 0 ] && grep -q '^1\.\.0 # SKIP' "$out" && ! grep -q '^1\.\.[1-9]' "$out"; then
    grep '^1\.\.0 # SKIP' "$out" | head -1
    exit 0
fi
t_ok "$rc" "3 ranks, rank 1's team setup failing, finish (exit $rc)"
! grep -q '^not ok' "$out" && [ "$(grep -c '^ok' "$out")" -eq 5 ]
t_ok $? "5 of 5 checks pass: right answers, no control block, allocation or mapping left"
n=$(grep -c 'rank 1 could not build the node team of communicator [0-9]*:' "$out")
m=$(grep -c 'could not build the node team' "$out")
t_ok $((n != 2 || m != 2)) "rank 1, and only rank 1, announces the failed setup once per communicator ($n, $m of 2)"
n=$(grep -c 'no NVLink/IPC team for this communicator' "$out")
t_ok $((n != 6)) "every rank gives the team up on both communicators, once each ($n of 6)"
n=$(grep -c 'staged (no node team' "$out")
f=$(grep -c ' via IPC\| via NVL/P2P' "$out")
t_ok $((n != 36 || f != 0)) "all 36 device-buffer calls are staged ($n), none on the fast path ($f)"
[ "$tap_failed" -eq 0 ] || t_diag "$out" 40
t_done
