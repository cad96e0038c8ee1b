#!/bin/sh
# kinds_sweep.sh - test_kinds_sweep on 2, 3 and 4 ranks under coll/gpu's defaults: each rank
# draws the memory kind of every buffer of every call on its own (host, pinned, device,
# managed), on communicators made by split_type (as CUDA-aware programs open), dup, split and
# create_group, with Open MPI's own collectives in between.  The calls: allreduce (in place
# too), bcast, reduce, allgather, alltoall, allgatherv, alltoallv, reduce_scatter and
# reduce_scatter_block (uneven and zero counts, gaps, in place); iallreduce, ibcast, iallgather,
# ialltoall, iallgatherv, ireduce_scatter_block; and the persistent allreduce, bcast,
# allgatherv, alltoallv, reduce_scatter and reduce_scatter_block.  Every call right, none hung.
# Then 3 and 4 ranks again across 2 emulated nodes (coll_gpu_emulate_nodes), where the device
# calls take the hierarchical path: under the promise of device memory, the hierarchical setup's
# own split of the communicator came back into coll/gpu as a device call and recursed until the
# stack ran out (fixed in coll_gpu_hier.c, hier_split).
# And 3 ranks where world rank 0 cannot make the shared block of the agreement: the communicators
# it leads agree by host collectives, as those whose ranks span hosts do.
# And with threads (MPI_THREAD_MULTIPLE): 2 ranks with 3 threads, 4 ranks with 2, and 4 ranks
# with 2 threads across 2 emulated nodes, each thread its sweep on communicators of its own at
# once.  Open MPI's MPI_Comm_dup on one thread agrees the new communicator's id by an
# MPI_Iallreduce that moves on in opal_progress; where that progress ran inside another
# thread's node-team setup, coll/gpu's engine lock was taken twice by one thread, and the rank
# hung (fixed in coll_gpu_engine.c, async_hold).
# COLL_GPU_SWEEP_SEED repeats a run (the seed is printed).
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_kinds_sweep.$$
trap 'rm -f "$out"' EXIT
: "${COLL_GPU_TEST_TIMEOUT:=300}"
export COLL_GPU_TEST_TIMEOUT
seed=${COLL_GPU_SWEEP_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
for cfg in 2 3 4 3:2 4:2 3:agree 2:t3 4:t2 4:2:t2; do
    np=${cfg%%:*} nodes=1 where= extra= threads=1
    case $cfg in
    *:t*)
        threads=${cfg##*:t}
        where=", $threads threads"
        cfg=${cfg%:t*} ;;
    esac
    case $cfg in
    *:agree)
        # rank 0 of the world cannot make the shared block: the communicators it leads agree
        # by host collectives, as those that span hosts do
        extra="--mca coll_gpu_test_fail_alloc 0 --mca coll_gpu_test_fail_alloc_site kinds_board"
        where=", agreeing by host collectives where world rank 0 leads" ;;
    *:*) nodes=${cfg#*:} where="$where, across $nodes emulated nodes" ;;
    esac
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 5 --mca coll_gpu_emulate_nodes $nodes $extra \
${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$np" "$MPI_TESTS/test_kinds_sweep" "$((seed + np))" 2 "$threads" >"$out" 2>&1
    rc=$?
    tap=$(grep -E '^(ok|not ok|1\.\.)' "$out")
    ! echo "$tap" | grep -q '^not ok' && echo "$tap" | grep -q '^1\.\.[1-9]'
    ok=$?
    [ "$rc" -eq 0 ] || ok=1
    t_ok "$ok" "$np ranks$where, seed $((seed + np)): exit $rc, $(echo "$tap" | grep -c '^ok') \
cases right, $(echo "$tap" | grep -c '^not ok') wrong"
    [ "$ok" -eq 0 ] || t_diag "$out" 40
    d=$(grep -c 'memory kinds agreed never: every rank asserts device memory only' "$out")
    h=$(grep -c 'memory kinds agreed never: every rank asserts host memory only' "$out")
    b=$(grep -c 'memory kinds agreed per call through a shared block' "$out")
    a=$(grep -c 'memory kinds agreed per call by a host allreduce' "$out")
    [ "$d" -eq "$np" ] && [ "$h" -eq "$np" ] && [ "$b" -gt 0 ] \
        && { [ -z "$extra" ] || [ "$a" -gt 0 ]; }
    t_ok $? "$np ranks$where: every rank read both promises of mpi_assert_memory_alloc_kinds ($d, $h of \
$np), the other communicators agree per call through the shared block ($b lines) or by host \
collectives ($a lines)"
done
t_done
