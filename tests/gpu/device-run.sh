#!/bin/bash
# device-run.sh TARBALL [UCX] - the whole GPU-machine cycle in one call: build coll/gpu from a
# `make dist` tarball against that machine's Open MPI and a UCX built with CUDA, run the unit
# tests and the GPU tests
# (cuda backend), a compute-sanitizer memcheck of a short run, the topology tool, the benchmark
# and the host-path bench.  Everything lands in $OUT (at most 10 files):
#   build.txt     configure summary, make and install output (tail)
#   check.txt     make check of unit/ and gpu/ tests (TAP lines, each test's device record
#                 "# device: rank N: ... backend cuda, device ...", the skips and the summary)
#   sanitizer.txt compute-sanitizer memcheck of a short allreduce/bcast matrix run, of the
#                 memory-kinds test and of the different-layouts-of-one-signature test
#   topo.txt      coll_gpu_topo on this machine (and its dump)
#   bench-*.txt   run-gpu.sh's env, check and timing outputs; hostpath
#   bench-nb.txt  the nonblocking calls against the blocking ones, and their overlap with compute
#   python.txt    python_bench.py (mpi4py with torch, CuPy and raw pointers), where available,
#                 and the collgpu torch backend's tests on CUDA tensors (tests/torch/torch.sh)
# UCX: the PyPI wheel libucx-cu13 (a .whl file, unpacked here), an unpacked wheel or a UCX
# prefix; default $UCX_WHEEL, else the newest .whl/libucx_cu13-*.whl under the current directory
# (the device tool's notes say how a wheel travels).  UCX is required: without it the
# hierarchical tests (gpu/hier_cuda.sh, gpu/hier_direct_cuda.sh) could only skip, so a missing
# UCX, a build without it, or a hierarchical test that skips fails this check.
# Environment: COMMIT (recorded), NP (benchmark ranks, default 2), MAXBYTES (default 16M),
# ITERS (default 5), BENCH_TIMEOUT (seconds for the benchmark, default 170).  A machine's call
# may be shorter than the whole cycle: STEPS (default "build check sanitizer topo bench nb
# python") picks steps, WORK (default a new temporary folder) keeps the build between calls
# (a WORK with a finished build skips the build step), and GPU_TESTS (default: every unit test
# and every GPU test) names the tests of the check step; the hierarchical tests' rule above
# holds when the check step runs them.
set -u
tarball=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
steps=" ${STEPS:-build check sanitizer topo bench nb python} "
has() { case "$steps" in *" $1 "*) return 0 ;; esac; return 1; }
check_rc=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
jobs=$(nproc)

stamp() { echo "== $* ($(date -u +%H:%M:%S))"; }

# UCX with CUDA: a wheel is unpacked where the build's rpath can keep pointing
ucx=${2:-${UCX_WHEEL:-}}
[ -n "$ucx" ] || ucx=$(ls -t .whl/libucx_cu13-*.whl 2>/dev/null | head -1)
if [ -z "$ucx" ] || [ ! -e "$ucx" ]; then
    echo "device-run.sh: no UCX: give a libucx-cu13 wheel or a UCX prefix (argument 2 or" \
        "UCX_WHEEL), or put the wheel in .whl/; the hierarchical GPU tests need it" \
        | tee "$out/build.txt" >&2
    exit 1
fi
ucx=$(cd "$(dirname "$ucx")" && pwd)/$(basename "$ucx")
if [ -f "$ucx" ]; then
    [ -d "$work/ucx/libucx" ] || python3 -m zipfile -e "$ucx" "$work/ucx" \
        || { echo "device-run.sh: cannot unpack $ucx" | tee "$out/build.txt" >&2; exit 1; }
    chmod +x "$work"/ucx/libucx/bin/* 2>/dev/null
    ucx=$work/ucx
fi

if has build && [ ! -f "$work/built" ]; then
    {
        stamp "machine"
        echo "commit: ${COMMIT:-unknown}"
        nvidia-smi -L; nvidia-smi topo -m
        ompi_info | grep -E "Open MPI:|built_with_cuda" ; mpicc --version | head -1; nvcc --version | tail -1
        stamp "build"
        cd "$work" && tar xzf "$tarball" && cd coll-gpu-* && src=$PWD
        mkdir b && cd b
        # --with-cuda: a machine without a usable CUDA toolkit fails here, loudly, instead of
        # building the emulated backend only and skipping every GPU test
        ../configure --prefix="$work/inst" --enable-werror --with-cuda --with-ucx="$ucx" \
            >configure.out 2>&1 || { cat configure.out; exit 1; }
        sed -n '/^coll\/gpu /,$p' configure.out
        grep -q '^#define COLL_GPU_HAVE_UCX 1' coll_gpu_config.h || { echo "built without UCX"; exit 1; }
        make -j"$jobs" >make.out 2>&1 || { tail -60 make.out; exit 1; }
        grep -iE "warning" make.out | head -20
        make install >install.out 2>&1 || { tail -30 install.out; exit 1; }
        echo "built and installed"
    } >"$out/build.txt" 2>&1 || { cat "$out/build.txt"; exit 1; }
        touch "$work/built"
fi
cd "$work"/coll-gpu-*/b && src=$(cd .. && pwd) && build=$PWD

if has check; then
    stamp "check" >"$out/check.txt"
    # build the test programs, then run the unit tests (every program under tests/unit) and every GPU
    # test (GPUTEST_SH of tests/gpu/gpu.am, on the cuda backend, which they require where nvidia-smi
    # lists a GPU), one at a time (noleak_cuda.sh reads the GPU's free memory); the MPI matrix on
    # the emulated device is CI's job
    make -C tests -j"$jobs" check TESTS= >>"$out/check.txt" 2>&1
    unit_tests=$(cd tests && find unit -maxdepth 1 -type f -name 'test_*' -perm -u+x | sort | tr '\n' ' ')
    COLL_GPU_TEST_DEVICE=cuda COLL_GPU_MATRIX_ARGS=${COLL_GPU_MATRIX_ARGS:---quick} \
        timeout "${CHECK_TIMEOUT:-330}" make -C tests -j1 check \
        TESTS="${GPU_TESTS:-$unit_tests \$(GPUTEST_SH)}" >>"$out/check.txt" 2>&1
    echo "make check rc=$?" >>"$out/check.txt"
    for f in tests/unit/*.log tests/gpu/*.log; do
        [ -f "$f" ] || continue
        echo "---- $f"; grep -E "^(ok|not ok|1\.\.|#)" "$f" | grep -vE "^ok" | head -40
        # a failing test's own error lines (the TAP lines above do not carry them)
        grep -q "^not ok" "$f" && grep -E "coll:gpu|rror" "$f" | grep -vE "^(ok|not ok|PASS|FAIL)" | head -15
        echo "ok lines: $(grep -c '^ok' "$f")"
    done >>"$out/check.txt" 2>&1
    "$src/tests/summary.sh" tests/test-suite.log >>"$out/check.txt" 2>&1
    # the hierarchical tests must have run (UCX is here): a skip is a failure of this check
    for f in tests/gpu/hier_cuda.log tests/gpu/hier_direct_cuda.log; do
        case " ${GPU_TESTS:-gpu/hier_cuda.sh gpu/hier_direct_cuda.sh} " in
        *" ${f%.log}.sh "*) ;;
        *) continue ;;
        esac
        if [ ! -f "$f" ] || grep -q '# SKIP' "$f" || ! grep -q '^ok' "$f"; then
            echo "FAIL: $f: the hierarchical test did not run ($(grep -m1 -o '# SKIP.*' "$f" 2>/dev/null))" >>"$out/check.txt"
            check_rc=1
        fi
    done
    grep -q '^# FAIL: *0$' tests/test-suite.log 2>/dev/null || check_rc=1
    echo "device-run check status: $check_rc" >>"$out/check.txt"
fi

if has sanitizer; then
    stamp "sanitizer" >"$out/sanitizer.txt"
    export top_builddir=$build top_srcdir=$src
    COLL_GPU_TEST_DEVICE=cuda COLL_GPU_TEST_UNIFORM=true COLL_GPU_TEST_FILTER="allreduce MPI_FLOAT * dev world*" \
        COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_allreduce_algorithm twoshot" \
        timeout 90 "$src/tests/run-mpi.sh" 2 compute-sanitizer --tool memcheck --error-exitcode 42 \
        "$build/tests/mpi/test_coll" --sections=types >>"$out/sanitizer.txt" 2>&1
    echo "sanitizer rc=$?" >>"$out/sanitizer.txt"
    # and the never-crash tests on cuda: every memory kind and address reuse between kinds (mixed
    # kinds per rank), ranks passing different layouts of one signature
    COLL_GPU_TEST_DEVICE=cuda COLL_GPU_TEST_UNIFORM=false timeout 150 "$src/tests/run-mpi.sh" 2 \
        compute-sanitizer --tool memcheck --error-exitcode 42 "$build/tests/gpu/test_kinds_cuda" \
        >>"$out/sanitizer.txt" 2>&1
    echo "sanitizer test_kinds_cuda rc=$?" >>"$out/sanitizer.txt"
    COLL_GPU_TEST_DEVICE=cuda COLL_GPU_TEST_UNIFORM=true COLL_GPU_MPIRUN_ARGS="--mca mpi_param_check 0" \
        timeout 150 "$src/tests/run-mpi.sh" 2 compute-sanitizer --tool memcheck --error-exitcode 42 \
        "$build/tests/mpi/test_signature" >>"$out/sanitizer.txt" 2>&1
    echo "sanitizer test_signature rc=$?" >>"$out/sanitizer.txt"
    # the hardening tests' device paths: requests completed on other threads, types across
    # allocations (without the case that makes a copy fail on purpose), the pinned pool
    for t in "mpi/test_progress_thread" "mpi/test_span --no-overrun" "mpi/test_pinned_pool percall"; do
        COLL_GPU_TEST_DEVICE=cuda timeout 120 "$src/tests/run-mpi.sh" 2 compute-sanitizer --tool memcheck \
            --error-exitcode 42 $build/tests/$t >>"$out/sanitizer.txt" 2>&1
        echo "sanitizer $t rc=$?" >>"$out/sanitizer.txt"
    done
fi

if has topo; then
    stamp "topo" >"$out/topo.txt"
    timeout 60 "$work/inst/bin/coll_gpu_topo" --dump "$out/topo-dump.txt" >>"$out/topo.txt" 2>&1
    echo "topo rc=$?" >>"$out/topo.txt"
    cat "$out/topo-dump.txt" >>"$out/topo.txt" 2>/dev/null && rm -f "$out/topo-dump.txt"
fi

if has bench; then
    stamp "bench"
    NP=${NP:-2} MAXBYTES=${MAXBYTES:-16M} ITERS=${ITERS:-5} WARMUP=${WARMUP:-2} HOSTPATH_ROUNDS=6 COMMIT=${COMMIT:-unknown} \
        timeout "${BENCH_TIMEOUT:-170}" "$src/tests/bench/run-gpu.sh" "$build" "$work/bench" >"$out/bench-run.txt" 2>&1
    echo "run-gpu rc=$?" >>"$out/bench-run.txt"
    cat "$work/bench/env.txt" "$work/bench/check.txt" >"$out/bench-check.txt" 2>/dev/null
    cat "$work/bench/timing.txt" "$work/bench/hostpath.txt" >"$out/bench-timing.txt" 2>/dev/null
fi
# the nonblocking fast path: MPI_Ixxx + MPI_Wait against the blocking call, and how much of a
# 100 us GPU compute phase a call overlaps (coll_gpu_bench -O)
if has nb; then
    stamp "nonblocking" >"$out/bench-nb.txt"
    (export OMPI_MCA_mca_base_component_path="$build/mca-coll-gpu/component:$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)" \
        OMPI_MCA_coll=gpu,tuned,basic,libnbc OMPI_MCA_coll_gpu_device=cuda OMPI_MCA_btl=self,vader \
        OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
     timeout 120 mpirun -np 2 --bind-to none --map-by slot "$build/tests/coll_gpu_bench" -d cuda \
        -c allreduce,bcast -t float -o sum -b 8 -e 64M -f 8 -B mpi,nb,nccl -n 20 -w 5 -T 2 -O 100 \
        -F
     # the staged nonblocking path's per-call cost (issue 19): a 16 B MPI_Iallgather + MPI_Wait
     # against the blocking MPI_Allgather (target: "nb / mpi time" within 2), with the pinned
     # allocations per call (0 since the pool; 2 before)
     timeout 60 mpirun -np 2 --bind-to none --map-by slot "$build/tests/coll_gpu_bench" -d cuda \
        -c allgather -t float -b 16 -e 16 -B mpi,nb -n 2000 -w 50 -T 5 -F) \
        >>"$out/bench-nb.txt" 2>&1
    echo "nonblocking bench rc=$?" >>"$out/bench-nb.txt"
fi

if has python; then
    stamp "python" >"$out/python.txt"
    # mpi4py with torch and CuPy buffers (tests/bench/python_bench.py), where python3 has all three
    if python3 -c 'import mpi4py, torch, cupy' >>"$out/python.txt" 2>&1; then
        COLL_GPU_TEST_DEVICE=cuda COLL_GPU_TEST_UNIFORM=true PYTHONUNBUFFERED=1 top_builddir=$build \
            top_srcdir=$src timeout 150 "$src/tests/run-mpi.sh" 2 python3 "$src/tests/bench/python_bench.py" --max 1048576 \
            >>"$out/python.txt" 2>&1
        echo "python_bench rc=$?" >>"$out/python.txt"
    fi
    # the collgpu torch backend on CUDA tensors (tests/torch/torch.sh: pip install of python/,
    # every collective x dtype x op, DDP), where python3 has torch
    COLL_GPU_TEST_DEVICE=cuda COLL_GPU_TORCH_DEVICE=cuda top_builddir=$build top_srcdir=$src \
        timeout 300 "$src/tests/torch/torch.sh" >>"$out/python.txt" 2>&1
    echo "torch.sh (cuda tensors) rc=$?" >>"$out/python.txt"
fi
stamp "done"
exit "$check_rc"
