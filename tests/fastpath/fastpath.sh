#!/bin/sh
# fastpath.sh - the node-team fast path on the emulated device, with the default
# coll_gpu_uniform_buffers=true: the matrix's allreduce and bcast cases on device buffers (every
# rank "dev"), forced onto each algorithm and left to the decision table, on 2, 3 and 4 ranks.
# The log must show the algorithm was taken, not silently staged.
. "$(dirname "$0")/../mpi/mpitest.sh"
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
log=${TMPDIR:-/tmp}/coll-gpu-fastpath.$$
for np in 2 3 4; do
    for alg in "allreduce oneshot" "allreduce twoshot" "allreduce auto" "bcast push" \
               "bcast auto"; do
        set -- $alg
        COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_$1_algorithm $2 --mca coll_gpu_verbose 10" \
        COLL_GPU_TEST_FILTER="$1 * dev *" \
            "$RUN_MPI" "$np" "$MPI_TESTS/test_coll" --sections=types,sizes >"$log" 2>&1
        rc=$?
        ran=$(grep -c '^ok ' "$log")
        taken=0
        case $2 in
        auto) grep -q -- "-> [a-z]* via" "$log" || taken=1 ;;
        *) grep -q -- "-> $2 via" "$log" || taken=1 ;;
        esac
        [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 0 ]
        t_ok $? "$np ranks, $1 algorithm $2: $ran cases pass and the log shows the fast path"
        [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 0 ] || t_diag "$log"
    done
done
rm -f "$log"
t_done
