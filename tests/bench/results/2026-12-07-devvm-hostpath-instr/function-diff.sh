#!/bin/bash
# function-diff.sh BUILDDIR: rank 0's instructions per host-buffer MPI_Allreduce (8 B, 2 ranks),
# function by function, without coll/gpu (tuned,basic,libnbc) and with it: callgrind runs of
# 20 x 500 and 20 x 1500 calls each, the difference divided by the 20,000 calls between them.
# Functions that spin on the peer (opal_progress, the btl's progress) move with the timing;
# every other function should be unchanged but coll/gpu's own.
b=$(cd "$1" && pwd); tmp=$(mktemp -d)
pk=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)
for c in stock gpu; do
  coll=tuned,basic,libnbc; [ $c = gpu ] && coll=gpu,tuned,basic,libnbc
  for k in 500 1500; do
    OMPI_MCA_mca_base_component_path=$b/mca-coll-gpu/component:$pk OMPI_MCA_coll=$coll \
    OMPI_MCA_coll_gpu_device=emulated OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx \
    OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 300 mpirun --allow-run-as-root \
      --oversubscribe -np 2 valgrind --tool=callgrind \
      --callgrind-out-file=$tmp/$c.$k.%q{OMPI_COMM_WORLD_RANK} \
      $b/tests/coll_gpu_hostpath_bench -b 20 -k $k -w 100 > /dev/null 2>&1
  done
done
python3 - "$tmp" <<'PY'
import collections, re, subprocess, sys
def per_fn(f):
    out = subprocess.run(['callgrind_annotate', '--inclusive=no', '--threshold=100', f],
                         capture_output=True, text=True).stdout
    d = collections.Counter()
    for l in out.split('\n'):
        m = re.match(r'^\s*([0-9,]+) \(\s*[0-9.]+%\)\s+(\S+)', l)
        if m and '=>' not in l and not m.group(2).startswith('<'):
            d[m.group(2).split(':')[-1]] += int(m.group(1).replace(',', ''))
    return d
t = sys.argv[1]
res = {}
for c in ('stock', 'gpu'):
    a, b = per_fn(f'{t}/{c}.500.0'), per_fn(f'{t}/{c}.1500.0')
    res[c] = {k: (b[k] - a.get(k, 0)) / 20000 for k in set(a) | set(b)}
keys = sorted(set(res['stock']) | set(res['gpu']),
              key=lambda k: -abs(res['gpu'].get(k, 0) - res['stock'].get(k, 0)))
print(f"{'function (per call, rank 0)':50s} {'stock':>9s} {'gpu':>9s} {'gpu-stock':>10s}")
for k in keys[:25]:
    s, g = res['stock'].get(k, 0), res['gpu'].get(k, 0)
    print(f"{k[:50]:50s} {s:9.1f} {g:9.1f} {g - s:+10.1f}")
PY
rm -rf "$tmp"
