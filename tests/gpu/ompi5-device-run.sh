#!/bin/bash
# ompi5-device-run.sh [--emulated] [BUNDLE] - coll/gpu against Open MPI 5.0 on a machine that
# has no Open MPI 5.0: unpacks the bundle of .ci/ompi5-bundle.sh (default
# .o5/ompi5-bundle.tar.xz) into /tmp/o5, checks that it runs on its own C library, then runs the
# unit tests and every GPU test of tests/gpu/gpu.am's GPUTEST_SH on the cuda backend, one at a
# time, and the benchmark (tests/bench/run-gpu.sh: coll/gpu, its nonblocking calls and NCCL in
# the same processes, allreduce and bcast, 8 B - 256 MiB, a few iterations a size).
#
# On the GPU machine, from the repository root, with .o5 carried:
#   bash tests/gpu/ompi5-device-run.sh
# Here, without a GPU (what .ci/ompi5-bundle.sh runs to prove a bundle):
#   tests/gpu/ompi5-device-run.sh --emulated
# --emulated runs MPI tests on the emulated device instead of the GPU tests and no benchmark.
#
# Output: the summary on stdout and in $OUT/summary.txt; beside it (at most 8 files):
#   env.txt          the bundle's manifest, the machine, where every library resolves
#   tests.txt        per test: its result lines other than ok, its errors, its counts
#   tests-raw.tar.gz every test's full log and .trs file
#   bench-check.txt  run-gpu.sh's env.txt and check-mode output; bench-run.txt its progress
#   bench-timing.txt the timing run with its closing tables, and the host-path bench
#   bench-timing.csv every timing row
# Bounded: the tests stop being started at TESTS_BUDGET seconds (default 300; the rest are
# listed as not run), each test is stopped after TEST_TIMEOUT (default 150), the benchmark after
# BENCH_TIMEOUT (default 120) and the whole run ends within about 7.5 minutes. Missing pieces
# (no bundle, no GPU, no driver library, a launcher that does not start) stop it at once with a
# FATAL line. Exit status 0 only when every test passed (or skipped) and the benchmark ran and
# checked right.
# Environment: OUT (default ./o5-out), TESTS (test names to run instead of the default list,
# e.g. "gpu/kinds_cuda.sh unit/test_dev_emulated"), NP (benchmark ranks, default 2), MAXBYTES
# (256M), ITERS (5), WARMUP (2), BACKENDS (mpi,nb,nccl), TESTS_BUDGET, TEST_TIMEOUT,
# BENCH_TIMEOUT.
set -u
start=$(date +%s)
P=/tmp/o5
mode=cuda
if [ "${1:-}" = --emulated ]; then
    mode=emulated
    shift
fi
bundle=${1:-.o5/ompi5-bundle.tar.xz}
out=${OUT:-$PWD/o5-out}
mkdir -p "$out" && out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/o5-run.XXXXXX)
summary=$out/summary.txt
: >"$summary"
tests_budget=${TESTS_BUDGET:-300}
test_timeout=${TEST_TIMEOUT:-150}
bench_timeout=${BENCH_TIMEOUT:-120}
hard_end=$((start + 450)) # nothing is started that could run past this
status=0

elapsed() { echo $(($(date +%s) - start)); }
say() { echo "$*" | tee -a "$summary"; }
fatal() {
    say "FATAL: $*"
    say "ompi5-device-run: stopped after $(elapsed) s; nothing else was run"
    reap
    exit 1
}
# processes left behind by a stopped test: every process running a program of the bundle
# (found by its executable, ended by its id)
reap() {
    local p exe
    for p in /proc/[0-9]*; do
        exe=$(readlink "$p/exe" 2>/dev/null) || continue
        case $exe in "$P"/*) kill -9 "${p#/proc/}" 2>/dev/null ;; esac
    done
}
trap 'reap; rm -rf "$work"' EXIT

say "== ompi5-device-run ($mode) $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"

# ---- 1. the bundle ---------------------------------------------------------------------------
if [ -e "$P/.coll-gpu-ompi5-bundle" ] && [ "$bundle" = --no-unpack ]; then
    say "using the bundle already in $P"
else
    [ -f "$bundle" ] || fatal "no bundle at $bundle (make it with .ci/ompi5-bundle.sh; carry .o5)"
    if [ -e "$P" ] && [ ! -e "$P/.coll-gpu-ompi5-bundle" ]; then
        fatal "$P exists and is not a bundle: not touching it"
    fi
    rm -rf "$P" && mkdir -p "$P" || fatal "cannot make $P"
    if command -v xz >/dev/null 2>&1; then
        tar -C "$P" -xJf "$bundle" || fatal "unpacking $bundle failed"
    else
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
            "$bundle" "$P" || fatal "unpacking $bundle failed (no xz; python3's tarfile failed too)"
    fi
    say "unpacked $bundle ($(du -sh "$bundle" | cut -f1)) into $P in $(elapsed) s"
fi
[ -f "$P/env.sh" ] || fatal "$P/env.sh missing: not a bundle of .ci/ompi5-bundle.sh"
. "$P/env.sh"
src=$P/coll-gpu
B=$src/_build
export top_builddir=$B top_srcdir=$src MPIRUN=$P/bin/mpirun OMPI_PKGLIBDIR=$P/lib/openmpi
export COLL_GPU_OMPI_SERIES=5.0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off on these machines
# 5.0's PMIx reads Open MPI's component path too and reports mca_coll_gpu.so there as no plugin
# of its own (tests/run-mpi.sh says the same; the benchmark's scripts do not)
export PMIX_MCA_mca_base_component_show_load_errors=none

# ---- 2. what runs where ----------------------------------------------------------------------
ngpus=0
command -v nvidia-smi >/dev/null 2>&1 && ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
{
    echo "== bundle"
    cat "$P/MANIFEST.txt"
    echo
    echo "== machine"
    uname -srm
    grep -h PRETTY_NAME /etc/os-release 2>/dev/null
    echo "host C library: $(ldd --version 2>/dev/null | head -1)"
    echo "bundle's loader: $("$P/glibc/ld-linux-x86-64.so.2" --version 2>&1 | head -1)"
    echo "GPUs: $ngpus"
    [ "$ngpus" -gt 0 ] && { nvidia-smi -L; nvidia-smi topo -m; }
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    echo
    echo "== Open MPI (the bundle's)"
    command -v mpirun ompi_info
    "$P/bin/mpirun" --version 2>&1 | head -2
    ompi_info 2>&1 | grep -E 'Open MPI:|PRRTE|PMIx|Prefix'
} >"$out/env.txt" 2>&1

# every ELF of the bundle: each library it needs must resolve inside the bundle, except the
# driver's and NCCL, which resolve on the host or (the driver, here) are absent
libcheck=$work/libcheck.txt
bad=0
while read -r f; do
    head -c4 "$f" 2>/dev/null | grep -q ELF || continue
    "$P/glibc/ld-linux-x86-64.so.2" --list "$f" >"$work/l" 2>&1 || {
        echo "BAD $f: the bundle's loader cannot list it: $(head -2 "$work/l")"
        bad=$((bad + 1))
        continue
    }
    while read -r name arrow path _; do
        [ "$arrow" = "=>" ] || continue
        case $name in
            libcuda.so.1 | libnvidia-ml.so.1 | libnccl.so.2)
                echo "host $name => $path  (${f#"$P"/})" ;;
            *)
                case $path in
                    "$P"/*) ;;
                    *) echo "BAD ${f#"$P"/}: $name => $path"; bad=$((bad + 1)) ;;
                esac ;;
        esac
    done <"$work/l"
done < <(find "$P/bin" "$P/lib" "$B" -type f) >"$libcheck"
nelf=$(find "$P/bin" "$P/lib" "$B" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF && echo' _ {} \; | wc -l)
{
    echo
    echo "== libraries: $nelf ELF files checked with the bundle's loader, $bad resolve outside it"
    sort -u "$libcheck"
} >>"$out/env.txt"
say "bundle: $(head -1 "$P/MANIFEST.txt")"
say "$(sed -n 2,3p "$P/MANIFEST.txt" | tr '\n' ' ')"
say "host: $(grep -h PRETTY_NAME /etc/os-release 2>/dev/null | cut -d= -f2 | tr -d '"'), $(ldd --version 2>/dev/null | head -1 | sed 's/.* //' | sed 's/^/glibc /'); GPUs: $ngpus"
say "libraries: $nelf ELF files, $bad resolve outside the bundle"
[ "$bad" -eq 0 ] || { grep '^BAD' "$libcheck" | head -20 | tee -a "$summary"; fatal "the bundle is not self-contained"; }
grep '^host libnccl' "$libcheck" | head -1 | sed 's/  (.*//' | tee -a "$summary"

if [ "$mode" = cuda ]; then
    [ "$ngpus" -ge 1 ] || fatal "nvidia-smi lists no GPU (use --emulated on a machine without one)"
    grep -q '^#define COLL_GPU_HAVE_CUDA 1' "$B/coll_gpu_config.h" || fatal "the bundle's coll/gpu has no cuda backend"
    cudalib=
    for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu \
        /lib/x86_64-linux-gnu /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib64 /usr/lib; do
        [ -e "$d/libcuda.so.1" ] && { cudalib=$d/libcuda.so.1; break; }
    done
    [ -n "$cudalib" ] || cudalib=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 .*x86-64/ { print $NF; exit }')
    [ -n "$cudalib" ] || fatal "libcuda.so.1 (the driver) is in none of the bundle's host paths nor in ldconfig's cache"
    say "host libcuda.so.1 => $cudalib"
    grep -q '^host libnccl.so.2 => /' "$libcheck" \
        || say "FAIL: libnccl.so.2 is not found for coll_gpu_bench: the benchmark cannot run"
fi

# ---- 3. does it start at all ------------------------------------------------------------------
ompi_info_out=$("$src/tests/run-mpi.sh" --exec ompi_info 2>&1)
echo "$ompi_info_out" | grep -E 'MCA coll: gpu' | tee -a "$summary" | grep -q . \
    || { echo "$ompi_info_out" | tail -20 >>"$out/env.txt"; fatal "ompi_info from the bundle does not list coll gpu (see env.txt)"; }
smoke=$work/smoke.txt
# device buffers; where a GPU is required, a cuda backend that cannot open fails the program.
# The loader logs what every process loads (LD_DEBUG=libs, one file a process): the bundle's
# processes (mpirun, prterun, the ranks) must load the C library and everything else from the
# bundle, the driver and NCCL excepted.
mkdir -p "$work/ld"
LD_DEBUG=libs LD_DEBUG_OUTPUT=$work/ld/ld \
    COLL_GPU_TEST_DEVICE=$mode COLL_GPU_TEST_REQUIRE_DEVICE=$([ $mode = cuda ] && echo 1 || echo 0) \
    COLL_GPU_TEST_UNIFORM=true timeout -k 5 60 "$src/tests/run-mpi.sh" 2 \
    "$B/tests/mpi/test_smoke" device >"$smoke" 2>&1
rc=$?
nproc_b=0 nhost=0 nlibc=0
# one log a process id; an exec starts a new image in the same log, with its loader's own
# "calling init" line first: the images whose loader is the bundle's are checked
cat "$work"/ld/ld.* 2>/dev/null | awk -v P="$P" '
    /calling init: / {
        sub(/.*calling init: /, ""); path = $1
        if (path ~ /ld-linux-x86-64\.so\.2$/) {
            mine = index(path, P "/glibc/") == 1
            if (mine) print "PROCESS"
        }
        if (mine && index(path, P "/") != 1) print path
    }' >"$work/hostlibs"
nproc_b=$(grep -c '^PROCESS' "$work/hostlibs")
grep -v '^PROCESS' "$work/hostlibs" | while read -r l; do
    case $(basename "$l") in
        libcuda.so* | libnvidia-* | libnccl.so*) echo "host (expected) $l" ;;
        ld-linux* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | libresolv.so*)
            echo "BAD host C library $l" ;;
        *) echo "WARN host library $l" ;;
    esac
done >"$work/loaded.txt"
{
    echo
    echo "== loaded at run time (LD_DEBUG=libs of the smoke run): $nproc_b processes on the bundle's C library"
    sort "$work/loaded.txt" | uniq -c
} >>"$out/env.txt"
nhost=$(grep -c '^WARN' "$work/loaded.txt")
nlibc=$(grep -c '^BAD' "$work/loaded.txt")
say "loaded at run time: $nproc_b processes on the bundle's C library; host libraries: $(grep -c '^host' "$work/loaded.txt") expected (driver, NCCL), $nhost other, $nlibc C library"
grep -E '^(WARN|BAD)' "$work/loaded.txt" | sort -u | head -10 | tee -a "$summary"
[ "$nlibc" -eq 0 ] || fatal "a process of the bundle loaded the host's C library"
[ "$nproc_b" -ge 3 ] || fatal "the smoke run's loader logs show $nproc_b processes of the bundle (mpirun/prterun and 2 ranks expected)"
{ echo; echo "== smoke: 2 ranks, test_smoke on device buffers, $mode device (exit $rc)"; cat "$smoke"; } >>"$out/env.txt"
if [ $rc -ne 0 ] || grep -qE '^not ok|^1\.\.0' "$smoke" || ! grep -q '^ok' "$smoke"; then
    tail -15 "$smoke" | tee -a "$summary"
    fatal "a 2-rank test_smoke through the bundle's mpirun failed (exit $rc; 124: it hung)"
fi
say "smoke: 2 ranks through the bundle's mpirun, $mode device: $(grep -c '^ok' "$smoke") ok ($(grep -m1 '^# ' "$smoke" | sed 's/^# //'))"

# ---- 4. the tests ------------------------------------------------------------------------------
if [ -n "${TESTS:-}" ]; then
    tests=$TESTS
elif [ "$mode" = cuda ]; then
    tests="$(cd "$B/tests" && find unit -maxdepth 1 -type f -name 'test_*' -perm -u+x | sort | tr '\n' ' ')"
    tests="$tests $(sed -n '/^GPUTEST_SH *=/,/[^\\]$/p' "$src/tests/gpu/gpu.am" | sed 's/^GPUTEST_SH *=//' | tr -d '\\' | tr -s ' \n' '  ')"
    # and the 5.0-only ones (GPUTEST_SH += under "if OMPI_5": this bundle is 5.0)
    tests="$tests $(sed -n 's/^GPUTEST_SH *+= *//p' "$src/tests/gpu/gpu.am" | tr -s ' \n' '  ')"
else
    tests="unit/test_dev_emulated unit/test_topo_select mpi/ompi_info.sh mpi/coll_types.sh \
mpi/coll_mixed.sh mpi/signature.sh mpi/persistent.sh mpi/hier.sh fastpath/nbc.sh \
bench/bench-smoke.sh"
fi
export COLL_GPU_TEST_DEVICE=$mode
[ "$mode" = cuda ] && export COLL_GPU_MATRIX_ARGS=${COLL_GPU_MATRIX_ARGS:---quick}
mkdir -p "$work/logs"
tests_end=$((start + tests_budget))
[ "$tests_end" -gt "$hard_end" ] && tests_end=$hard_end
npass=0 nfail=0 nskip=0 nnotrun=0
: >"$out/tests.txt"
say "== tests ($mode device): $(echo $tests | wc -w) to run, budget until $((tests_end - start)) s"
for t in $tests; do
    left=$((tests_end - $(date +%s)))
    if [ "$left" -lt 15 ]; then
        say "NOT RUN  $t (the time budget of ${tests_budget} s is spent)"
        nnotrun=$((nnotrun + 1))
        continue
    fi
    lim=$test_timeout
    [ "$left" -lt "$lim" ] && lim=$left
    case $t in
        *.sh) cmd=("$src/tests/$t") ;;
        *) cmd=("$B/tests/$t") ;;
    esac
    base=$work/logs/$(echo "$t" | tr / _)
    t0=$(date +%s)
    (cd "$B/tests" && timeout -k 10 "$lim" env AM_TAP_AWK=awk bash "$src/config/tap-driver.sh" \
        --test-name "$t" --log-file "$base.log" --trs-file "$base.trs" --color-tests no \
        --enable-hard-errors yes --expect-failure no -- "${cmd[@]}" >"$base.out" 2>&1)
    rc=$?
    secs=$(($(date +%s) - t0))
    reap
    p=$(grep -c '^:test-result: PASS' "$base.trs" 2>/dev/null)
    f=$(grep -cE '^:test-result: (FAIL|ERROR|XPASS)' "$base.trs" 2>/dev/null)
    s=$(grep -c '^:test-result: SKIP' "$base.trs" 2>/dev/null)
    : "${p:=0}" "${f:=0}" "${s:=0}"
    verdict=PASS
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        verdict="FAIL (stopped after ${lim} s)"
        f=$((f + 1))
    elif [ "$rc" -ne 0 ] || [ ! -s "$base.trs" ]; then
        verdict="FAIL (TAP driver exit $rc)"
        [ "$f" -eq 0 ] && f=1
    elif [ "$f" -gt 0 ]; then
        verdict=FAIL
    elif [ "$p" -eq 0 ] && [ "$s" -gt 0 ]; then
        verdict=SKIP
    fi
    npass=$((npass + p)) nfail=$((nfail + f)) nskip=$((nskip + s))
    say "$(printf '%-28s %-26s %4d ok %3d failed %3d skipped %4d s' "$t" "$verdict" "$p" "$f" "$s" "$secs")"
    {
        echo "---- $t: $verdict, $p ok, $f failed, $s skipped, $secs s"
        grep -E '^(not ok|1\.\.|#|Bail out)' "$base.log" 2>/dev/null | head -40
        grep -E '^SKIP' "$base.out" 2>/dev/null | head -5
        if [ "$verdict" != PASS ] && [ "$verdict" != SKIP ]; then
            grep -E 'coll:gpu|rror|FATAL|abort|Segmentation' "$base.log" 2>/dev/null \
                | grep -vE '^(ok|not ok)' | head -20
            tail -5 "$base.out"
        fi
    } >>"$out/tests.txt"
done
(cd "$work/logs" && tar -czf "$out/tests-raw.tar.gz" .)
say "tests: $npass passed, $nfail failed, $nskip skipped, $nnotrun not run ($(elapsed) s so far)"
[ "$nfail" -eq 0 ] && [ "$nnotrun" -eq 0 ] || status=1

# ---- 5. the benchmark ----------------------------------------------------------------------------
if [ "$mode" = cuda ]; then
    left=$((hard_end - $(date +%s)))
    lim=$bench_timeout
    [ "$left" -lt "$lim" ] && lim=$left
    if [ "$lim" -lt 30 ]; then
        say "NOT RUN  benchmark (only $left s left of the run's budget)"
        status=1
    else
        say "== benchmark: 2 ranks on $ngpus GPU(s), allreduce and bcast, 8 B - ${MAXBYTES:-256M}," \
            "backends ${BACKENDS:-mpi,nb,nccl}, ${ITERS:-5} iterations a size, stopped after $lim s"
        commit=$(sed -n '1s/^coll\/gpu \([^,]*\),.*/\1/p' "$P/MANIFEST.txt")
        NP=${NP:-2} MAXBYTES=${MAXBYTES:-256M} ITERS=${ITERS:-5} WARMUP=${WARMUP:-2} \
            BACKENDS=${BACKENDS:-mpi,nb,nccl} HOSTPATH_ROUNDS=${HOSTPATH_ROUNDS:-3} \
            COMMIT="$commit (Open MPI 5.0.7 bundle)" MPIRUN=$P/bin/mpirun \
            timeout -k 10 "$lim" "$src/tests/bench/run-gpu.sh" "$B" "$work/bench" \
            >"$out/bench-run.txt" 2>&1
        rc=$?
        reap
        echo "run-gpu.sh exit $rc" >>"$out/bench-run.txt"
        cat "$work/bench/env.txt" "$work/bench/check.txt" >"$out/bench-check.txt" 2>/dev/null
        cat "$work/bench/timing.txt" "$work/bench/hostpath.txt" >"$out/bench-timing.txt" 2>/dev/null
        cp "$work/bench/timing.csv" "$out/bench-timing.csv" 2>/dev/null
        grep -E '^# check: [0-9]+ wrong|^# floor =|^# NCCL|^# !!!|stopped after|: exit' \
            "$out/bench-run.txt" | tee -a "$summary"
        grep -E 'geometric mean' "$out/bench-timing.txt" 2>/dev/null | tee -a "$summary"
        for c in allreduce bcast; do
            sed -n "/^# Closing table, $c/,/^#\$/p" "$out/bench-timing.txt" 2>/dev/null \
                | awk 'NR <= 4 || $1 ~ /^(8|65536|1048576|16777216|268435456)$/' | tee -a "$summary"
        done
        tail -1 "$work/bench/hostpath.txt" 2>/dev/null | sed 's/^/host path: /' | tee -a "$summary"
        if [ $rc -ne 0 ] || ! grep -q '^# check: 0 wrong elements' "$out/bench-run.txt"; then
            say "FAIL: benchmark (run-gpu.sh exit $rc$([ $rc -eq 124 ] && echo ': stopped at the time limit'))"
            status=1
        fi
    fi
fi

say "== $([ $status -eq 0 ] && echo "RESULT: OK" || echo "RESULT: FAILED") after $(elapsed) s; files in $out: $(cd "$out" && ls | tr '\n' ' ')"
exit $status
