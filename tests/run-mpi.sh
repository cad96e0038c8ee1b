#!/bin/sh
# run-mpi.sh NP PROGRAM [ARGS...] - run an MPI test with coll/gpu loaded from the build tree.
# run-mpi.sh --exec COMMAND [ARGS...] - run COMMAND (ompi_info, a singleton MPI program) in the
#                                      same environment, without mpirun.
#
# Loads mca_coll_gpu.so from mca-coll-gpu/component ahead of Open MPI's own components, as root
# when needed, oversubscribed (CI has 2 cores).  The device backend comes from
# COLL_GPU_TEST_DEVICE (default: emulated), the coll components from COLL_GPU_TEST_COLL, extra
# mpirun options from COLL_GPU_MPIRUN_ARGS, and COLL_GPU_TEST_TIMEOUT (seconds, unset: none)
# makes mpirun end a job that runs longer.  COLL_GPU_TEST_RANK_LOGS=DIR writes each rank's
# stderr to DIR/1/rank.N/stderr (the layout of Open MPI 4.1's --output-filename, whose 5.0
# counterpart loses the output of all but one rank: PMIx 5.0.7's output-to-directory fails on
# the folder the first rank made).
set -u
if [ "${1:-}" = "--exec" ]; then
    np=
else
    np=$1
fi
shift
: "${top_builddir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${MPIRUN:=mpirun}"
: "${OMPI_PKGLIBDIR:=$(ompi_info --parsable --path pkglibdir | cut -d: -f3-)}"
: "${COLL_GPU_TEST_DEVICE:=emulated}"
: "${COLL_GPU_TEST_COLL:=gpu,tuned,basic,libnbc}"
# A folder in the component path that does not exist makes mpirun fail with a misleading
# 'unknown option "-np"': say what is missing instead.
component_dir="$top_builddir/mca-coll-gpu/component"
if [ -d "$component_dir" ]; then
    export OMPI_MCA_mca_base_component_path="$component_dir:$OMPI_PKGLIBDIR"
else
    case ",$COLL_GPU_TEST_COLL," in
    *,gpu,*)
        echo "run-mpi.sh: no coll/gpu component in $component_dir (build it first)" >&2
        exit 99 ;;
    esac
    export OMPI_MCA_mca_base_component_path="$OMPI_PKGLIBDIR"
fi
export OMPI_MCA_coll_gpu_device="$COLL_GPU_TEST_DEVICE"
# Every test runs with coll/gpu's defaults, under which any mix of memory kinds across ranks is
# right; COLL_GPU_TEST_UNIFORM=true makes the promise of coll_gpu_uniform_buffers (tests of
# that promise use no mixed cases).
if [ -n "${COLL_GPU_TEST_UNIFORM:-}" ]; then
    export OMPI_MCA_coll_gpu_uniform_buffers="$COLL_GPU_TEST_UNIFORM"
fi
export OMPI_MCA_coll="$COLL_GPU_TEST_COLL"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# No network needed: everything runs on this machine over shared memory.
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
# Open MPI 5.0's PMIx reads the same component path and reports every file in it that is not
# a PMIx plugin (mca_coll_gpu.so among them) on stderr, which tests read: PMIx's load errors
# are not coll/gpu's business.
# (make check tells the series; by hand it is read from ompi_info)
: "${COLL_GPU_OMPI_SERIES:=$(ompi_info --version 2>/dev/null | sed -n '1s/.* v\([0-9]*\.[0-9]*\).*/\1/p')}"
if [ "$COLL_GPU_OMPI_SERIES" = 5.0 ]; then
    export PMIX_MCA_mca_base_component_show_load_errors=none
fi
if [ -z "$np" ]; then
    exec "$@"
fi
if [ -n "${COLL_GPU_TEST_RANK_LOGS:-}" ]; then
    # shellcheck disable=SC2016
    set -- /bin/sh -c 'd=$0/1/rank.${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-x}}; mkdir -p "$d" && exec "$@" 2>"$d/stderr"' \
        "$COLL_GPU_TEST_RANK_LOGS" "$@"
fi
# The time limit is coreutils' timeout around mpirun, not mpirun's own --timeout: with that
# option Open MPI 4.1 garbles the help messages the ranks send up ("Data unpack would read past
# end of buffer" in show_help.c), and coll/gpu's messages are part of what the tests check.
# mpirun passes the TERM on to the ranks; KILL follows 10 s later.
if [ -n "${COLL_GPU_TEST_TIMEOUT:-}" ]; then
    exec timeout -k 10 "$COLL_GPU_TEST_TIMEOUT" "$MPIRUN" -np "$np" --oversubscribe \
        --bind-to none ${COLL_GPU_MPIRUN_ARGS:-} "$@"
fi
exec "$MPIRUN" -np "$np" --oversubscribe --bind-to none ${COLL_GPU_MPIRUN_ARGS:-} "$@"
