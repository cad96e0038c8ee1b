#!/bin/sh
# composed_team.sh - the blocking MPI_Allgather(v), MPI_Alltoall(v), MPI_Reduce_scatter_block
# and MPI_Reduce on device buffers run on the node team (the first four as one exchange,
# coll_gpu_exchange.c; a reduce_scatter_block as an allreduce into a device scratch, a reduce as
# an allreduce whose result the root keeps, coll_gpu_reduce.c), not through host memory:
# test_coll's cases of them (every type, user ops, in place, uneven and zero v counts,
# communicators of 1 to 4 ranks, host, device and mixed buffers) right on 3 and 4 ranks under
# the defaults, and the verbose log saying so for the all-device calls.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_composed_team.$$
trap 'rm -f "$out" "$out.log"' EXIT
for np in 3 4; do
    COLL_GPU_TEST_FILTER="allgather *|allgatherv *|alltoall *|alltoallv *|reduce_scatter_block*|reduce *" \
        COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" $np "$MPI_TESTS/test_coll" --quick >"$out" 2>"$out.log"
    rc=$?
    why=$(t_skipped "$out")
    if [ "$rc" -eq 0 ] && [ -n "$why" ]; then
        echo "1..0 # SKIP $why"
        exit 0
    fi
    # TAP lines counted wherever they stand: Open MPI 5 forwards a rank's verbose log into the same
    # stream, sometimes without its line end, so a case's line may start mid-line
    n=$(( $(grep -oE 'ok [0-9]+ - ' "$out" | wc -l) - $(grep -oE 'not ok [0-9]+ - ' "$out" | wc -l) ))
    ! grep -q 'not ok [0-9]* - ' "$out" && [ "$rc" -eq 0 ] && [ "$n" -gt 0 ]
    t_ok $? "test_coll's allgather(v), alltoall(v), reduce_scatter_block and reduce cases on $np ranks: $n right (exit $rc)"
    grep -o 'not ok [0-9]* - .*' "$out" | head -5 | sed 's/^/#   /'
    [ "$rc" -eq 0 ] || t_diag "$out.log" 20
    for c in "allgather:exchange on the node team" "allgatherv:exchange on the node team" \
             "alltoall:exchange on the node team" "alltoallv:exchange on the node team" \
             "reduce_scatter_block:an allreduce into a device scratch" \
             "reduce:an allreduce on the node team"; do
        coll=${c%%:*}
        k=$(grep -hc "coll:gpu:$coll .*${c#*:}" "$out" "$out.log" | awk '{s += $1} END {print s + 0}')
        [ "$k" -gt 0 ]
        t_ok $? "$np ranks: the device $coll calls ran on the node team ($k log lines say so)"
        [ "$k" -gt 0 ] || grep -h "coll:gpu:$coll " "$out" "$out.log" | head -3 | sed 's/^/#   log: /'
    done
done
t_done
