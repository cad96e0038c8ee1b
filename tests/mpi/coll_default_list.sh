#!/bin/sh
# coll_default_list.sh - coll/gpu among every coll component this Open MPI has (its own default
# list: ^sync leaves out only a debugging component that is off by default), as a program run
# without --mca coll gets it: on 5.0 coll/han, adapt, sm, ftagree and monitoring besides tuned,
# basic, libnbc, self and inter (coll/cuda and coll/ucc where Open MPI was built with them).
# The matrix's quick subset on 3 ranks with every buffer-kind mix, and the nonblocking twins
# on 4 ranks; host buffers go to whichever component held the slot before coll/gpu.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_default_list.$$
trap 'rm -f "$out".*' EXIT
COLL_GPU_TEST_TIMEOUT=600
COLL_GPU_TEST_COLL='^sync'
COLL_GPU_TEST_UNIFORM=false
export COLL_GPU_TEST_TIMEOUT COLL_GPU_TEST_COLL COLL_GPU_TEST_UNIFORM

check() {
    what=$1 min=$2
    shift 2
    "$RUN_MPI" "$@" >"$out.tap" 2>"$out.err"
    rc=$?
    pass=$(grep -c '^ok ' "$out.tap")
    fail=$(grep -c '^not ok' "$out.tap")
    [ "$rc" -eq 0 ] && [ "$fail" -eq 0 ] && [ "$pass" -ge "$min" ]
    t_ok $? "Open MPI's default component list, $what: $pass cases pass, $fail fail (exit $rc)"
    if [ "$fail" -ne 0 ] || [ "$rc" -ne 0 ]; then
        grep '^not ok' "$out.tap" | head -20 | sed 's/^/#   /'
        t_diag "$out.err" 20
    fi
}

check "3 ranks, the matrix's quick subset, every kind mix" 1000 \
    3 "$MPI_TESTS/test_coll" --quick --kinds=all
check "4 ranks, the nonblocking twins" 100 4 "$MPI_TESTS/test_coll" --sections=nonblocking
t_done
