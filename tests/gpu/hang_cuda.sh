#!/bin/sh
# hang_cuda.sh - the hang report and the give-up of the node team's waits with the cuda backend
# (test_faults, as fastpath/hang.sh does on the emulated device), 2 ranks, the last one 3 s late:
#   - coll_gpu_hang_warn_seconds=1, one-shot allreduce: rank 0 prints one line naming
#     MPI_Allreduce, communicator 0, call 2 and rank 1; the result is right;
#   - coll_gpu_hang_error_seconds=1 under each fast-path algorithm: every rank returns an
#     error (the late one and the next call too), a host barrier works, the job ends.
. "$(dirname "$0")/gputest.sh"
out=${TMPDIR:-/tmp}/coll-gpu-hang.$$
trap 'rm -f "$out"' EXIT
COLL_GPU_TEST_UNIFORM=true
COLL_GPU_TEST_TIMEOUT=120
export COLL_GPU_TEST_UNIFORM COLL_GPU_TEST_TIMEOUT
prog="$top_builddir/tests/fastpath/test_faults"

# run NAME MCA-ARGS PROGRAM-ARGS...: exit 0 and every TAP check passing; output in $out
run() {
    name=$1 args=$2
    shift 2
    COLL_GPU_MPIRUN_ARGS="$args ${COLL_GPU_MPIRUN_ARGS:-}" "$RUN_MPI" 2 "$prog" "$@" \
        >"$out" 2>&1
    rc=$?
    ! grep -q '^not ok' "$out" && grep -q '^1\.\.[1-9]' "$out"
    ok=$((rc != 0 || $? != 0))
    t_ok $ok "$name: finishes (exit $rc), every check passes"
    [ $ok -eq 0 ] || t_diag "$out"
}

run "late for a call" "--mca coll_gpu_allreduce_algorithm oneshot \
--mca coll_gpu_hang_warn_seconds 1" late 3 call
pat='rank 0 has waited [0-9]* s in MPI_Allreduce on communicator 0 (call 2 through the node team)'
[ "$(grep -c "$pat for rank(s) 1 to enter the call" "$out")" -eq 1 ]
t_ok $? "rank 0 prints one line: MPI_Allreduce, communicator 0, call 2, rank 1"
grep 'coll/gpu: rank' "$out" | head -1 | sed 's/^/#   /'

giveup="--mca coll_gpu_hang_warn_seconds 0 --mca coll_gpu_hang_error_seconds 1"
for alg in oneshot twoshot ring; do
    run "never there, $alg allreduce" "$giveup --mca coll_gpu_allreduce_algorithm $alg" giveup 3
done
for alg in push chain tree; do
    run "never there, $alg bcast" "$giveup --mca coll_gpu_bcast_algorithm $alg" giveup 3 bcast
done
t_done
