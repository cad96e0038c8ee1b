#!/bin/bash
# Call 4: the merged main on the GPU: composed/exchanged collectives, erroneous, kinds sweep,
# big counts, half precision, nbc, fastpath on cuda; torch on CUDA; reduce-scatters benched
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/out}; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
t0=$(date +%s)
st() { echo "$* at $(( $(date +%s) - t0 )) s" >> "$out/stamps.txt"; }
OUT=$out/dr WORK=/tmp/dr-new STEPS="build" COMMIT=${COMMIT:-new} timeout 300 bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz
st "build rc=$?"
build=$(echo /tmp/dr-new/coll-gpu-*/b); src=$(cd $build/.. && pwd)
make -C $build/tests -j16 check TESTS= > "$out/tests-build.txt" 2>&1
st "tests built rc=$?"
export top_builddir=$build top_srcdir=$src
COLL_GPU_TEST_DEVICE=cuda timeout 100 $src/tests/run-mpi.sh 2 $build/tests/coll_gpu_bench -d cuda -C -K -t float -o sum -F -c reduce_scatter,reduce_scatter_block,alltoallv -B mpi -b 8 -e 64M -f 8 -n 5 -w 2 -T 1 2>&1 | grep -vE "^#   # device|^# device" > "$out/bench-rs.txt"
st "bench rs rc=$?"
COLL_GPU_TEST_DEVICE=cuda timeout 250 make -C $build/tests check TESTS="mpi/composed_team.sh gpu/erroneous_cuda.sh gpu/kinds_sweep_cuda.sh gpu/big_count_cuda.sh gpu/halfprec_cuda.sh gpu/span_cuda.sh" > "$out/check.txt" 2>&1
st "check rc=$?"
for f in mpi/composed_team gpu/erroneous_cuda gpu/kinds_sweep_cuda gpu/big_count_cuda gpu/halfprec_cuda gpu/span_cuda; do echo "---- $f"; grep -E "^(ok|not ok|1\.\.)" $build/tests/$f.log | head -40; done >> "$out/check.txt" 2>&1
left=$(( 570 - ($(date +%s) - t0) ))
COLL_GPU_TEST_DEVICE=cuda COLL_GPU_TORCH_DEVICE=cuda timeout $left $src/tests/torch/torch.sh > "$out/torch.txt" 2>&1
st "torch rc=$?"
