#!/bin/bash
# mpi4py-tests.sh MPI4PY_SRC COLL_GPU_BUILD OUT [host|cupy] - mpi4py's own test suite against
# coll/gpu: what Python users (and PyTorch users who reach MPI through mpi4py) run MPI with.
#
#   MPI4PY_SRC       a source tree of the mpi4py release that PYTHON imports (its test/ folder,
#                    not part of this repository: the tag of the installed version, from the
#                    sdist or github.com/mpi4py/mpi4py)
#   COLL_GPU_BUILD   a built tree of coll/gpu (its mca-coll-gpu/component is loaded)
#   OUT              summary.txt, and per case a folder of logs (mpirun's, each rank's)
#   host             (the default) the suite's own buffers (host memory: NumPy, array, bytes),
#                    emulated device: coll/gpu must pass every collective through unharmed
#   cupy             also CuPy device arrays (--cupy: every buffer test runs once more on them),
#                    the cuda device backend (the GPU machine; needs cupy in PYTHON)
#   emucupy          the same with emucupy/ standing in for CuPy over the emulated device's
#                    memory (no GPU; needs NumPy in PYTHON)
#
# The whole suite (collectives blocking, nonblocking, persistent and neighbourhood, on intra- and
# intercommunicators, with MPI_IN_PLACE and zero counts; communicators, groups, ops, requests,
# RMA, I/O, datatypes ...) runs under MPI_THREAD_MULTIPLE (mpi4py's default) at NPS ranks under
# Open MPI's default coll list and under gpu,tuned, but for the tests that spawn processes
# (spawn, dynproc, util_pool: the ranks of two jobs reach each other only over TCP, which this
# shared-memory setting leaves out).  A case passes when mpirun exits 0 and every rank prints
# "OK" after "Ran N tests".
# Environment: PYTHON (default python3), NPS (default "1 2 3 4"), COLLS (default
# "default gpu,tuned"), LIMIT (seconds a case, default 900), EXCLUDE (runtests.py -e patterns,
# default "spawn dynproc util_pool"), ARGS (more runtests.py arguments: "-v -f -i test_cco_buf"
# names each test as it starts and stops a rank at its first failure, to find the one whose
# failure on some ranks left the others waiting in a collective).
set -u
src=$(cd "$1/test" && pwd) build=$(cd "$2" && pwd) out=$3 mode=${4:-host}
mkdir -p "$out/logs" || exit 2
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}

version=$("$py" -c 'import mpi4py; print(mpi4py.__version__)') || exit 2
library=$("$py" -c 'from mpi4py import MPI; print(MPI.Get_library_version().split(",")[0])' \
    | tr -d '\0') || exit 2

. "$(dirname "$0")/runner-env.sh"
args=(-q)
for e in ${EXCLUDE-spawn dynproc util_pool}; do
    args+=(-e "$e")
done
# shellcheck disable=SC2206
args+=(${ARGS:-})
export OMPI_MCA_coll_gpu_device=emulated
if [ "$mode" = cupy ]; then
    export OMPI_MCA_coll_gpu_device=cuda
elif [ "$mode" = emucupy ]; then
    # emucupy/cupy: CuPy's part that the tests use, over the emulated device's memory
    export COLL_GPU_DEV_LIB=$build/kernels/.libs/libcoll_gpu_dev.so.0 COLL_GPU_DEV_BACKEND=emulated
    export PYTHONPATH=$(cd "$(dirname "$0")/emucupy" && pwd)${PYTHONPATH:+:$PYTHONPATH}
fi
if [ "$mode" != host ]; then
    # device arrays, in the collective tests (test_cco_*) only.  The rest hand device memory to
    # Open MPI's point-to-point, RMA and I/O layers, which coll/gpu does not serve (a CUDA-aware
    # Open MPI would); test_msgspec also uses CuPy's 2-D views, which emucupy has not
    export OMPI_MCA_coll_gpu_hang_warn_seconds=20
    # -v: each rank's log names every test as it starts, so a case cut at its limit shows
    # which test each rank was in (call 44's 4-rank logs, without it, were empty)
    args+=(--cupy -i test_cco -v)
    # The tests fill arrays with -1 of unsigned types too.  Their NumPy class converts such
    # values first (numpy.asarray(v).astype(type): 255), their CuPy class hands them to fill()
    # and cupy.asarray(), which CuPy 14 refuses as NumPy 2 does ("OverflowError: Python integer
    # -1 out of bounds for uint8", on the GPU machine): the ranks that fill with -1 (a bcast's
    # non-roots) raise and leave the others waiting in the collective.  The suite runs from a
    # copy whose CuPy class converts Python values as the NumPy class does; no MPI call changes.
    rm -rf "$out/test" && cp -r "$src" "$out/test" && src=$out/test || exit 2
    "$py" - "$src/arrayimpl.py" <<'PATCH' || exit 2
import sys
path = sys.argv[1]
text = open(path).read()
at = text.find("cupy.zeros(shape, typecode)")
fill = text.find("self.array.fill(arg)", at)
if at < 0 or fill < 0:
    sys.exit("arrayimpl.py: the CuPy class's fill(arg) not found")
text = text[:fill] + "self.array.fill(numpy.asarray(arg).astype(typecode))" \
    + text[fill + len("self.array.fill(arg)"):]
# a list or tuple of Python values (not a device array, which NumPy cannot read)
seq = "self.array[:] = cupy.asarray(arg, typecode)"
at_seq = text.find(seq, at)
if at_seq < 0:
    sys.exit("arrayimpl.py: the CuPy class's cupy.asarray(arg, typecode) not found")
text = text[:at_seq] + "self.array[:] = cupy.asarray(numpy.asarray(arg).astype(typecode) " \
    "if isinstance(arg, (list, tuple)) else arg, typecode)" + text[at_seq + len(seq):]
open(path, "w").write(text)
PATCH
fi

{
    echo "mpi4py $version ($library), mode $mode, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "python: $("$py" --version 2>&1); runtests.py ${args[*]}"
} >"$out/summary.txt"
pass=0 fail=0
for coll in ${COLLS:-default gpu,tuned}; do
    for np in ${NPS:-1 2 3 4}; do
        name=${coll//,/-}.np$np
        coll_args=()
        [ "$coll" = default ] || coll_args=(--mca coll "$coll")
        start=$(date +%s)
        rm -rf "$out/logs/$name" && mkdir -p "$out/logs/$name" || exit 2
        # each rank's output to a file of its own (the ranks' last lines would share lines)
        # shellcheck disable=SC2016
        (cd "$src" && timeout -k 10 "${LIMIT:-900}" mpirun -np "$np" --oversubscribe \
            --bind-to none "${coll_args[@]}" /bin/sh -c \
            'exec "$@" >"$0/rank.${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-x}}.txt" 2>&1' \
            "$out/logs/$name" "$py" runtests.py "${args[@]}") >"$out/logs/$name/mpirun.txt" 2>&1
        rc=$?
        ran=0 ok=0 failed=0
        for f in "$out/logs/$name"/rank.*.txt; do
            [ -f "$f" ] || continue
            grep -aqE '^Ran [0-9]+ tests?' "$f" && ran=$((ran + 1))
            grep -aqE '^OK( \(|$)' "$f" && ok=$((ok + 1))
            grep -aqE '^FAILED \(|^(ERROR|FAIL):' "$f" && failed=$((failed + 1))
        done
        tests=$(cat "$out/logs/$name"/rank.*.txt 2>/dev/null | grep -aoE '^Ran [0-9]+' | head -1 \
                    | cut -d' ' -f2)
        if [ "$rc" -eq 0 ] && [ "$ran" -eq "$np" ] && [ "$ok" -eq "$np" ] && [ "$failed" -eq 0 ]
        then
            verdict=PASS pass=$((pass + 1))
        else
            verdict=FAIL fail=$((fail + 1))
        fi
        printf '%s coll=%s np=%s: exit %s, %s of %s ranks OK, %s tests a rank, %ss\n' \
            "$verdict" "$coll" "$np" "$rc" "$ok" "$np" "${tests:-0}" \
            "$(($(date +%s) - start))" | tee -a "$out/summary.txt"
    done
done
echo "$pass passed, $fail failed" | tee -a "$out/summary.txt"
[ "$fail" -eq 0 ]
