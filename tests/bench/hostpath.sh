#!/bin/sh
# hostpath.sh [-r ROUNDS] [-d DEVICE] [-n NP] BUILDDIR [-- BENCH-OPTIONS]
#
# What coll/gpu adds to a host-buffer MPI_Allreduce: runs coll_gpu_hostpath_bench (8 bytes,
# median ns per call) without coll/gpu (A) and with it (B), alternating A B A B ... ROUNDS times
# in this one invocation so that drift of the machine hits both alike, then prints the median of
# each side over the rounds, and the median and spread of the per-round differences B - A (the
# headline: a pair of neighbouring runs shares the machine's state).  The goal is at most 50 ns
# added.  Compare the spread with the difference before believing a small one.  The buffers are
# plain malloc memory; a header line says whether coll/gpu's classification cache is on (the
# number that matters) or off (every call asks the driver: Open MPI's memory hooks missing).
#
#   BUILDDIR     a configured and built tree (the component comes from BUILDDIR/mca-coll-gpu)
#   -r ROUNDS    rounds of A and B (default 10; each run takes about a second)
#   -d DEVICE    coll/gpu's device backend: cuda or emulated (default: cuda when nvidia-smi
#                lists a GPU, else emulated)
#   -n NP        ranks (default 2)
# Environment: MPIRUN, COLL_WITHOUT (default tuned,basic,libnbc), COLL_WITH (default
# gpu,tuned,basic,libnbc), HOSTPATH_MPIRUN_ARGS (extra mpirun options).
set -u

rounds=10
device=
np=2
while getopts r:d:n:h opt; do
    case $opt in
        r) rounds=$OPTARG ;;
        d) device=$OPTARG ;;
        n) np=$OPTARG ;;
        *) sed -n '2,18p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '2,18p' "$0"; exit 2; }
build=$(cd "$1" && pwd) || exit 2
shift
[ "${1:-}" = "--" ] && shift

prog=$build/tests/coll_gpu_hostpath_bench
[ -x "$prog" ] || { echo "hostpath.sh: $prog is not built" >&2; exit 1; }
compdir=$build/mca-coll-gpu/component
[ -e "$compdir/mca_coll_gpu.so" ] || compdir=$build/mca-coll-gpu/.libs
if [ ! -e "$compdir/mca_coll_gpu.so" ]; then
    echo "hostpath.sh: no mca_coll_gpu.so under $build/mca-coll-gpu" >&2
    exit 1
fi
if [ -z "$device" ]; then
    device=emulated
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        device=cuda
    fi
fi

: "${MPIRUN:=mpirun}"
: "${COLL_WITHOUT:=tuned,basic,libnbc}"
: "${COLL_WITH:=gpu,tuned,basic,libnbc}"
. "$(dirname "$0")/bench-env.sh"
export OMPI_MCA_mca_base_component_path="$compdir:$pkglibdir"
export OMPI_MCA_coll_gpu_device="$device"
# one core per rank when there are enough: latency is what this measures
if [ "$(nproc 2>/dev/null || echo 1)" -ge "$np" ]; then
    bind="--bind-to core"
else
    bind="--bind-to none --oversubscribe"
fi

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# run SIDE COLL: one run, its result line appended to $tmp/SIDE
run() {
    side=$1 coll=$2
    shift 2
    # shellcheck disable=SC2086
    OMPI_MCA_coll=$coll "$MPIRUN" -np "$np" $bind ${HOSTPATH_MPIRUN_ARGS:-} "$prog" "$@" \
        >"$tmp/run.out" 2>&1
    rc=$?
    line=$(grep '^hostpath ' "$tmp/run.out")
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        echo "hostpath.sh: the run with OMPI_MCA_coll=$coll failed (exit $rc):" >&2
        cat "$tmp/run.out" >&2
        exit 1
    fi
    echo "$line" | sed 's/.*median_ns=\([0-9.]*\).*/\1/' >>"$tmp/$side"
    echo "$line"
}

median() {
    sort -g "$1" | awk '{ v[NR] = $1 }
        END {
            if (NR % 2) print v[(NR + 1) / 2]
            else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
        }'
}

echo "# hostpath.sh: 8-byte host-buffer MPI_Allreduce, $np ranks, $rounds rounds A B"
echo "#   A: OMPI_MCA_coll=$COLL_WITHOUT    B: OMPI_MCA_coll=$COLL_WITH (coll_gpu_device=$device)"
echo "#   component: $compdir/mca_coll_gpu.so; mpirun $bind"
# Whether B answers host buffers from the classification cache (on when Open MPI's memory hooks
# see munmap) or asks the driver every call: one short run at coll_gpu_verbose 5 says.
# shellcheck disable=SC2086
cache=$(OMPI_MCA_coll=$COLL_WITH OMPI_MCA_coll_gpu_verbose=5 "$MPIRUN" -np "$np" $bind \
    ${HOSTPATH_MPIRUN_ARGS:-} "$prog" -b 1 -k 1 -w 0 2>&1 | grep -m1 'classification cache' \
    | sed 's/.*coll:gpu:memhooks: //')
echo "#   B's ${cache:-classification cache: (no line from coll/gpu: not loaded?)}"
i=1
while [ "$i" -le "$rounds" ]; do
    a=$(run A "$COLL_WITHOUT" "$@") || exit 1
    b=$(run B "$COLL_WITH" "$@") || exit 1
    case $a in
        *coll_gpu=absent*) ;;
        *) echo "hostpath.sh: A has coll/gpu loaded: $a" >&2; exit 1 ;;
    esac
    case $b in
        *coll_gpu=loaded*) ;;
        *) echo "hostpath.sh: B does not have coll/gpu loaded: $b" >&2; exit 1 ;;
    esac
    echo "round $i  A ${a#hostpath }"
    echo "round $i  B ${b#hostpath }"
    i=$((i + 1))
done
ma=$(median "$tmp/A")
mb=$(median "$tmp/B")
paste "$tmp/A" "$tmp/B" | awk '{ printf "%.1f\n", $2 - $1 }' >"$tmp/D"
md=$(median "$tmp/D")
lo=$(sort -g "$tmp/D" | head -1)
hi=$(sort -g "$tmp/D" | tail -1)
echo "# medians over $rounds rounds: without coll/gpu $ma ns, with coll/gpu $mb ns;" \
    "per-round B - A from $lo to $hi ns"
awk -v d="$md" 'BEGIN {
    printf "hostpath: coll/gpu adds %+.1f ns per 8-byte host-buffer MPI_Allreduce", d
    printf " (median of per-round differences); goal <= 50 ns: %s\n", (d <= 50 ? "met" : "NOT met")
}'
