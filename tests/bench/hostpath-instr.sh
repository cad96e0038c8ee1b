#!/bin/sh
# hostpath-instr.sh [-c | -C COLL] [-n NP] BUILDDIR
#
# The instructions coll/gpu executes for one host-buffer MPI_Allreduce (-c: MPI_Bcast; -C: any
# collective coll_gpu_hostpath_bench times) of 8 bytes a block, counted by valgrind's callgrind:
# the same count on every machine and every run, where the time that hostpath.sh measures moves
# by more than the whole budget from run to run on a shared VM.  What it does not see: cache and
# branch misses, and what the extra call level costs the component below; hostpath.sh (on a
# quiet machine) is still the budget's measure.
#
# coll_gpu_hostpath_bench runs twice under callgrind, with 20 x 500 and 20 x 1500 timed calls;
# the instructions of coll/gpu's own code (mca_coll_gpu.so and its device library, by function:
# what runs inside the component below is not counted) of the first run are subtracted from the
# second's and divided by the 20,000 calls between them, so that everything a run does once
# (MPI_Init, the first call's setup, MPI_Finalize) drops out.  What coll/gpu's progress callbacks
# run (opal_progress calls them on every poll while a request is waited for, as many times as
# the timing makes it) is left out: the count is the call's own path.  Prints one line,
#   hostpath-instr: allreduce 90.0 instructions per call (rank 0)
# and exits 0; 1 when a run fails.
#
#   BUILDDIR  a configured and built tree (the component from BUILDDIR/mca-coll-gpu, the
#             program from BUILDDIR/tests)
#   -c        MPI_Bcast from rank 0 instead of MPI_Allreduce
#   -C COLL   the collective (coll_gpu_hostpath_bench -h lists them)
#   -n NP     ranks (default 2)
# Environment: MPIRUN; the device backend is the emulated one (the host path does not depend on
# it: with a device, the same classification cache answers).
set -u

coll=allreduce
np=2
while getopts cC:n:h opt; do
    case $opt in
        c) coll=bcast ;;
        C) coll=$OPTARG ;;
        n) np=$OPTARG ;;
        *) sed -n '2,28p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { sed -n '2,28p' "$0"; exit 2; }
build=$(cd "$1" && pwd) || exit 2
prog=$build/tests/coll_gpu_hostpath_bench
[ -x "$prog" ] || { echo "hostpath-instr.sh: $prog is not built" >&2; exit 1; }
for tool in valgrind callgrind_annotate; do
    command -v "$tool" >/dev/null 2>&1 || { echo "hostpath-instr.sh: no $tool" >&2; exit 1; }
done
compdir=$build/mca-coll-gpu/component
[ -e "$compdir/mca_coll_gpu.so" ] || compdir=$build/mca-coll-gpu/.libs
[ -e "$compdir/mca_coll_gpu.so" ] || { echo "hostpath-instr.sh: no mca_coll_gpu.so" >&2; exit 1; }

: "${MPIRUN:=mpirun}"
. "$(dirname "$0")/bench-env.sh"
export OMPI_MCA_mca_base_component_path="$compdir:$pkglibdir"
export OMPI_MCA_coll=gpu,tuned,basic,libnbc OMPI_MCA_coll_gpu_device=emulated

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# coll/gpu's functions: every function symbol of the component and its device library (static
# ones too: the table of callgrind_annotate names some by file, some as "???:" without one).
# Those its progress callbacks run are left out: the callbacks (*_progress), and the setup step
# and the engine's busy test that they call while a request is waited for.
nm "$compdir/mca_coll_gpu.so" "$build/kernels/.libs/libcoll_gpu_dev.so" 2>/dev/null \
    | awk '$2 ~ /^[tTwW]$/ && $3 !~ /_progress$/ && $3 != "mca_coll_gpu_kinds_setup_step" \
           && $3 != "mca_coll_gpu_async_busy" { print $3 }' | sort -u >"$tmp/own"
[ -s "$tmp/own" ] || { echo "hostpath-instr.sh: no symbols in mca_coll_gpu.so" >&2; exit 1; }

# own CALLS: coll/gpu's own instructions in rank 0's run of 20 batches of CALLS calls.
own() {
    # shellcheck disable=SC2086
    timeout 600 "$MPIRUN" -np "$np" --oversubscribe --bind-to none \
        valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$1.%q{OMPI_COMM_WORLD_RANK}" \
        "$prog" -C "$coll" -b 20 -k "$1" -w 100 >"$tmp/run.$1" 2>&1 || {
        echo "hostpath-instr.sh: the run of $1 calls failed:" >&2
        tail -20 "$tmp/run.$1" >&2
        return 1
    }
    callgrind_annotate --inclusive=no --threshold=100 "$tmp/cg.$1.0" 2>/dev/null \
        | awk 'NR == FNR { own[$1] = 1; next }
               /^ *[0-9][0-9,]* \( *[0-9.]+%\) / && match($0, /%\) +[^ ]+/) {
                   fn = substr($0, RSTART, RLENGTH)
                   sub(/^%\) +/, "", fn)
                   sub(/^.*:/, "", fn)
                   if (fn in own) { gsub(",", "", $1); s += $1 }
               }
               END { printf "%d\n", s }' "$tmp/own" -
}

a=$(own 500) || exit 1
b=$(own 1500) || exit 1
awk -v a="$a" -v b="$b" -v c="$coll" \
    'BEGIN { printf "hostpath-instr: %s %.1f instructions per call (rank 0)\n", c, (b - a) / 20000 }'
