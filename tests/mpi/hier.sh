#!/bin/sh
# hier.sh - MPI_Allreduce, MPI_Bcast, MPI_Allgather and the reduce-scatters on device buffers
# across emulated nodes
# (coll_gpu_emulate_nodes): node teams inside each node, UCX between the node leaders
# (coll_gpu_hier.c, coll_gpu_ucx.c), UCX over shared memory or TCP on this host.
#
#   2 nodes x 2 ranks, 3 nodes of 2 + 1 + 1 ranks, 2 nodes of 2 + 1 and of 1 + 1 ranks (what
#     2 GPUs as 2 nodes are, gpu/hier_cuda.sh): test_hier right on
#     every case, and the verbose log shows the hierarchical path via UCX on every rank, and no
#     device allreduce or bcast staged instead;
#   2 x 2 again with coll_gpu_uniform_buffers=true (the default; run-mpi.sh sets false);
#   2 + 1 + 1 with the communicator's tag id different in every process
#   (COLL_GPU_TEST_CID_SKEW, as local cids may differ on Open MPI 5.0); and
#   with UCX_TLS=tcp: the leaders' traffic over TCP on loopback, the log naming tcp as UCX
#   reports it; and over TCP with 1 MiB chunks (rendezvous-sized messages): no descriptors kept
#   by communicators made and freed;
#   MPI_Reduce, MPI_Allgather(v) and the reduce-scatters (test_hier exchange) on
#     2 x 2, 2 + 1 + 1, 1 + 1 and 3 + 2, also with the nodes interleaved in the communicator:
#     right, every call hierarchical on every rank, the allgather's leaders via UCX, nothing
#     staged; and the allgather's fallback when a leader's UCX sends fail;
#   test_hier_threads: two threads in hierarchical calls on two communicators at once;
#   UCX_TLS naming no transport: the leaders cannot connect; the log says so once and every
#     case is still right (staged between the leaders);
#   coll_gpu_test_fail_ucx: one leader's UCX sends fail in the first call; it tells its peer,
#     which stops waiting; the fallback is logged and every case is right; and again without
#     the notice (coll_gpu_test_fail_ucx_silent), the peer giving up after
#     coll_gpu_ucx_timeout_seconds;
#   rails (coll_gpu_hier_rail_min_bytes 8, so that most cases are above it and some below):
#     2 nodes x 2 ranks (2 rails), 2 x 3 (3 rails), 3 + 2 (2 rails, a rank on none): test_hier
#     with its rail cases (uneven shards, shards smaller than one element, every rank's result
#     bitwise the same) right, and the log shows each call of 8 B or more on the rails (every
#     rank; every rail's rank via UCX) and every smaller one via the leaders; then 2 x 2 with
#     the UCX sends of a rail's rank failing: every rank of the communicator stages that call's
#     step between nodes, and every case is right.
# Skipped when coll/gpu was built without UCX.  COLL_GPU_HIER_CHUNK sets the pipeline chunk
# (default 4096 B; the cases' sizes follow it).
. "$(dirname "$0")/mpitest.sh"
# The leader path's runs take no rails: with the GPU run's 1 MiB chunks (gpu/hier_cuda.sh) most
# cases would reach the rails' 2 MiB default and log the rails instead of the leaders.  The
# rails' runs below set their threshold on the command line, which takes precedence.
OMPI_MCA_coll_gpu_hier_rail_min_bytes=0
export OMPI_MCA_coll_gpu_hier_rail_min_bytes
out=${TMPDIR:-/tmp}/coll_gpu_hier.$$
logs=${TMPDIR:-/tmp}/coll_gpu_hier_logs.$$
trap 'rm -rf "$out" "$logs"' EXIT
: "${COLL_GPU_HIER_CHUNK:=4096}"
# test_hier's rail threshold argument (set for the rails' runs only)
rail_arg=

if ! "$RUN_MPI" --exec ompi_info --param coll gpu --level 9 2>/dev/null \
        | grep -q 'coll_gpu_emulate_nodes'; then
    echo "1..0 # SKIP coll/gpu has no coll_gpu_emulate_nodes parameter"
    exit 0
fi
if ! grep -q '^#define COLL_GPU_HAVE_UCX 1' "$top_builddir/coll_gpu_config.h" 2>/dev/null; then
    echo "1..0 # SKIP coll/gpu was built without UCX"
    exit 0
fi

# run NP NODES LABEL [MPIRUN ARGS...]: test_hier under those settings, output in $out, and each
# rank's stderr apart under $logs (the log lines of different ranks may run together in $out)
run() {
    np=$1 nodes=$2 label=$3
    shift 3
    rm -rf "$logs"
    COLL_GPU_TEST_RANK_LOGS="$logs" COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 --mca coll_gpu_emulate_nodes $nodes \
--mca coll_gpu_ucx_chunk_bytes $COLL_GPU_HIER_CHUNK --mca coll_gpu_ucx_depth 3 $* \
${COLL_GPU_MPIRUN_ARGS:-}" "$RUN_MPI" "$np" "$MPI_TESTS/test_hier" "$COLL_GPU_HIER_CHUNK" \
        $rail_arg >"$out" 2>&1
    rc=$?
    t_ok "$rc" "$label: test_hier exits 0 (exit $rc)"
    # rank 0's TAP (the other ranks print none; their logs go to $logs: run-mpi.sh)
    tap=$(grep -E '^(ok|not ok|1\.\.)' "$out")
    ! echo "$tap" | grep -q '^not ok' && echo "$tap" | grep -q '^1\.\.[1-9]'
    ok=$?
    t_ok "$ok" "$label: every case matches the reference ($(echo "$tap" | grep -c '^ok') ok, \
$(echo "$tap" | grep -c '^not ok') not ok)"
    [ "$rc" -eq 0 ] && [ "$ok" -eq 0 ] || t_diag "$out" 40
}

# the number of log lines, over every rank's own log, of the hierarchical path via UCX, and of
# staged device calls
ranklogs() { cat "$logs"/*/rank.*/stderr 2>/dev/null; }
# mpirun's own output and every rank's log
alltext() { cat "$out"; ranklogs; }
# (the log names the transports UCX reports for the leaders' endpoints: "via UCX/tcp:lo,...")
via_ucx() { ranklogs | grep -c 'hierarchical: [0-9]* nodes, .*leaders via UCX/[a-z][^ ]*:[^ ]* (UCX '; }
staged() { ranklogs | grep -c 'coll:gpu:\(allreduce\|bcast\) .*-> staged'; }

# np nodes label
for cfg in "4 2 2x2" "4 3 2+1+1" "3 2 2+1" "2 2 1+1"; do
    set -- $cfg
    run "$1" "$2" "$3 ranks/nodes ($1 ranks, emulate_nodes=$2)"
    # every rank logs every call (2 communicators x (36 allreduce + 3 bcast per root), then 12
    # allreduce on communicators made and freed); every node leader (one per node) says how
    # the leaders exchanged
    calls=$(( 2 * (36 + 3 * $1) + 12 ))
    h=$(ranklogs | grep -c 'coll:gpu:.* -> hierarchical: '"$2"' nodes')
    n=$(via_ucx)
    s=$(staged)
    [ "$h" -eq $(( $1 * calls )) ]
    t_ok $? "$3: every rank logs the hierarchical path for every call ($h of $(( $1 * calls )) lines)"
    [ "$n" -eq $(( $2 * calls )) ]
    t_ok $? "$3: every node leader logs the exchange via UCX for every call ($n of $(( $2 * calls )) lines)"
    [ "$s" -eq 0 ]
    t_ok $? "$3: no device allreduce or bcast staged instead ($s lines)"
    [ "$h" -eq $(( $1 * calls )) ] && [ "$n" -eq $(( $2 * calls )) ] && [ "$s" -eq 0 ] \
        || ranklogs | grep 'coll:gpu:\(allreduce\|bcast\)' | head -3 | sed 's/^/#   /'
done

# MPI_Reduce, MPI_Allgather(v), MPI_Reduce_scatter_block and MPI_Reduce_scatter (test_hier's
# exchange mode, coll_gpu_hier_exchange.c) on 2 x 2, 2 + 1 + 1, 1 + 1 and 3 + 2, each also on a
# communicator
# whose nodes are not contiguous: every rank logs every call hierarchical, every leader the
# allgather(v)'s step via UCX, and no call of any collective is staged (the node steps are the
# node team's); then the allgather's fallback when a leader's UCX sends fail
rail_arg="0 exchange"
for cfg in "4 2 2x2" "4 3 2+1+1" "2 2 1+1" "5 2 3+2"; do
    set -- $cfg
    xnp=$1 xnodes=$2 xname=$3
    run "$xnp" "$xnodes" "allgather and reduce-scatters, $xname ranks/nodes ($xnp ranks, emulate_nodes=$xnodes)"
    calls=$(sed -n 's/^# exchange calls: //p' "$out")
    red=$(echo "$calls" | sed -n 's/.*reduce \([0-9]*\).*/\1/p')
    agv=$(echo "$calls" | sed -n 's/.*allgatherv \([0-9]*\).*/\1/p')
    ag=$(echo "$calls" | sed -n 's/.*allgather \([0-9]*\).*/\1/p')
    rsb=$(echo "$calls" | sed -n 's/.*reduce_scatter_block \([0-9]*\).*/\1/p')
    rs=$(echo "$calls" | sed -n 's/.*reduce_scatter \([0-9]*\)$/\1/p')
    : "${red:=0}" "${agv:=0}" "${ag:=0}" "${rsb:=0}" "${rs:=0}"
    bad=
    for c in "reduce $red" "allgatherv $agv" "allgather $ag" "reduce_scatter_block $rsb" "reduce_scatter $rs"; do
        set -- $c
        h=$(ranklogs | grep -c "coll:gpu:$1 (cid [0-9]*): .* -> hierarchical: $xnodes nodes, ")
        [ "$2" -gt 0 ] && [ "$h" -eq $(( xnp * $2 )) ] || bad="$bad $1: $h of $(( xnp * $2 )) lines;"
    done
    [ -z "$bad" ]
    t_ok $? "exchange, $xname: every rank logs every reduce, allgatherv, allgather, reduce_scatter_block and reduce_scatter hierarchical (${bad:-$red, $agv, $ag, $rsb and $rs calls})"
    n=$(ranklogs | grep -c "coll:gpu:allgather (cid [0-9]*): .* -> hierarchical: $xnodes nodes, .*leaders via UCX/[a-z][^ ]*:[^ ]* (UCX ")
    [ "$n" -eq $(( xnodes * ag )) ]
    t_ok $? "exchange, $xname: every node leader logs the allgather's step via UCX ($n of $(( xnodes * ag )) lines)"
    n=$(ranklogs | grep -c "coll:gpu:allgatherv (cid [0-9]*): .* -> hierarchical: $xnodes nodes, .*leaders via UCX/[a-z][^ ]*:[^ ]* (UCX ")
    [ "$n" -eq $(( xnodes * agv )) ]
    t_ok $? "exchange, $xname: every node leader logs the allgatherv's step via UCX ($n of $(( xnodes * agv )) lines)"
    s=$(ranklogs | grep -c 'coll:gpu:[a-z_]* (cid [0-9]*): .*-> staged')
    [ "$s" -eq 0 ]
    t_ok $? "exchange, $xname: no call of any collective staged ($s lines)"
    [ "$s" -eq 0 ] || ranklogs | grep 'coll:gpu:[a-z_]* (cid [0-9]*): .*-> staged' | head -3 \
        | sed 's/^/#   /'
done
# world rank 0 leads node 0, the root of the allgather's first chain: its UCX sends fail there
run 4 2 "exchange, coll_gpu_test_fail_ucx=0" --mca coll_gpu_test_fail_ucx 0
alltext | grep -q 'coll:gpu:allgather (cid 0): the UCX transfer between node leaders failed'
t_ok $? "exchange, coll_gpu_test_fail_ucx: the allgather's fallback is logged"
n=$(alltext | grep -c "coll:gpu:allgather (cid 0): rank [0-9]*: leaders' step staged through Open MPI's point-to-point layer (fallback)")
[ "$n" -eq 2 ]
t_ok $? "exchange, coll_gpu_test_fail_ucx: both leaders redid the allgather's step through the point-to-point layer ($n)"
rail_arg=

# the default coll_gpu_uniform_buffers=true (run-mpi.sh sets false: the runs above agree on
# the buffers' kind first)
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
run 4 2 "2x2 with coll_gpu_uniform_buffers=true"
unset COLL_GPU_TEST_UNIFORM
n=$(via_ucx)
[ "$n" -eq $(( 2 * (2 * (36 + 3 * 4) + 12) )) ]
t_ok $? "coll_gpu_uniform_buffers=true: every node leader logs the exchange via UCX ($n lines)"

# the communicator's id differing between processes, as the local cids of sessions-made
# communicators may on Open MPI 5.0 (COLL_GPU_TEST_CID_SKEW): every message must carry its
# receiver's id, or no transfer matches and every call falls back; 3 nodes, so that the middle
# leader sends both ways
COLL_GPU_TEST_CID_SKEW=1
export COLL_GPU_TEST_CID_SKEW
run 4 3 "2+1+1 with an id per process in the tags"
unset COLL_GPU_TEST_CID_SKEW
n=$(via_ucx)
s=$(staged)
[ "$n" -eq $(( 3 * (2 * (36 + 3 * 4) + 12) )) ] && [ "$s" -eq 0 ]
t_ok $? "an id per process in the tags: every node leader logs the exchange via UCX for every call ($n of $(( 3 * (2 * (36 + 3 * 4) + 12) )) lines), none staged ($s)"

# the same over TCP on loopback only (UCX's shared-memory transports left out)
UCX_TLS=tcp
export UCX_TLS
run 4 2 "UCX_TLS=tcp, 2x2" -x UCX_TLS
unset UCX_TLS
n=$(ranklogs | grep -c 'hierarchical: 2 nodes, .*leaders via UCX/tcp:[^ ]* (UCX [0-9.]*, UCX_TLS=tcp,')
[ "$n" -eq $(( 2 * (2 * (36 + 3 * 4) + 12) )) ]
t_ok $? "UCX_TLS=tcp: every node leader logs the exchange via UCX over tcp, as UCX reports its transports, for every call ($n lines)"
o=$(ranklogs | grep 'leaders via UCX' | grep -v 'leaders via UCX/tcp:[^ ,]*\(,tcp:[^ ,]*\)* (' \
    | head -1)
[ -z "$o" ]
t_ok $? "UCX_TLS=tcp: no call names another transport${o:+ (\"$o\")}"

# TCP again with chunks of 1 MiB (unless they are that big already): rendezvous-sized messages,
# after which a closed endpoint left two sockets open for each communicator made and freed
# (test_hier's last case counts the descriptors)
if [ "$COLL_GPU_HIER_CHUNK" -lt 1048576 ]; then
    UCX_TLS=tcp
    export UCX_TLS
    small_chunk=$COLL_GPU_HIER_CHUNK
    COLL_GPU_HIER_CHUNK=1048576
    run 4 2 "UCX_TLS=tcp, 2x2, 1 MiB chunks" -x UCX_TLS
    COLL_GPU_HIER_CHUNK=$small_chunk
    unset UCX_TLS
fi

# two threads, each with its own communicator, in hierarchical calls at the same time
# (MPI_THREAD_MULTIPLE): the leaders' messages of the two must not mix
rm -rf "$logs"
COLL_GPU_TEST_RANK_LOGS="$logs" COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 --mca coll_gpu_emulate_nodes 2 \
--mca coll_gpu_ucx_chunk_bytes $COLL_GPU_HIER_CHUNK ${COLL_GPU_MPIRUN_ARGS:-}" \
    "$RUN_MPI" 4 "$MPI_TESTS/test_hier_threads" "$COLL_GPU_HIER_CHUNK" >"$out" 2>&1
rc=$?
why=$(t_skipped "$out")
if [ "$rc" -eq 0 ] && [ -n "$why" ]; then
    t_skip "two threads on two communicators" "$why"
else
    tap=$(grep -E '^(ok|not ok|1\.\.)' "$out")
    [ "$rc" -eq 0 ] && ! echo "$tap" | grep -q '^not ok' && echo "$tap" | grep -q '^1\.\.2$'
    ok=$?
    t_ok "$ok" "two threads on two communicators: both threads' results right (exit $rc)"
    [ "$ok" -eq 0 ] || t_diag "$out" 30
    n=$(ranklogs | grep 'leaders via UCX' | grep -o '(cid [0-9]*)' | sort -u | wc -l)
    [ "$n" -eq 2 ]
    t_ok $? "two threads on two communicators: both went via UCX ($n communicators in the log)"
fi

# UCX that cannot connect: no transport by that name
UCX_TLS=no_such_transport
export UCX_TLS
run 4 2 "UCX_TLS=no_such_transport" -x UCX_TLS
unset UCX_TLS
alltext | grep -q 'UCX connection between the 2 nodes could not be set up'
t_ok $? "UCX_TLS=no_such_transport: the failed setup is logged"
n=$(via_ucx)
[ "$n" -eq 0 ]
t_ok $? "UCX_TLS=no_such_transport: no call claims the UCX path ($n lines)"

# a leader's UCX sends fail in its first call (world rank 2 leads the second node of world):
# it tells the other leader, who stops waiting (no timeout set: without the notice it would
# wait for ever); then the same failure without the notice, ended by the timeout
run 4 2 "coll_gpu_test_fail_ucx=2" --mca coll_gpu_test_fail_ucx 2
alltext | grep -q 'the UCX transfer between node leaders failed'
t_ok $? "coll_gpu_test_fail_ucx: the fallback is logged"
alltext | grep -q "another leader's UCX transfers failed"
t_ok $? "coll_gpu_test_fail_ucx: the other leader stopped waiting on the failing one's notice"
alltext | grep -q 'leaders. step staged through Open MPI.s point-to-point layer (fallback)'
t_ok $? "coll_gpu_test_fail_ucx: the failed call was redone through the point-to-point layer"
run 4 2 "coll_gpu_test_fail_ucx=2, silent, 2 s timeout" --mca coll_gpu_test_fail_ucx 2 \
    --mca coll_gpu_test_fail_ucx_silent 1 --mca coll_gpu_ucx_timeout_seconds 2
alltext | grep -q 'no UCX progress for 2 s'
t_ok $? "coll_gpu_test_fail_ucx_silent: the other leader gave up after the timeout"
alltext | grep -q 'leaders. step staged through Open MPI.s point-to-point layer (fallback)'
t_ok $? "coll_gpu_test_fail_ucx_silent: the failed call was redone through the point-to-point layer"

# rails: every allreduce of 8 B or more (test_hier says how many calls those were)
rail_arg=8
# np nodes rails label
for cfg in "4 2 2 2x2" "6 2 3 2x3" "5 2 2 3+2"; do
    set -- $cfg
    run "$1" "$2" "rails, $4 ranks/nodes ($1 ranks, emulate_nodes=$2)" \
        --mca coll_gpu_hier_rail_min_bytes $rail_arg
    big=$(sed -n 's/^# rail-sized allreduce calls: \([0-9]*\) of \([0-9]*\).*/\1/p' "$out")
    all=$(sed -n 's/^# rail-sized allreduce calls: \([0-9]*\) of \([0-9]*\).*/\2/p' "$out")
    : "${big:=0}" "${all:=0}"
    [ "$big" -gt 0 ] && [ "$big" -lt "$all" ]
    t_ok $? "rails, $4: calls above and below the threshold ($big of $all allreduce calls of 8 B or more)"
    # every call: the allreduces and 3 bcasts per root on 2 communicators
    calls=$(( all + 2 * 3 * $1 ))
    h=$(ranklogs | grep -c 'coll:gpu:.* -> hierarchical: '"$2"' nodes')
    r=$(ranklogs | grep -c 'coll:gpu:allreduce .* -> hierarchical: '"$2"' nodes, .*, '"$3"' rails, ')
    n=$(via_ucx)
    s=$(staged)
    [ "$h" -eq $(( $1 * calls )) ]
    t_ok $? "rails, $4: every rank logs the hierarchical path for every call ($h of $(( $1 * calls )) lines)"
    [ "$r" -eq $(( $1 * big )) ]
    t_ok $? "rails, $4: every rank logs $3 rails for every call of 8 B or more ($r of $(( $1 * big )) lines)"
    bad=
    for rail in $(seq 0 $(( $3 - 1 ))); do
        m=$(ranklogs | grep -c ", $3 rails, shard of rail $rail via UCX")
        [ "$m" -eq $(( $2 * big )) ] || bad="$bad rail $rail: $m lines;"
    done
    m=$(ranklogs | grep -c ", $3 rails, node rank [0-9]* on no rail")
    [ "$m" -eq $(( ($1 - $2 * $3) * big )) ] || bad="$bad on no rail: $m lines;"
    [ -z "$bad" ]
    t_ok $? "rails, $4: the rank of every rail on every node logs its shard via UCX, the others no rail (${bad:-as expected})"
    [ "$n" -eq $(( $2 * (calls - big) )) ]
    t_ok $? "rails, $4: every node leader logs the leaders' exchange via UCX for every smaller call ($n of $(( $2 * (calls - big) )) lines)"
    [ "$s" -eq 0 ]
    t_ok $? "rails, $4: no device allreduce or bcast staged instead ($s lines)"
done

# two threads, each with its own communicator, on the rails at the same time
rm -rf "$logs"
COLL_GPU_TEST_RANK_LOGS="$logs" COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_verbose 10 --mca coll_gpu_emulate_nodes 2 \
--mca coll_gpu_ucx_chunk_bytes $COLL_GPU_HIER_CHUNK --mca coll_gpu_hier_rail_min_bytes $rail_arg \
${COLL_GPU_MPIRUN_ARGS:-}" "$RUN_MPI" 4 "$MPI_TESTS/test_hier_threads" "$COLL_GPU_HIER_CHUNK" \
    >"$out" 2>&1
rc=$?
why=$(t_skipped "$out")
if [ "$rc" -eq 0 ] && [ -n "$why" ]; then
    t_skip "rails, two threads on two communicators" "$why"
else
    tap=$(grep -E '^(ok|not ok|1\.\.)' "$out")
    [ "$rc" -eq 0 ] && ! echo "$tap" | grep -q '^not ok' && echo "$tap" | grep -q '^1\.\.2$'
    ok=$?
    t_ok "$ok" "rails, two threads on two communicators: both threads' results right (exit $rc)"
    [ "$ok" -eq 0 ] || t_diag "$out" 30
    n=$(ranklogs | grep '2 rails, shard of rail 1 via UCX' | grep -o '(cid [0-9]*)' | sort -u | wc -l)
    [ "$n" -eq 2 ]
    t_ok $? "rails, two threads on two communicators: both allreduced on the rails via UCX ($n communicators in the log)"
fi

# the UCX sends of world rank 3 fail in its first chain on each communicator: on the world
# communicator it is node 1's rank 1, on rail 1 (its first chain is the first call of 8 B or
# more); it tells rail 1's other rank; every rank of the communicator, rail 0's too, redoes
# that call's step between nodes through the point-to-point layer
run 4 2 "rails, coll_gpu_test_fail_ucx=3" --mca coll_gpu_hier_rail_min_bytes $rail_arg \
    --mca coll_gpu_test_fail_ucx 3
alltext | grep -q 'the UCX transfer between the ranks of a rail failed'
t_ok $? "rails, coll_gpu_test_fail_ucx: the fallback is logged"
alltext | grep -q "another rank of the rail's UCX transfers failed"
t_ok $? "rails, coll_gpu_test_fail_ucx: the other rank of the rail stopped waiting on the failing one's notice"
bad=
for rank in 0 1 2 3; do
    case $rank in 0 | 2) chain="leaders." ;; *) chain="rail.s" ;; esac
    grep -q "coll:gpu:allreduce (cid 0): rank $rank: $chain step staged through Open MPI.s point-to-point layer (fallback)" \
        "$logs"/*/rank.$rank/stderr 2>/dev/null || bad="$bad $rank"
done
[ -z "$bad" ]
t_ok $? "rails, coll_gpu_test_fail_ucx: every rank of the world communicator redid its chain's step through the point-to-point layer (${bad:+not on rank(s)}${bad:-on ranks 0 to 3})"
rail_arg=
t_done
