#!/bin/bash
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/out}; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
t0=$(date +%s)
OUT=$out/dr WORK=/tmp/dr-new STEPS="build" COMMIT=${COMMIT:-new} timeout 300 bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz
echo "build rc=$? at $(( $(date +%s) - t0 )) s" >> "$out/stamps.txt"
build=$(echo /tmp/dr-new/coll-gpu-*/b)
rm -rf /tmp/cgt-src /tmp/cgt-site; cp -r python /tmp/cgt-src && python3 -m pip install --no-build-isolation --no-deps --target /tmp/cgt-site /tmp/cgt-src > "$out/pip.txt" 2>&1
for r in 1 2; do
  COLL_GPU_TEST_DEVICE=cuda PYTHONPATH=/tmp/cgt-site top_builddir=$build top_srcdir=$PWD timeout 200 tests/run-mpi.sh 2 python3 tests/bench/torch_bench.py --device cuda --iters 200 --big 256 ${BD:---breakdown} 2>&1 | grep -vE "^#   # device|^# device"
  BD=" "
done > "$out/torch-bench.txt" 2>&1
echo "bench rc=$? at $(( $(date +%s) - t0 )) s" >> "$out/stamps.txt"
