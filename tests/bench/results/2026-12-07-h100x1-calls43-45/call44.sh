#!/bin/bash
# Call 44: c43 again on a1732ff (mpi4py CuPy fill patch; torch bench guard), mpi4py first.
# Call 43: c42's content on the tarball of 52773d4, plus: torch_bench of 2cc8b0a's package and
# 52773d4's alternating (cg_allreduce_synced), allgather in place against the copy floor.
# (c42, kept for reference:) the tarball of 1883ecd (make dist) on cuda:
#   1. torch.sh on CUDA tensors (the op cache fixed), torch_bench --breakdown (issue 21 item 6)
#   2. mpi4py's suite with CuPy arrays, 2 ranks, default coll list, -v -f: which test failed on
#      one rank and left the other waiting in MPI_Bcast (call 39)
#   3. GPU checks call 35 had no time for, each under its own timeout, with the time left.
# Results packed into OUT/all.tgz after every phase.  Env: END (seconds).
set -u
cd "$(dirname "$0")/.."
OUTF=${OUT:-/tmp/out}; mkdir -p "$OUTF"
out=/tmp/c44; rm -rf $out; mkdir -p $out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
t0=$(date +%s); END=${END:-330}
st() { echo "$* at $(( $(date +%s) - t0 )) s" >> "$out/stamps.txt"; pack; }
pack() { (cd $out && tar czf /tmp/all.tgz .) && cp /tmp/all.tgz "$OUTF/all.tgz"; cp $out/keep-*.txt "$OUTF/" 2>/dev/null; }
left() { echo $(( END - ($(date +%s) - t0) )); }
rm -rf /tmp/dr-new
OUT=$out/dr-new WORK=/tmp/dr-new STEPS="build" COMMIT=${COMMIT:-new} timeout 200 bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz >/dev/null 2>&1; st "build new rc=$?"
new=$(echo /tmp/dr-new/coll-gpu-*/b); src=$(cd "$new/.." && pwd)
[ -d "$new" ] || { echo "no build"; tail -30 $out/dr-new/*; exit 3; }
(make -C $new/tests -j12 check TESTS= > "$out/tests-build.txt" 2>&1) &
nvidia-smi -L > "$out/machine.txt"; ompi_info | grep -E "Open MPI:" >> "$out/machine.txt"
export top_builddir=$new top_srcdir=$src
rm -rf /tmp/cgt-src /tmp/cgt-site; cp -r "$src/python" /tmp/cgt-src && python3 -m pip install --no-build-isolation --no-deps --target /tmp/cgt-site /tmp/cgt-src > "$out/pip.txt" 2>&1
rm -rf /tmp/old-src /tmp/cgt-old && mkdir -p /tmp/old-src && tar xzf .devrun/coll-gpu-2cc8b0a.tar.gz -C /tmp/old-src && python3 -m pip install --no-build-isolation --no-deps --target /tmp/cgt-old /tmp/old-src/coll-gpu-*/python > "$out/pip-old.txt" 2>&1
for round in 1 2 3; do for v in old new; do
  site=/tmp/cgt-site; [ $v = old ] && site=/tmp/cgt-old
  COLL_GPU_TEST_DEVICE=cuda PYTHONPATH=$site timeout 90 "$src/tests/run-mpi.sh" 2 python3 "$src/tests/bench/torch_bench.py" --device cuda --iters 200 --breakdown > "$out/torch-bench-$v-$round.txt" 2>&1
  grep -E "breakdown|^torch_bench" "$out/torch-bench-$v-$round.txt" | sed "s/^/$v $round: /" >> "$out/keep-torch-bench.txt"
done; st "torch bench round $round"; done

rm -rf /tmp/m4 /tmp/m4out && mkdir -p /tmp/m4 && tar xzf .devrun/mpi4py-4.1.2-test.tgz -C /tmp/m4
for cl in default gpu,tuned; do
  l=$(left); [ "$l" -gt 200 ] || break
  COLLS=$cl NPS="2" LIMIT=150 ARGS="-v" timeout 170 bash tests/thirdparty/mpi4py-tests.sh /tmp/m4 "$new" /tmp/m4out-${cl//,/-} cupy > /dev/null 2>&1
  mkdir -p $out/mpi4py-${cl//,/-} && cp -r /tmp/m4out-${cl//,/-}/logs /tmp/m4out-${cl//,/-}/summary.txt $out/mpi4py-${cl//,/-}/ 2>/dev/null
  st "mpi4py $cl np2"
done
for f in /tmp/m4out-*/logs/*/rank.*.txt; do echo "== $f"; grep -aE "FAIL|ERROR|Error|assert|Traceback" "$f" | head -20; tail -4 "$f"; done > $out/keep-mpi4py.txt 2>&1
st "mpi4py cupy -v -f"
wait
for t in kinds_sweep erroneous halfprec persistent pinned_pool; do
    l=$(left); [ "$l" -gt 30 ] || { echo "$t: not run (time)" >> $out/keep-check.txt; continue; }
    lim=$(( l - 15 )); [ $lim -gt 150 ] && lim=150
    (cd $new/tests && COLL_GPU_TEST_DEVICE=cuda timeout $lim sh $src/tests/gpu/${t}_cuda.sh > $out/$t.txt 2>&1; echo "rc=$?" >> $out/$t.txt)
    echo "$t: $(grep -c '^ok' $out/$t.txt) ok, $(grep -c '^not ok' $out/$t.txt) not ok, $(tail -1 $out/$t.txt)" >> $out/keep-check.txt
    grep '^not ok' $out/$t.txt | head -5 >> $out/keep-check.txt
    st "$t"
done
l=$(left)
if [ "$l" -gt 130 ]; then
  COLLS=default NPS="4" LIMIT=$(( l - 20 )) timeout $(( l - 10 )) bash tests/thirdparty/mpi4py-tests.sh /tmp/m4 "$new" /tmp/m4out-np4 cupy > /dev/null 2>&1
  mkdir -p $out/mpi4py-np4 && cp -r /tmp/m4out-np4/logs /tmp/m4out-np4/summary.txt $out/mpi4py-np4/ 2>/dev/null; st "mpi4py default np4"
fi
cat $out/mpi4py-*/summary.txt > $out/keep-mpi4py-summary.txt 2>/dev/null; pack
cat $out/stamps.txt $out/keep-check.txt $out/keep-torch.txt $out/keep-mpi4py-summary.txt | tail -60
grep -E "dist.all_reduce|one C call|_settle|through ctypes: " $out/keep-torch-bench.txt | tail -40
