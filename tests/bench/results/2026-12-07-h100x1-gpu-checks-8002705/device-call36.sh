#!/bin/bash
# Call 36: 8002705 on cuda: OSU 7.4's collectives with validation on device buffers
# (tests/thirdparty/osu-coll.sh cuda, 2 and 4 ranks, default coll list), then every GPU check
# (GPUTEST_SH) in the time left.  Results are packed into OUT/all.tgz after every phase.
set -u
cd "$(dirname "$0")/.."
OUTF=${OUT:-/tmp/out}; mkdir -p "$OUTF"
out=/tmp/c34; rm -rf $out; mkdir -p $out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
t0=$(date +%s); END=${END:-500}
st() { echo "$* at $(( $(date +%s) - t0 )) s" >> "$out/stamps.txt"; pack; }
pack() { (cd $out && tar czf /tmp/all.tgz .) && cp /tmp/all.tgz "$OUTF/all.tgz"; cp $out/stamps.txt $out/keep-*.txt "$OUTF/" 2>/dev/null; }
rm -rf /tmp/osusrc /tmp/osuout && mkdir -p /tmp/osusrc /tmp/osuout && tar xzf .devrun/osu.tar.gz -C /tmp/osusrc
(o=/tmp/osuout/osu; cp -a /tmp/osusrc/osu-7.4 $o && cd $o && call="cudaMemPrefetchAsync(buf, length" && sed -i "s/$call, devid, um_stream)/$call, (struct cudaMemLocation){cudaMemLocationTypeDevice, devid}, 0, um_stream)/" c/util/osu_util_mpi.c && ./configure CC=mpicc CXX=mpicxx --enable-cuda --with-cuda-include=/usr/local/cuda/include --with-cuda-libpath=/usr/local/cuda/lib64 > $out/osu-configure.txt 2>&1 && make -C c/mpi/collective -j8 > $out/osu-make.txt 2>&1; echo "osu built rc=$? at $(( $(date +%s) - t0 )) s" >> $out/stamps.txt) &
rm -rf /tmp/dr-new
OUT=$out/dr-new WORK=/tmp/dr-new STEPS="build" COMMIT=${COMMIT:-8002705} timeout 200 bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz >/dev/null 2>&1; st "build new rc=$?"
wait
new=$(echo /tmp/dr-new/coll-gpu-*/b)
[ -d "$new" ] || { echo "no build"; tail -30 $out/dr-new/*; exit 3; }
nvidia-smi -L > "$out/machine.txt"; ompi_info | grep -E "Open MPI:" >> "$out/machine.txt"
left=$(( ${CEND:-360} - ($(date +%s) - t0) ))
[ -n "${GT:-}" ] || GT='$(GPUTEST_SH)'
OUT=$out/check WORK=/tmp/dr-new STEPS="check" COMMIT=${COMMIT:-8002705} CHECK_TIMEOUT=$((left - 15)) GPU_TESTS="$GT" timeout $left bash tests/gpu/device-run.sh .devrun/coll-gpu-new.tar.gz >/dev/null 2>&1; rc=$?
grep -aE "^# (TOTAL|PASS|SKIP|FAIL|ERROR)|make check rc|^(FAIL|ERROR)" $out/check/check.txt > $out/keep-check.txt
st "gpu checks rc=$rc"
[ "${ODL:-200}" -gt 0 ] && NPS="${ONPS:-2 4}" COLLS=default JOBS=4 LIMIT=60 DEADLINE=$(( END - ($(date +%s) - t0) - 20 )) bash tests/thirdparty/osu-coll.sh /tmp/osusrc/osu-7.4 $new /tmp/osuout cuda > /dev/null 2>&1
mkdir -p $out/osu && cp /tmp/osuout/summary.txt $out/osu/ 2>/dev/null && cp -r /tmp/osuout/logs $out/osu/
grep -v "^PASS" /tmp/osuout/summary.txt > $out/keep-osu.txt 2>/dev/null
st "osu rc=$?"
cat $out/stamps.txt $out/keep-*.txt | tail -60
