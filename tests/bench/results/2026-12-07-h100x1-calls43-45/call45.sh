#!/bin/bash
# Call 45: mpi4py 4.1.2's collective tests on CuPy arrays (the runner's fill patches), 2 then 4
# ranks, default coll list, -v.  Env: END (seconds).
set -u
cd "$(dirname "$0")/.."
OUTF=${OUT:-/tmp/out}; mkdir -p "$OUTF"
out=/tmp/c45; rm -rf $out; mkdir -p $out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
t0=$(date +%s); END=${END:-330}
st() { echo "$* at $(( $(date +%s) - t0 )) s" >> "$out/stamps.txt"; pack; }
pack() { (cd $out && tar czf /tmp/all.tgz .) && cp /tmp/all.tgz "$OUTF/all.tgz"; }
left() { echo $(( END - ($(date +%s) - t0) )); }
rm -rf /tmp/dr-new
OUT=$out/dr-new WORK=/tmp/dr-new STEPS="build" COMMIT=new timeout 200 bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz >/dev/null 2>&1; st "build new rc=$?"
new=$(echo /tmp/dr-new/coll-gpu-*/b)
[ -d "$new" ] || { echo "no build"; exit 3; }
nvidia-smi -L > "$out/machine.txt"
rm -rf /tmp/m4 && mkdir -p /tmp/m4 && tar xzf .devrun/mpi4py-4.1.2-test.tgz -C /tmp/m4
COLLS=default NPS=2 LIMIT=110 ARGS="-v" timeout 125 bash tests/thirdparty/mpi4py-tests.sh /tmp/m4 "$new" /tmp/m4o2 cupy > /dev/null 2>&1
mkdir -p $out/np2 && cp -r /tmp/m4o2/logs /tmp/m4o2/summary.txt $out/np2/; st "np2"
l=$(left); lim=$(( l - 15 ))
COLLS=default NPS=4 LIMIT=$lim ARGS="-v" timeout $(( lim + 10 )) bash tests/thirdparty/mpi4py-tests.sh /tmp/m4 "$new" /tmp/m4o4 cupy > /dev/null 2>&1
mkdir -p $out/np4 && cp -r /tmp/m4o4/logs /tmp/m4o4/summary.txt $out/np4/; st "np4"
cat $out/stamps.txt $out/np*/summary.txt
for f in $out/np*/logs/*/rank.*.txt; do echo "== $f: $(grep -ac ' ok$' $f) ok"; grep -aE '\.\.\. (ERROR|FAIL)|^(Ran|OK|FAILED)' $f | head -8; tail -2 $f; done
