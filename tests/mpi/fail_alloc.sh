#!/bin/sh
# fail_alloc.sh - a rank whose host allocation fails still takes part in the collective
# (test_lifecycle failalloc): for each site of coll_gpu_test_fail_alloc_site, on 2 and 3 ranks,
# one rank's allocations there fail; allreduce, bcast, allgather, alltoall and reduce on device
# buffers, blocking and nonblocking, must return on every rank with an error or the right data.
#   stage     the staging bounce memory (pinned and plain) of rank 1; allreduce and bcast forced
#             onto the staged path
#   team      the node team's setup state of rank 1 (default algorithms: the team path; the
#             setup begun by a blocking call, and by a nonblocking one)
#   fallback  rank 0's gather buffer in the linear host fallback, which serves the nonblocking
#             calls queued on a team whose setup failed (coll_gpu_test_fail_team=1 fails it)
# and, across 2 emulated nodes (when coll/gpu has UCX), test_hier on 2 and 3 ranks, every case
# right and the failed setup announced:
#   hier_state  rank 1's hierarchical state of each communicator (it joins the setup's memory
#               agreement without it)
#   hier        rank 1's tables of the hierarchical setup (who leads whom)
#   ucx         rank 0's (a node leader's) worker address tables in the leaders' UCX setup
# and test_hier exchange (allgather(v), the reduce-scatters, reduce) with rank 1 failing at
#   hier_scratch  both the device scratch and the host memory of a reduce-scatter or reduce
#                 across nodes, on 2 ranks (rank 1 alone on its node), 3 (rank 1 beside its
#                 node's leader) and 4 on the rails (rank 1 on rail 1): every case ran, every
#                 reduce-scatter and reduce returned an error on every rank (none hangs, none a
#                 wrong result), and every allgather(v) is right.
# A hang fails through COLL_GPU_TEST_TIMEOUT; a crash through the exit status.
. "$(dirname "$0")/mpitest.sh"
COLL_GPU_TEST_TIMEOUT=${FAIL_ALLOC_TIMEOUT:-120}
export COLL_GPU_TEST_TIMEOUT
log=${TMPDIR:-/tmp}/fail_alloc.$$
trap 'rm -f "$log"' EXIT

for np in 2 3; do
    for site in stage team fallback; do
        (
            OMPI_MCA_coll_gpu_test_fail_alloc_site=$site
            OMPI_MCA_coll_gpu_test_fail_alloc=1
            export OMPI_MCA_coll_gpu_test_fail_alloc_site OMPI_MCA_coll_gpu_test_fail_alloc
            # the promise of device buffers lets a communicator's first nonblocking call begin
            # the node team's setup (and queue on it), as the first blocking one does
            OMPI_MCA_coll_gpu_uniform_buffers=true
            export OMPI_MCA_coll_gpu_uniform_buffers
            case $site in
            stage)
                OMPI_MCA_coll_gpu_allreduce_algorithm=staged
                OMPI_MCA_coll_gpu_bcast_algorithm=staged
                OMPI_MCA_coll_gpu_exchange_algorithm=staged
                export OMPI_MCA_coll_gpu_allreduce_algorithm OMPI_MCA_coll_gpu_bcast_algorithm \
                    OMPI_MCA_coll_gpu_exchange_algorithm
                ;;
            fallback)
                OMPI_MCA_coll_gpu_test_fail_alloc=0
                OMPI_MCA_coll_gpu_test_fail_team=1
                export OMPI_MCA_coll_gpu_test_fail_team
                ;;
            esac
            run_tap "$np" "$MPI_TESTS/test_lifecycle" failalloc >"$log" 2>&1
        )
        rc=$?
        why=$(t_skipped "$log")
        if [ -n "$why" ]; then
            t_skip "$site on $np ranks" "$why"
            continue
        fi
        bad=$(grep -c '^not ok' "$log")
        good=$(grep -c '^ok' "$log")
        [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$good" -gt 0 ]
        st=$?
        t_ok $st "$site allocation failing on $np ranks: every rank returns an error or the right \
data ($good ok, $bad not ok, exit $rc)"
        [ "$st" -eq 0 ] || t_diag "$log" 40
    done
done
if grep -q '^#define COLL_GPU_HAVE_UCX 1' "$top_builddir/coll_gpu_config.h" 2>/dev/null; then
    for np in 2 3; do
        for site in hier_state hier ucx; do
            case $site in
            ucx) who=0 says="UCX connection between the 2 nodes could not be set up" ;;
            *) who=1 says="a rank had no memory for the hierarchical path's setup" ;;
            esac
            COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_emulate_nodes 2 --mca coll_gpu_test_fail_alloc $who \
--mca coll_gpu_test_fail_alloc_site $site --mca coll_gpu_hier_rail_min_bytes 0 \
${COLL_GPU_MPIRUN_ARGS:-}" run_tap "$np" "$MPI_TESTS/test_hier" 4096 >"$log" 2>&1
            rc=$?
            bad=$(grep -c '^not ok' "$log")
            good=$(grep -c '^ok' "$log")
            told=$(grep -c "$says" "$log")
            [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$good" -gt 0 ] && [ "$told" -gt 0 ]
            st=$?
            t_ok $st "$site allocation failing on $np ranks across 2 nodes: every case right, \
the failed setup told ($good ok, $bad not ok, $told notices, exit $rc)"
            [ "$st" -eq 0 ] || t_diag "$log" 40
        done
    done
    for cfg in "2 0 1+1" "3 0 2+1" "4 8 2x2_rails"; do
        set -- $cfg
        COLL_GPU_TEST_TIMEOUT=${FAIL_ALLOC_HIER_TIMEOUT:-90} \
        COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_emulate_nodes 2 --mca coll_gpu_test_fail_alloc 1 \
--mca coll_gpu_test_fail_alloc_site hier_scratch --mca coll_gpu_hier_rail_min_bytes $2 \
${COLL_GPU_MPIRUN_ARGS:-}" run_tap "$1" "$MPI_TESTS/test_hier" 4096 0 exchange >"$log" 2>&1
        rc=$?
        # -a: a line of Open MPI 5.0's launcher may carry bytes that make grep call the log binary
        plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$log" | head -1)
        ran=$(grep -ac '^\(not \)\{0,1\}ok' "$log")
        # the reductions: the reduce-scatters and MPI_Reduce, each an allreduce across nodes
        rs_bad=$(grep -a '^not ok' "$log" | grep -ac ' - reduce')
        other_bad=$(grep -a '^not ok' "$log" | grep -avc ' - reduce')
        rs_ok=$(grep -a '^ok' "$log" | grep -ac ' - reduce')
        ag_ok=$(grep -a '^ok' "$log" | grep -ac ' - allgather')
        errors=$(grep -ac '^#  *rank [0-9]*: MPI_Reduce\(_scatter\(_block\)\{0,1\}\)\{0,1\}: ' \
            "$log")
        [ -n "$plan" ] && [ "$ran" -eq "$plan" ] && [ "$rs_bad" -gt 0 ] && [ "$rs_ok" -eq 0 ] \
            && [ "$other_bad" -eq 0 ] && [ "$ag_ok" -gt 0 ] \
            && [ "$errors" -eq $(( $1 * rs_bad )) ]
        st=$?
        t_ok $st "hier_scratch allocation failing on rank 1 of $3 across 2 nodes: every case ran \
(${ran} of ${plan:-no plan}, exit $rc), every reduce-scatter and reduce an error on every rank \
($errors errors of $(( $1 * rs_bad )), $rs_ok right), every allgather right ($ag_ok ok, \
$other_bad other not ok)"
        [ "$st" -eq 0 ] || t_diag "$log" 40
    done
else
    t_skip "hier_state, hier, ucx and hier_scratch sites" "coll/gpu was built without UCX"
fi
t_done
