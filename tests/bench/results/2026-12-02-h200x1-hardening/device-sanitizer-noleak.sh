#!/bin/bash
set -u
cd "$(dirname "$0")/.."
repo=$PWD
out=${OUT:-/tmp/out}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p /tmp/dr-new && cd /tmp/dr-new && tar xzf "$repo/.devrun/coll-gpu-new.tar.gz" && cd coll-gpu-* && mkdir -p b && cd b \
  && ../configure --enable-werror --with-cuda >configure.out 2>&1 && make -j16 >make.out 2>&1 && make -C tests -j16 check TESTS= >tests.out 2>&1
echo "build rc=$?" >"$out/sanitizer-noleak.txt"
export top_builddir=$PWD top_srcdir=$(cd .. && pwd)
COLL_GPU_TEST_DEVICE=cuda COLL_GPU_TEST_UNIFORM=true timeout 150 "$top_srcdir/tests/run-mpi.sh" 3 compute-sanitizer --tool memcheck \
    --error-exitcode 42 $top_builddir/tests/fastpath/test_noleak >>"$out/sanitizer-noleak.txt" 2>&1
echo "sanitizer test_noleak rc=$?" >>"$out/sanitizer-noleak.txt"
