#!/bin/sh
# persistent.sh - MPI_Allreduce_init and MPI_Bcast_init on device buffers through the node
# team's nonblocking path (coll_gpu_engine.c; 4.1 by its MPIX_ names), emulated device,
# coll_gpu_uniform_buffers=true, 2 and 3 ranks: test_persistent team (many starts of one
# request on fresh data into poisoned outputs, in place and not, every bcast root; requests
# started together and completed with MPI_Waitall, MPI_Testall and MPI_Test in different
# orders; blocking and nonblocking calls on the same communicator between them; requests freed
# never started, after completion and while started; a user-defined op).
# Each run forces an allreduce and a bcast algorithm; on every rank every MPI_Allreduce_init
# and MPI_Bcast_init the program made must have logged the forced algorithm (coll_gpu_verbose,
# one line per _init, counted against the program's own count), but the user-defined op's,
# which must have logged staging; forced staging must stage every one.  Then a rank failing
# locally in every call (COLL_GPU_TEST_FAIL_ASYNC): every rank's start completes with an error.
. "$(dirname "$0")/../mpi/mpitest.sh"
COLL_GPU_TEST_UNIFORM=true
: "${COLL_GPU_TEST_TIMEOUT:=300}"
export COLL_GPU_TEST_UNIFORM COLL_GPU_TEST_TIMEOUT
: "${PERS_RANKS:=2 3}"
log=${TMPDIR:-/tmp}/coll-gpu-pers.$$
trap 'rm -rf "$log" "$log.ranks"' EXIT
prog="$top_builddir/tests/mpi/test_persistent"

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

# decided NAME PATTERN WANT TOTAL: 0 when, on every rank, WANT lines of NAME's calls name
# PATTERN as their path and TOTAL lines of NAME's calls exist; sets dmsg
decided() {
    dmsg="" bad=0 nranks=0
    for f in "$log".ranks/*/rank.*/stderr; do
        [ -f "$f" ] || continue
        nranks=$((nranks + 1))
        all=$(grep -c "coll:gpu:$1 (cid [0-9]*): rank [0-9]*: .* ranks -> " "$f")
        took=$(grep -c "coll:gpu:$1 (cid [0-9]*): rank [0-9]*: .* ranks -> \\($2\\)" "$f")
        if [ -z "$3" ] || [ -z "$4" ] || [ "$4" -eq 0 ] || [ "$all" -ne "$4" ] \
               || [ "$took" -ne "$3" ]; then
            bad=1
            dmsg="$dmsg ${f#$log.ranks/}: $took of $all lines took '$2', want $3 of $4;"
        fi
    done
    [ "$nranks" -gt 1 ] || { bad=1; dmsg="no per-rank logs"; }
    return $bad
}

# the program's count of its _init calls: sets n_ar n_bc n_user
counts() {
    set -- $(sed -n 's/^# inits: allreduce_init \([0-9]*\) bcast_init \([0-9]*\) user_op \([0-9]*\)$/\1 \2 \3/p' "$log")
    n_ar=${1:-} n_bc=${2:-} n_user=${3:-}
}

passed() {
    [ "$rc" -eq 0 ] && ! grep -q '^not ok' "$log" && [ "$(grep -c '^ok' "$log")" -eq "$1" ]
}

# test_persistent is built wherever coll/gpu is (4.1: MPIX_ names); a tree without it skips
if [ ! -x "$prog" ]; then
    echo "1..0 # SKIP test_persistent not built"
    exit 0
fi

for np in $PERS_RANKS; do
    for pair in "fused push" "oneshot pull" "twoshot chain" "twoshot_ce tree" "ring push" \
                "auto auto" \
                "fused tree --mca coll_gpu_oneshot_slot_bytes 307200 --mca coll_gpu_chunk_bytes 4096"; do
        set -- $pair
        ar=$1 bc=$2
        shift 2
        run "$np" "$ar" "$bc" team "$@"
        skip=$(t_skipped "$log")
        if [ -n "$skip" ]; then
            t_skip "$np ranks, $ar/$bc: test_persistent team" "$skip"
            continue
        fi
        case $ar in
        auto) arpat='fused via\|oneshot via\|twoshot via\|twoshot_ce via\|ring via' ;;
        # above a scratch slot, or in place, one-shot becomes two-shot, as the blocking call does
        oneshot) arpat='oneshot via\|twoshot via .*\(exceed the one-shot slot\|in place: two-shot\)' ;;
        twoshot_ce) arpat='twoshot_ce via' ;;
        *) arpat="$ar via" ;;
        esac
        [ "$bc" = auto ] && bcpat='push via\|pull via\|chain via\|tree via' || bcpat="$bc via"
        passed 13
        t_ok $? "$np ranks, $ar/$bc $*: test_persistent team's 13 checks pass (exit $rc)"
        [ $rc -eq 0 ] || t_diag "$log"
        counts
        decided allreduce_init "$arpat" "$n_ar" "$((n_ar + n_user))"
        t_ok $? "$np ranks, $ar/$bc: each of $n_ar MPI_Allreduce_init took $ar on the team$dmsg"
        decided allreduce_init 'staged (persistent)' "$n_user" "$((n_ar + n_user))"
        t_ok $? "$np ranks, $ar/$bc: the $n_user with a user-defined op staged$dmsg"
        decided bcast_init "$bcpat" "$n_bc" "$n_bc"
        t_ok $? "$np ranks, $ar/$bc: each of $n_bc MPI_Bcast_init took $bc on the team$dmsg"
    done

    # forced staging: every one staged (libnbc, which refuses to free a started request)
    run "$np" staged staged "team nofree"
    passed 13
    t_ok $? "$np ranks, staged/staged: test_persistent team nofree's 13 checks pass (exit $rc)"
    [ $rc -eq 0 ] || t_diag "$log"
    counts
    decided allreduce_init 'staged (persistent)' "$((n_ar + n_user))" "$((n_ar + n_user))"
    t_ok $? "$np ranks, staged: every MPI_Allreduce_init staged on every rank$dmsg"
    decided bcast_init 'staged (persistent)' "$n_bc" "$n_bc"
    t_ok $? "$np ranks, staged: every MPI_Bcast_init staged on every rank$dmsg"

    # a rank failing locally in every call: errors everywhere, no hang
    for pair in "fused push" "oneshot pull" "twoshot chain" "ring tree"; do
        set -- $pair
        COLL_GPU_TEST_FAIL_ASYNC=1 run "$np" "$1" "$2" teamfail
        passed 1
        t_ok $? "$np ranks, $1/$2, rank 1 failing: every rank's starts complete with an error, the job ends"
        [ $rc -eq 0 ] || t_diag "$log"
    done
done
t_done
