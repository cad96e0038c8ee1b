# mpitest.sh - sourced by the MPI test scripts of tests/mpi.
#
# Sets top_srcdir and top_builddir (from make check, or from where the script lies when it is
# run by hand: then the build tree defaults to the source tree, or to $COLL_GPU_BUILDDIR),
# RUN_MPI (tests/run-mpi.sh) and MPI_TESTS (the folder of the built test programs), and gives
# the scripts a small TAP producer.
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=${COLL_GPU_BUILDDIR:-$top_srcdir}}"
export top_srcdir top_builddir
RUN_MPI="$top_srcdir/tests/run-mpi.sh"
MPI_TESTS="$top_builddir/tests/mpi"
# A test that hangs is killed by mpirun after this many seconds (run-mpi.sh passes it on).
: "${COLL_GPU_TEST_TIMEOUT:=600}"
export COLL_GPU_TEST_TIMEOUT

# run_tap NP PROGRAM [ARGS...]: run an MPI program that prints TAP itself (its skip, if any, is
# tap.h's: the plan "1..0 # SKIP why" and exit 0; any other exit status is passed on).
run_tap() {
    "$RUN_MPI" "$@"
}

tap_n=0
tap_failed=0
# t_ok STATUS DESCRIPTION: one TAP line, passing when STATUS is 0.
t_ok() {
    tap_n=$((tap_n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $tap_n - $2"
    else
        echo "not ok $tap_n - $2"
        tap_failed=$((tap_failed + 1))
    fi
}
# t_skip DESCRIPTION REASON: one skipped check (tap.h's contract: the reason is never empty).
t_skip() {
    tap_n=$((tap_n + 1))
    echo "ok $tap_n - $1 # SKIP ${2:-(no reason given)}"
}
# t_skipped FILE: the reason of a program's skip plan ("1..0 # SKIP why") in FILE, or nothing.
t_skipped() {
    sed -n 's/^1\.\.0 *# *[Ss][Kk][Ii][Pp] *//p' "$1" | head -1
}
# t_diag FILE [LINES]: the tail of a file as TAP comments (ended by a newline even where the
# file is not, so that the next TAP line stands on its own).
t_diag() {
    tail -n "${2:-30}" "$1" | sed -e 's/^/#   /' -e '$a\'
}
# t_done: the plan, and the exit status.
t_done() {
    echo "1..$tap_n"
    [ "$tap_failed" -eq 0 ]
}
