#!/bin/sh
# progress_thread.sh - test_progress_thread: nonblocking allreduces and bcasts of device buffers
# on a node team, posted by the main thread and completed by MPI_Wait on another thread: one
# that never touched the device, and one on another device (COLL_GPU_EMULATED_DEVICES=2 on the
# emulated device; gpu/progress_thread_cuda.sh brings the machine's own).  The team's steps must
# run on the team's device and leave every thread on its own: on the emulated device a stream
# used from a thread on another device fails as CUDA's does.  2 and 3 ranks, the team's default
# algorithms, then the fused allreduce forced.
. "$(dirname "$0")/mpitest.sh"
log=${TMPDIR:-/tmp}/coll-gpu-progress-thread.$$
trap 'rm -f "$log"' EXIT
if [ "${COLL_GPU_TEST_DEVICE:-emulated}" = emulated ]; then
    COLL_GPU_EMULATED_DEVICES=2
    export COLL_GPU_EMULATED_DEVICES
fi
COLL_GPU_TEST_TIMEOUT=${COLL_GPU_TEST_TIMEOUT:-120}
export COLL_GPU_TEST_TIMEOUT
for np in 2 3; do
    for alg in default fused; do
        args=
        [ "$alg" = fused ] && args="--mca coll_gpu_allreduce_algorithm fused"
        COLL_GPU_MPIRUN_ARGS="$args ${COLL_GPU_MPIRUN_ARGS:-}" \
            run_tap "$np" "$MPI_TESTS/test_progress_thread" >"$log" 2>&1
        rc=$?
        why=$(t_skipped "$log")
        if [ -n "$why" ]; then
            t_skip "$np ranks, $alg algorithms" "$why"
            continue
        fi
        bad=$(grep -c '^not ok' "$log")
        good=$(grep -c '^ok' "$log")
        [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$good" -gt 0 ]
        st=$?
        t_ok $st "$np ranks, $alg algorithms: requests completed on other threads, every result \
right, every thread on its own device ($good ok, $bad not ok, exit $rc)"
        [ "$st" -eq 0 ] || t_diag "$log" 30
    done
done
t_done
