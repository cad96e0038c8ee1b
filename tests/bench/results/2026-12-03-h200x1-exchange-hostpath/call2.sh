#!/bin/bash
# Call 2 (was call 1): build HEAD and 62d0365; host-path cost with variants that each remove one suspect;
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
mkvar pass coll_gpu_allreduce.c '    /* an intercommunicator: every rank stages its own buffers (no team spans the two groups,' '    return m->prev_allreduce.fn(sbuf, rbuf, count, dtype, op, comm, m->prev_allreduce.module);
    /* an intercommunicator: every rank stages its own buffers (no team spans the two groups,' > "$out/var.txt" 2>&1
mkvar noclass coll_gpu.h 'if (MPI_IN_PLACE == ptr || NULL == ptr || !mca_coll_gpu_component.dev_opened) {' 'if (1) {' >> "$out/var.txt" 2>&1
ls /tmp/var-*/built >> "$out/var.txt" 2>&1
wait $bo
st "old and variants built"
oldb=$(echo /tmp/dr-old/coll-gpu-*/b)
pk=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
wait $tbp
st "tests built"
export top_builddir=$build top_srcdir=$src
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
run1() {
    local label=$1 b=$2 dev=${3:-cuda} p c
    if [ "$b" = - ]; then p=$pk; c=tuned,basic,libnbc; else p=$b/mca-coll-gpu/component:$pk; c=gpu,tuned,basic,libnbc; fi
    echo "$label $(env OMPI_MCA_mca_base_component_path=$p OMPI_MCA_coll=$c OMPI_MCA_coll_gpu_device=$dev timeout 30 mpirun -np 2 --bind-to core $build/tests/coll_gpu_hostpath_bench 2>&1 | grep ^hostpath)"
}
for b in $oldb $build; do
  echo "==== verbose 100, $b"
  env OMPI_MCA_mca_base_component_path=$b/mca-coll-gpu/component:$pk OMPI_MCA_coll=gpu,tuned,basic,libnbc OMPI_MCA_coll_gpu_device=cuda OMPI_MCA_coll_gpu_verbose=100 OMPI_MCA_coll_base_verbose=20 timeout 30 mpirun -np 2 --bind-to core $build/tests/coll_gpu_hostpath_bench -b 1 -k 1 -w 0 2>&1 | head -150
done > "$out/verbose.txt" 2>&1
for r in $(seq 1 ${ROUNDS:-7}); do
    run1 stock -
    run1 old62 "$oldb"
    run1 new "$build"
    run1 pass $(echo /tmp/var-pass/coll-gpu-*/b)
    run1 noclass $(echo /tmp/var-noclass/coll-gpu-*/b)
    run1 old62-emul "$oldb" emulated
    run1 new-emul "$build" emulated
done > "$out/hostcost.txt" 2>&1
st "hostcost"
