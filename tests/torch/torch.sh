#!/bin/sh
# torch.sh - the collgpu torch backend (python/) on CPU tensors: pip-installed from the source
# tree into a folder of its own, then test_collgpu_torch.py under mpirun with coll/gpu loaded
# (the emulated device), at 2 and 4 ranks: every collective x dtype x op against an exact
# reference and against gloo, the errors it must raise, async_op, coalescing, point to point,
# subgroups, and DDP training equal to one process on the whole batch.  Skips where python3 has
# no torch with torch.distributed (Debian 12 has none; CI's Open MPI 5.0 leg, Debian 13, has
# python3-torch).  COLL_GPU_TORCH_DEVICE=cuda runs the same on CUDA tensors (the GPU machine).
. "$(dirname "$0")/../mpi/mpitest.sh"
py=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/coll_gpu_torch.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1 # not the build tree, whose tests/torch folder python would take for torch
why=$("$py" -c 'import torch, torch.distributed as d; assert d.is_available(), "no torch.distributed"' 2>&1 | tail -1)
if [ -n "$why" ] || ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "1..0 # SKIP no torch with torch.distributed for $py (${why:-not found})"
    exit 0
fi
if ! "$py" -m pip --version >/dev/null 2>&1; then
    echo "1..1"
    echo "not ok 1 - torch is here but pip is not: the backend is installed with pip"
    exit 1
fi
# the user's way: pip install of the checkout's python/ (no build isolation: nothing to fetch)
brk=
"$py" -m pip install --help 2>/dev/null | grep -q -- --break-system-packages && brk=--break-system-packages
cp -r "$top_srcdir/python" "$work/src"
"$py" -m pip install --no-build-isolation --no-deps $brk --target "$work/site" "$work/src" \
    >"$work/pip.log" 2>&1
t_ok $? "pip install of python/ builds libcollgpu_torch.so and installs collgpu_torch"
[ -f "$work/site/collgpu_torch/libcollgpu_torch.so" ] || { t_diag "$work/pip.log"; t_done; exit 1; }
export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
# every case's line out before a crash, and Python's traceback of one
export PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
dev=${COLL_GPU_TORCH_DEVICE:-cpu}
for np in 2 4; do
    out=$work/run$np.out
    "$RUN_MPI" "$np" "$py" "$top_srcdir/tests/torch/test_collgpu_torch.py" all --device "$dev" \
        >"$out" 2>&1
    rc=$?
    n=$(grep -c '^ok ' "$out")
    bad=$(grep -c '^not ok ' "$out")
    plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$out" | head -1)
    [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ] && [ -n "$plan" ] && [ "$n" -eq "$plan" ]
    t_ok $? "$np ranks, $dev tensors: $n of ${plan:-?} cases right ($(grep -m1 '^# gloo' "$out" | sed 's/^# //')), exit $rc"
    { [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ]; } || {
        grep '^not ok' "$out" | head -20 | sed 's/^/#   /'
        grep '^ok ' "$out" | tail -1 | sed 's/^/#   the last case right: /'
        grep -E '^(Fatal Python error|Current thread|  File )' "$out" | head -12 | sed 's/^/#   /'
        t_diag "$out" 25; }
done
# FSDP2 (fully_shard, bf16 mixed precision) against DDP: on CUDA tensors (torch 2.6's FSDP2 cannot
# run on CPU tensors: its CPU stream has no record_event)
if [ "$dev" = cuda ]; then
    out=$work/fsdp2.out
    "$RUN_MPI" 2 "$py" "$top_srcdir/tests/torch/test_fsdp2.py" >"$out" 2>&1
    rc=$?
    grep -q '^ok 1 ' "$out" && [ "$rc" -eq 0 ]
    t_ok $? "FSDP2 on 2 ranks: $(sed -n 's/^\(not \)\{0,1\}ok 1 - //p' "$out" | head -1) (exit $rc)"
    grep '^# ' "$out" | sed 's/^/#   /'
    [ "$rc" -eq 0 ] || t_diag "$out" 30
fi
t_done
