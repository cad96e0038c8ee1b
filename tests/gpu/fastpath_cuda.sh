#!/bin/sh
# fastpath_cuda.sh - allreduce and bcast on device buffers forced onto each fast-path algorithm
# (one-shot, two-shot, ring; push, chain, tree)
# (and staged, for reference), with the cuda backend, 2 and 4 ranks.  Each run is the matrix's
# allreduce and bcast sections; a run that fails prints its tail as TAP comments.
. "$(dirname "$0")/gputest.sh"
log=${TMPDIR:-/tmp}/coll-gpu-fastpath.$$
for np in 2 4; do
    for alg in "allreduce_algorithm oneshot" "allreduce_algorithm twoshot" \
               "allreduce_algorithm ring" "bcast_algorithm push" "bcast_algorithm chain" \
               "bcast_algorithm tree" \
               "allreduce_algorithm staged"; do
        set -- $alg
        COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_$1 $2 --mca coll_gpu_verbose 10" \
        COLL_GPU_TEST_FILTER="${1%%_algorithm}*" \
            "$RUN_MPI" "$np" "$MPI_TESTS/test_coll" --quick >"$log" 2>&1
        rc=$?
        # the log must show the forced algorithm was taken, not silently staged
        taken=0
        [ "$2" = staged ] || grep -q -- "-> $2 via" "$log" || taken=1
        [ $rc -eq 0 ] && [ $taken -eq 0 ]
        t_ok $? "$np ranks, coll_gpu_$1=$2: matrix passes and the log shows $2"
        [ $rc -eq 0 ] && [ $taken -eq 0 ] || t_diag "$log"
    done
done
rm -f "$log"
t_done
