#!/bin/bash
# Call 32 (calls 30 and 31 in one, as the machine came rarely): builds 8e07b02 (new) and
# 62d0365 (old62, issue 18's start); MPICH's coll tests with memory kinds per rank against new
# (tests/thirdparty/mpich-coll.sh kinds); the host-buffer MPI_Allreduce, tight and with a random
# pause of 0-300 ns before each call (hp.c -j), for stock, new and two variants of new's host note
# (pass: the entry calls the saved function at once; nostore: the sequence number only, no
# store), five rounds alternating; device 8 B allreduce and bcast, old62 against new, six rounds
# alternating (CSV rows: mean and median of each run).
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/out}; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
t0=$(date +%s)
st() { echo "$* at $(( $(date +%s) - t0 )) s" >> "$out/stamps.txt"; }
(OUT=$out/dr-old62 WORK=/tmp/dr-old62 STEPS="build" COMMIT=62d0365 timeout 300 bash tests/gpu/device-run.sh .devrun/coll-gpu-62d0365.tar.gz >/dev/null 2>&1; st "build old62 rc=$?") &
rm -rf /tmp/mt && mkdir -p /tmp/mt && tar xzf .devrun/mpich-coll.tar.gz -C /tmp/mt
mpicc -O2 -o /tmp/hp .devrun/hp.c || echo "hp build failed"
OUT=$out/dr-new WORK=/tmp/dr-new STEPS="build" COMMIT=8e07b02 timeout 300 bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz >/dev/null 2>&1; st "build new rc=$?"
new=$(echo /tmp/dr-new/coll-gpu-*/b)
[ -d "$new" ] || { echo "no build"; tail -30 $out/dr-new/*; exit 3; }
src=$(cd $new/.. && pwd)
nvidia-smi -L > "$out/machine.txt"; ompi_info | grep -E "Open MPI:" >> "$out/machine.txt"
mkv() { # name FILE A B: replace A by B in FILE of a copy of the new tree, build it
    local d=/tmp/var-$1; rm -rf $d; mkdir -p $d; cp -a $src $d/; local vs=$(echo $d/coll-gpu-*)
    python3 - "$vs/mca-coll-gpu/$2" "$3" "$4" <<'PY'
import sys
p, a, b = sys.argv[1:4]; s = open(p).read(); assert a in s, a; s = s.replace(a, b, 1); open(p, 'w').write(s)
PY
    make -C $vs/b/mca-coll-gpu -j4 > $d/make.out 2>&1 || { echo "make $1 failed"; tail -20 $d/make.out; }
}
N='        mca_coll_gpu_kinds_publish(m, ++m->kinds_seq, 0);'
mkv nostore coll_gpu.h "$N" '        ++m->kinds_seq;' &
mkv pass coll_gpu_allreduce.c '    if (mca_coll_gpu_host_pass(m, host)) {' '    if (1) {' &
(make -C $new/tests -j8 coll_gpu_bench > "$out/bench-build.txt" 2>&1) &
LIMIT=40 DEADLINE=${DEADLINE:-220} bash tests/thirdparty/mpich-coll.sh /tmp/mt/test/mpi $new /tmp/mpich kinds > /dev/null 2>&1
st "mpich tests"
mkdir -p $out/mpich && cp /tmp/mpich/summary.txt $out/mpich/ && cp -r /tmp/mpich/logs $out/mpich/
cp $out/mpich/summary.txt /tmp/keep-mpich-summary.txt
wait
st "variants built"
pk=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
( export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
run2() { # label build jitter
    local label=$1 b=$2 j=$3 p c
    if [ "$b" = - ]; then p=$pk; c=tuned,basic,libnbc; else p=$b/mca-coll-gpu/component:$pk; c=gpu,tuned,basic,libnbc; fi
    echo "$label j=$j $(env OMPI_MCA_mca_base_component_path=$p OMPI_MCA_coll=$c OMPI_MCA_coll_gpu_device=cuda timeout 30 mpirun -np 2 --bind-to core /tmp/hp -j $j 2>&1 | grep ^hostpath)"
}
for r in $(seq 1 5); do
  for j in 0 300; do
    run2 stock - $j
    run2 new "$new" $j
    for v in pass nostore; do run2 $v $(echo /tmp/var-$v/coll-gpu-*/b) $j; done
  done
done ) > "$out/hostcost-variants.txt" 2>&1
st "hostcost variants"
python3 - "$out/hostcost-variants.txt" <<'PY' > "$out/summary.txt"
import sys, re, statistics as S
rows = [l.split() for l in open(sys.argv[1]) if 'median_ns=' in l]
labels = []; vals = {}
for r in rows:
    lab = r[0] + ' ' + r[1]; v = float(re.search(r'median_ns=([0-9.]+)', ' '.join(r)).group(1))
    if lab not in vals: labels.append(lab); vals[lab] = []
    vals[lab].append(v)
n = min(len(v) for v in vals.values())
for lab in labels:
    d = [vals[lab][i] - vals['stock ' + lab.split()[1]][i] for i in range(n)]
    print(f"{lab:12s} median {S.median(vals[lab]):7.1f}  over stock: median {S.median(d):+7.1f} (from {min(d):+.1f} to {max(d):+.1f})")
PY
cp "$out/summary.txt" /tmp/keep-summary.txt
old62=$(echo /tmp/dr-old62/coll-gpu-*/b)
for r in $(seq 1 6); do
  for v in old62 new; do
    b=$new; [ $v = old62 ] && b=$old62
    COLL_GPU_TEST_DEVICE=cuda top_builddir=$b timeout 60 $src/tests/run-mpi.sh 2 $new/tests/coll_gpu_bench -d cuda -c allreduce,bcast -t float -b 8 -e 8 -B mpi -n 2000 -w 100 -T 3 -F -p /tmp/d8.csv > /dev/null 2>&1
    sed "s/^/$v,$r,/" /tmp/d8.csv >> "$out/device8.csv"
  done
done
st "device 8 B"
cp $out/stamps.txt /tmp/keep-stamps.txt
cat /tmp/keep-mpich-summary.txt /tmp/keep-summary.txt
# at most 8 files come back: everything in one archive, the summaries beside it
cd "$out" && tar czf /tmp/all.tgz . && find . -mindepth 1 -delete && mv /tmp/all.tgz . && cp /tmp/keep-*.txt . 2>/dev/null
