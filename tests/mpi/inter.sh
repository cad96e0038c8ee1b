#!/bin/sh
# inter.sh - every intercommunicator collective through coll/gpu (test_inter.c), on 4 ranks
# (groups of 1+3 and 2+2), under three coll component lists: gpu,tuned (coll/gpu must fill the
# intercommunicator's slots itself, as if coll/inter, basic and libnbc were listed), the test
# default gpu,tuned,basic,libnbc, and Open MPI's own default (every component; ^sync leaves out
# only a debugging component that is off by default).  Then gpu,tuned with 3 threads
# (MPI_THREAD_MULTIPLE), each running all of it on intercommunicators of its own at once.  A
# hang fails through COLL_GPU_TEST_TIMEOUT.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_inter.$$
trap 'rm -f "$out".*' EXIT
COLL_GPU_TEST_TIMEOUT=300
export COLL_GPU_TEST_TIMEOUT

for list in gpu,tuned gpu,tuned,libnbc '^sync'; do
    COLL_GPU_TEST_COLL=$list "$RUN_MPI" 4 "$MPI_TESTS/test_inter" "$@" >"$out.tap" 2>"$out.err"
    rc=$?
    pass=$(grep -c '^ok ' "$out.tap")
    fail=$(grep -c '^not ok' "$out.tap")
    [ "$rc" -eq 0 ] && [ "$fail" -eq 0 ] && [ "$pass" -gt 80 ] && grep -q '^1\.\.' "$out.tap"
    t_ok $? "coll $list: $pass intercommunicator checks pass, $fail fail (exit $rc)"
    if [ "$fail" -ne 0 ] || [ "$rc" -ne 0 ]; then
        grep -v '^ok ' "$out.tap" | head -40 | sed 's/^/#   /'
        t_diag "$out.err" 20
    else
        grep '^#' "$out.tap" | head -2 | sed 's/^/#   /'
    fi
done
COLL_GPU_TEST_COLL=gpu,tuned "$RUN_MPI" 4 "$MPI_TESTS/test_inter" 3 >"$out.tap" 2>"$out.err"
rc=$?
pass=$(grep -c '^ok ' "$out.tap")
fail=$(grep -c '^not ok' "$out.tap")
checks=$(sed -n 's/^ok .*: \([0-9]*\) intercommunicator checks right.*/\1/p' "$out.tap" | head -1)
[ "$rc" -eq 0 ] && [ "$fail" -eq 0 ] && [ "$pass" -eq 3 ] && [ "${checks:-0}" -gt 80 ]
t_ok $? "coll gpu,tuned, 3 threads at once: $pass of 3 threads right, ${checks:-0} checks each \
(exit $rc)"
if [ "$fail" -ne 0 ] || [ "$rc" -ne 0 ]; then
    grep -v '^ok ' "$out.tap" | head -40 | sed 's/^/#   /'
    t_diag "$out.err" 20
fi
t_done
