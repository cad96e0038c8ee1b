#!/bin/sh
# params.sh - every numeric coll/gpu parameter given a bad value: -1, 0, 64g, 1e30, abc.  Open
# MPI's own parser takes abc for 0, 1e30 for 1 and -1 for SIZE_MAX without a word, and
# coll_gpu_oneshot_slot_bytes=64g used to write 2 x 64 GiB per rank into /dev/shm.  For each
# (parameter, value), test_smoke device on 2 ranks (device-buffer allreduce, bcast, allgather
# on the emulated device) must end within the time limit without a signal, and either give
# right answers or fail cleanly; where the value is not a valid one for that parameter, a line
# must name the parameter (coll_gpu_<name>).  coll_gpu_priority has its own test (priority.sh):
# a negative priority leaves coll/gpu out, as for every component.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_params.$$
trap 'rm -f "$out"' EXIT
COLL_GPU_TEST_TIMEOUT=60
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_TIMEOUT COLL_GPU_TEST_UNIFORM

params="stage_cache_bytes pinned_pool_bytes nblocks nthreads chunk_bytes oneshot_slot_bytes
hang_warn_seconds hang_error_seconds test_fail_team emulate_nodes ucx_chunk_bytes ucx_depth
hier_rail_min_bytes ucx_timeout_seconds test_fail_ucx test_fail_alloc"

# valid PARAM VALUE: the value is a valid one for the parameter (no line is required)
valid() {
    case "$1:$2" in
    test_fail_team:-1 | test_fail_ucx:-1 | test_fail_alloc:-1) return 0 ;;
    ucx_depth:0 | ucx_chunk_bytes:0 | oneshot_slot_bytes:0) return 1 ;;
    *:0) return 0 ;;
    hier_rail_min_bytes:64g) return 0 ;;
    esac
    return 1
}

for p in $params; do
    for v in -1 0 64g 1e30 abc; do
        COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_$p $v ${COLL_GPU_MPIRUN_ARGS:-}" \
            "$RUN_MPI" 2 "$MPI_TESTS/test_smoke" device >"$out" 2>&1
        rc=$?
        n=$(grep -c '^ok' "$out")
        named=$(grep -c "coll_gpu_$p" "$out")
        crash=$(grep -c 'signal\|Segmentation\|Bus error\|Bail out' "$out")
        right=1
        ! grep -q '^not ok' "$out" && [ "$rc" -eq 0 ] && [ "$n" -eq 3 ] && right=0
        bad=0
        if [ "$rc" -ge 124 ] || [ "$crash" -ne 0 ]; then
            bad=1 # a hang, or a signal
        elif [ "$right" -ne 0 ] && [ "$named" -eq 0 ]; then
            bad=1 # a failure that does not say why
        elif [ "$right" -eq 0 ] && [ "$named" -eq 0 ] && ! valid "$p" "$v"; then
            bad=1 # a bad value taken silently
        fi
        t_ok $bad "coll_gpu_$p=$v: exit $rc, $n of 3 right, $named line(s) name it"
        [ "$bad" -eq 0 ] || t_diag "$out" 15
        grep "coll:gpu: coll_gpu_$p" "$out" | head -1 | sed 's/^/#   /'
    done
done
t_done
