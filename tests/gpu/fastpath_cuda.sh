#!/bin/sh
# fastpath_cuda.sh - allreduce and bcast on device buffers forced onto each fast-path algorithm
# (one-shot, two-shot, ring, fused, copy-engine two-shot; push, chain, tree, pull)
# (and staged, for reference), with the cuda backend, 2 and 4 ranks.  Each run is the matrix's
# allreduce and bcast sections; a run that fails prints its tail as TAP comments.
. "$(dirname "$0")/gputest.sh"
log=${TMPDIR:-/tmp}/coll-gpu-fastpath.$$
for np in 2 4; do
    for alg in "allreduce_algorithm oneshot" "allreduce_algorithm twoshot" \
               "allreduce_algorithm ring" "allreduce_algorithm fused" \
               "allreduce_algorithm twoshot_ce" "bcast_algorithm push" "bcast_algorithm chain" \
               "bcast_algorithm tree" "bcast_algorithm pull" \
               "allreduce_algorithm fused --mca coll_gpu_oneshot_slot_bytes 307200" \
               "allreduce_algorithm twoshot_ce --mca coll_gpu_chunk_bytes 4096" \
               "allreduce_algorithm staged"; do
        # "PARAMETER VALUE [more mpirun arguments]": the small slots and pieces make the fused
        # kernel run in many pieces and the copy-engine pipeline reuse its staging rows
        set -- $alg
        var=$1 val=$2
        shift 2
        COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_$var $val --mca coll_gpu_verbose 10 $*" \
        COLL_GPU_TEST_FILTER="${var%%_algorithm}*" \
            "$RUN_MPI" "$np" "$MPI_TESTS/test_coll" --quick >"$log" 2>&1
        rc=$?
        # the log must show the forced algorithm was taken, not silently staged
        taken=0
        [ "$val" = staged ] || grep -q -- "-> $val via" "$log" || taken=1
        [ $rc -eq 0 ] && [ $taken -eq 0 ]
        t_ok $? "$np ranks, coll_gpu_$var=$val $*: matrix passes and the log shows $val"
        [ $rc -eq 0 ] && [ $taken -eq 0 ] || t_diag "$log"
    done
done
rm -f "$log"
t_done
