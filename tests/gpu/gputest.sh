# gputest.sh - sourced by the GPU test scripts: the MPI test helpers and the cuda backend.
#
# Where nvidia-smi lists no GPU the script skips (tap.h's skip: the plan "1..0 # SKIP why",
# exit 0).  Where it lists one, the GPU is required: COLL_GPU_TEST_REQUIRE_DEVICE=1 makes the
# test programs fail (Bail out!, not skip) when the cuda backend cannot be opened, so a build
# without the cuda backend or a broken driver cannot pass the GPU record as skipped tests; and
# this file checks first that the build has the backend at all.  Each test program prints the
# backend and the device of every rank ("# device: rank N: backend cuda, device ...").
. "$(dirname "$0")/../mpi/mpitest.sh"
COLL_GPU_TEST_DEVICE=cuda
export COLL_GPU_TEST_DEVICE
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "1..0 # SKIP nvidia-smi lists no GPU on this machine"
    exit 0
fi
COLL_GPU_TEST_REQUIRE_DEVICE=1
export COLL_GPU_TEST_REQUIRE_DEVICE
GPU_COUNT=$(nvidia-smi -L | grep -c '^GPU')
# coll_gpu_config.h says whether configure built the cuda backend; without it every test below
# would only find out one by one.
if ! grep -q '^#define COLL_GPU_HAVE_CUDA 1' "$top_builddir/coll_gpu_config.h" 2>/dev/null; then
    echo "Bail out! nvidia-smi lists $GPU_COUNT GPU(s) but this build has no cuda backend" \
        "($top_builddir/coll_gpu_config.h; configure --with-cuda)"
    exit 1
fi
