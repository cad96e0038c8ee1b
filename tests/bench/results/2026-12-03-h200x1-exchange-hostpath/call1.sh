#!/bin/bash
# Call 1: build HEAD and 62d0365; host-path cost with variants that each remove one suspect;
# device 8 B old vs new; exchange on cuda (tests, check-mode bench)
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
      && touch /tmp/dr-old/built
}
( build_old "$PWD/.devrun/coll-gpu-old62.tar.gz" > "$out/build-old.txt" 2>&1; echo "old rc=$?" >> "$out/build-old.txt" ) &
bo=$!
OUT=$out/dr WORK=/tmp/dr-new STEPS="build" COMMIT=${COMMIT:-new} timeout 300 bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz
st "build rc=$?"
build=$(echo /tmp/dr-new/coll-gpu-*/b); src=$(cd $build/.. && pwd)
( make -C $build/tests -j8 check TESTS= > "$out/tests-build.txt" 2>&1; echo "tests rc=$?" >> "$out/tests-build.txt" ) &
tbp=$!
# variants of the new build, each without one suspect of the host path
mkvar() { # name file python-replacement
    local d=/tmp/var-$1
    [ -f $d/built ] && return 0
    rm -rf $d; mkdir -p $d; cp -a $src $d/; local vs=$(echo $d/coll-gpu-*)
    python3 - "$vs/mca-coll-gpu/$2" "$3" "$4" <<'PY'
import sys
p,a,b=sys.argv[1:4]; s=open(p).read(); assert a in s, (p,a); open(p,'w').write(s.replace(a,b))
PY
    make -C $vs/b/mca-coll-gpu -j4 > $d/make.out 2>&1 && touch $d/built
}
mkvar nopub coll_gpu_kinds.c 'kinds_publish(m, ++m->kinds_seq, 0);' '++m->kinds_seq;' > "$out/var.txt" 2>&1
mkvar bss coll_gpu_kinds.c 'kinds_publish(m, ++m->kinds_seq, 0);' '{ static _Atomic uint64_t ring[COLL_GPU_KINDS_RING]; uint64_t u = ++m->kinds_seq; atomic_store_explicit(&ring[u % COLL_GPU_KINDS_RING], u << 8, memory_order_release); }' >> "$out/var.txt" 2>&1
mkvar cls coll_gpu_allreduce.c 'host = mca_coll_gpu_data_host(sbuf, dtype, count) && mca_coll_gpu_data_host(rbuf, dtype, count);' 'host = mca_coll_gpu_is_host(mca_coll_gpu_classify(mca_coll_gpu_data_start(sbuf, dtype, count))) && mca_coll_gpu_is_host(mca_coll_gpu_classify(mca_coll_gpu_data_start(rbuf, dtype, count)));' >> "$out/var.txt" 2>&1
ls /tmp/var-*/built >> "$out/var.txt" 2>&1
wait $bo
st "old and variants built"
oldb=$(echo /tmp/dr-old/coll-gpu-*/b)
pk=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
wait $tbp
st "tests built"
export top_builddir=$build top_srcdir=$src
for r in 1 2 3; do
  for v in old new; do
    b=$build; [ $v = old ] && b=$oldb
    echo "== $v round $r"
    COLL_GPU_TEST_DEVICE=cuda top_builddir=$b timeout 40 $src/tests/run-mpi.sh 2 $build/tests/coll_gpu_bench -d cuda -c allreduce,bcast -t float -b 8 -e 8 -B mpi -n 2000 -w 100 -T 3 -F 2>&1 | grep -vE "^#   # device|^# device"
  done
done > "$out/device8.txt" 2>&1
st "device 8 B"
( export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
run1() {
    local label=$1 b=$2 p c
    if [ "$b" = - ]; then p=$pk; c=tuned,basic,libnbc; else p=$b/mca-coll-gpu/component:$pk; c=gpu,tuned,basic,libnbc; fi
    echo "$label $(env OMPI_MCA_mca_base_component_path=$p OMPI_MCA_coll=$c OMPI_MCA_coll_gpu_device=cuda timeout 30 mpirun -np 2 --bind-to core $build/tests/coll_gpu_hostpath_bench 2>&1 | grep ^hostpath)"
}
for r in $(seq 1 ${ROUNDS:-7}); do
    run1 stock -
    run1 old62 "$oldb"
    run1 new "$build"
    for v in nopub bss cls; do run1 $v $(echo /tmp/var-$v/coll-gpu-*/b); done
done ) > "$out/hostcost.txt" 2>&1
st "hostcost"
COLL_GPU_TEST_DEVICE=cuda timeout 60 $src/tests/run-mpi.sh 2 $build/tests/coll_gpu_bench -d cuda -C -c allreduce,allgather -t float -b 8 -e 64M -f 8 -B mpi -n 20 -w 3 -T 1 > "$out/exchange-bench.txt" 2>&1
st "exchange bench rc=$?"
left=$(( 585 - ($(date +%s) - t0) ))
COLL_GPU_TEST_DEVICE=cuda timeout $left make -C $build/tests check TESTS="mpi/composed_team.sh gpu/erroneous_cuda.sh gpu/span_cuda.sh gpu/kinds_sweep_cuda.sh" > "$out/check.txt" 2>&1
st "check rc=$?"
for f in composed_team.log ../gpu/erroneous_cuda.log ../gpu/span_cuda.log ../gpu/kinds_sweep_cuda.log; do echo "---- $f"; grep -E "^(ok|not ok|1\.\.|#)" $build/tests/mpi/$f | head -60; done >> "$out/check.txt" 2>&1
