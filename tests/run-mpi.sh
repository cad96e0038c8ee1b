#!/bin/sh
# run-mpi.sh NP PROGRAM [ARGS...] - run an MPI test with coll/gpu loaded from the build tree.
#
# Loads mca_coll_gpu.so from mca-coll-gpu/.libs ahead of Open MPI's own components, as root
# when needed, oversubscribed (CI has 2 cores).  The device backend comes from
# COLL_GPU_TEST_DEVICE (default: emulated); extra mpirun options from COLL_GPU_MPIRUN_ARGS.
set -u
np=$1; shift
: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${MPIRUN:=mpirun}"
: "${OMPI_PKGLIBDIR:=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)}"
: "${COLL_GPU_TEST_DEVICE:=emulated}"
: "${COLL_GPU_TEST_COLL:=gpu,tuned,basic,libnbc}"
export OMPI_MCA_mca_base_component_path="$top_builddir/mca-coll-gpu/component:$OMPI_PKGLIBDIR"
export OMPI_MCA_coll_gpu_device="$COLL_GPU_TEST_DEVICE"
export OMPI_MCA_coll="$COLL_GPU_TEST_COLL"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# No network needed: everything runs on this machine over shared memory.
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
exec "$MPIRUN" -np "$np" --oversubscribe --bind-to none ${COLL_GPU_MPIRUN_ARGS:-} "$@"
