#!/bin/bash
# one device call: CALL=1|2 (each builds what a cold machine lacks)
set -u
cd "$(dirname "$0")/.."
repo=$PWD
out=${OUT:-/tmp/out}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
new=$repo/.devrun/coll-gpu-new.tar.gz
build_old() {
    [ -f /tmp/dr-old/built ] && return 0
    rm -rf /tmp/dr-old && mkdir -p /tmp/dr-old && cd /tmp/dr-old && tar xzf "$repo/.devrun/coll-gpu-old.tar.gz" \
      && cd coll-gpu-* && mkdir -p b && cd b && ../configure --enable-werror --with-cuda >configure.out 2>&1 \
      && make -j16 >make.out 2>&1 && make -C tests -j16 check TESTS= >tests.out 2>&1 && touch /tmp/dr-old/built
}
date -u >"$out/stamps.txt"
if [ "${OLD:-0}" = 1 ]; then ( build_old >"$out/build-old.txt" 2>&1; echo "old build rc=$?" >>"$out/build-old.txt" ) & bo=$!; fi
OUT=$out/dr WORK=/tmp/dr-new STEPS="build check" COMMIT=${COMMIT:-new} CHECK_TIMEOUT=${CT:-380} \
    GPU_TESTS="${GPU_TESTS}" timeout ${DRT:-560} bash tests/gpu/device-run.sh "$new"
echo "device-run rc=$?" >>"$out/dr/check.txt"
date -u >>"$out/stamps.txt"
[ -n "${bo:-}" ] && wait $bo
newb=$(echo /tmp/dr-new/coll-gpu-*/b)
oldb=$(echo /tmp/dr-old/coll-gpu-*/b)
if [ "${EXTRA:-}" = 2 ]; then
    export top_builddir=$newb top_srcdir=$(cd $newb/.. && pwd)
    # compute-sanitizer on the new tests (cuda)
    for t in "mpi/test_progress_thread" "mpi/test_span" "mpi/test_pinned_pool percall"; do
        COLL_GPU_TEST_DEVICE=cuda timeout 120 "$top_srcdir/tests/run-mpi.sh" 2 compute-sanitizer \
            --tool memcheck --error-exitcode 42 $newb/tests/$t >>"$out/sanitizer.txt" 2>&1
        echo "sanitizer $t rc=$?" >>"$out/sanitizer.txt"
    done
    date -u >>"$out/stamps.txt"
    # 16 B MPI_Iallgather + MPI_Wait against MPI_Allgather, device buffers: old component, new, new without the pool
    for r in 1 2 3; do
      for v in old new new-nopool; do
        case $v in old) b=$oldb; a=;; new) b=$newb; a=;; new-nopool) b=$newb; a="--mca coll_gpu_pinned_pool_bytes 0";; esac
        echo "== $v round $r"
        COLL_GPU_TEST_DEVICE=cuda COLL_GPU_MPIRUN_ARGS="$a" top_builddir=$b timeout 60 "$top_srcdir/tests/run-mpi.sh" 2 \
            $newb/tests/coll_gpu_bench -d cuda -c allgather -t float -b 16 -e 16 -B mpi,nb -n 2000 -w 50 -T 3 -F 2>&1 | grep -vE "^#   # device"
      done
    done >"$out/nb-allgather.txt" 2>&1
    date -u >>"$out/stamps.txt"
    # host-path cost: stock, old, new, new without the host watch callback, new under the promise
    pk=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
    export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
    run1() {
        local label=$1 b=$2 p c; shift 2
        if [ "$b" = - ]; then p=$pk; c=tuned,basic,libnbc; else p=$b/mca-coll-gpu/component:$pk; c=gpu,tuned,basic,libnbc; fi
        echo "$label $(env "$@" OMPI_MCA_mca_base_component_path=$p OMPI_MCA_coll=$c OMPI_MCA_coll_gpu_device=cuda timeout 60 mpirun -np 2 --bind-to core $newb/tests/coll_gpu_hostpath_bench 2>&1 | grep ^hostpath)"
    }
    for r in $(seq 1 ${ROUNDS:-6}); do
        run1 stock -
        run1 old "$oldb"
        run1 new "$newb"
        run1 new-nowatch "$newb" OMPI_MCA_coll_gpu_hang_warn_seconds=0
        run1 new-promise "$newb" OMPI_MCA_coll_gpu_uniform_buffers=true
    done >"$out/hostcost.txt" 2>&1
    date -u >>"$out/stamps.txt"
fi
