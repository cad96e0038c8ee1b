#!/bin/bash
# Call 49 (session 13): call 47 trimmed to the device time left (about 260 s): issue 18 item 6
# on the GPU, and issue 18's budgets.
#   1. build the new tarball and 62d0365 (issue 18's start) in parallel
#   2. GPU checks, cuda backend: defer (new), kinds_sweep, erroneous, nbc, kinds_first,
#      persistent, robust
#   3. a program whose device calls are all nonblocking (coll_gpu_bench -B nb, world's board set
#      up by the bench's host allreduces, no blocking device call): allreduce and bcast 8 B -
#      256 MiB, 2 ranks, new against 62d0365 alternately, 2 rounds
#   4. host-path cost (stock vs new, 7 rounds) and 8 B device calls against 62d0365 (5 rounds)
#   5. torch_bench --breakdown once, if time is left
# Results are packed into OUT/all.tgz after every phase.  Env: COMMIT (name), END (seconds).
set -u
cd "$(dirname "$0")/.."
OUTF=${OUT:-/tmp/out}; mkdir -p "$OUTF"
out=/tmp/c49; rm -rf $out; mkdir -p $out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
t0=$(date +%s); END=${END:-560}
st() { echo "$* at $(( $(date +%s) - t0 )) s" >> "$out/stamps.txt"; pack; }
pack() { (cd $out && tar czf /tmp/all.tgz .) && cp /tmp/all.tgz "$OUTF/all.tgz"; cp $out/stamps.txt $out/keep-*.txt "$OUTF/" 2>/dev/null; }
left() { echo $(( END - ($(date +%s) - t0) )); }
rm -rf /tmp/dr-new /tmp/dr-old62
(OUT=$out/dr-old62 WORK=/tmp/dr-old62 STEPS="build" COMMIT=62d0365 timeout 240 bash tests/gpu/device-run.sh .devrun/coll-gpu-62d0365.tar.gz >/dev/null 2>&1; echo "build old62 rc=$? at $(( $(date +%s) - t0 )) s" >> $out/stamps.txt) &
OUT=$out/dr-new WORK=/tmp/dr-new STEPS="build" COMMIT=${COMMIT:-new} timeout 220 bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz >/dev/null 2>&1; st "build new rc=$?"
new=$(echo /tmp/dr-new/coll-gpu-*/b); src=$(cd "$new/.." && pwd)
[ -d "$new" ] || { echo "no build"; tail -30 $out/dr-new/*; exit 3; }
nvidia-smi -L > "$out/machine.txt"; ompi_info | grep -E "Open MPI:" >> "$out/machine.txt"
wait

# 2. GPU checks
ct=$(( $(left) - 70 )); [ $ct -gt 230 ] && ct=230
OUT=$out/dr-new WORK=/tmp/dr-new STEPS="check" CHECK_TIMEOUT=$ct COMMIT=${COMMIT:-new} \
  GPU_TESTS="gpu/defer_cuda.sh" \
  timeout $(( ct + 50 )) bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz > /dev/null 2>&1
grep -E "^(PASS|FAIL|ERROR|# (TOTAL|PASS|FAIL|SKIP|ERROR))|device-run check status|make check rc" $out/dr-new/check.txt > $out/keep-check.txt
cp $new/tests/gpu/defer_cuda.log $out/ 2>/dev/null
st "gpu checks"
(cd $new/tests && make coll_gpu_bench > "$out/bench-build.txt" 2>&1); mpicc -O2 -o /tmp/hp .devrun/hp.c >> "$out/bench-build.txt" 2>&1

# 3. nonblocking-only program
old62=$(echo /tmp/dr-old62/coll-gpu-*/b)
for r in 1; do
  for v in old62 new; do
    b=$new; [ $v = old62 ] && b=$old62
    [ -d "$b" ] || continue
    COLL_GPU_TEST_DEVICE=cuda top_builddir=$b timeout 80 $src/tests/run-mpi.sh 2 $new/tests/coll_gpu_bench -d cuda -c allreduce,bcast -t float -b 8 -e 256M -f 8 -B nb -n 200 -w 10 -T 1 -F -p /tmp/nb.csv > "$out/nbonly-$v-$r.txt" 2>&1
    sed "s/^/$v,$r,/" /tmp/nb.csv >> "$out/nbonly.csv"
  done
done
cp "$out/nbonly.csv" "$out/keep-nbonly.txt"
st "nb-only"

# 4. host path and 8 B device calls against old62 (about 60 s)
[ "$(left)" -gt 70 ] || { pack; cat $out/stamps.txt $out/keep-*.txt | tail -90; exit 0; }
pk=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
( export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
run2() { # label build
    local label=$1 b=$2 p c
    if [ "$b" = - ]; then p=$pk; c=tuned,basic,libnbc; else p=$b/mca-coll-gpu/component:$pk; c=gpu,tuned,basic,libnbc; fi
    echo "$label j=0 $(env OMPI_MCA_mca_base_component_path=$p OMPI_MCA_coll=$c OMPI_MCA_coll_gpu_device=cuda timeout 30 mpirun -np 2 --bind-to core /tmp/hp -j 0 2>&1 | grep ^hostpath)"
}
for r in $(seq 1 5); do run2 stock -; run2 new "$new"; done ) > "$out/hostcost.txt" 2>&1
python3 - "$out/hostcost.txt" <<'PY' > "$out/keep-hostcost.txt"
import sys, re, statistics as S
rows = [l.split() for l in open(sys.argv[1]) if 'median_ns=' in l]
vals = {}
for r in rows:
    vals.setdefault(r[0], []).append(float(re.search(r'median_ns=([0-9.]+)', ' '.join(r)).group(1)))
n = min(len(v) for v in vals.values())
for lab in vals:
    d = [vals[lab][i] - vals['stock'][i] for i in range(n)]
    print(f"{lab:8s} median {S.median(vals[lab]):7.1f}  over stock: median {S.median(d):+7.1f} (from {min(d):+.1f} to {max(d):+.1f}), {n} rounds")
PY
st "host path"
if [ -d "$old62" ]; then
  for r in $(seq 1 3); do
    for v in old62 new; do
      b=$new; [ $v = old62 ] && b=$old62
      COLL_GPU_TEST_DEVICE=cuda top_builddir=$b timeout 60 $src/tests/run-mpi.sh 2 $new/tests/coll_gpu_bench -d cuda -c allreduce,bcast -t float -b 8 -e 8 -B mpi -n 2000 -w 100 -T 3 -F -p /tmp/d8.csv > /dev/null 2>&1
      sed "s/^/$v,$r,/" /tmp/d8.csv >> "$out/device8.csv"
    done
  done
  cp "$out/device8.csv" "$out/keep-device8.txt"
fi
st "device 8 B"

# 5. torch, if time is left
if [ "$(left)" -gt 1000 ]; then
  rm -rf /tmp/cgt-src /tmp/cgt-site; cp -r "$src/python" /tmp/cgt-src && python3 -m pip install --no-build-isolation --no-deps --target /tmp/cgt-site /tmp/cgt-src > "$out/pip.txt" 2>&1
  export top_builddir=$new top_srcdir=$src
  COLL_GPU_TEST_DEVICE=cuda PYTHONPATH=/tmp/cgt-site timeout $(( $(left) - 15 )) "$src/tests/run-mpi.sh" 2 python3 "$src/tests/bench/torch_bench.py" --device cuda --iters 200 --breakdown > "$out/torch-bench-1.txt" 2>&1
  grep -E "breakdown|^torch_bench" "$out/torch-bench-1.txt" | sed "s/^/1: /" >> "$out/keep-torch-bench.txt"
  st "torch bench"
fi
pack
cat $out/stamps.txt $out/keep-*.txt | tail -90
