#!/bin/sh
# signature.sh - ranks that pass different datatypes of one type signature to one call
# (test_signature.c), on 4 ranks (COLL_GPU_SIGNATURE_NP) with device buffers:
#   1. every section under the default algorithms;
#   2. bcast and reductions forced onto the staged path;
#   3-5. bcast, reductions and the erroneous bcast under the forced algorithms (push/oneshot,
#      chain/twoshot and tree/ring with small chunks), so that the team path runs with ranks
#      packing their layouts into device temporaries;
#   in 2-5 each rank's buffers are drawn from plain device, stream-ordered pool (not
#   exportable through IPC) and managed memory; in every run a bcast buffer's pointer may lie
#   before its allocation (a type with a positive lower bound: only the elements must be memory);
#   6. bcast, reductions and the erroneous bcast across 2 emulated nodes;
#   7. on 2 ranks, MPI_INT on one and a dup of it on the other: the coll_gpu_verbose lines of
#      each allreduce and bcast name the same path on both ranks.
# A hang fails the case that hangs (COLL_GPU_TEST_CASE_TIMEOUT) and the run
# (COLL_GPU_TEST_TIMEOUT) rather than stalling the suite.
: "${COLL_GPU_TEST_TIMEOUT:=120}"
: "${COLL_GPU_TEST_CASE_TIMEOUT:=30}"
. "$(dirname "$0")/mpitest.sh"
export COLL_GPU_TEST_TIMEOUT COLL_GPU_TEST_CASE_TIMEOUT
# coll/gpu's default: every rank of a call passes the same kind of memory
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
np=${COLL_GPU_SIGNATURE_NP:-4}
out=${TMPDIR:-/tmp}/coll_gpu_signature.$$
trap 'rm -f "$out"' EXIT
# Open MPI 4.1 checks the arguments of MPI_Allreduce and MPI_Reduce and refuses a predefined op
# on a derived datatype (MPI_ERR_OP) before any coll component sees the call, although its
# reductions take such a type when it is made of one predefined type; the reduction cases
# (dup and dense derived types of int) need that check off to reach coll/gpu.
base="--mca mpi_param_check 0"

# run_case DESCRIPTION NP MCA-ARGS PROGRAM-ARGS: one TAP line for a whole run of the program
run_case() {
    COLL_GPU_MPIRUN_ARGS="$base $3 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$2" "$MPI_TESTS/test_signature" $4 >"$out" 2>&1
    rc=$?
    if [ "$rc" -eq 77 ]; then
        t_skip "$1" "$(sed -n 's/^1\.\.0 # SKIP //p' "$out" | head -1)"
        return 1
    fi
    n_ok=$(grep -c '^ok' "$out")
    ! grep -q '^not ok' "$out" && grep -q "^1\.\.$n_ok\$" "$out" && [ "$rc" -eq 0 ]
    st=$?
    t_ok "$st" "$1 ($n_ok cases, exit $rc)"
    if [ "$st" -ne 0 ]; then
        { grep -A4 '^not ok' "$out"; grep -i 'bail out\|timed out\|terminated' "$out"; } |
            head -40 | sed 's/^/#   /'
    fi
    return 0
}

run_case "default algorithms: bcast, gather, scatter, allgather, alltoall, reductions, \
erroneous bcast" "$np" "" ""
for algs in "staged staged 0" "push oneshot 0" "chain twoshot 4096" "tree ring 4096"; do
    set -- $algs
    mca="--mca coll_gpu_bcast_algorithm $1 --mca coll_gpu_allreduce_algorithm $2"
    # the erroneous bcast is the team path's to catch: staging hands it to the component below
    sections=bcast,reduce,truncate
    [ "$1" = staged ] && sections=bcast,reduce
    run_case "bcast $1, allreduce $2, chunk $3, any device memory: $sections" "$np" \
        "$mca --mca coll_gpu_chunk_bytes $3" "--sections=$sections --any-device"
done

# across 2 emulated nodes (the hierarchical path): under coll_gpu_uniform_buffers no per-call
# agreement ran there, and the erroneous bcast hung the leaders' chain until the details were
# compared across nodes (kinds_gather_compare)
run_case "across 2 emulated nodes: bcast, reductions, erroneous bcast" "$np" \
    "--mca coll_gpu_emulate_nodes 2" "--sections=bcast,reduce,truncate"

# MPI_INT on rank 0, its dup on rank 1: the same path, call by call
if run_case "MPI_INT and a dup of it: results" 2 "--mca coll_gpu_verbose 10" \
    "--sections=dupint"; then
    paths() {
        grep -o "coll:gpu:[a-z]* (cid 0): rank $1: .* -> [^(]*" "$out" |
            sed 's/^coll:gpu:\([a-z]*\) .* -> /\1: /'
    }
    p0=$(paths 0)
    p1=$(paths 1)
    [ -n "$p0" ] && [ "$p0" = "$p1" ]
    st=$?
    n=$(echo "$p0" | grep -c .)
    t_ok "$st" "MPI_INT and a dup of it: the same path on both ranks, call by call ($n calls)"
    if [ "$st" -ne 0 ]; then
        echo "$p0" | sed 's/^/#   rank 0: /'
        echo "$p1" | sed 's/^/#   rank 1: /'
    else
        echo "$p0" | sort | uniq -c | sed 's/^/#   /'
    fi
fi
t_done
