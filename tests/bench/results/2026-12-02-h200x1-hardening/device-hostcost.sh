#!/bin/bash
set -u
cd "$(dirname "$0")/.."
repo=$PWD
out=${OUT:-/tmp/out}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
b1() { # name tarball
    [ -f /tmp/dr-$1/built ] && return 0
    rm -rf /tmp/dr-$1 && mkdir -p /tmp/dr-$1 && cd /tmp/dr-$1 && tar xzf "$2" && cd coll-gpu-* && mkdir -p b && cd b \
      && ../configure --enable-werror --with-cuda >configure.out 2>&1 && make -j8 >make.out 2>&1 && touch /tmp/dr-$1/built
}
date -u >"$out/stamps.txt"
rm -rf /tmp/dr-exp
( b1 new "$repo/.devrun/coll-gpu-new.tar.gz" && cd /tmp/dr-new/coll-gpu-*/b && make -C tests -j8 check TESTS= >tests.out 2>&1; echo "new rc=$?" ) >"$out/build.txt" 2>&1 &
( b1 old "$repo/.devrun/coll-gpu-old.tar.gz"; echo "old rc=$?" ) >>"$out/build-old.txt" 2>&1 &
( b1 exp "$repo/.devrun/coll-gpu-exp.tar.gz"; echo "exp rc=$?" ) >>"$out/build-exp.txt" 2>&1 &
wait
date -u >>"$out/stamps.txt"
newb=$(echo /tmp/dr-new/coll-gpu-*/b); oldb=$(echo /tmp/dr-old/coll-gpu-*/b); expb=$(echo /tmp/dr-exp/coll-gpu-*/b)
export top_builddir=$newb top_srcdir=$(cd $newb/.. && pwd)
OMPI_MCA_coll_gpu_verbose=5 OMPI_MCA_mca_base_component_path=$newb/mca-coll-gpu/component:$(ompi_info --parsable --path pkglibdir | cut -d: -f3-) OMPI_MCA_coll=gpu,tuned,basic,libnbc OMPI_MCA_coll_gpu_device=cuda timeout 60 mpirun -np 2 $newb/tests/coll_gpu_hostpath_bench >"$out/verbose.txt" 2>&1
date -u >>"$out/stamps.txt"
pk=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
run1() {
    local label=$1 b=$2 p c; shift 2
    if [ "$b" = - ]; then p=$pk; c=tuned,basic,libnbc; else p=$b/mca-coll-gpu/component:$pk; c=gpu,tuned,basic,libnbc; fi
    local x=; case $label in exp-at*) x="-x XX_AT=${label#exp-at}";; esac
    echo "$label $(env OMPI_MCA_mca_base_component_path=$p OMPI_MCA_coll=$c OMPI_MCA_coll_gpu_device=cuda "$@" timeout 60 mpirun -np 2 --bind-to core $x $newb/tests/coll_gpu_hostpath_bench 2>&1 | grep ^hostpath)"
}
for r in $(seq 1 ${ROUNDS:-8}); do
    run1 stock -
    run1 new "$newb"
    run1 exp-reordered "$expb"
    run1 old "$oldb"
done >"$out/hostcost.txt" 2>&1
date -u >>"$out/stamps.txt"
