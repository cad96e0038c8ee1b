#!/bin/sh
# ft_agree.sh - Open MPI 5.0 with fault tolerance enabled (mpirun --with-ft ulfm) under
# --mca coll gpu,tuned: MPIX_Comm_agree and MPIX_Comm_iagree work (test_agree, 3 ranks), their
# slots filled by coll/gpu's gap filling with coll/ftagree's functions (ahead of coll/basic's,
# which ignore failures), as the framework would choose had ftagree been listed.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_ft_agree.$$
trap 'rm -f "$out" "$out".*' EXIT
COLL_GPU_TEST_COLL=gpu,tuned
COLL_GPU_MPIRUN_ARGS="${COLL_GPU_MPIRUN_ARGS:-} --with-ft ulfm --mca coll_gpu_verbose 5"
export COLL_GPU_TEST_COLL COLL_GPU_MPIRUN_ARGS
"$RUN_MPI" 3 "$MPI_TESTS/test_agree" >"$out" 2>"$out.err"
rc=$?
why=$(t_skipped "$out")
if [ "$rc" -eq 0 ] && [ -n "$why" ]; then
    echo "1..0 # SKIP $why"
    exit 0
fi
passed=$(grep -c '^ok ' "$out")
! grep -q '^not ok' "$out" && [ "$passed" -eq 6 ] && [ "$rc" -eq 0 ]
t_ok $? "--with-ft ulfm, --mca coll gpu,tuned: $passed of 6 agreement checks pass (exit $rc)"
[ "$passed" -eq 6 ] && [ "$rc" -eq 0 ] || { t_diag "$out"; t_diag "$out.err"; }
# every rank, on each of its 3 communicators (world, its dup, self)
n=$(grep -c 'coll:gpu:gapfill (cid [0-9]*): coll/ftagree fills 2 slots' "$out.err")
[ "$n" -ge 9 ]
t_ok $? "coll/ftagree fills the 2 agreement slots on every communicator of every rank ($n of 9)"
t_done
