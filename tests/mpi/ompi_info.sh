#!/bin/sh
# ompi_info.sh - Open MPI finds the component in the build tree and lists its parameters:
# `ompi_info` shows "MCA coll: gpu", and `ompi_info --param coll gpu --level 9` shows
# coll_gpu_priority, coll_gpu_verbose and coll_gpu_device.
. "$(dirname "$0")/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_ompi_info.$$
trap 'rm -f "$out" "$out.param"' EXIT

"$RUN_MPI" --exec ompi_info >"$out" 2>&1
rc=$?
t_ok "$rc" "ompi_info exits 0"
grep -q 'MCA coll: gpu' "$out"
found=$?
t_ok "$found" "ompi_info lists 'MCA coll: gpu'"
[ "$found" -eq 0 ] || { grep 'MCA coll' "$out" | t_diag /dev/stdin; }

"$RUN_MPI" --exec ompi_info --param coll gpu --level 9 >"$out.param" 2>&1
t_ok $? "ompi_info --param coll gpu --level 9 exits 0"
for p in coll_gpu_priority coll_gpu_verbose coll_gpu_device; do
    grep -q "MCA coll gpu: parameter \"$p\"" "$out.param"
    rc=$?
    t_ok "$rc" "ompi_info --param coll gpu --level 9 shows $p"
    [ "$rc" -eq 0 ] || t_diag "$out.param" 10
done
t_done
