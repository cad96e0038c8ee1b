#!/bin/sh
# hier_direct_cuda.sh - the direct path across emulated nodes (coll_gpu_ucx_device_direct=1):
# the node leaders hand cudaMalloc chunks to UCX themselves, no host copies.  Needs a UCX that
# moves CUDA memory (configure --with-ucx=<unpacked libucx-cu13 wheel>; Debian's UCX cannot):
# skipped otherwise, and said why.  test_hier on 2 ranks (2 GPUs as 2 nodes) and 4 ranks (2 x 2):
# every case right, every leader's log line says "device memory straight to UCX".
# UCX_TLS is passed on when set (e.g. UCX_TLS=tcp,cuda_copy keeps the bytes off CUDA IPC).
. "$(dirname "$0")/gputest.sh"
if ! grep -q '^#define COLL_GPU_HAVE_UCX 1' "$top_builddir/coll_gpu_config.h" 2>/dev/null; then
    echo "1..0 # SKIP coll/gpu was built without UCX"
    exit 0
fi
out=${TMPDIR:-/tmp}/coll_gpu_hier_direct.$$
logs=${TMPDIR:-/tmp}/coll_gpu_hier_direct_logs.$$
trap 'rm -rf "$out" "$logs"' EXIT
: "${COLL_GPU_HIER_CHUNK:=1048576}"
xtls=
[ -n "${UCX_TLS:-}" ] && xtls="-x UCX_TLS"

for np in 2 4; do
    rm -rf "$logs"
    COLL_GPU_TEST_RANK_LOGS="$logs" COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 \
--mca coll_gpu_emulate_nodes 2 --mca coll_gpu_ucx_device_direct 1 --mca coll_gpu_hier_rail_min_bytes 0 \
--mca coll_gpu_ucx_chunk_bytes $COLL_GPU_HIER_CHUNK $xtls ${COLL_GPU_MPIRUN_ARGS:-}" \
        "$RUN_MPI" "$np" "$MPI_TESTS/test_hier" "$COLL_GPU_HIER_CHUNK" >"$out" 2>&1
    rc=$?
    # the ranks' log lines are in their own logs (COLL_GPU_TEST_RANK_LOGS), not in $out
    said=$(cat "$out" "$logs"/*/rank.*/stderr 2>/dev/null)
    if echo "$said" | grep -q 'CUDA memory not supported by UCX'; then
        echo "1..0 # SKIP this build's UCX does not move CUDA memory ($(echo "$said" | grep -o 'UCX [0-9.]*, UCX_TLS=[^,]*' | head -1)); configure --with-ucx=<libucx-cu13 wheel>"
        exit 0
    fi
    tap=$(grep -E '^(ok|not ok|1\.\.)' "$out")
    [ "$rc" -eq 0 ] && ! echo "$tap" | grep -q '^not ok' && echo "$tap" | grep -q '^1\.\.[1-9]'
    ok=$?
    t_ok "$ok" "$np ranks as 2 nodes, direct: every case right ($(echo "$tap" | grep -c '^ok') ok, exit $rc)"
    [ "$ok" -eq 0 ] || t_diag "$out" 40
    calls=$(( 2 * (36 + 3 * np) + 12 ))
    n=$(cat "$logs"/*/rank.*/stderr | grep -c 'leaders via UCX/[^ ]* .*device memory straight to UCX')
    [ "$n" -eq $(( 2 * calls )) ]
    t_ok $? "$np ranks as 2 nodes, direct: every leader moved device memory straight to UCX ($n of $(( 2 * calls )) lines)"
    grep -m1 'leaders via UCX' "$out" | sed 's/^/#   /'
done
t_done
