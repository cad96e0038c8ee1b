#!/bin/sh
# ring.sh - ring allreduce and chain bcast along the node model's ring (test_ring.c), 4 ranks.
#
# Emulated backend (CI): 4 emulated GPUs and a topology file whose best ring is not 0 1 2 3
# (peer access allowed through the CPU, coll_gpu_p2p_level PHB, so that every hop may be used).
# Every rank must log the same ring, that ring must keep the NVLink pairs 0-2 and 1-3 adjacent,
# and the results are right.
# cuda backend (gpu/ring_cuda.sh): the machine's own GPUs and probed topology; the same checks
# but the fixture's NVLink pairs.
# Both: every one of the 4 calls on every rank logs the forced algorithm (ring for the two
# allreduces, chain for the two bcasts), counted, so that no call falls back to staging unseen.
. "$(dirname "$0")/../mpi/mpitest.sh"
log=${TMPDIR:-/tmp}/coll-gpu-ring.$$
COLL_GPU_TEST_UNIFORM=true
export COLL_GPU_TEST_UNIFORM
if [ "${COLL_GPU_TEST_DEVICE:-emulated}" = emulated ]; then
    fixture=yes
    COLL_GPU_EMULATED_DEVICES=4
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_allreduce_algorithm ring --mca coll_gpu_bcast_algorithm chain --mca coll_gpu_chunk_bytes 65536 --mca coll_gpu_p2p_level PHB --mca coll_gpu_verbose 10"
    OMPI_MCA_coll_gpu_topo_file=${TMPDIR:-/tmp}/coll-gpu-ring.$$.topo
    export COLL_GPU_EMULATED_DEVICES OMPI_MCA_coll_gpu_topo_file
else
    fixture=no
    COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_allreduce_algorithm ring --mca coll_gpu_bcast_algorithm chain --mca coll_gpu_chunk_bytes 65536 --mca coll_gpu_verbose 10"
fi
# each rank's log in a file of its own: mpirun's merged stderr may cut one rank's line with
# another's, and the lines are counted
COLL_GPU_TEST_RANK_LOGS=$log.ranks
export COLL_GPU_MPIRUN_ARGS COLL_GPU_TEST_RANK_LOGS
rm -rf "$log.ranks"
"$RUN_MPI" 4 "$top_builddir/tests/fastpath/test_ring" >"$log" 2>"$log.err"
rc=$?
cat "$log.ranks"/*/rank.*/stderr >"$log.verbose" 2>/dev/null
cat "$log.err" >>"$log"
why=$(t_skipped "$log")
if [ "$rc" -eq 0 ] && [ -n "$why" ]; then
    echo "1..0 # SKIP $why"
    rm -rf "$log" "$log.err" "$log.verbose" "$log.ranks" "${OMPI_MCA_coll_gpu_topo_file:-}"
    exit 0
fi
grep '^# device:' "$log"
passed=$(grep -c '^ok ' "$log")
grep '^not ok\|^Bail out' "$log" | sed 's/^/# /'
[ "$passed" -eq 4 ]
t_ok $? "allreduce (in place too) and bcast from two roots right on 4 ranks: $passed of 4"
[ "$rc" -eq 0 ]
t_ok $? "test_ring exits 0 (exit $rc)"
rings=$(sed -n 's/.*coll:gpu:team (cid 0): .*, ring \([0-9 ]*\)$/\1/p' "$log.verbose" | sort | uniq -c)
nrings=$(printf '%s\n' "$rings" | grep -c .)
ring=$(printf '%s\n' "$rings" | sed 's/^ *\([0-9]*\) //' | head -1)
[ "$nrings" -eq 1 ] && printf '%s\n' "$rings" | grep -q '^ *4 '
t_ok $? "every rank logs the same ring: $ring"
if [ "$fixture" = yes ]; then
    case " $ring $(echo "$ring" | cut -d' ' -f1) " in
    *" 0 2 "* | *" 2 0 "*) adj02=0 ;;
    *) adj02=1 ;;
    esac
    case " $ring " in
    *" 1 3 "* | *" 3 1 "*) adj13=0 ;;
    *) adj13=1 ;;
    esac
    [ "$adj02" -eq 0 ] && [ "$adj13" -eq 0 ]
    t_ok $? "the ring keeps the NVLink pairs 0-2 and 1-3 adjacent ($ring)"
else
    t_skip "the ring keeps the fixture's NVLink pairs adjacent" \
        "the cuda run uses the machine's probed topology, not the fixture"
fi
# 2 allreduces and 2 bcasts on 4 ranks: 8 decision lines each, every one naming the algorithm
# (a decision line: "coll:gpu:bcast (cid 0): rank 1: 3145733 B MPI_BYTE, 4 ranks -> chain via ...")
decision='(cid 0): rank [0-9]*: [0-9]* B [^,]*, [0-9]* ranks -> '
ar_all=$(grep -c "coll:gpu:allreduce $decision" "$log.verbose")
ar_ring=$(grep -c "coll:gpu:allreduce $decision"'ring via' "$log.verbose")
bc_all=$(grep -c "coll:gpu:bcast $decision" "$log.verbose")
bc_chain=$(grep -c "coll:gpu:bcast $decision"'chain via' "$log.verbose")
[ "$ar_all" -eq 8 ] && [ "$ar_ring" -eq 8 ] && [ "$bc_all" -eq 8 ] && [ "$bc_chain" -eq 8 ]
t_ok $? "every call took the forced algorithm: ring in $ar_ring of $ar_all allreduce decisions, chain in $bc_chain of $bc_all bcast decisions (8 each expected)"
[ "$tap_failed" -eq 0 ] || { t_diag "$log" 20; t_diag "$log.verbose" 20; }
rm -rf "$log" "$log.err" "$log.verbose" "$log.ranks" "${OMPI_MCA_coll_gpu_topo_file:-}"
t_done
