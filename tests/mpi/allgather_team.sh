#!/bin/sh
# allgather_team.sh - a blocking MPI_Allgather on device buffers runs on the node team (one bcast
# per rank, coll_gpu_gather.c), not through host memory: test_coll's allgather cases (every
# type, in place, communicators of 1 to 4 ranks, host, device and mixed buffers) right on 4
# ranks under the defaults, and the verbose log saying so for the all-device calls.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_allgather_team.$$
trap 'rm -f "$out" "$out.log"' EXIT
COLL_GPU_TEST_FILTER="allgather *" COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 ${COLL_GPU_MPIRUN_ARGS:-}" \
    "$RUN_MPI" 4 "$MPI_TESTS/test_coll" --quick >"$out" 2>"$out.log"
rc=$?
why=$(t_skipped "$out")
if [ "$rc" -eq 0 ] && [ -n "$why" ]; then
    echo "1..0 # SKIP $why"
    exit 0
fi
n=$(grep -c '^ok ' "$out")
! grep -q '^not ok' "$out" && [ "$rc" -eq 0 ] && [ "$n" -gt 0 ]
t_ok $? "test_coll's allgather cases on 4 ranks: $n right (exit $rc)"
grep '^not ok' "$out" | head -5 | sed 's/^/#   /'
[ "$rc" -eq 0 ] || t_diag "$out.log" 20
team=$(grep -hc 'coll:gpu:allgather.*a bcast per rank on the node team' "$out" "$out.log" | awk '{s += $1} END {print s + 0}')
[ "${team:-0}" -gt 0 ]
t_ok $? "the device allgathers ran on the node team ($team log lines say so)"
[ "${team:-0}" -gt 0 ] || grep -h 'coll:gpu:allgather' "$out" "$out.log" | head -3 | sed 's/^/#   log: /'
t_done
