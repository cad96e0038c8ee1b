#!/bin/sh
# fastpath.sh - the node-team fast path on the emulated device, with the default
# coll_gpu_uniform_buffers=true: the matrix's allreduce and bcast cases on device buffers (every
# rank "dev", in place included), forced onto each algorithm and left to the decision table, on
# 2, 3 and 4 ranks.  Every call of every case must have taken the forced algorithm, unless the
# case itself asks for staging (decisions.sh says which and how the calls are counted).  Then the
# chain and tree bcast cut into 4 KiB chunks (thousands of chunks at the matrix's sizes, several in
# flight), the ring allreduce on the in-place cases alone, the fused allreduce in small slots
# (many pieces, one sequence number each) and the copy-engine two-shot in 4 KiB pieces (the
# staging rows reused hundreds of times).
. "$(dirname "$0")/../mpi/mpitest.sh"
. "$(dirname "$0")/decisions.sh"
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
log=${TMPDIR:-/tmp}/coll-gpu-fastpath.$$

# run NP COLL ALG FILTER SECTIONS [MPIRUN ARGS...]: the matrix's cases FILTER of SECTIONS with
# coll_gpu_COLL_algorithm ALG; sets rc, ran (cases that passed) and taken (0: every call took
# ALG, or a fast-path algorithm for auto, but where the case asks for staging; dec_* and
# dec_msg from check_decisions say how many and which not).
run() {
    np=$1 coll=$2 alg=$3 filter=$4 sections=$5
    shift 5
    rm -rf "$log.ranks"
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_${coll}_algorithm $alg --mca coll_gpu_verbose 10 $*" \
    COLL_GPU_TEST_RANK_LOGS="$log.ranks" \
    COLL_GPU_TEST_FILTER="$filter" \
        "$RUN_MPI" "$np" "$MPI_TESTS/test_coll" --sections="$sections" >"$log" 2>"$log.err"
    rc=$?
    ran=$(grep -c '^ok ' "$log")
    check_decisions "$log" "$log.ranks" "$coll" "$alg" "$np"
    taken=$?
    if [ "$taken" -ne 0 ]; then
        echo "# $dec_msg"
        # why a call did not take it: the ranks' own words (a team that did not form says why)
        grep -h "coll:gpu:team\|cannot\|failed" "$log".ranks/*/rank.*/stderr 2>/dev/null \
            | sed 's/^\[[^]]*\] //' | sort | uniq -c | head -8 | sed 's/^/#   /'
    fi
    # what t_diag shows when a check fails
    cat "$log.err" >>"$log"
}

for np in 2 3 4; do
    for alg in "allreduce oneshot" "allreduce twoshot" "allreduce ring" "allreduce fused" \
               "allreduce twoshot_ce" "allreduce auto" \
               "bcast push" "bcast chain" "bcast tree" "bcast pull" "bcast auto"; do
        set -- $alg
        run "$np" "$1" "$2" "$1 * dev *" types,sizes
        [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 0 ]
        t_ok $? "$np ranks, $1 algorithm $2: $ran cases pass; $dec_taken of $dec_calls calls took it, $dec_staged staged as their case asks"
        [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 0 ] || t_diag "$log"
    done

    # chain and tree bcast in 4 KiB chunks: the 8 MiB case alone is 2049 chunks
    for shape in chain tree; do
        run "$np" bcast $shape "bcast * dev *" types,sizes,modes --mca coll_gpu_chunk_bytes 4096
        many=$(grep -c "$shape position [0-9]* from root [0-9]*, parent -*[0-9]*, [0-9][0-9][0-9][0-9]* chunk(s) of 4096 B" "$log".ranks/*/rank.*/stderr | awk -F: '{n += $NF} END {print n + 0}')
        [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 0 ] && [ "$many" -gt 0 ]
        t_ok $? "$np ranks, bcast $shape in 4 KiB chunks: $ran cases pass, $dec_taken of $dec_calls calls took it, $many of 1000+ chunks"
        [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 0 ] && [ "$many" -gt 0 ] || t_diag "$log"
    done

    # fused allreduce in 300 KiB slots (the head takes 136-264 KiB on 2-4 ranks): 1 MiB is
    # 13 pieces on 2 ranks, 8 MiB hundreds on 4; in place and not, every type/op
    run "$np" allreduce fused "allreduce * dev *" types,sizes,modes \
        --mca coll_gpu_oneshot_slot_bytes 307200
    many=$(grep -c "fused, [0-9][0-9][0-9]* piece(s) of up to" "$log".ranks/*/rank.*/stderr | awk -F: '{n += $NF} END {print n + 0}')
    [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 0 ] && [ "$many" -gt 0 ]
    t_ok $? "$np ranks, allreduce fused in 300 KiB slots: $ran cases pass, $many rank-calls of 10+ pieces"
    [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 0 ] && [ "$many" -gt 0 ] || t_diag "$log"

    # copy-engine two-shot in 4 KiB pieces: the 8 MiB case is hundreds of pieces per shard
    run "$np" allreduce twoshot_ce "allreduce * dev *" types,sizes,modes \
        --mca coll_gpu_chunk_bytes 4096
    many=$(grep -c "twoshot_ce, shard of [0-9]* B in [0-9][0-9][0-9]* piece(s) of 4096 B" "$log".ranks/*/rank.*/stderr | awk -F: '{n += $NF} END {print n + 0}')
    [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 0 ] && [ "$many" -gt 0 ]
    t_ok $? "$np ranks, allreduce twoshot_ce in 4 KiB pieces: $ran cases pass, $many rank-calls of 100+ pieces"
    [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 0 ] && [ "$many" -gt 0 ] || t_diag "$log"

    # ring allreduce in place (sizes and modes sections; uneven chunks at count 1023 and 1, 7)
    run "$np" allreduce ring "allreduce * dev * in-place" types,sizes,modes
    [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 3 ]
    t_ok $? "$np ranks, allreduce ring in place: $ran cases pass, $dec_taken of $dec_calls calls took the ring"
    [ $rc -eq 0 ] && [ $taken -eq 0 ] && [ "$ran" -gt 3 ] || t_diag "$log"
done
rm -rf "$log" "$log.err" "$log.ranks"
t_done
