# gputest.sh - sourced by the GPU test scripts: the MPI test helpers, the cuda backend, and a
# skip (exit 77 with a TAP plan that says why) where there is no GPU.
. "$(dirname "$0")/../mpi/mpitest.sh"
COLL_GPU_TEST_DEVICE=cuda
export COLL_GPU_TEST_DEVICE
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "1..0 # SKIP no GPU on this machine"
    exit 0
fi
GPU_COUNT=$(nvidia-smi -L | grep -c '^GPU')
