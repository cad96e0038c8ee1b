#!/bin/bash
# osu-coll.sh OSU_SRC COLL_GPU_BUILD OUT [host|cuda] - the OSU micro-benchmarks' collectives,
# with their own validation (-c), against coll/gpu: the programs HPC users time MPI with.
#
#   OSU_SRC          an unpacked OSU micro-benchmarks release (7.x, not part of this
#                    repository); configured and built into OUT/osu with the mpicc on PATH, its
#                    CUDA support on in cuda mode (CUDA in CUDA_HOME, default /usr/local/cuda)
#   COLL_GPU_BUILD   a built tree of coll/gpu (its mca-coll-gpu/component is loaded)
#   OUT              where the build, one log per case and summary.txt go
#   host             host buffers, emulated device (any machine): coll/gpu must pass them through
#   cuda             (the default) device buffers (-d cuda), the cuda device backend
#
# Every blocking, nonblocking and neighborhood collective benchmark that was built runs at 2, 3
# and 4 ranks (the neighborhood ones at 3 and 4) under Open MPI's default coll list and under
# gpu,tuned, 20 iterations after 5 warm-up ones, sizes 1 B to MAX, validation on (-c): the
# reductions over MPI_CHAR, MPI_INT and MPI_FLOAT (-T) and in place (-l); the others as they
# come and in place (-l) where offered, and over a derived type (-D vect:4:2: 2 elements of
# every 4) without validation, which the benchmarks do not offer for derived types.  A case
# passes when mpirun exits 0 and its log has no failed validation, error or usage message.
# The benchmarks' sums over MPI_CHAR fail on host memory without coll/gpu too (Open MPI's
# op/avx saturates 8-bit sums: README), and on device memory wherever a call is staged through
# the component below (a nonblocking reduction before any blocking one had device memory
# everywhere), so both modes exclude op/avx.  OSU 7.4's neighbourhood benchmarks have no
# device buffers: cuda mode runs them on host buffers.
# Environment: LIMIT (seconds a case, default 60), DEADLINE (seconds for the whole run, default
# 1800: later cases are reported SKIP), ONLY (an extended regular expression on the case's line,
# "COLL NP BENCH ARGS"), MAX (largest size, default 1048576), NPS (default "2 3 4"), COLLS (the
# coll lists, default "default gpu,tuned"), JOBS (cases run at once, default 1).
set -u
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd) out=$3 mode=${4:-cuda}
mkdir -p "$out/logs" || exit 2
out=$(cd "$out" && pwd)
cu=${CUDA_HOME:-/usr/local/cuda}
osu=$out/osu

if [ ! -d "$osu/c/mpi/collective" ]; then
    cp -a "$src" "$osu" || exit 2
    # OSU 7.4 prefetches managed memory with CUDA 12's cudaMemPrefetchAsync (a device number);
    # CUDA 13's takes a location and flags: rewrite that call in the copy where the header asks
    cu13_sig="cudaMemPrefetchAsync(const void \\*devPtr, size_t count, struct cudaMemLocation"
    if [ "$mode" = cuda ] && grep -q "$cu13_sig" "$cu/include/cuda_runtime_api.h" 2>/dev/null; then
        loc="(struct cudaMemLocation){cudaMemLocationTypeDevice, devid}, 0"
        call="cudaMemPrefetchAsync(buf, length"
        sed -i "s/$call, devid, um_stream)/$call, $loc, um_stream)/" "$osu/c/util/osu_util_mpi.c"
    fi
    cuda_args=
    if [ "$mode" = cuda ]; then
        cuda_args="--enable-cuda --with-cuda-include=$cu/include --with-cuda-libpath=$cu/lib64"
    fi
    # shellcheck disable=SC2086
    (cd "$osu" && ./configure CC=mpicc CXX=mpicxx $cuda_args >"$out/configure.txt" 2>&1 \
        && make -C c/util -j8 >"$out/make.txt" 2>&1; make -C c/mpi/collective -j8 \
        >>"$out/make.txt" 2>&1) || { tail -20 "$out/configure.txt" "$out/make.txt"; exit 1; }
fi
coll_dir=$osu/c/mpi/collective

. "$(dirname "$0")/runner-env.sh"
# Open MPI 4.1's and 5.0's op/avx add 8-bit integers with saturation, and the benchmarks'
# validation expects them to wrap: without it, MPI_CHAR sums fail from 16 B on every path that
# reduces on the host (the stock host path, coll/gpu's staged path)
export OMPI_MCA_op=^avx
if [ "$mode" = cuda ]; then
    export OMPI_MCA_coll_gpu_device=cuda OMPI_MCA_coll_gpu_hang_warn_seconds=20
    dev_args="-d cuda"
else
    export OMPI_MCA_coll_gpu_device=emulated
    dev_args=
fi

n=0
: >"$out/cases.txt"
one() { # coll np bench args...: a case to run
    if [ -z "${ONLY:-}" ] || echo "$*" | grep -qE -- "$ONLY"; then
        n=$((n + 1))
        echo "$n $*" >>"$out/cases.txt"
    fi
}
run_case() { # n coll np bench args...: its line of the summary into OUT/res/n
    local n=$1 coll=$2 np=$3 b=$4 r log t0 rc d
    shift 4
    log=$out/logs/$n-$b.txt
    t0=$(date +%s)
    echo "# $coll np=$np $b $*" >"$log"
    if [ "$coll" = default ]; then unset OMPI_MCA_coll; else export OMPI_MCA_coll=$coll; fi
    # OSU 7.4's neighbourhood benchmarks take no -d (host buffers only): they run as in host
    # mode, with the cuda backend loaded
    case $b in *neighbor*) d= ;; *) d=$dev_args ;; esac
    # (--oversubscribe: Open MPI 5.0's mpirun takes no rmaps parameter for it from the
    # environment)
    # shellcheck disable=SC2086
    timeout -k 5 "${LIMIT:-60}" mpirun -np "$np" --oversubscribe --bind-to none \
        "$coll_dir"/*/"$b" $d \
        -i 20 -x 5 "$@" >>"$log" 2>&1 </dev/null
    rc=$?
    r=PASS
    if [ $rc -ne 0 ] || grep -qiE "fail|error|usage" "$log"; then
        r="FAIL(rc=$rc)"
    fi
    echo "$r $(($(date +%s) - t0))s $coll np=$np $b $*" >"$out/res/$n"
}

sizes="-m 1:${MAX:-1048576}"
ddt="$sizes -D vect:4:2" # the benchmarks cannot validate a derived type: it must not fail
benches=$(cd "$coll_dir" && find blocking non_blocking neighborhood -maxdepth 1 -type f \
    -perm -u+x -name 'osu_*' -printf '%f\n' | sort)
for np in ${NPS:-2 3 4}; do
    for coll in ${COLLS:-default gpu,tuned}; do
        for b in $benches; do
            h=$("$coll_dir"/*/"$b" --help 2>&1)
            case $b in
            osu_barrier | osu_ibarrier) one $coll $np $b ;; # no validation, no sizes
            *neighbor*)
                # a Cartesian neighbourhood of radius 1 needs 3 ranks a dimension
                [ "$np" -ge 3 ] && one $coll $np $b -c $sizes && one $coll $np $b $ddt
                ;;
            *reduce*)
                for t in mpi_char mpi_int mpi_float; do one $coll $np $b -c $sizes -T $t; done
                one $coll $np $b -c $sizes -T mpi_float -l
                ;;
            *)
                one $coll $np $b -c $sizes
                echo "$h" | grep -qE '^ +-l,' && one $coll $np $b -c $sizes -l
                echo "$h" | grep -qE '^ +-D,' && one $coll $np $b $ddt
                ;;
            esac
        done
    done
done
# JOBS cases at once (default 1; the GPU machine's cores and one GPU take 4)
rm -rf "$out/res" && mkdir -p "$out/res"
start=$(date +%s)
while read -r i line; do
    if [ $(($(date +%s) - start)) -gt "${DEADLINE:-1800}" ]; then
        echo "SKIP (deadline) $line" >"$out/res/$i"
        continue
    fi
    # shellcheck disable=SC2086
    run_case "$i" $line &
    while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-1}" ]; do wait -n; done
done <"$out/cases.txt"
wait
for i in $(seq 1 "$n"); do cat "$out/res/$i"; done >"$out/summary.txt"
echo "total $n passed $(grep -c ^PASS "$out/summary.txt") failed $(grep -c ^FAIL \
    "$out/summary.txt")" >>"$out/summary.txt"
cat "$out/summary.txt"
