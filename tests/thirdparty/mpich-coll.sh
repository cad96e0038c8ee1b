#!/bin/bash
# mpich-coll.sh MPICH_TEST_DIR COLL_GPU_BUILD OUT [host|kinds] - MPICH's collective tests against
# coll/gpu: the third-party suite that found the mixed-kinds hangs of issue 18.
#
#   MPICH_TEST_DIR   MPICH's test/mpi folder (not part of this repository: e.g. `git archive HEAD
#                    test/mpi/util test/mpi/include test/mpi/dtpools test/mpi/coll | tar -x` in a
#                    clone of github.com/pmodels/mpich); built here with the mpicc on PATH and a
#                    small configuration header of ours instead of its configure
#   COLL_GPU_BUILD   a built tree of coll/gpu (its mca-coll-gpu/component is loaded)
#   OUT              where the binaries, one log per case and summary.txt go
#   host             every test of coll/testlist.in on host memory, under Open MPI's default coll
#                    list with coll/gpu loaded, emulated device (no GPU
#                    needed); a case passes when rank 0 prints "No Errors" and mpirun exits 0
#   kinds            (the default) the tests that take memory kinds (-memtype=all: the even ranks
#                    go through host, registered host, device and managed memory while the odd
#                    ones pass device memory; -evenmemtype/-oddmemtype), CUDA built in, the cuda
#                    device backend, under Open MPI's default coll list and under gpu,tuned
# Environment: LIMIT (seconds a case, default 60), DEADLINE (seconds for the whole run, default
# 1800: later cases are reported SKIP), ONLY (an extended regular expression: only the cases
# whose line, "COLL np=N TEST ARGS", matches it), CUDA_HOME (default /usr/local/cuda).
set -u
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd) out=$3 mode=${4:-kinds}
mkdir -p "$out/bin/lib" "$out/logs" "$out/include" || exit 2
out=$(cd "$out" && pwd)
cu=${CUDA_HOME:-/usr/local/cuda}

# What MPICH's configure would have found on a Linux machine with Open MPI (and CUDA).
{
    echo "#define HAVE_GETRUSAGE 1"
    echo "#define HAVE_MPI_INIT_THREAD 1"
    echo "#define HAVE_MPI_WIN_CREATE 1"
    echo "#define HAVE_STDARG_H 1"
    echo "#define HAVE_STRING_H 1"
    echo "#define HAVE_SYS_RESOURCE_H 1"
    echo "#define HAVE_SYS_TIME_H 1"
    echo "#define HAVE_UNISTD_H 1"
    echo "#define HAVE__BOOL 1"
    echo "#define USE_STDARG 1"
    echo "#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX"
    echo "#define THREAD_PACKAGE_POSIX 1"
    [ "$mode" = kinds ] && echo "#define HAVE_CUDA 1"
} >"$out/include/mpitestconf.h"
: >"$out/include/mtest_mpix.h"
printf '#define HAVE_STDLIB_H 1\n#define HAVE_STRING_H 1\n' >"$out/include/dtpoolsconf.h"
cflags="-O1 -g -w -I$out/include -I$src/include -I$src/dtpools/include"
libs="-lm"
if [ "$mode" = kinds ]; then
    cflags="$cflags -I$cu/include"
    libs="-L$cu/lib64 -lcudart -lm"
fi
# dtpools_internal.h includes "../dtpoolsconf.h": a copy beside its include folder's parent;
# and mtest.h includes "mpitestconf.h", found beside it first: this mode's there too (a run in
# the other mode, or MPICH's configure, leaves one with or without HAVE_CUDA)
cp "$out/include/dtpoolsconf.h" "$src/dtpools/dtpoolsconf.h" 2>/dev/null
cp "$out/include/mpitestconf.h" "$src/include/mpitestconf.h" || exit 2

bin=$out/bin
for f in "$src"/util/mtest.c "$src"/util/mtest_common.c "$src"/util/dtypes.c \
    "$src"/util/mtest_single.c "$src"/dtpools/src/*.c; do
    mpicc $cflags -c "$f" -o "$bin/lib/$(basename "$f" .c).o" || exit 1
done
mpicc $cflags -c "$src/util/run_mpitests.c" -o "$bin/run_mpitests.o" || exit 1
build_test() { # name: built once; a test with its own main does without run_mpitests.o
    [ -x "$bin/$1" ] && return 0
    [ -f "$src/coll/$1.c" ] || return 1
    local m=$bin/run_mpitests.o
    grep -q "^int main" "$src/coll/$1.c" && m=
    # shellcheck disable=SC2086
    mpicc $cflags "$src/coll/$1.c" $m "$bin"/lib/*.o -o "$bin/$1" $libs >"$bin/$1.build" 2>&1
}

. "$(dirname "$0")/runner-env.sh"
if [ "$mode" = kinds ]; then
    export OMPI_MCA_coll_gpu_device=cuda OMPI_MCA_coll_gpu_hang_warn_seconds=20
else
    export OMPI_MCA_coll_gpu_device=emulated
fi
start=$(date +%s) n=0 pass=0 fail=0
: >"$out/summary.txt"
one() { # coll np test args...
    local coll=$1 np=$2 t=$3 r
    shift 3
    if [ -n "${ONLY:-}" ] && ! echo "$coll np=$np $t $*" | grep -qE -- "$ONLY"; then
        return
    fi
    n=$((n + 1))
    if [ $(($(date +%s) - start)) -gt "${DEADLINE:-1800}" ]; then
        echo "SKIP (deadline) $coll np=$np $t $*" >>"$out/summary.txt"
        return
    fi
    if ! build_test "$t"; then
        echo "NOBIN $coll np=$np $t $*" >>"$out/summary.txt"
        return
    fi
    if [ "$coll" = default ]; then unset OMPI_MCA_coll; else export OMPI_MCA_coll=$coll; fi
    local log=$out/logs/$n-$t.txt t0
    t0=$(date +%s)
    echo "# $coll np=$np $t $*" >"$log"
    timeout -k 5 "${LIMIT:-60}" mpirun -np "$np" --oversubscribe --bind-to none "$bin/$t" "$@" \
        >>"$log" 2>&1 </dev/null
    local rc=$?
    if [ $rc -eq 0 ] && grep -q "No Errors" "$log"; then
        pass=$((pass + 1)) r=PASS
    else
        fail=$((fail + 1)) r="FAIL(rc=$rc)"
    fi
    echo "$r $(($(date +%s) - t0))s $coll np=$np $t $*" >>"$out/summary.txt"
}

if [ "$mode" = host ]; then
    while read -r name np rest; do
        # shellcheck disable=SC2046
        one default "$np" "$name" \
            $(echo "$rest" | grep -o "arg=[^ ]*" | sed 's/^arg=//')
    done < <(grep -v '^#\|^@\|^[[:space:]]*$' "$src/coll/testlist.in")
else
    for coll in default gpu,tuned; do
        one $coll 4 allred -counts=10,100 -memtype=all
        one $coll 7 allred -counts=10 -memtype=all
        one $coll 4 allred2 -memtype=all
        one $coll 12 allred2 -memtype=all
        one $coll 5 reduce -memtype=all
        one $coll 7 reduce -memtype=all
        one $coll 4 op_coll -memtype=all
        for e in host device; do
            for o in host device reg_host shared; do
                [ $e = $o ] || one $coll 8 allred2 -evenmemtype=$e -oddmemtype=$o
            done
        done
        one $coll 6 bcast_gpu -memtype=all
        one $coll 6 alltoall_gpu -memtype=all
        one $coll 6 allgather_gpu -memtype=all
        one $coll 6 allgatherv_gpu -memtype=all
    done
    for e in device host reg_host shared; do
        for o in device host reg_host shared; do
            one default 4 bcast -typelist=MPI_INT,MPI_INT:4+MPI_DOUBLE:8 \
                -counts=1,17,50,100,512,65530 -seed=100 -testsizes=2,50 \
                -evenmemtype=$e -oddmemtype=$o
        done
    done
fi
echo "total $n passed $pass failed $fail" >>"$out/summary.txt"
cat "$out/summary.txt"
