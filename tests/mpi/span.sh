#!/bin/sh
# span.sh - test_span on 4 ranks: MPI_BOTTOM types whose blocks lie in 2 and 3 device
# allocations (8 MiB apart), in one (the common case), and in device and host memory in either
# order (the lowest block host memory too; many blocks over few pages too); MPI_Bcast,
# MPI_Allreduce (in place too), MPI_Ibcast, MPI_Iallreduce, MPI_Reduce, MPI_Bcast_init,
# MPI_Allreduce_init, MPI_Allgather from a pointer to the lowest block; a rank whose block runs
# past the end of its allocation returns an error, and nobody hangs.
#   1. defaults: every rank passes such types, so every rank counts as a device rank and the
#      bcasts take the node team, each rank packing its blocks (the reductions, whose op is
#      the program's, stage);
#   2. bcast and allreduce forced onto the staged path;
#   3. rank 0 with host memory only: the kinds agreement sends every rank to staging.
: "${COLL_GPU_TEST_TIMEOUT:=120}"
: "${COLL_GPU_TEST_CASE_TIMEOUT:=30}"
. "$(dirname "$0")/mpitest.sh"
export COLL_GPU_TEST_TIMEOUT COLL_GPU_TEST_CASE_TIMEOUT
out=${TMPDIR:-/tmp}/coll_gpu_span.$$
trap 'rm -f "$out"' EXIT

# run_case DESCRIPTION MCA-ARGS PROGRAM-ARGS: one TAP line for a whole run of the program
run_case() {
    COLL_GPU_MPIRUN_ARGS="$2 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" 4 "$MPI_TESTS/test_span" $3 >"$out" 2>&1
    rc=$?
    n_ok=$(grep -c '^ok' "$out")
    n_skip=$(grep -c '^ok.*# SKIP' "$out")
    ! grep -q '^not ok' "$out" && grep -q "^1\.\.$n_ok\$" "$out" && [ "$rc" -eq 0 ]
    st=$?
    t_ok "$st" "$1 ($n_ok cases, $n_skip skipped, exit $rc)"
    if [ "$st" -ne 0 ]; then
        { grep -A3 '^not ok' "$out"; grep -i 'bail out\|timed out\|terminated' "$out"; } |
            head -40 | sed 's/^/#   /'
    fi
    grep '# SKIP' "$out" | sed 's/^/#   /'
}

run_case "defaults: bcasts on the node team, each rank packing its blocks" "" ""
run_case "bcast and allreduce staged" \
    "--mca coll_gpu_bcast_algorithm staged --mca coll_gpu_allreduce_algorithm staged" ""
run_case "rank 0 with host memory only: every rank staged" "" "--rank0-host"
t_done
