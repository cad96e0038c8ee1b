#!/bin/sh
# composed_team.sh - the blocking MPI_Allgather(v), MPI_Alltoall(v), MPI_Reduce_scatter,
# MPI_Reduce_scatter_block and MPI_Reduce on device buffers run on the node team (the first four
# as one exchange, coll_gpu_exchange.c; a reduce-scatter as the team's reduce-scatter, or with a
# user-defined op as an allreduce into a device scratch; a reduce as the team's reduce-scatter
# whose whole result is the root's, or with a user-defined op as an allreduce whose result the
# root keeps, coll_gpu_reduce.c), not through host memory: test_coll's cases of them (every
# type, user ops, in place, every root, uneven and zero v counts, communicators of 1 to 4 ranks,
# host, device and mixed buffers) right on 3 and 4 ranks under the defaults, and the verbose log
# saying so for the all-device calls; MPI_Reduce_scatter's cases (counts that differ per rank,
# zero on every third rank: test_coll's vcount) on 2 ranks too; and exchanges large enough to
# spread their copies over three streams, in the benchmark's check mode.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_composed_team.$$
trap 'rm -f "$out" "$out.log"' EXIT

# composed NP FILTER: test_coll's --quick cases FILTER selects, on NP ranks with the verbose
# log; sets rc (its exit status) and n (the cases right), and skips the whole script where
# test_coll skips
composed() {
    COLL_GPU_TEST_FILTER="$2" \
        COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$1" "$MPI_TESTS/test_coll" --quick >"$out" 2>"$out.log"
    rc=$?
    why=$(t_skipped "$out")
    if [ "$rc" -eq 0 ] && [ -n "$why" ]; then
        echo "1..0 # SKIP $why"
        exit 0
    fi
    # TAP lines counted wherever they stand: Open MPI 5 forwards a rank's verbose log into the
    # same stream, sometimes without its line end, so a case's line may start mid-line
    n=$(( $(grep -oE 'ok [0-9]+ - ' "$out" | wc -l) - $(grep -oE 'not ok [0-9]+ - ' "$out" | wc -l) ))
    ! grep -q 'not ok [0-9]* - ' "$out" && [ "$rc" -eq 0 ] && [ "$n" -gt 0 ]
}

# logged COLL WORDS: the log lines of the last run that say the device COLL calls took WORDS
logged() {
    k=$(grep -hc "coll:gpu:$1 .*$2" "$out" "$out.log" | awk '{s += $1} END {print s + 0}')
    [ "$k" -gt 0 ]
    t_ok $? "the device $1 calls ran on the node team ($k log lines say so)"
    [ "$k" -gt 0 ] || grep -h "coll:gpu:$1 " "$out" "$out.log" | head -3 | sed 's/^/#   log: /'
}

# the cases' failures, and the log's tail when test_coll failed
failures() {
    grep -o 'not ok [0-9]* - .*' "$out" | head -5 | sed 's/^/#   /'
    [ "$rc" -eq 0 ] || t_diag "$out.log" 20
}

for np in 3 4; do
    composed "$np" "allgather *|allgatherv *|alltoall *|alltoallv *|reduce_scatter *|reduce_scatter_block*|reduce *"
    t_ok $? "test_coll's allgather(v), alltoall(v), reduce_scatter(_block) and reduce cases on $np\
 ranks: $n right (exit $rc)"
    failures
    for coll in allgather allgatherv alltoall alltoallv; do
        logged $coll "exchange on the node team"
    done
    logged reduce_scatter "a reduce-scatter on the node team"
    logged reduce_scatter_block "a reduce-scatter on the node team"
    # user-defined ops: the allreduce composition
    logged reduce_scatter "an allreduce into a device scratch, then this rank's piece"
    logged reduce_scatter_block "an allreduce into a device scratch, then this rank's block"
    logged reduce "an allreduce on the node team (the root keeps the result)"
    logged reduce "a reduce on the node team, the root reading every rank's input"
done

composed 2 "reduce_scatter *"
t_ok $? "test_coll's reduce_scatter cases on 2 ranks: $n right (exit $rc)"
failures
logged reduce_scatter "a reduce-scatter on the node team"

# The nonblocking MPI_Iallgather(v), MPI_Ialltoall(v), MPI_Ireduce_scatter(_block) and
# MPI_Ireduce run the same team step through the engine once a blocking call has found the team
# ready (test_coll's COLL_GPU_TEST_WARM_TEAMS): test_coll's nonblocking cases of them (host,
# device, mixed, in place, every root, MPI_Wait and MPI_Test polling, derived types) right on 4
# ranks, and the log says so.
for np in 4; do
    COLL_GPU_TEST_WARM_TEAMS=1 COLL_GPU_TEST_FILTER="iallgather*|ialltoall*|ireduce*" \
        COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$np" "$MPI_TESTS/test_coll" --kinds=all --sections=nonblocking >"$out" 2>"$out.log"
    rc=$?
    n=$(( $(grep -oE 'ok [0-9]+ - ' "$out" | wc -l) - $(grep -oE 'not ok [0-9]+ - ' "$out" | wc -l) ))
    ! grep -q 'not ok [0-9]* - ' "$out" && [ "$rc" -eq 0 ] && [ "$n" -gt 0 ]
    t_ok $? "test_coll's nonblocking iallgather(v), ialltoall(v), ireduce_scatter(_block) and\
 ireduce cases on $np ranks after a blocking call: $n right (exit $rc)"
    failures
    for coll in iallgather iallgatherv ialltoall ialltoallv; do
        logged $coll "exchange on the node team"
    done
    logged ireduce_scatter "a reduce-scatter on the node team"
    logged ireduce_scatter_block "a reduce-scatter on the node team"
    logged ireduce "a reduce on the node team"
done

# Pieces of 4 MiB and more: a rank's exchange copies go round-robin over three streams
# (coll_gpu_nvl.c, nvl_exchange_streams); the benchmark's check mode (fresh random data,
# poisoned outputs, a host reference) on 3 ranks, 6 and 24 MiB in all, must count no wrong
# element, on the node team.
bench=$top_builddir/tests/coll_gpu_bench
if [ -x "$bench" ]; then
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" 3 "$bench" -d "${COLL_GPU_TEST_DEVICE:-emulated}" -t float -o sum -C \
        -c allgather,allgatherv,alltoall,alltoallv -B mpi -b 6M -e 24M -f 4 -n 2 -w 1 \
        >"$out" 2>"$out.log"
    rc=$?
    rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +float' "$out")
    grep -q '^# check: 0 wrong elements in total' "$out" && [ "$rc" -eq 0 ] && [ "$rows" -eq 8 ]
    t_ok $? "exchanges of 6 and 24 MiB on 3 ranks, copies over three streams: $rows rows, \
$(grep -oE '^# check: [0-9]+ wrong elements' "$out" | sed 's/^# check: //') (exit $rc)"
    [ "$rc" -eq 0 ] || t_diag "$out.log" 20
    logged alltoallv "exchange on the node team"
fi
t_done
