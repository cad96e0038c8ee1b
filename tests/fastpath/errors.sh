#!/bin/sh
# errors.sh - an erroneous device-buffer allreduce through the node team (test_errors), emulated
# device, coll_gpu_uniform_buffers=true, 2 and 3 ranks, MPI_Allreduce and MPI_Iallreduce, each
# allreduce algorithm forced (and the automatic choice): after a correct call of 262144 floats,
#   - counts that differ (16 elements on rank 0, 262144 on the others): MPI_ERR_COUNT;
#   - ops that differ (MPI_SUM on rank 0, MPI_MAX on the others): MPI_ERR_OP;
#   - element types that differ (MPI_INT on rank 0, MPI_FLOAT on the others): MPI_ERR_OTHER;
#   - MPI_IN_PLACE on rank 0 only: MPI_ERR_BUFFER;
# on every rank, with no rank hanging (COLL_GPU_TEST_TIMEOUT), nothing written anywhere (the
# previous call's receive buffer, which the program reuses, the guards around every buffer,
# and the erroneous call's own buffers: no data moves), and a correct call afterwards right: the
# communicator stays usable.  Rank 0 names the difference in one line (in its own log:
# COLL_GPU_TEST_RANK_LOGS, as mpirun may split lines of several ranks).  The plan lines
# (coll_gpu_verbose) show that every call, blocking and nonblocking, ran the forced algorithm;
# one-shot gets a slot that takes the 1 MiB calls.
. "$(dirname "$0")/../mpi/mpitest.sh"
COLL_GPU_TEST_UNIFORM=true
COLL_GPU_TEST_TIMEOUT=90
export COLL_GPU_TEST_UNIFORM COLL_GPU_TEST_TIMEOUT
out=${TMPDIR:-/tmp}/coll_gpu_errors.$$
trap 'rm -rf "$out" "$out.ranks"' EXIT
prog="$top_builddir/tests/fastpath/test_errors"
base="${COLL_GPU_MPIRUN_ARGS:-}"

# forced COLL ALG: every plan line of COLL names ALG, and there is one at least
forced() {
    plan="coll:gpu:$1 (cid [0-9]*): rank [0-9]*: .* ->"
    n=$(cat "$out".ranks/*/rank.*/stderr | grep -c "$plan ")
    k=$(cat "$out".ranks/*/rank.*/stderr | grep -c "$plan $2 via")
    if [ "$2" = oneshot ]; then # in place, one-shot's form is two-shot (coll_gpu_select.c)
        k=$((k + $(cat "$out".ranks/*/rank.*/stderr | grep -c "$plan twoshot via .*in place: two-shot")))
    fi
    [ "$n" -gt 0 ] && [ "$n" -eq "$k" ]
}

# run NP ALG [MCA-ARGS]: one TAP line for the whole run, its failures as comments
run() {
    np=$1 alg=$2 extra=${3:-}
    rm -rf "$out.ranks"
    COLL_GPU_TEST_RANK_LOGS="$out.ranks" COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 \
--mca coll_gpu_allreduce_algorithm $alg $extra $base" \
        "$RUN_MPI" "$np" "$prog" count,op,type,inplace blocking,nb >"$out" 2>&1
    rc=$?
    if grep -q '^1\.\.0 # SKIP' "$out"; then
        grep '^1\.\.0 # SKIP' "$out" | head -1
        exit 0
    fi
    ! grep -q '^not ok' "$out" && grep -q '^1\.\.24$' "$out"
    r=$((rc != 0 || $? != 0))
    t_ok $r "$np ranks, $alg: errors on every rank, nothing written, next call right (exit $rc)"
    [ "$r" -eq 0 ] || grep -E '^not ok|^#   rank|Terminated|timeout' "$out" | head -12 |
        sed 's/^/#   /'
    line='coll/gpu: MPI_I\{0,1\}[aA]llreduce on communicator 0 (call [0-9]* through the node team)'
    line="$line is erroneous: the .* differs across ranks (.* on rank(s) 0; .* on rank(s) 1"
    lines=$(grep -c "$line" "$out.ranks/1/rank.0/stderr")
    others=$(cat "$out".ranks/1/rank.[1-9]*/stderr | grep -c 'is erroneous')
    [ "$lines" -eq 8 ] && [ "$others" -eq 0 ]
    t_ok $? "$np ranks, $alg: rank 0 names each difference, ranks ($lines of 8; $others elsewhere)"
    if [ "$alg" != auto ]; then
        forced allreduce "$alg" && forced iallreduce "$alg"
        t_ok $? "$np ranks, $alg: every call ran $alg"
    fi
}

for np in 2 3; do
    run $np fused
    run $np oneshot "--mca coll_gpu_oneshot_slot_bytes 4194304"
    run $np twoshot
    run $np twoshot_ce
    run $np ring
    run $np auto
done
t_done
