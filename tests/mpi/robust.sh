#!/bin/sh
# robust.sh - test_robust (what real programs do to device-buffer collectives): communicators
# freed under running nonblocking calls, MPI_Finalize right after the last wait, many calls
# outstanding, MPI_Waitany/Waitsome/Testany, threads, memory kinds mixed across ranks and
# calls, nonblocking calls started in different orders on different communicators, 200
# communicators alive with a node team each, shared-memory names a dead process of the same
# pid left behind; 2 and 3
# ranks, on the node team's nonblocking path (coll_gpu_uniform_buffers=true: default
# algorithms, then forced ones) and staged (false).
#
# A known hang is reported as an expected failure (TAP "# TODO", automake's XFAIL; it turns
# into a failing XPASS once fixed): the first MPI_Iallreduce / MPI_Ibcast on device buffers of
# a communicator builds its node team with a blocking exchange, so two fresh communicators whose
# first such calls are started in different orders on different ranks (legal MPI) deadlock.
. "$(dirname "$0")/mpitest.sh"
: "${COLL_GPU_TEST_TIMEOUT:=300}"
export COLL_GPU_TEST_TIMEOUT
log=${TMPDIR:-/tmp}/coll-gpu-robust.$$
trap 'rm -f "$log"' EXIT

# run NP UNIFORM ALGS MODE...: one TAP line for test_robust MODE (every check passed, exit 0)
run() {
    np=$1 uniform=$2
    ar=${3% *} bc=${3#* }
    shift 3
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
for np in 2 3; do
    for uniform in true false; do
        run "$np" "$uniform" "auto auto" threads
        run "$np" "$uniform" "auto auto" kinds
    done
    run "$np" false "auto auto" crossed
    run "$np" true "auto auto" crossed warm
done
run 3 true "auto auto" comms 200
# names in /dev/shm that a killed process with the same pid left (pids wrap at 32768: a test
# suite that ends jobs by timeouts gets there) must cost no call its node team: the team of
# world and of the dup forms on every rank, no call falls back for want of one
for np in 2 3; do
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 5" run "$np" true "auto auto" stale
    teams=$(grep -c "coll:gpu:team (cid [0-9]*): $np ranks on " "$log")
    noteam=$(grep -c "no node team\|no NVLink/IPC team\|cannot create the control block" "$log")
    [ "$teams" -eq $((2 * np)) ] && [ "$noteam" -eq 0 ]
    t_ok $? "$np ranks, test_robust stale: $teams of $((2 * np)) rank-teams formed (world, dup), $noteam without"
    [ "$teams" -eq $((2 * np)) ] && [ "$noteam" -eq 0 ] || t_diag "$log" 40
done
# as mpi4py initializes MPI: MPI_THREAD_MULTIPLE, real locks, one thread
COLL_GPU_TEST_THREAD_MULTIPLE=1 run 3 true "auto auto" freed
COLL_GPU_TEST_THREAD_MULTIPLE=1 run 3 true "auto auto" any

# the known hang: crossed first calls on fresh communicators with the node team's path
COLL_GPU_TEST_UNIFORM=true COLL_GPU_TEST_CASE_TIMEOUT=15 \
    "$RUN_MPI" 2 "$MPI_TESTS/test_robust" crossed >"$log" 2>&1
rc=$?
what="2 ranks, uniform_buffers=true, test_robust crossed: first device MPI_Iallreduce/MPI_Ibcast of two fresh dups started in different orders"
if [ "$rc" -eq 0 ] && ! grep -q '^not ok' "$log"; then
    tap_n=$((tap_n + 1))
    echo "ok $tap_n - $what # TODO known hang (the team's setup blocks in the first nonblocking call): passes now, update robust.sh"
elif grep -q 'timed out .* in case: crossed: first calls on fresh communicators' "$log"; then
    tap_n=$((tap_n + 1))
    echo "not ok $tap_n - $what # TODO known hang: the node team's setup is a blocking exchange inside the first nonblocking call"
else
    t_ok 1 "$what: failed otherwise than by the known hang (exit $rc)"
    t_diag "$log" 40
fi
t_done
