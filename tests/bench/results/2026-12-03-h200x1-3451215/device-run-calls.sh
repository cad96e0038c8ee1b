#!/bin/bash
# PART=a: build HEAD (device-run.sh, UCX) and 62d0365; unit + GPU tests of this change; torch on CUDA (+FSDP2)
# PART=b: benchmarks: torch backend vs C; in place vs out of place; 8 B device old vs new; host-path cost
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/out}; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
t0=$(date +%s)
st() { echo "$* at $(( $(date +%s) - t0 )) s" >> "$out/stamps.txt"; }
build_old() {
    [ -f /tmp/dr-old/built ] && return 0
    rm -rf /tmp/dr-old && mkdir -p /tmp/dr-old && cd /tmp/dr-old && tar xzf "$1" && cd coll-gpu-* && mkdir -p b && cd b \
      && ../configure --enable-werror --with-cuda >configure.out 2>&1 && make -j8 >make.out 2>&1 \
      && make -C tests -j8 check TESTS= >tests.out 2>&1 && touch /tmp/dr-old/built
}
( build_old "$PWD/.devrun/coll-gpu-old62.tar.gz" > "$out/build-old.txt" 2>&1; echo "old rc=$?" >> "$out/build-old.txt" ) &
bo=$!
OUT=$out/dr WORK=/tmp/dr-new STEPS="build" COMMIT=${COMMIT:-new} timeout 300 bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz
st "build rc=$?"
build=$(echo /tmp/dr-new/coll-gpu-*/b); src=$(cd $build/.. && pwd)
[ -f /tmp/dr-new/tests-built ] || { make -C $build/tests -j16 check TESTS= > "$out/tests-build.txt" 2>&1 && touch /tmp/dr-new/tests-built; }
wait $bo
st "old build done"
oldb=$(echo /tmp/dr-old/coll-gpu-*/b)
if [ "${PART:-a}" = a ]; then
    COLL_GPU_TEST_DEVICE=cuda COLL_GPU_TORCH_DEVICE=cuda top_builddir=$build top_srcdir=$src \
        timeout 240 $src/tests/torch/torch.sh > "$out/torch.txt" 2>&1
    st "torch rc=$?"
    left=$(( 570 - ($(date +%s) - t0) ))
    OUT=$out/dr WORK=/tmp/dr-new STEPS="check" COMMIT=${COMMIT:-new} CHECK_TIMEOUT=$(( left - 30 )) \
        GPU_TESTS="${GPU_TESTS}" timeout $(( left - 10 )) bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz
    st "check rc=$?"
    exit 0
fi
# ---- PART b
export top_builddir=$build top_srcdir=$src
pk=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
( cd /tmp && PYTHONPATH=/tmp/cgt-site python3 -c 'import collgpu_torch' 2>/dev/null ) || \
    { cp -r $src/python /tmp/cgt-src && python3 -m pip install --no-build-isolation --no-deps --target /tmp/cgt-site /tmp/cgt-src > "$out/pip.txt" 2>&1; }
for r in 1 2; do
    COLL_GPU_TEST_DEVICE=cuda PYTHONPATH=/tmp/cgt-site timeout 120 $src/tests/run-mpi.sh 2 python3 $src/tests/bench/torch_bench.py --device cuda --iters 200 2>&1 | grep -E "^torch_bench|rror"
done > "$out/torch-bench.txt" 2>&1
st "torch bench"
for r in 1 2 3; do
  for ip in "" "-I"; do
    echo "== round $r ${ip:-out of place}"
    COLL_GPU_TEST_DEVICE=cuda timeout 60 $src/tests/run-mpi.sh 2 $build/tests/coll_gpu_bench -d cuda -c allreduce -t float -b 8 -e 32K -f 8 -B mpi -n 200 -w 20 -T 2 -F $ip 2>&1 | grep -vE "^#   # device|^# device"
  done
done > "$out/inplace.txt" 2>&1
st "in place bench"
for r in 1 2 3 4; do
  for v in old new; do
    b=$build; [ $v = old ] && b=$oldb
    echo "== $v round $r"
    COLL_GPU_TEST_DEVICE=cuda top_builddir=$b timeout 60 $src/tests/run-mpi.sh 2 $build/tests/coll_gpu_bench -d cuda -c allreduce,bcast -t float -b 8 -e 8 -B mpi -n 2000 -w 100 -T 3 -F 2>&1 | grep -vE "^#   # device|^# device"
  done
done > "$out/device8.txt" 2>&1
st "device 8 B"
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
run1() {
    local label=$1 b=$2 p c
    if [ "$b" = - ]; then p=$pk; c=tuned,basic,libnbc; else p=$b/mca-coll-gpu/component:$pk; c=gpu,tuned,basic,libnbc; fi
    echo "$label $(env OMPI_MCA_mca_base_component_path=$p OMPI_MCA_coll=$c OMPI_MCA_coll_gpu_device=cuda timeout 60 mpirun -np 2 --bind-to core $build/tests/coll_gpu_hostpath_bench 2>&1 | grep ^hostpath)"
}
for r in $(seq 1 ${ROUNDS:-10}); do
    run1 stock -
    run1 old62 "$oldb"
    run1 new "$build"
done > "$out/hostcost.txt" 2>&1
st "hostcost"
