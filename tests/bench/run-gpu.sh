#!/bin/bash
# run-gpu.sh BUILDDIR [OUTDIR] - the whole benchmark on a GPU machine, in one call.
#
# Runs coll_gpu_bench on device buffers for allreduce (float sum) and bcast, 8 B to 512 MiB,
# with backends mpi (coll/gpu), nccl (NCCL directly) and staged (coll/gpu forced to host
# staging), 2 ranks: first once in check mode, then in timing mode; then plots the timing CSV
# and measures what coll/gpu adds to a host-buffer allreduce (hostpath.sh).  With 2 or more
# GPUs each rank gets its own GPU; with one GPU both ranks share it, which is good for
# correctness only, and every output says so.
#
# OUTDIR (default: $OUT when set, else ./bench-out) receives at most 6 files:
#   env.txt       what ran where: date, commit, machine, GPUs and topology, software, commands
#   check.txt     the check-mode run (stdout and stderr)
#   timing.txt    the timing run, with its closing tables (coll/gpu against NCCL)
#   timing.csv    every row of the timing run; timing.png its plot (plot.py)
#   hostpath.txt  hostpath.sh: host-buffer allreduce with and without coll/gpu
# Environment: NP (ranks, default 2), MAXBYTES (default 512M), ITERS (default 20), WARMUP
# (default 5), TIMING_FACTOR (default 2), CHECK_FACTOR (default 4), HOSTPATH_ROUNDS (default 10),
# MPIRUN, COLL (the MCA coll list, default gpu,tuned,basic,libnbc), BACKENDS (default
# mpi,nccl,staged,mpi:fused,mpi:twoshot_ce,mpi:pull: coll/gpu as the decision table runs it,
# NCCL, staging, and the newer fast-path algorithms forced at every size, so that check mode
# counts their wrong elements and the timing shows their crossovers), COMMIT (recorded in
# env.txt when the tree has no .git).  Exit status: 0 when every step ran and the check found
# nothing wrong.
set -u

[ $# -ge 1 ] || { sed -n '2,24p' "$0"; exit 2; }
build=$(cd "$1" && pwd) || exit 2
out=${2:-${OUT:-$PWD/bench-out}}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)

np=${NP:-2}
maxbytes=${MAXBYTES:-512M}
iters=${ITERS:-20}
warmup=${WARMUP:-5}
tfactor=${TIMING_FACTOR:-2}
cfactor=${CHECK_FACTOR:-4}
: "${MPIRUN:=mpirun}"

bench=$build/tests/coll_gpu_bench
[ -x "$bench" ] || { echo "run-gpu.sh: $bench is not built (make in $build)" >&2; exit 1; }
compdir=$build/mca-coll-gpu/component
[ -e "$compdir/mca_coll_gpu.so" ] || compdir=$build/mca-coll-gpu/.libs
if [ ! -e "$compdir/mca_coll_gpu.so" ]; then
    echo "run-gpu.sh: no mca_coll_gpu.so under $build/mca-coll-gpu" >&2
    exit 1
fi

ngpus=0
command -v nvidia-smi >/dev/null 2>&1 && ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$ngpus" -lt 1 ]; then
    echo "run-gpu.sh: no GPU (nvidia-smi lists none): this script measures GPUs; use" >&2
    echo "            coll_gpu_bench -d emulated for a run on the emulated device" >&2
    exit 1
fi

caveat=
if [ "$ngpus" -lt "$np" ]; then
    caveat="!!! $np ranks on $ngpus GPU(s): ranks SHARE a GPU, which time-slices between processes.
!!! Every time and bandwidth of this run is NOT meaningful: correctness only.
!!! NCCL refuses two ranks on one GPU, so there is no nccl column either."
    printf '\n%s\n\n' "$caveat"
fi

# coll/gpu from the build tree, on the cuda device; host traffic over shared memory only.
. "$(dirname "$0")/bench-env.sh"
export OMPI_MCA_mca_base_component_path="$compdir:$pkglibdir"
export OMPI_MCA_coll=${COLL:-gpu,tuned,basic,libnbc}
export OMPI_MCA_coll_gpu_device=cuda
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off on these machines
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
mpirun_args=(-np "$np" --bind-to none --map-by slot --oversubscribe)

backends=${BACKENDS:-mpi,nccl,staged,mpi:fused,mpi:twoshot_ce,mpi:pull}
common=(-c allreduce,bcast -t float -o sum -B "$backends" -d cuda -b 8 -e "$maxbytes")
check_cmd=("$bench" "${common[@]}" -f "$cfactor" -C -n 2 -w 1 -T 2)
timing_cmd=("$bench" "${common[@]}" -f "$tfactor" -n "$iters" -w "$warmup" -T 2
            -p "$out/timing.csv")

# ---- what ran where ------------------------------------------------------------------------
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(hostname)  $(uname -srm)"
    if git -C "$src" rev-parse HEAD >/dev/null 2>&1; then
        dirty=
        git -C "$src" diff --quiet HEAD -- 2>/dev/null || dirty=" (with uncommitted changes)"
        echo "commit: $(git -C "$src" rev-parse HEAD)$dirty"
        echo "commit subject: $(git -C "$src" log -1 --format=%s)"
    else
        echo "commit: ${COMMIT:-unknown: no git checkout at $src, and COMMIT was not given}"
    fi
    echo "build: $build"
    echo "GPUs: $ngpus; ranks: $np"
    [ -n "$caveat" ] && printf '%s\n' "$caveat"
    echo; echo "== nvidia-smi"; nvidia-smi 2>&1
    echo; echo "== nvidia-smi topo -m"; nvidia-smi topo -m 2>&1
    echo; echo "== nvcc --version"; nvcc --version 2>&1 | tail -2
    echo; echo "== Open MPI"
    ompi_info 2>&1 | grep -E 'Open MPI:|MCA coll'
    ompi_info --parsable --all 2>&1 | grep 'mpi_built_with_cuda_support:value'
    echo; echo "== environment"; env | grep -E '^(OMPI_MCA_|NCCL_|CUDA_VISIBLE)' | sort
    echo; echo "== commands"
    echo "$MPIRUN ${mpirun_args[*]} ${check_cmd[*]}"
    echo "$MPIRUN ${mpirun_args[*]} ${timing_cmd[*]}"
    echo "python3 $here/plot.py $out/timing.csv $out/timing.png"
    echo "$here/hostpath.sh -d cuda -n $np -r ${HOSTPATH_ROUNDS:-10} $build"
} >"$out/env.txt" 2>&1

status=0
step() { # step NAME FILE TIMEOUT COMMAND...: run, keep output, report
    local name=$1 file=$2 limit=$3 rc
    shift 3
    echo "== $name ($(date -u +%H:%M:%S))"
    timeout "$limit" "$@" >"$file" 2>&1
    rc=$?
    [ $rc -eq 124 ] && echo "run-gpu.sh: $name stopped after ${limit}s" | tee -a "$file"
    [ $rc -ne 0 ] && { echo "== $name: exit $rc (see $(basename "$file"))"; status=1; }
    return $rc
}

# ---- 1. check mode -------------------------------------------------------------------------
step "check mode" "$out/check.txt" 300 "$MPIRUN" "${mpirun_args[@]}" "${check_cmd[@]}"
grep -E '^# check:|^# .*error|unavailable' "$out/check.txt"
grep -E '^rank [0-9]+: ' "$out/check.txt" | head -20

# ---- 2. timing -----------------------------------------------------------------------------
step "timing" "$out/timing.txt" 420 "$MPIRUN" "${mpirun_args[@]}" "${timing_cmd[@]}"
grep -E '^# floor|^# NCCL|^# !!!' "$out/timing.txt"
sed -n '/^# Closing table/,/^#$/p' "$out/timing.txt"

# ---- 3. plot -------------------------------------------------------------------------------
if [ -s "$out/timing.csv" ]; then
    python3 "$here/plot.py" "$out/timing.csv" "$out/timing.png" || status=1
fi

# ---- 4. host path --------------------------------------------------------------------------
step "host path" "$out/hostpath.txt" 240 "$here/hostpath.sh" -d cuda -n "$np" \
    -r "${HOSTPATH_ROUNDS:-10}" "$build"
tail -1 "$out/hostpath.txt"

[ -n "$caveat" ] && printf '\n%s\n' "$caveat"
echo "== results in $out: $(cd "$out" && ls | tr '\n' ' ')"
exit $status
