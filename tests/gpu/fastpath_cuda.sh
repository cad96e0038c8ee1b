#!/bin/sh
# fastpath_cuda.sh - allreduce and bcast on device buffers forced onto each fast-path algorithm
# (one-shot, two-shot, ring, fused, copy-engine two-shot; push, chain, tree, pull) and
# staged, with the cuda backend, 2 and 4
# ranks.  Each run is the quick matrix's allreduce or bcast cases on device buffers (every rank
# "dev", in place included; coll_matrix_cuda.sh runs the rest); every call must have taken the
# forced algorithm unless its case asks for staging (fastpath/decisions.sh counts the decision
# lines per rank and case).  A run that fails prints its tail as TAP comments.
. "$(dirname "$0")/gputest.sh"
. "$(dirname "$0")/../fastpath/decisions.sh"
log=${TMPDIR:-/tmp}/coll-gpu-fastpath.$$
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
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
        coll=${var%%_algorithm}
        rm -rf "$log.ranks"
        COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_$var $val --mca coll_gpu_verbose 10 $*" \
        COLL_GPU_TEST_RANK_LOGS="$log.ranks" \
        COLL_GPU_TEST_FILTER="$coll * dev *" \
            "$RUN_MPI" "$np" "$MPI_TESTS/test_coll" --quick >"$log" 2>"$log.err"
        rc=$?
        grep -q '^# device: ' "$log" && [ "$np" -eq 2 ] && [ "$coll" = allreduce ] && [ "$val" = oneshot ] \
            && grep '^# device: ' "$log"
        if [ "$val" = staged ]; then
            # staged: every decision line must say staged (none may take a fast path)
            dec_calls=$(cat "$log.ranks"/*/rank.*/stderr | grep -c "coll:gpu:$coll (cid .* ranks -> ")
            dec_taken=$(cat "$log.ranks"/*/rank.*/stderr | grep -c "coll:gpu:$coll (cid .* ranks -> staged (")
            [ "$dec_calls" -gt 0 ] && [ "$dec_taken" -eq "$dec_calls" ]
            taken=$?
            dec_msg="$((dec_calls - dec_taken)) of $dec_calls calls did not stage"
        else
            check_decisions "$log" "$log.ranks" "$coll" "$val" "$np"
            taken=$?
        fi
        [ $rc -eq 0 ] && [ $taken -eq 0 ]
        t_ok $? "$np ranks, coll_gpu_$var=$val $*: matrix passes (exit $rc); ${dec_taken:-?} of ${dec_calls:-?} calls took $val"
        if [ $rc -ne 0 ] || [ $taken -ne 0 ]; then
            echo "# $dec_msg"
            cat "$log.err" >>"$log"
            t_diag "$log"
        fi
        dec_taken= dec_calls=
    done
done
rm -rf "$log" "$log.err" "$log.ranks"
t_done
