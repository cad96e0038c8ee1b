#!/bin/sh
# halfprec.sh - libcollgpu's float16 and bfloat16 (test_halfprec.c): every op, blocking,
# nonblocking, persistent and MPI_Reduce, device, host and mixed buffers, in place and not, on
# 2 ranks under the default settings (every case) and under each allreduce algorithm forced
# (device cases), and on 3 and 4 ranks; the verbose log must show the device allreduces of both
# formats on the node team ("via IPC"), not staged.
. "$(dirname "$0")/mpitest.sh"
: "${COLL_GPU_TEST_TIMEOUT:=300}"
export COLL_GPU_TEST_TIMEOUT
out=${TMPDIR:-/tmp}/coll_gpu_halfprec.$$
trap 'rm -f "$out" "$out.log"' EXIT

run() { # NP LABEL MPIRUN-ARGS PROGRAM-ARGS
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 $3 ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$1" "$MPI_TESTS/test_halfprec" $4 >"$out" 2>"$out.log"
    rc=$?
    why=$(t_skipped "$out")
    if [ "$rc" -eq 0 ] && [ -n "$why" ]; then
        t_skip "$2" "$why"
        return
    fi
    # TAP lines counted wherever they stand: Open MPI 5 forwards a rank's verbose log into the same
    # stream, sometimes without its line end, so a case's line may start mid-line
    n=$(( $(grep -oE 'ok [0-9]+ - ' "$out" | wc -l) - $(grep -oE 'not ok [0-9]+ - ' "$out" | wc -l) ))
    plan=$(grep -oE '1\.\.[0-9]+$' "$out" | head -1 | cut -c4-)
    ! grep -q 'not ok [0-9]* - ' "$out" && [ "$rc" -eq 0 ] && [ -n "$plan" ] && [ "$n" -eq "$plan" ]
    t_ok $? "$2: $n of ${plan:-?} cases right (exit $rc)"
    grep -o 'not ok [0-9]* - .*' "$out" | head -5 | sed 's/^/#   /'
    [ "$rc" -eq 0 ] || { t_diag "$out" 10; t_diag "$out.log" 20; }
    for f in float16 bfloat16; do
        # the log (stderr, apart from the TAP lines, which it would otherwise break up)
        line=$(grep -h "coll:gpu:allreduce.*collgpu_$f" "$out" "$out.log" | grep -v staged | head -1)
        [ -n "$line" ]
        t_ok $? "$2: a device MPI_Allreduce of collgpu_$f ran on the node team"
        [ -n "$line" ] || grep -h "coll:gpu:allreduce.*collgpu_$f" "$out" "$out.log" | head -2 |
            sed 's/^/#   log: /'
    done
}

run 2 "2 ranks, defaults" "" ""
for alg in oneshot twoshot ring fused; do
    run 2 "2 ranks, $alg" "--mca coll_gpu_allreduce_algorithm $alg" --quick
done
run 3 "3 ranks" "" --quick
run 4 "4 ranks" "" --quick
t_done
