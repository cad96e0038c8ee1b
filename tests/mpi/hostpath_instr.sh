#!/bin/sh
# hostpath_instr.sh - host buffers pass through at almost no cost: coll/gpu's own instructions
# for one host-buffer call of 8 bytes a block on 2 ranks (tests/bench/hostpath-instr.sh:
# valgrind's callgrind, the same count on every run) stay within a limit, for every collective
# coll_gpu_hostpath_bench times.  Each entry tests its buffers against the classification cache
# inline, notes its kind where its collective agrees per call, and calls below, building nothing
# else (GCC 12 -O2: allreduce 92, bcast 52, gather and scatter 59, igather 64, scan 81, ibcast
# 99, reduce, reduce_scatter_block and allgather 107-109, alltoall 123, iallreduce 136,
# iallgather 137).  The program makes a blocking host allreduce first, so that the
# communicator's agreement is set up before the counted calls (a first nonblocking call sets it
# up in the background, and the calls made meanwhile take the longer path, as many as the
# timing makes them).  The path through the staged table and the agreement, which host calls
# took before (1c44258: 245 to 639), or one function call more on the path (its frame, the saved
# registers, its checks), go past the limits; issue 18's budget of 50 ns is about 150
# instructions at one per cycle at 3 GHz.  Skipped without valgrind.
. "$(dirname "$0")/mpitest.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# check COLL LIMIT
check() {
    name=$1 limit=$2
    if ! command -v valgrind >/dev/null 2>&1 || ! command -v callgrind_annotate >/dev/null 2>&1
    then
        t_skip "$name: coll/gpu's instructions per host call" "valgrind is not installed"
        return
    fi
    sh "$top_srcdir/tests/bench/hostpath-instr.sh" -C "$name" "$top_builddir" >"$log" 2>&1
    rc=$?
    n=$(sed -n 's/^hostpath-instr: [a-z_]* \([0-9.]*\) instructions.*/\1/p' "$log")
    [ "$rc" -eq 0 ] && [ -n "$n" ] && awk -v n="$n" -v l="$limit" 'BEGIN { exit !(n <= l) }'
    rc2=$?
    t_ok "$rc2" "$name: coll/gpu's instructions per host call: ${n:-none} (at most $limit)"
    [ "$rc2" -eq 0 ] || t_diag "$log" 30
}

check allreduce 100
check bcast 60
check reduce 120
check allgather 120
check alltoall 140
check gather 70
check scatter 70
check reduce_scatter_block 120
check scan 95
check iallreduce 160
check ibcast 120
check igather 75
check iallgather 160
t_done
