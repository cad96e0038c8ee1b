#!/bin/sh
# hang.sh - a rank that waits too long says where (coll_gpu_hang_warn_seconds), and with
# coll_gpu_hang_error_seconds gives up with an error instead of hanging.  3 ranks, the last one
# late (test_faults late / giveup), forced one-shot allreduce so that the node team runs:
#   - late for the second call through the team: ranks 0 and 1 each print one line naming
#     MPI_Allreduce, communicator 0, call 2 and rank 2; the result is right;
#   - late for the first call: the lines name the team's setup exchange;
#   - late under the defaults (no coll_gpu_uniform_buffers promise): the lines name the
#     per-call agreement on the memory kinds and the late rank;
#   - late by 3 s with coll_gpu_hang_error_seconds=1: ranks 0 and 1 give up with an error (one
#     line each), the late rank gets an error too, nothing hangs; then the same for two-shot
#     and ring allreduce and push, chain and tree bcast (every rank returns an error; which
#     ranks give up and which see a peer's failure depends on the algorithm);
#   - the same bcasts with 2 ranks, where the late rank is the root (test_faults' bcast root is
#     rank 1): rank 0 gives up waiting for the root's plan, every rank returns an error;
#   - fused allreduce (its waits are no flag waits: the host's spin on the kernel's done word,
#     the emulated kernel's wait for its peers' flags): 3 ranks, the last one 8 s late with
#     coll_gpu_hang_warn_seconds=2: ranks 0 and 1 each print the warning line (call 2, rank 2)
#     and the result is right; the last one 12 s late with warn 2 and error 5: a rank gives
#     up (the other may see its failure first), every rank returns an error, the next call
#     too, and the job ends well before the test's time limit.
. "$(dirname "$0")/../mpi/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_hang.$$
trap 'rm -f "$out"' EXIT
COLL_GPU_TEST_TIMEOUT=120
export COLL_GPU_TEST_TIMEOUT
prog="$top_builddir/tests/fastpath/test_faults"
base="${COLL_GPU_MPIRUN_ARGS:-}"
one="--mca coll_gpu_allreduce_algorithm oneshot"

# run NAME UNIFORM MCA-ARGS PROGRAM-ARGS...: run, check exit and TAP, leave the output in $out
run() {
    name=$1 uniform=$2 args=$3
    shift 3
    COLL_GPU_TEST_UNIFORM=$uniform COLL_GPU_MPIRUN_ARGS="$args $base" \
        "$RUN_MPI" "${np:-3}" "$prog" "$@" >"$out" 2>&1
    rc=$?
    # a skip is the program's only plan, from a clean exit, before any check of ours (tap.h)
    if [ "$rc" -eq 0 ] && [ "$tap_n" -eq 0 ] && grep -q '^1\.\.0 # SKIP' "$out" \
        && ! grep -q '^1\.\.[1-9]' "$out"; then
        grep '^1\.\.0 # SKIP' "$out" | head -1
        exit 0
    fi
    ! grep -q '^not ok' "$out" && grep -q '^1\.\.[1-9]' "$out"
    t_ok $((rc != 0 || $? != 0)) "$name: finishes (exit $rc), every check passes"
}

# lines PATTERN: one line from rank 0 and one from rank 1 match, none from rank 2
lines() {
    n0=$(grep -c "rank 0 $1" "$out")
    n1=$(grep -c "rank 1 $1" "$out")
    n2=$(grep -c "rank 2 $1" "$out")
    [ "$n0" -eq 1 ] && [ "$n1" -eq 1 ] && [ "$n2" -eq 0 ]
}

report() {
    [ "$1" -eq 0 ] || t_diag "$out" 30
    grep 'coll/gpu: rank' "$out" | head -2 | sed 's/^/#   /'
}

run "late for a call" true "$one --mca coll_gpu_hang_warn_seconds 1" late 3 call
lines 'has waited [0-9]* s in MPI_Allreduce on communicator 0 (call 2 through the node team) for rank(s) 2 to enter the call; still waiting'
r=$?
t_ok $r "ranks 0 and 1 each print one line: MPI_Allreduce, communicator 0, call 2, rank 2"
report $r

run "late for the setup" true "$one --mca coll_gpu_hang_warn_seconds 1" late 3 setup
lines 'has waited [0-9]* s in MPI_Allreduce on communicator 0, in the node team setup (round 1 of 2)'
r=$?
t_ok $r "ranks 0 and 1 each print one line naming the team's setup exchange"
report $r

run "late for the agreement" false "$one --mca coll_gpu_hang_warn_seconds 1" late 3 call
lines "has waited [0-9]* s in MPI_Allreduce on communicator 0 (call [0-9]*, memory-kind agreement) for rank(s) 2 to enter the call"
r=$?
t_ok $r "ranks 0 and 1 each print one line naming the agreement"
report $r

run "never there" true "$one --mca coll_gpu_hang_warn_seconds 0 --mca coll_gpu_hang_error_seconds 1" \
    giveup 3
# (a rank that sees its peer's give-up first goes on to wait for the late rank to finish the
# call, and gives up there: which wait each rank names depends on who gives up first)
lines 'gave up after [0-9]* s in MPI_Allreduce on communicator 0 (call 2 through the node team) waiting for rank(s) 2 to \(enter\|finish\) the call'
r=$?
t_ok $r "ranks 0 and 1 each print one line as they give up: MPI_Allreduce, communicator 0, call 2, rank 2"
report $r

giveup="--mca coll_gpu_hang_warn_seconds 0 --mca coll_gpu_hang_error_seconds 1"
for alg in twoshot ring; do
    run "never there, $alg allreduce" true "$giveup --mca coll_gpu_allreduce_algorithm $alg" \
        giveup 3
    grep -q 'gave up after [0-9]* s in MPI_Allreduce on communicator 0 (call 2' "$out"
    t_ok $? "$alg allreduce: a rank says it gave up on call 2"
done
for alg in push chain tree; do
    run "never there, $alg bcast" true "$giveup --mca coll_gpu_bcast_algorithm $alg" \
        giveup 3 bcast
    grep -q 'gave up after [0-9]* s in MPI_Bcast on communicator 0 (call 2' "$out"
    t_ok $? "$alg bcast: a rank says it gave up on call 2"
done
np=2
for alg in push pull chain; do
    run "root never there, $alg bcast, 2 ranks" true \
        "$giveup --mca coll_gpu_bcast_algorithm $alg" giveup 3 bcast
    grep -q 'rank 0 gave up after [0-9]* s in MPI_Bcast on communicator 0 (call 2.* rank(s) 1 to enter' "$out"
    t_ok $? "$alg bcast: rank 0 says it gave up on call 2 waiting for the root, rank 1"
    report $?
done
np=3
fused="--mca coll_gpu_allreduce_algorithm fused"
run "late for a call, fused" true "$fused --mca coll_gpu_hang_warn_seconds 2" late 8 call
lines 'has waited [0-9]* s in MPI_Allreduce on communicator 0 (call 2 through the node team) for rank(s) 2 to enter the call; still waiting'
r=$?
t_ok $r "fused: ranks 0 and 1 each print one line: MPI_Allreduce, communicator 0, call 2, rank 2"
report $r

start=$(date +%s)
run "never there, fused" true \
    "$fused --mca coll_gpu_hang_warn_seconds 2 --mca coll_gpu_hang_error_seconds 5" giveup 12
took=$(($(date +%s) - start))
grep -q 'gave up after [0-9]* s in MPI_Allreduce on communicator 0 (call 2 through the node team) waiting for rank(s) 2 to enter the call' "$out"
r=$?
t_ok $r "fused: a rank says it gave up on call 2 waiting for rank 2"
report $r
[ "$took" -lt 60 ]
t_ok $? "fused: every rank returned within 60 s (took ${took} s; the late rank sleeps 12 s)"
t_done
