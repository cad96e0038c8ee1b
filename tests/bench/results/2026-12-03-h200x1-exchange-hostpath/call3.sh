#!/bin/bash
# Call 3: entry cost in TSC cycles (old62, new, new without the publish or the typed classification); build HEAD and 62d0365; host-path cost with variants that each remove one suspect;
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
cat > /tmp/patch.py <<'PY'
import sys
# patch.py FILE A1 B1 [A2 B2 ...]: each A must occur; its first occurrence becomes B
p=sys.argv[1]; s=open(p).read()
for a,b in zip(sys.argv[2::2], sys.argv[3::2]):
    assert a in s, (p, a); s=s.replace(a,b,1)
open(p,'w').write(s)
PY
TSC_HDR='#include "coll_gpu.h"
#include <x86intrin.h>
#include <time.h>
static unsigned long long tsc_sum, tsc_n;
static unsigned tsc_ring[65536];
static int tsc_cmp(const void *a, const void *b) { unsigned x = *(const unsigned *) a, y = *(const unsigned *) b; return x < y ? -1 : x > y; }
#define TSC_END(t0) do { unsigned long long d_ = __rdtsc() - (t0); tsc_sum += d_; tsc_ring[tsc_n++ & 65535] = (unsigned) d_; } while (0)
static void __attribute__((destructor)) tsc_report(void)
{
    struct timespec a, b, d = {0, 20000000};
    unsigned long long c0, c1;
    size_t k = tsc_n < 65536 ? tsc_n : 65536;
    if (0 == tsc_n) return;
    clock_gettime(CLOCK_MONOTONIC, &a); c0 = __rdtsc(); nanosleep(&d, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b); c1 = __rdtsc();
    double ghz = (double) (c1 - c0) / ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec));
    qsort(tsc_ring, k, sizeof(unsigned), tsc_cmp);
    fprintf(stderr, "tsc-entry median %u cycles %.1f ns, p10 %.1f ns, p90 %.1f ns, mean %.1f ns, %llu calls\n", tsc_ring[k / 2], tsc_ring[k / 2] / ghz, tsc_ring[k / 10] / ghz, tsc_ring[9 * k / 10] / ghz, (double) tsc_sum / tsc_n / ghz, tsc_n);
}'
M='    mca_coll_gpu_module_t *m = (mca_coll_gpu_module_t *) module;'
T0="$M
    unsigned long long tsc0 = __rdtsc();"
mkv() { # name base-src-dir, then FILE A B [A B ...] [";" FILE A B ...]
    local name=$1 base=$2 d=/tmp/var-$1; shift 2
    rm -rf $d; mkdir -p $d; cp -a $base $d/; local vs=$(echo $d/coll-gpu-*)
    while [ $# -gt 0 ]; do
        local f=$1; shift; local args=()
        while [ $# -gt 0 ] && [ "$1" != ";" ]; do args+=("$1"); shift; done
        [ $# -gt 0 ] && shift
        python3 /tmp/patch.py "$vs/mca-coll-gpu/$f" "${args[@]}" || echo "PATCH FAILED $name $f"
    done
    make -C $vs/b/mca-coll-gpu -j4 > $d/make.out 2>&1 && touch $d/built || { echo "MAKE FAILED $name"; tail -20 $d/make.out; }
}
NEWHOT='    if (mca_coll_gpu_host_noted(m, host)) { /* the hot path: a note, no wait */'
NEWHOT_T="$NEWHOT
        TSC_END(tsc0);"
wait $bo
oldsrc=$(cd /tmp/dr-old/coll-gpu-*/ && pwd)
OLDHOT='        if (mca_coll_gpu_both_host(sdata, rdata)) {'
OLDHOT_T="$OLDHOT
            TSC_END(tsc0);"
{
mkv old62t $oldsrc coll_gpu_allreduce.c '#include "coll_gpu.h"' "$TSC_HDR" "$M" "$T0" "$OLDHOT" "$OLDHOT_T"
mkv newt $src coll_gpu_allreduce.c '#include "coll_gpu.h"' "$TSC_HDR" "$M" "$T0" "$NEWHOT" "$NEWHOT_T"
mkv newt_nopub $src coll_gpu_allreduce.c '#include "coll_gpu.h"' "$TSC_HDR" "$M" "$T0" "$NEWHOT" "$NEWHOT_T" ";" coll_gpu_kinds.c 'kinds_publish(m, ++m->kinds_seq, 0);' '++m->kinds_seq;'
mkv newt_cls $src coll_gpu_allreduce.c '#include "coll_gpu.h"' "$TSC_HDR" "$M" "$T0" "$NEWHOT" "$NEWHOT_T" 'host = mca_coll_gpu_data_host(sbuf, dtype, count) && mca_coll_gpu_data_host(rbuf, dtype, count);' 'host = mca_coll_gpu_is_host(mca_coll_gpu_classify(mca_coll_gpu_data_start(sbuf, dtype, count))) && mca_coll_gpu_is_host(mca_coll_gpu_classify(mca_coll_gpu_data_start(rbuf, dtype, count)));'
} > "$out/var.txt" 2>&1
ls /tmp/var-*/built >> "$out/var.txt" 2>&1
st "variants built"
pk=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
wait $tbp
export top_builddir=$build top_srcdir=$src
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
run1() {
    local label=$1 b=$2 dev=${3:-cuda} p c
    if [ "$b" = - ]; then p=$pk; c=tuned,basic,libnbc; else p=$b/mca-coll-gpu/component:$pk; c=gpu,tuned,basic,libnbc; fi
    env OMPI_MCA_mca_base_component_path=$p OMPI_MCA_coll=$c OMPI_MCA_coll_gpu_device=$dev OMPI_MCA_coll_gpu_verbose=5 timeout 30 mpirun -np 2 --bind-to core $build/tests/coll_gpu_hostpath_bench 2>&1 | grep -E "^hostpath|tsc-entry|classification:" | sed "s/^/$label /"
}
for r in 1 2 3; do
    run1 stock -
    for v in old62t newt newt_nopub newt_cls; do run1 $v $(echo /tmp/var-$v/coll-gpu-*/b); done
done > "$out/hostcost.txt" 2>&1
st "hostcost"
oldb=$(echo /tmp/dr-old/coll-gpu-*/b)
unset OMPI_MCA_btl OMPI_MCA_pml OMPI_MCA_osc OMPI_MCA_btl_vader_single_copy_mechanism
for r in 1 2 3 4; do
  for v in old new; do
    b=$build; [ $v = old ] && b=$oldb
    echo "== $v round $r"
    COLL_GPU_TEST_DEVICE=cuda top_builddir=$b timeout 40 $src/tests/run-mpi.sh 2 $build/tests/coll_gpu_bench -d cuda -c allreduce,bcast -t float -b 8 -e 8 -B mpi -n 2000 -w 100 -T 3 -F 2>&1 | grep -vE "^#   # device|^# device"
  done
done > "$out/device8.txt" 2>&1
st "device 8 B"
# issue 22: the exchange and the composed collectives against the copy floor and the staged path
tb22() { COLL_GPU_TEST_DEVICE=cuda timeout $1 $src/tests/run-mpi.sh $2 $build/tests/coll_gpu_bench -d cuda -K -t float -o sum -F "${@:3}" 2>&1 | grep -vE "^#   # device|^# device"; }
tb22 170 2 -C -c allreduce,allgather,allgatherv,alltoall,alltoallv,reduce_scatter_block -B mpi,staged -b 8 -e 64M -f 8 -n 10 -w 2 -T 1 > "$out/bench22-np2.txt"
st "bench22 np2"
tb22 120 2 -c allreduce,allgather,alltoall,reduce_scatter_block -B mpi -b 16M -e 256M -f 4 -n 10 -w 2 -T 1 > "$out/bench22-np2-big.txt"
st "bench22 np2 big"
left=$(( 580 - ($(date +%s) - t0) ))
[ $left -gt 30 ] && tb22 $left 4 -C -c allreduce,allgather,alltoall,reduce_scatter_block -B mpi -b 8 -e 64M -f 8 -n 5 -w 2 -T 1 > "$out/bench22-np4.txt"
st "bench22 np4"
