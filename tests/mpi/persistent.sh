#!/bin/sh
# persistent.sh - MPI-4's persistent collectives on device buffers (Open MPI 5.0; 4.1: MPIX_), 4 ranks,
# every rank's buffers in device memory, coll_gpu_verbose on (per-rank logs):
#   test_persistent dev (each request started three times with fresh data and a poisoned
#   output), as the tests' default runs it (coll_gpu_uniform_buffers=false): every _init
#   staged; and with coll_gpu_uniform_buffers=true: MPI_Allreduce_init and MPI_Bcast_init take
#   the node team's path (coll_gpu_engine.c), every other _init is staged;
#   test_persistent team with coll_gpu_uniform_buffers=true and the default algorithms: many
#   starts, requests together, blocking and nonblocking calls between, frees; every
#   MPI_Allreduce_init and MPI_Bcast_init on the team but the user-defined op's (staged).
# tests/fastpath/persistent.sh runs test_persistent team under each forced algorithm.
. "$(dirname "$0")/mpitest.sh"
log=${TMPDIR:-/tmp}/coll-gpu-persistent.$$
trap 'rm -rf "$log" "$log.ranks"' EXIT

# run UNIFORM MODE: output in $log, per-rank logs under $log.ranks; sets rc
run() {
    rm -rf "$log.ranks"
    COLL_GPU_TEST_UNIFORM=$1 COLL_GPU_TEST_RANK_LOGS="$log.ranks" \
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" 4 "$MPI_TESTS/test_persistent" $2 >"$log" 2>&1
    rc=$?
}

# lines NAME PATTERN: on every rank, the number of NAME's decision lines naming PATTERN as
# their path, and of all NAME's decision lines, as "took/all" words, one per rank
lines() {
    for f in "$log".ranks/*/rank.*/stderr; do
        [ -f "$f" ] || continue
        all=$(grep -c "coll:gpu:$1 (cid [0-9]*): rank [0-9]*: .* ranks -> " "$f")
        took=$(grep -c "coll:gpu:$1 (cid [0-9]*): rank [0-9]*: .* ranks -> \\($2\\)" "$f")
        echo "$took/$all"
    done
}

# every NAME PATTERN [WANT]: 0 when on each of the 4 ranks every decision line of NAME names
# PATTERN (WANT of them, when given; at least one); sets dmsg
every() {
    res=$(lines "$1" "$2" | tr '\n' ' ')
    dmsg=" (per rank: $res)"
    [ "$(echo $res | wc -w)" -eq 4 ] || return 1
    for w in $res; do
        took=${w%/*} all=${w#*/}
        [ "$all" -gt 0 ] && [ "$took" -eq "$all" ] || return 1
        [ -z "${3:-}" ] || [ "$all" -eq "$3" ] || return 1
    done
    return 0
}

passed() {
    [ "$rc" -eq 0 ] && ! grep -q '^not ok' "$log" && [ "$(grep -c '^ok' "$log")" -eq "$1" ]
}

team='[a-z_]* via'
others="reduce_init scan_init exscan_init allgather_init allgatherv_init gather_init gatherv_init scatter_init scatterv_init alltoall_init alltoallv_init alltoallw_init reduce_scatter_init reduce_scatter_block_init"

run false dev
skip=$(t_skipped "$log")
if [ -n "$skip" ]; then
    echo "1..0 # SKIP $skip"
    exit 0
fi
passed 18
t_ok $? "test_persistent dev, coll_gpu_uniform_buffers=false: 18 checks pass (exit $rc)"
[ $rc -eq 0 ] || t_diag "$log"
for c in allreduce_init bcast_init; do
    every "$c" 'staged (persistent)'
    t_ok $? "uniform_buffers=false: every $c staged$dmsg"
done

run true dev
passed 18
t_ok $? "test_persistent dev, coll_gpu_uniform_buffers=true: 18 checks pass (exit $rc)"
[ $rc -eq 0 ] || t_diag "$log"
for c in allreduce_init bcast_init; do
    every "$c" "$team"
    t_ok $? "uniform_buffers=true: every $c took the node team$dmsg"
done
bad=""
for c in $others; do
    every "$c" 'staged (persistent)' || bad="$bad $c:$dmsg"
done
[ -z "$bad" ]
t_ok $? "uniform_buffers=true: every other _init staged${bad:+ (not:$bad)}"

run true team
passed 13
t_ok $? "test_persistent team, coll_gpu_uniform_buffers=true: 13 checks pass (exit $rc)"
[ $rc -eq 0 ] || t_diag "$log"
set -- $(sed -n 's/^# inits: allreduce_init \([0-9]*\) bcast_init \([0-9]*\) user_op \([0-9]*\)$/\1 \2 \3/p' "$log")
n_ar=${1:-0} n_bc=${2:-0} n_user=${3:-0}
res=$(lines allreduce_init "$team" | tr '\n' ' ')
ok=0
for w in $res; do
    [ "$w" = "$n_ar/$((n_ar + n_user))" ] || ok=1
done
[ "$(echo $res | wc -w)" -eq 4 ] && [ "$n_ar" -gt 0 ]
[ $? -eq 0 ] && [ $ok -eq 0 ]
t_ok $? "team: $n_ar of $((n_ar + n_user)) MPI_Allreduce_init took the team on every rank (per rank: $res)"
res=$(lines allreduce_init 'staged (persistent)' | tr '\n' ' ')
ok=0
for w in $res; do
    [ "$w" = "$n_user/$((n_ar + n_user))" ] || ok=1
done
[ "$(echo $res | wc -w)" -eq 4 ] && [ "$n_user" -gt 0 ] && [ $ok -eq 0 ]
t_ok $? "team: the $n_user with a user-defined op staged (per rank: $res)"
every bcast_init "$team" "$n_bc"
t_ok $? "team: all $n_bc MPI_Bcast_init took the team$dmsg"

# inits and starts on two fresh communicators in different orders on even and odd ranks: an
# _init never waits for the other ranks (it waited for the node team's setup, and hung); then
# the same with rank 1's team setup failing (every start takes the host fallback)
COLL_GPU_TEST_TIMEOUT=120
export COLL_GPU_TEST_TIMEOUT
run true crossed
passed 1
t_ok $? "test_persistent crossed, coll_gpu_uniform_buffers=true: right (exit $rc)"
[ $rc -eq 0 ] || t_diag "$log"
every allreduce_init "$team" 2
t_ok $? "crossed: each rank's 2 MPI_Allreduce_init took the team$dmsg"
COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_test_fail_team 1" run true crossed
passed 1
t_ok $? "test_persistent crossed, rank 1's team setup failing: right (exit $rc)"
[ $rc -eq 0 ] || t_diag "$log"
every bcast_init 'staged (.*through the host with coll/gpu' 4
t_ok $? "crossed, rank 1's team setup failing: the 2 bcasts' 2 starts each took the host fallback$dmsg"
t_done
