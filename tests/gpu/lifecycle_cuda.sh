#!/bin/sh
# lifecycle_cuda.sh - the intercommunicator, deviceless-rank and failing-stage tests of
# tests/mpi (inter.sh, mixed_device.sh, stage_failure.sh) with the cuda backend, 4 ranks on the
# machine's GPUs (local rank % GPUs): real device memory staged around coll/inter, basic and
# libnbc; a rank hidden from its GPU by COLL_GPU_TEST_NO_DEVICE among ranks on GPUs; a rank
# whose staging copies fail (COLL_GPU_TEST_FAIL_STAGE).  A hang fails through
# COLL_GPU_TEST_TIMEOUT.
. "$(dirname "$0")/gputest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_lifecycle_cuda.$$
trap 'rm -f "$out".*' EXIT
COLL_GPU_TEST_TIMEOUT=180
export COLL_GPU_TEST_TIMEOUT

# run MIN DESCRIPTION COMMAND...: one TAP line; passes when the program's TAP has at least MIN
# passing lines, none failing, a plan, and exit 0
run() {
    min=$1 what=$2
    shift 2
    "$@" >"$out.tap" 2>"$out.err"
    rc=$?
    pass=$(grep -c '^ok ' "$out.tap")
    fail=$(grep -c '^not ok' "$out.tap")
    [ "$rc" -eq 0 ] && [ "$fail" -eq 0 ] && [ "$pass" -ge "$min" ] && grep -q '^1\.\.' "$out.tap"
    t_ok $? "$what: $pass checks pass, $fail fail (exit $rc)"
    if [ "$fail" -ne 0 ] || [ "$rc" -ne 0 ] || [ "$pass" -lt "$min" ]; then
        grep -v '^ok ' "$out.tap" | head -30 | sed 's/^/#   /'
        t_diag "$out.err" 20
    fi
}

run 90 "intercommunicators, gpu,tuned" \
    env COLL_GPU_TEST_COLL=gpu,tuned "$RUN_MPI" 4 "$MPI_TESTS/test_inter"
run 90 "intercommunicators, Open MPI's default list" \
    env COLL_GPU_TEST_COLL='^sync' "$RUN_MPI" 4 "$MPI_TESTS/test_inter"
run 24 "rank 1 without a device, uniform_buffers=false" \
    env COLL_GPU_TEST_UNIFORM=false COLL_GPU_TEST_NO_DEVICE=1 \
    "$RUN_MPI" 4 "$MPI_TESTS/test_lifecycle" mixed
run 9 "rank 2's staging fails" \
    env COLL_GPU_TEST_FAIL_STAGE=2 OMPI_MCA_coll_gpu_allreduce_algorithm=staged \
    OMPI_MCA_coll_gpu_bcast_algorithm=staged OMPI_MCA_coll_gpu_exchange_algorithm=staged \
    "$RUN_MPI" 4 "$MPI_TESTS/test_lifecycle" stagefail
t_done
