#!/bin/sh
# errors.sh - an erroneous device-buffer MPI_Allreduce through the node team (test_errors),
# emulated device, coll_gpu_uniform_buffers=true, 2 and 3 ranks: every rank returns an error,
# no rank hangs (COLL_GPU_TEST_TIMEOUT), nothing outside the call's buffers is written (the
# previous call's receive buffer, reused by the program, and guards around every buffer), and
# a correct call afterwards is right.
#   - the automatic choice, counts that differ (16 elements on rank 0, 262144 on the others)
#     right after a correct two-shot-sized call: rank 0's small call publishes no buffer, and
#     its peers must not take the previous call's record of rank 0's receive buffer for this
#     call's (exported handles carry the call's sequence number and size)
. "$(dirname "$0")/../mpi/mpitest.sh"
COLL_GPU_TEST_UNIFORM=true
COLL_GPU_TEST_TIMEOUT=60
export COLL_GPU_TEST_UNIFORM COLL_GPU_TEST_TIMEOUT
out=${TMPDIR:-/tmp}/coll_gpu_errors.$$
trap 'rm -f "$out"' EXIT
prog="$top_builddir/tests/fastpath/test_errors"
base="${COLL_GPU_MPIRUN_ARGS:-}"

# run NP ALG PROGRAM-ARGS...: one TAP line for the whole run, its failures as comments
run() {
    np=$1 alg=$2
    shift 2
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_allreduce_algorithm $alg $base" \
        "$RUN_MPI" "$np" "$prog" "$@" >"$out" 2>&1
    rc=$?
    if grep -q '^1\.\.0 # SKIP' "$out"; then
        grep '^1\.\.0 # SKIP' "$out" | head -1
        exit 0
    fi
    ! grep -q '^not ok' "$out" && grep -q '^1\.\.[1-9]' "$out"
    r=$((rc != 0 || $? != 0))
    t_ok $r "$np ranks, $alg, $*: every check passes (exit $rc)"
    [ "$r" -eq 0 ] || grep -E '^not ok|^#   rank|Terminated|timeout' "$out" | head -12 |
        sed 's/^/#   /'
}

for np in 2 3; do
    run $np auto count blocking,nb any
done
t_done
