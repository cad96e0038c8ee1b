#!/bin/sh
# pinned_pool.sh - the process's pool of pinned host memory for the bounce buffers of staged
# nonblocking and persistent calls (coll_gpu_pinned_pool.c), and their copies back, which
# complete the request from progress once they have ended (coll_gpu_stage_async.c); emulated
# device, every algorithm staged:
#   test_pinned_pool percall, 2 and 3 ranks: once warm, no pinned allocation per call; with
#     coll_gpu_pinned_pool_bytes=0 (no pool) the same program must count one or more per call
#     (so the count can fail; before the pool every staged call pinned its buffers: 1350 in
#     these 750 calls)
#   test_pinned_pool bounded, 2 and 3 ranks, a 1 MiB pool: 64 calls of 32 KiB per rank in
#     flight, then no more than 1 MiB of blocks kept; a call above the bound keeps nothing
#   test_coll's nonblocking and neighbor sections (4 ranks, every kind mix) and test_persistent
#     dev with COLL_GPU_EMULATED_ASYNC=3: each copy back stays in flight for three polls, so a
#     request reported complete before its copies ended would show its poisoned output
#   test_pinned_pool copyfail, 3 ranks: rank 1's copies back fail (COLL_GPU_TEST_FAIL_COPYBACK),
#     ended at once and held back: its requests complete with errors, the others' are right
# Every run of test_pinned_pool also checks, after MPI_Finalize, that each rank's pinned memory
# is all freed (its exit status).  A hang fails through COLL_GPU_TEST_TIMEOUT.
. "$(dirname "$0")/mpitest.sh"
COLL_GPU_TEST_TIMEOUT=${COLL_GPU_TEST_TIMEOUT_POOL:-300}
export COLL_GPU_TEST_TIMEOUT
log=${TMPDIR:-/tmp}/coll-gpu-pool.$$
trap 'rm -f "$log"' EXIT
staged="--mca coll_gpu_allreduce_algorithm staged --mca coll_gpu_bcast_algorithm staged"

# run NP PROGRAM ARGS...: output in $log; sets rc
run() {
    np=$1
    shift
    COLL_GPU_MPIRUN_ARGS="$staged ${EXTRA:-} ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$np" "$@" >"$log" 2>&1
    rc=$?
}

# passed: the run ended well, with at least one check and none failing
passed() {
    [ "$rc" -eq 0 ] && ! grep -q '^not ok' "$log" && [ "$(grep -c '^ok' "$log")" -gt 0 ]
}

skip=""
for np in 2 3; do
    EXTRA="" run "$np" "$MPI_TESTS/test_pinned_pool" percall
    skip=$(t_skipped "$log")
    if [ -n "$skip" ]; then
        break
    fi
    passed
    t_ok $? "percall, $np ranks: right, no pinned allocation per call once warm, all freed at \
MPI_Finalize (exit $rc; $(sed -n 's/^# pinned allocations: //p' "$log"))"
    [ "$rc" -eq 0 ] || t_diag "$log"

    EXTRA="--mca coll_gpu_pinned_pool_bytes 0" run "$np" "$MPI_TESTS/test_pinned_pool" percall
    set -- $(sed -n 's/^# pinned allocations: \([0-9]*\) in \([0-9]*\) calls$/\1 \2/p' "$log")
    [ -n "${1:-}" ] && [ "$1" -ge "$2" ] && grep -q '^not ok.*no pinned host allocation' "$log"
    t_ok $? "percall, $np ranks, no pool: the count fails, ${1:-?} allocations in ${2:-?} calls"
    [ -n "${1:-}" ] || t_diag "$log"

    EXTRA="--mca coll_gpu_pinned_pool_bytes 1M" run "$np" "$MPI_TESTS/test_pinned_pool" \
        bounded 1048576
    passed
    t_ok $? "bounded, $np ranks, 1 MiB pool: right, at most 1 MiB kept, all freed at \
MPI_Finalize (exit $rc)"
    [ "$rc" -eq 0 ] || t_diag "$log"
done
if [ -n "$skip" ]; then
    echo "1..0 # SKIP $skip"
    exit 0
fi

# copies back held in flight: completion must wait for them
for section in nonblocking neighbor; do
    COLL_GPU_EMULATED_ASYNC=3 COLL_GPU_TEST_UNIFORM=false EXTRA="" \
        run 4 "$MPI_TESTS/test_coll" --kinds=all --sections=$section
    passed
    t_ok $? "test_coll $section, copies back held for 3 polls: right (exit $rc, \
$(grep -c '^ok' "$log") cases)"
    [ "$rc" -eq 0 ] || t_diag "$log"
done
COLL_GPU_EMULATED_ASYNC=3 EXTRA="" run 4 "$MPI_TESTS/test_persistent" dev
passed
t_ok $? "test_persistent dev, copies back held for 3 polls: right (exit $rc)"
[ "$rc" -eq 0 ] || t_diag "$log"

for held in 0 3; do
    COLL_GPU_TEST_FAIL_COPYBACK=1 COLL_GPU_EMULATED_ASYNC=$held EXTRA="" \
        run 3 "$MPI_TESTS/test_pinned_pool" copyfail
    passed
    t_ok $? "copyfail, copies back held for $held polls: rank 1 gets errors, the others the \
right data, no hang (exit $rc)"
    [ "$rc" -eq 0 ] || t_diag "$log"
done
t_done
