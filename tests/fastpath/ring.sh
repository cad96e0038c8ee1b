#!/bin/sh
# ring.sh - ring allreduce and chain bcast along the node model's ring (test_ring.c): 4 ranks on
# 4 emulated GPUs, a topology file whose best ring is not 0 1 2 3 (peer access allowed through
# the CPU, coll_gpu_p2p_level PHB, so that every hop may be used).  Every rank must log the same
# ring, that ring must keep the NVLink pairs 0-2 and 1-3 adjacent, and the results are right.
. "$(dirname "$0")/../mpi/mpitest.sh"
log=${TMPDIR:-/tmp}/coll-gpu-ring.$$
COLL_GPU_TEST_UNIFORM=true
COLL_GPU_EMULATED_DEVICES=4
COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_allreduce_algorithm ring --mca coll_gpu_bcast_algorithm chain --mca coll_gpu_chunk_bytes 65536 --mca coll_gpu_p2p_level PHB --mca coll_gpu_verbose 10"
OMPI_MCA_coll_gpu_topo_file=${TMPDIR:-/tmp}/coll-gpu-ring.$$.topo
export COLL_GPU_TEST_UNIFORM COLL_GPU_EMULATED_DEVICES COLL_GPU_MPIRUN_ARGS OMPI_MCA_coll_gpu_topo_file
"$RUN_MPI" 4 "$top_builddir/tests/fastpath/test_ring" >"$log" 2>&1
rc=$?
if [ "$rc" -eq 77 ]; then
    t_skip "ring order" "$(grep SKIP "$log")"
    rm -f "$log" "$OMPI_MCA_coll_gpu_topo_file"
    t_done
    exit
fi
passed=$(grep -c '^ok ' "$log")
grep '^not ok' "$log" | sed 's/^/# /'
[ "$passed" -eq 4 ]
t_ok $? "allreduce (in place too) and bcast from two roots right on 4 GPUs: $passed of 4"
[ "$rc" -eq 0 ]
t_ok $? "test_ring exits 0 (exit $rc)"
rings=$(sed -n 's/.*coll:gpu:team (cid 0): .*, ring \([0-9 ]*\)$/\1/p' "$log" | sort | uniq -c)
nrings=$(printf '%s\n' "$rings" | grep -c .)
ring=$(printf '%s\n' "$rings" | sed 's/^ *\([0-9]*\) //' | head -1)
[ "$nrings" -eq 1 ] && printf '%s\n' "$rings" | grep -q '^ *4 '
t_ok $? "every rank logs the same ring: $ring"
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
grep -q -- "-> ring via" "$log" && grep -q -- "-> chain via" "$log"
t_ok $? "the log shows ring and chain taken"
[ "$tap_failed" -eq 0 ] || t_diag "$log" 40
rm -f "$log" "$OMPI_MCA_coll_gpu_topo_file"
t_done
