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
# Nonblocking calls started in different orders on two fresh communicators (legal MPI) hung
# while the first MPI_Iallreduce / MPI_Ibcast on device buffers built its node team with a
# blocking exchange; they run here on the team's path, and with a setup that fails (every call
# queued then takes the host fallback, until a blocking call settles the setup).
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

# crossed first calls: on fresh communicators (uniform_buffers=true: nothing known of the kinds
# yet, so staged), and after a blocking host allreduce on each (kinds agreed: the calls take
# the node team and start its setup; hung while that setup waited inside the first call)
for np in 2 3; do
    run "$np" true "auto auto" crossed
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10" run "$np" true "auto auto" crossed agreed
    n=$(grep -c "coll:gpu:iallreduce (cid [0-9]*): .* ranks -> [a-z_]* via" "$log")
    [ "$n" -gt 0 ]
    t_ok $? "$np ranks, test_robust crossed agreed: $n iallreduce calls took the team"
done
# a host MPI_Reduce as a fresh communicator's first collective, then device nonblocking calls:
# under the promise of coll_gpu_uniform_buffers they take the node team; under the defaults
# they are staged (no blocking call had device memory on every rank), and right either way
for np in 2 3; do
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10" run "$np" true "auto auto" reducefirst
    n=$(grep -c "coll:gpu:iallreduce (cid [0-9]*): .* ranks -> [a-z_]* via" "$log")
    [ "$n" -eq "$np" ]
    t_ok $? "$np ranks, test_robust reducefirst, uniform_buffers=true: every iallreduce took the team ($n)"
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10" run "$np" false "auto auto" reducefirst
done
# a setup that fails (rank 1's scratch refused) under nonblocking first calls: every call
# queued on the team runs through the host fallback, crossed orders and many calls included
for mode in "crossed agreed" "many 300" any; do
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_test_fail_team 1 --mca coll_gpu_verbose 10" \
        run 3 true "auto auto" $mode
    n=$(grep -c "through the host with coll/gpu's own messages" "$log")
    [ "$n" -gt 0 ]
    t_ok $? "3 ranks, rank 1's team setup fails, test_robust $mode: $n calls took the host fallback"
done
# ... and not for good: a blocking device allreduce settles the failed setup on every rank, the
# two calls queued before it took the host fallback, the six after it are staged as on any
# communicator without a team (before: all eight through the fallback, 24 lines)
COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_test_fail_team 1 --mca coll_gpu_verbose 10" \
    run 3 true "auto auto" settled 3
n=$(grep -ac "through the host with coll/gpu's own messages" "$log")
s=$(grep -ac "coll:gpu:i[a-z]* (cid [0-9]*): rank [0-9]*: .* -> staged (nonblocking)" "$log")
t_ok $((n != 6 || s != 18)) "3 ranks, rank 1's team setup fails, test_robust settled 3: the calls \
before the blocking allreduce through the host fallback ($n of 6 lines), after it staged ($s of 18)"
t_done
