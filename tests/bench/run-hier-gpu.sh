#!/bin/bash
# run-hier-gpu.sh [UCX] - coll/gpu across (emulated) nodes on a GPU machine, in one call: build
# from this tree against a given UCX, run the hierarchical GPU tests, benchmark the leaders'
# pipeline against staging, NCCL over sockets and ucx_perftest, and print a summary table.
#
# UCX: the libucx-cu13 wheel (a .whl file, unpacked here), an unpacked wheel or a UCX prefix
# (default: $UCX_WHEEL, else the newest .whl/libucx_cu13-*.whl at the tree's root).
# Run from anywhere; the tree is the one this script sits in.  Steps:
#   1. build   ./autogen.sh when the tree has no configure (needs autoconf, automake and
#              libtool; DIST=coll-gpu-X.tar.gz builds a `make dist` tarball instead), then
#              configure --with-cuda --with-ucx=UCX in $BUILD (default <tree>/_build_hier_gpu,
#              ignored by git and kept between calls: STEPS without build reuses it)
#   2. tests   make check TESTS='gpu/hier_cuda.sh gpu/hier_direct_cuda.sh' (UCX_TLS unset: the
#              tests choose their own; hier.sh runs UCX_TLS=tcp among others)
#   3. bench   coll_gpu_bench across 2 emulated nodes (2 ranks: 2 GPUs, or 1 GPU shared, then
#              times are not meaningful and NCCL refuses), allreduce (float sum) and bcast,
#              8 B to $MAXBYTES: backends mpi (coll/gpu), staged and nccl with
#              coll_gpu_ucx_device_direct=0, mpi with =1; NCCL with NCCL_P2P_DISABLE=1
#              NCCL_SHM_DISABLE=1 (its socket transport); one verbose call per setting records
#              the path each leader logs ("via UCX/<transport>")
#   4. perftest ucx_perftest -t tag_bw between two processes on this host, host memory, the
#              same sizes and UCX_TLS
#   5. summary  per collective and size: coll/gpu busbw (direct 0 and 1), ucx_perftest's
#              bandwidth and the ratio, staged and NCCL busbw (GB/s = 1e9 B/s; ucx_perftest's
#              "MB/s" are MiB/s and converted)
# Everything raw goes to $OUT (default ./hier-gpu-out): env.txt (ucx_info -v, UCX_TLS, GPUs,
# commands), build.txt, hier-check.txt and the tests' logs, bench-direct{0,1}.{txt,csv},
# path-direct{0,1}.txt, perftest.txt, summary.txt.
# Environment: UCX_TLS for the bench and perftest (default tcp,cuda_copy), STEPS (default
# "build tests bench perftest summary"), MAXBYTES (default 512M), FACTOR (default 4), ITERS
# (default 10), WARMUP (default 2), BENCH_T (seconds per size and backend, default 1),
# BENCH_TIMEOUT (per bench run, default 150), DEVICE (cuda; emulated tries the script on a
# machine without a GPU: mpi/hier.sh, bench -d emulated, no NCCL), JOBS (make -j, default nproc).
# Exit status 0 when every step that ran succeeded.
set -u

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
out=${OUT:-$PWD/hier-gpu-out}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
steps=" ${STEPS:-build tests bench perftest summary} "
device=${DEVICE:-cuda}
maxbytes=${MAXBYTES:-512M}
factor=${FACTOR:-4}
iters=${ITERS:-10}
warmup=${WARMUP:-2}
bench_t=${BENCH_T:-1}
bench_timeout=${BENCH_TIMEOUT:-150}
jobs=${JOBS:-$(nproc)}
build=${BUILD:-$src/_build_hier_gpu}
tls=${UCX_TLS:-tcp,cuda_copy}
unset UCX_TLS # the tests choose their own; the bench and perftest get $tls explicitly
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
stamp() { echo "== $* ($(date -u +%H:%M:%S))"; }
has() { case "$steps" in *" $1 "*) return 0 ;; esac; return 1; }
fail() { echo "run-hier-gpu.sh: $*" | tee -a "$out/env.txt" >&2; status=1; }

# ---- UCX: a wheel is unpacked; the libraries and tools are found under it -------------------
ucx=${1:-${UCX_WHEEL:-}}
if [ -z "$ucx" ]; then
    ucx=$(ls -t "$src"/.whl/libucx_cu13-*.whl 2>/dev/null | head -1)
fi
[ -n "$ucx" ] && [ -e "$ucx" ] || { echo "run-hier-gpu.sh: no UCX given and no .whl/libucx_cu13-*.whl in $src" >&2; exit 2; }
ucx=$(cd "$(dirname "$ucx")" && pwd)/$(basename "$ucx")
if [ -f "$ucx" ]; then
    python3 -m zipfile -e "$ucx" "$work/ucxw" || { echo "run-hier-gpu.sh: cannot unpack $ucx" >&2; exit 2; }
    ucx=$work/ucxw
    # a wheel kept between calls (the build's rpath points into it)
    mkdir -p "$build" && rm -rf "$build/ucx-wheel" && mv "$work/ucxw" "$build/ucx-wheel" && ucx=$build/ucx-wheel
fi
ucx_home=$ucx
[ -d "$ucx/libucx/include" ] && ucx_home=$ucx/libucx
ucx_ld=$ucx_home/lib
[ -d "$ucx/libucx_cu13.libs" ] && ucx_ld=$ucx_ld:$ucx/libucx_cu13.libs
chmod +x "$ucx_home"/bin/* 2>/dev/null
ucx_run() { LD_LIBRARY_PATH="$ucx_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }

ngpus=0
command -v nvidia-smi >/dev/null 2>&1 && ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(hostname)  $(uname -srm)"
    if git -C "$src" rev-parse HEAD >/dev/null 2>&1; then
        echo "commit: $(git -C "$src" rev-parse HEAD)$(git -C "$src" diff --quiet HEAD -- 2>/dev/null || echo ' (with uncommitted changes)')"
    else
        echo "commit: ${COMMIT:-unknown (no git checkout)}"
    fi
    echo "UCX: $ucx"
    echo "UCX_TLS (bench and ucx_perftest): $tls"
    echo "device: $device; GPUs: $ngpus"
    [ "$device" = cuda ] && [ "$ngpus" -lt 2 ] && echo "!!! fewer than 2 GPUs: both ranks share one, times are not meaningful, NCCL refuses"
    echo; echo "== ucx_info -v"; ucx_run "$ucx_home/bin/ucx_info" -v 2>&1
    echo; echo "== ucx_info -d (UCX_TLS=$tls): transports and devices"
    UCX_TLS=$tls ucx_run "$ucx_home/bin/ucx_info" -d 2>&1 | grep -E '^#\s+(Transport|Device):'
    [ "$ngpus" -gt 0 ] && { echo; nvidia-smi -L; nvidia-smi topo -m 2>&1; }
    echo; ompi_info 2>&1 | grep -E 'Open MPI:'
} >"$out/env.txt" 2>&1
sed -n '1,8p' "$out/env.txt"
grep -m1 'Library version' "$out/env.txt"

# ---- 1. build ------------------------------------------------------------------------------
if has build; then
    stamp "build in $build"
    {
        tree=$src
        if [ -n "${DIST:-}" ]; then
            tar xzf "$DIST" -C "$work" && tree=$(ls -d "$work"/coll-gpu-*/ | head -1)
        elif [ ! -x "$src/configure" ]; then
            command -v autoreconf >/dev/null || { echo "no configure in $src and no autoreconf here: give DIST=<make dist tarball>"; exit 1; }
            (cd "$src" && ./autogen.sh) >"$work/autogen.out" 2>&1 || { tail -20 "$work/autogen.out"; exit 1; }
        fi
        mkdir -p "$build" && cd "$build" || exit 1
        wc=--with-cuda
        [ "$device" = cuda ] || wc=
        "$tree/configure" $wc --enable-werror --with-ucx="$ucx" >configure.out 2>&1 || { tail -30 configure.out; exit 1; }
        sed -n '/^coll\/gpu /,$p' configure.out
        make -j"$jobs" >make.out 2>&1 && make -C tests -j"$jobs" check TESTS= >>make.out 2>&1 \
            || { tail -40 make.out; exit 1; }
        grep -i warning make.out | head -10
        echo "built"
    } >"$out/build.txt" 2>&1 || fail "build failed (build.txt)"
    sed -n '/^coll\/gpu /,$p' "$out/build.txt" | grep -E 'UCX|CUDA|NCCL'
    tail -1 "$out/build.txt"
    [ "$status" -eq 0 ] || { cat "$out/build.txt" | tail -20; exit 1; }
fi
bench=$build/tests/coll_gpu_bench
[ -x "$bench" ] || { echo "run-hier-gpu.sh: $bench is not built (STEPS with build)" >&2; exit 1; }

# ---- 2. the hierarchical tests -------------------------------------------------------------
if has tests; then
    stamp "hierarchical tests"
    if [ "$device" = cuda ]; then
        t='gpu/hier_cuda.sh gpu/hier_direct_cuda.sh'
    else
        t='mpi/hier.sh'
    fi
    COLL_GPU_TEST_DEVICE=$device timeout 300 make -C "$build/tests" -j1 check TESTS="$t" \
        >"$out/hier-check.txt" 2>&1 || fail "hierarchical tests: exit $? (hier-check.txt)"
    for f in $t; do
        log=$build/tests/${f%.sh}.log
        [ -f "$log" ] || continue
        cp "$log" "$out/$(basename "$log")"
        echo "$f: $(grep -c '^ok' "$log") ok, $(grep -c '^not ok' "$log") not ok$(grep -m1 -o '# SKIP.*' "$log" | sed 's/^/, /')"
        grep '^not ok' "$log" | head -5
    done
fi

# ---- 3. the benchmark across 2 emulated nodes ------------------------------------------------
pkglibdir=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
export OMPI_MCA_mca_base_component_path="$build/mca-coll-gpu/component:$pkglibdir"
export OMPI_MCA_coll=gpu,tuned,basic,libnbc OMPI_MCA_coll_gpu_device=$device
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_coll_gpu_emulate_nodes=2
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
mpirun_args=(-np 2 --bind-to none --map-by slot -x UCX_TLS="$tls" -x NCCL_P2P_DISABLE
             -x NCCL_SHM_DISABLE -x NCCL_NVLS_ENABLE -x NCCL_DEBUG)
if has bench; then
    for direct in 0 1; do
        backends=mpi
        [ "$direct" = 0 ] && backends=mpi,staged,nccl
        [ "$device" = cuda ] || backends=${backends/,nccl/}
        cmd=(mpirun "${mpirun_args[@]}" --mca coll_gpu_ucx_device_direct "$direct" "$bench"
             -d "$device" -c allreduce,bcast -t float -o sum -b 8 -e "$maxbytes" -f "$factor"
             -B "$backends" -n "$iters" -w "$warmup" -T "$bench_t" -F
             -p "$out/bench-direct$direct.csv")
        echo "${cmd[*]}" >>"$out/env.txt"
        stamp "bench, coll_gpu_ucx_device_direct=$direct, $backends, UCX_TLS=$tls"
        timeout "$bench_timeout" "${cmd[@]}" >"$out/bench-direct$direct.txt" 2>&1 \
            || fail "bench direct=$direct: exit $? (bench-direct$direct.txt)"
        grep -E '^# !!!|unavailable|error' "$out/bench-direct$direct.txt" | head -5
        # the path each leader logs for one 1 MiB call of each collective
        timeout 60 mpirun "${mpirun_args[@]}" --mca coll_gpu_ucx_device_direct "$direct" \
            --mca coll_gpu_verbose 10 "$bench" -d "$device" -c allreduce,bcast -t float -o sum \
            -b 1M -e 1M -B mpi -n 1 -w 0 -T 0 -F >"$out/path-direct$direct.txt" 2>&1
        grep -o 'coll:gpu:[a-z]* (cid [0-9]*): rank [0-9]*: 1048576 B.*-> hierarchical.*' \
            "$out/path-direct$direct.txt" | grep 'via UCX' | sort -u -t: -k3,3 | head -2
    done
fi

# ---- 4. ucx_perftest between two processes, the same sizes and transports --------------------
# sizes: 8 B times FACTOR up to MAXBYTES, as coll_gpu_bench steps them
tobytes() { local v=${1%[KMGkmg]}; case $1 in *[Kk]) v=$((v << 10)) ;; *[Mm]) v=$((v << 20)) ;; *[Gg]) v=$((v << 30)) ;; esac; echo "$v"; }
max=$(tobytes "$maxbytes")
sizes=
for ((s = 8; s <= max; s *= factor)); do sizes="$sizes $s"; last=$s; done
[ "${last:-0}" -lt "$max" ] && sizes="$sizes $max" # the bench ends on MAXBYTES too
if has perftest; then
    stamp "ucx_perftest tag_bw, host memory, UCX_TLS=$tls"
    : >"$out/perftest.txt"
    port=$((13000 + RANDOM % 2000))
    for s in $sizes; do
        # about 2 GiB per size, at least 10 and at most 20000 messages
        n=$(( (1 << 31) / s )); [ "$n" -lt 10 ] && n=10; [ "$n" -gt 20000 ] && n=20000
        echo "#### size $s, $n iterations" >>"$out/perftest.txt"
        UCX_TLS=$tls ucx_run timeout 60 "$ucx_home/bin/ucx_perftest" -t tag_bw -s "$s" -n "$n" \
            -p "$port" >>"$work/perftest-server.txt" 2>&1 &
        spid=$!
        ok=1
        for try in 1 2 3 4 5; do
            sleep 0.5
            UCX_TLS=$tls ucx_run timeout 60 "$ucx_home/bin/ucx_perftest" 127.0.0.1 -t tag_bw \
                -s "$s" -n "$n" -p "$port" >"$work/pt.txt" 2>&1 && { ok=0; break; }
            grep -q 'Final:' "$work/pt.txt" && break
        done
        cat "$work/pt.txt" >>"$out/perftest.txt"
        wait "$spid"
        [ "$ok" -eq 0 ] || fail "ucx_perftest size $s failed (perftest.txt)"
        port=$((port + 1))
    done
    grep -c '^Final:' "$out/perftest.txt" | sed 's/^/ucx_perftest: sizes measured: /'
fi

# ---- 5. summary ------------------------------------------------------------------------------
if has summary; then
    stamp "summary"
    caveat=
    [ "$device" = cuda ] || caveat="!!! emulated device: the times measure the emulation, not a GPU"
    [ "$device" = cuda ] && [ "$ngpus" -lt 2 ] && caveat="!!! both ranks on one GPU: times are not meaningful"
    python3 - "$out" "$tls" "$caveat" >"$out/summary.txt" 2>&1 <<'EOF'
import csv, os, re, sys
out, tls, caveat = sys.argv[1], sys.argv[2], sys.argv[3]
if caveat:
    print(caveat)
rows = {}  # (coll, size, column) -> busbw GB/s
for direct in (0, 1):
    path = os.path.join(out, "bench-direct%d.csv" % direct)
    if not os.path.exists(path):
        continue
    for r in csv.DictReader(open(path)):
        b = r["backend"]
        col = {"mpi": "mpi%d" % direct, "staged": "staged", "nccl": "nccl"}.get(b)
        if col and r["busbw_gbs"]:
            rows[(r["collective"], int(r["size_bytes"]), col)] = float(r["busbw_gbs"])
pt = {}  # size -> GB/s (ucx_perftest prints MiB/s)
path = os.path.join(out, "perftest.txt")
if os.path.exists(path):
    size = None
    for line in open(path):
        m = re.match(r"#### size (\d+)", line)
        if m:
            size = int(m.group(1))
        elif line.startswith("Final:") and size is not None:
            pt[size] = float(line.split()[6]) * 1048576 / 1e9
def f(v):
    return "%9.3f" % v if v is not None else "%9s" % "-"
print("busbw in GB/s (1e9 B/s); perftest: ucx_perftest tag_bw, host memory, UCX_TLS=%s;" % tls)
print("ratio: coll/gpu (direct 0) / perftest.  staged: Open MPI's path through the host (shared")
print("memory on this one host: not a network path); nccl: NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1")
for coll in ("allreduce", "bcast"):
    sizes = sorted({k[1] for k in rows if k[0] == coll})
    if not sizes:
        continue
    print("\n%s" % coll)
    print("%12s %9s %9s %9s %7s %9s %9s" % ("size(B)", "coll/gpu", "direct=1", "perftest", "ratio",
                                         "staged", "nccl"))
    for s in sizes:
        g = lambda c: rows.get((coll, s, c))
        m0, p = g("mpi0"), pt.get(s)
        ratio = "%7.2f" % (m0 / p) if m0 is not None and p else "%7s" % "-"
        print("%12d %s %s %s %s %s %s" % (s, f(m0), f(g("mpi1")), f(p), ratio, f(g("staged")),
                                          f(g("nccl"))))
EOF
    [ $? -eq 0 ] || status=1
    cat "$out/summary.txt"
fi
echo "== results in $out: $(cd "$out" && ls | tr '\n' ' ')"
exit $status
