#!/bin/sh
# nbc.sh - MPI_Iallreduce and MPI_Ibcast on device buffers through the node team's nonblocking
# path (coll_gpu_engine.c), emulated device, coll_gpu_uniform_buffers=true, 2 and 3 ranks
# (test_nbc: results on fresh random data, several calls outstanding on world and a dup,
# MPI_Waitall in reverse order, MPI_Test loops, blocking calls interleaved, MPI_Request_free).
# Each run forces an allreduce and a bcast algorithm; every nonblocking call of every rank must
# have logged the forced algorithm (coll_gpu_verbose, one line per call, counted per rank
# against the calls the program made) and none may have been staged; forced staging must stage
# every call.  Then: a late rank (the calls return at once),
# a long wait reported and given up (coll_gpu_hang_warn_seconds, coll_gpu_hang_error_seconds),
# and a rank failing locally (COLL_GPU_TEST_FAIL_ASYNC: every rank gets an error, no hang).
. "$(dirname "$0")/../mpi/mpitest.sh"
COLL_GPU_TEST_UNIFORM=true
: "${COLL_GPU_TEST_TIMEOUT:=300}"
export COLL_GPU_TEST_UNIFORM COLL_GPU_TEST_TIMEOUT
: "${NBC_RANKS:=2 3}"
log=${TMPDIR:-/tmp}/coll-gpu-nbc.$$
trap 'rm -rf "$log" "$log.ranks"' EXIT
prog="$top_builddir/tests/fastpath/test_nbc"

# run NP AR BC MODE [MPIRUN ARGS...]: output in $log, per-rank logs under $log.ranks; sets rc
run() {
    np=$1 ar=$2 bc=$3 mode=$4
    shift 4
    rm -rf "$log.ranks"
    COLL_GPU_TEST_RANK_LOGS="$log.ranks" \
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_allreduce_algorithm $ar --mca coll_gpu_bcast_algorithm $bc --mca coll_gpu_verbose 10 $* ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$np" "$prog" $mode >"$log" 2>&1
    rc=$?
}

# decided COLL PATTERN: 0 when, on every rank, the lines of nonblocking COLL calls that name
# PATTERN as their path number the program's calls of COLL, and no other line of COLL exists;
# sets dmsg
decided() {
    calls=$(sed -n "s/^# calls: iallreduce \([0-9]*\) ibcast \([0-9]*\)$/\1 \2/p" "$log")
    set -- "$1" "$2" $calls
    [ "$1" = iallreduce ] && want=$3 || want=$4
    dmsg="" bad=0 nranks=0
    for f in "$log".ranks/*/rank.*/stderr; do
        [ -f "$f" ] || continue
        nranks=$((nranks + 1))
        all=$(grep -c "coll:gpu:$1 (cid [0-9]*): rank [0-9]*: .* ranks -> " "$f")
        took=$(grep -c "coll:gpu:$1 (cid [0-9]*): rank [0-9]*: .* ranks -> \\($2\\)" "$f")
        if [ -z "$want" ] || [ "$want" -eq 0 ] || [ "$all" -ne "$want" ] || [ "$took" -ne "$want" ]; then
            bad=1
            dmsg="$dmsg ${f#$log.ranks/}: $took of $all lines took '$2', $want calls;"
        fi
    done
    [ "$nranks" -gt 1 ] || { bad=1; dmsg="no per-rank logs"; }
    return $bad
}

passed() {
    [ "$rc" -eq 0 ] && ! grep -q '^not ok' "$log" && [ "$(grep -c '^ok' "$log")" -eq "$1" ]
}

for np in $NBC_RANKS; do
    for pair in "fused push" "oneshot pull" "twoshot chain" "twoshot_ce tree" "ring push" \
                "auto auto" \
                "twoshot chain --mca coll_gpu_chunk_bytes 4096" \
                "fused tree --mca coll_gpu_oneshot_slot_bytes 307200 --mca coll_gpu_chunk_bytes 4096"; do
        set -- $pair
        ar=$1 bc=$2
        shift 2
        run "$np" "$ar" "$bc" all "$@"
        case $ar in
        auto) arpat='fused\|oneshot\|twoshot' ;;
        # above a scratch slot, or in place, one-shot becomes two-shot, as the blocking call does
        oneshot) arpat='oneshot via\|twoshot via .*\(exceed the one-shot slot\|in place: two-shot\)' ;;
        twoshot_ce) arpat='twoshot_ce via' ;;
        *) arpat="$ar via" ;;
        esac
        [ "$bc" = auto ] && bcpat='push\|pull\|chain\|tree' || bcpat="$bc via"
        passed 6
        t_ok $? "$np ranks, $ar/$bc $*: test_nbc's 6 checks pass (exit $rc)"
        [ $rc -eq 0 ] || t_diag "$log"
        decided iallreduce "$arpat"
        t_ok $? "$np ranks, $ar/$bc: every iallreduce took $ar on the team, none staged$dmsg"
        decided ibcast "$bcpat"
        t_ok $? "$np ranks, $ar/$bc: every ibcast took $bc on the team, none staged$dmsg"
    done
    # chunks: the chain bcast in 4 KiB chunks really cut (600000 int32: 586 chunks)
    run "$np" twoshot chain all --mca coll_gpu_chunk_bytes 4096
    many=$(cat "$log".ranks/*/rank.*/stderr | grep -c "chain position [0-9]* from root [0-9]*, parent -*[0-9]*, [0-9][0-9][0-9]* chunk(s) of 4096 B (nonblocking)")
    passed 6 && [ "$many" -gt 0 ]
    t_ok $? "$np ranks, ibcast chain in 4 KiB chunks: right, $many rank-calls of 100+ chunks"

    # forced staging: every iallreduce and ibcast staged (libnbc), on every rank
    run "$np" staged staged "all nofree"
    passed 5
    t_ok $? "$np ranks, staged/staged: test_nbc's 5 checks pass (exit $rc)"
    decided iallreduce 'staged (nonblocking)'
    t_ok $? "$np ranks, staged: every iallreduce staged on every rank$dmsg"
    decided ibcast 'staged (nonblocking)'
    t_ok $? "$np ranks, staged: every ibcast staged on every rank$dmsg"

    # a late rank: the calls return before it arrives
    for pair in "fused push" "twoshot pull" "oneshot tree"; do
        set -- $pair
        run "$np" "$1" "$2" late
        passed 2
        t_ok $? "$np ranks, $1/$2, last rank 1 s late: calls return at once, results right"
        [ $rc -eq 0 ] || t_diag "$log"
    done

    # a long wait is reported once (coll_gpu_hang_warn_seconds), and given up with an error on
    # every rank past coll_gpu_hang_error_seconds
    run "$np" fused push "late 3" --mca coll_gpu_hang_warn_seconds 1
    n=$(cat "$log" "$log".ranks/*/rank.*/stderr 2>/dev/null | grep -c "rank 0 has waited [0-9]* s in MPI_Iallreduce on communicator 0 (call [0-9]* through the node team) for rank(s) [0-9 ]*to enter the call")
    passed 2 && [ "$n" -eq 1 ]
    t_ok $? "$np ranks, fused, last rank 3 s late, hang_warn_seconds 1: rank 0 reports the wait once ($n), results right"
    [ $rc -eq 0 ] || t_diag "$log"
    for ar in fused twoshot; do
        run "$np" "$ar" push "giveup 3" --mca coll_gpu_hang_error_seconds 1
        n=$(cat "$log" "$log".ranks/*/rank.*/stderr 2>/dev/null | grep -c "rank 0 gave up after [0-9]* s in MPI_Iallreduce on communicator 0")
        passed 2 && [ "$n" -eq 1 ]
        t_ok $? "$np ranks, $ar, last rank 3 s late, hang_error_seconds 1: rank 0 gives up ($n), every rank's call and the next fail, host calls work"
        [ $rc -eq 0 ] || t_diag "$log"
    done
    # the same for MPI_Ibcast from the late rank: the others give up on the root's plan
    run "$np" fused push "giveup-bcast 3" --mca coll_gpu_hang_error_seconds 1
    n=$(cat "$log" "$log".ranks/*/rank.*/stderr 2>/dev/null | grep -c "rank 0 gave up after [0-9]* s in MPI_Ibcast on communicator 0 (call [0-9]* through the node team) waiting for rank(s) $((np - 1)) to enter the call (the root: its plan)")
    passed 2 && [ "$n" -eq 1 ]
    t_ok $? "$np ranks, ibcast from the last rank, 3 s late, hang_error_seconds 1: rank 0 gives up on the root's plan ($n), every rank's call and the next fail, host calls work"
    [ $rc -eq 0 ] || t_diag "$log"

    # a rank failing locally in every nonblocking call: errors everywhere, no hang
    for pair in "fused push" "twoshot chain" "oneshot pull" "ring tree"; do
        set -- $pair
        COLL_GPU_TEST_FAIL_ASYNC=1 run "$np" "$1" "$2" fail
        passed 5
        t_ok $? "$np ranks, $1/$2, rank 1 failing: every rank gets an error, the job ends (a blocking exchange does not)"
        [ $rc -eq 0 ] || t_diag "$log"
    done
done
t_done
