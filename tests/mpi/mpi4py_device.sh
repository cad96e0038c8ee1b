#!/bin/sh
# mpi4py_device.sh - test_mpi4py_device.py on 2, 3 and 4 ranks under coll/gpu's defaults: mpi4py
# (how Python programs reach MPI, PyTorch users without a backend among them) with device arrays
# that present __cuda_array_interface__ as CuPy's do, over the device layer's memory (the
# emulated device faults on host access, so every right answer was moved by coll/gpu), after an
# MPI_Comm_split_type; device memory everywhere, on even ranks only, and drawn per rank and
# call.  Skips where no python3 has mpi4py (quickstart.sh test and .ci/ompi5-check.sh install
# Debian's python3-mpi4py, built against the same Open MPI).
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_mpi4py.$$
trap 'rm -f "$out"' EXIT
py=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if "$p" -c 'import mpi4py.MPI' >/dev/null 2>&1; then
        py=$p
        break
    fi
done
if [ -z "$py" ]; then
    echo "1..0 # SKIP no python3 here has mpi4py"
    exit 0
fi
version=$("$py" -c 'import mpi4py; print(mpi4py.__version__)')
lib=$top_builddir/kernels/.libs/libcoll_gpu_dev.so.0
if [ ! -f "$lib" ]; then
    echo "1..1"
    echo "not ok 1 - the device layer's library $lib is missing (build first)"
    exit 1
fi
: "${COLL_GPU_TEST_TIMEOUT:=180}"
export COLL_GPU_TEST_TIMEOUT
seed=${COLL_GPU_MPI4PY_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
for np in 2 3 4; do
    "$RUN_MPI" "$np" "$py" "$top_srcdir/tests/mpi/test_mpi4py_device.py" "$lib" \
        "${COLL_GPU_TEST_DEVICE:-emulated}" "$((seed + np))" >"$out" 2>&1
    rc=$?
    plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$out" | head -1)
    n=$(grep -c '^ok ' "$out")
    bad=$(grep -c '^not ok' "$out")
    [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ] && [ -n "$plan" ] && [ "$n" -eq "$plan" ]
    t_ok $? "$np ranks, mpi4py $version: $n of ${plan:-?} cases right on every rank \
(seed $((seed + np)), exit $rc)"
    [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ] \
        || { grep '^not ok' "$out" | head -10 | sed 's/^/#   /'; t_diag "$out" 20; }
done
t_done
