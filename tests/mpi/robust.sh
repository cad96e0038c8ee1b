#!/bin/sh
# robust.sh - test_robust (what real programs do to device-buffer collectives): communicators
# freed under running nonblocking calls, MPI_Finalize right after the last wait, many calls
# outstanding, MPI_Waitany/Waitsome/Testany; 2 and 3 ranks, on the node team's nonblocking path
# (coll_gpu_uniform_buffers=true: default algorithms, then forced ones) and staged (false).
. "$(dirname "$0")/mpitest.sh"
: "${COLL_GPU_TEST_TIMEOUT:=300}"
export COLL_GPU_TEST_TIMEOUT
log=${TMPDIR:-/tmp}/coll-gpu-robust.$$
trap 'rm -f "$log"' EXIT

# run NP UNIFORM ALGS MODE...: one TAP line for test_robust MODE (every check passed, exit 0)
run() {
    np=$1 uniform=$2 algs=$3
    shift 3
    set -- $algs
    ar=$1 bc=$2
    shift 2
    COLL_GPU_TEST_UNIFORM=$uniform \
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_allreduce_algorithm $ar --mca coll_gpu_bcast_algorithm $bc ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$np" "$MPI_TESTS/test_robust" "$@" >"$log" 2>&1
    rc=$?
    n_ok=$(grep -c '^ok' "$log")
    ! grep -q '^not ok' "$log" && [ "$rc" -eq 0 ] && [ "$n_ok" -gt 0 ]
    t_ok $? "$np ranks, uniform_buffers=$uniform, $ar/$bc, test_robust $*: $n_ok checks pass (exit $rc)"
    [ "$rc" -eq 0 ] && ! grep -q '^not ok' "$log" || t_diag "$log" 40
}

for np in 2 3; do
    for mode in freed "many 300" any; do
        run "$np" true "auto auto" $mode
        run "$np" false "auto auto" $mode
    done
done
for algs in "fused chain" "ring tree" "twoshot pull"; do
    for mode in freed "many 300" any; do
        run 3 true "$algs" $mode
    done
done
t_done
