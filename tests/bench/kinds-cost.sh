#!/bin/bash
# kinds-cost.sh OLD_BUILD NEW_BUILD [ROUNDS] - what a change costs the small calls, old build
# against new in one invocation, rounds alternating so that drift of the machine hits both:
#   host   8-byte MPI_Allreduce and MPI_Bcast on host buffers (coll_gpu_hostpath_bench of
#          NEW_BUILD): stock Open MPI (tuned,basic,libnbc), the old component, the new one
#   device 8-byte MPI_Allreduce and MPI_Bcast on device buffers (each build's coll_gpu_bench,
#          backend mpi, cuda), old and new
# 2 ranks.  Prints each run's line, then per measure the median over the rounds and the median
# of the per-round differences new - stock and new - old.  With both ranks on one GPU a device
# call pays for the GPU's time slicing (hundreds of microseconds): compare old with new there,
# never with other machines.
set -u
[ $# -ge 2 ] || { sed -n '2,12p' "$0"; exit 2; }
old=$(cd "$1" && pwd) || exit 2
new=$(cd "$2" && pwd) || exit 2
rounds=${3:-5}
: "${MPIRUN:=mpirun}"
. "$(dirname "$0")/bench-env.sh"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# host SIDE BUILD|- [-c]: one host-path run (BUILD's component, or none), its median appended
host() {
    local side=$1 build=$2 coll=tuned,basic,libnbc path=$pkglibdir line
    shift 2
    if [ "$build" != - ]; then
        coll=gpu,tuned,basic,libnbc
        path=$build/mca-coll-gpu/component:$pkglibdir
    fi
    line=$(OMPI_MCA_mca_base_component_path=$path OMPI_MCA_coll=$coll \
        OMPI_MCA_coll_gpu_device=cuda timeout 60 "$MPIRUN" -np 2 --bind-to core \
        "$new/tests/coll_gpu_hostpath_bench" "$@" 2>&1 | grep '^hostpath ')
    echo "$side ${line:-FAILED}"
    echo "$line" | sed -n 's/.*median_ns=\([0-9.]*\).*/\1/p' >>"$tmp/$side"
}

# device SIDE BUILD: one 8-byte allreduce and bcast run on device buffers
device() {
    local side=$1 build=$2 out
    out=$(OMPI_MCA_mca_base_component_path=$build/mca-coll-gpu/component:$pkglibdir \
        OMPI_MCA_coll=gpu,tuned,basic,libnbc OMPI_MCA_coll_gpu_device=cuda \
        timeout 120 "$MPIRUN" -np 2 --bind-to none "$build/tests/coll_gpu_bench" -d cuda \
        -c allreduce,bcast -t float -o sum -b 8 -e 8 -B mpi -n 1000 -w 100 -F 2>&1)
    echo "$out" | grep -E '^ +8 ' | sed "s/^/$side /"
    echo "$out" | awk '/^# allreduce/ { c = "ar" } /^# bcast/ { c = "bc" }
        /^ +8 / && c { print $7 >> "'"$tmp/$side"'-" c }'
}

median() {
    sort -g "$1" | awk '{ v[NR] = $1 } END {
        if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
        else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# diffmed A B: median of B - A, round by round
diffmed() {
    paste "$tmp/$1" "$tmp/$2" | awk 'NF == 2 { printf "%.2f\n", $2 - $1 }' >"$tmp/d"
    median "$tmp/d"
}

echo "# kinds-cost.sh: old $old, new $new, $rounds rounds, 2 ranks, $(nvidia-smi -L | wc -l) GPU(s)"
# host_sides MEASURE [ARGS]: the three sides of one host measure in round i's order
host_sides() {
    local measure=$1 k
    shift
    for k in 0 1 2; do
        case $(( (i + k) % 3 )) in
        1) host "$measure-stock" - "$@" ;;
        2) host "$measure-old" "$old" "$@" ;;
        0) host "$measure-new" "$new" "$@" ;;
        esac
    done
}
# each round runs the three sides in another order (stock old new, old new stock, new stock
# old), and the two device sides in turn, so that no side is always first or last: on a GPU VM
# whose runs drifted by up to 250 ns between rounds, the new side, always last, read 86 ns over
# the old, which callgrind counts 60 instructions more than the new
for i in $(seq 1 "$rounds"); do
    echo "## round $i"
    host_sides har
    host_sides hbc -c
    if [ $(( i % 2 )) -eq 1 ]; then
        device dold "$old"
        device dnew "$new"
    else
        device dnew "$new"
        device dold "$old"
    fi
done
echo "## medians over $rounds rounds"
for m in har hbc; do
    name=$([ $m = har ] && echo "host 8 B MPI_Allreduce" || echo "host 8 B MPI_Bcast")
    echo "$name: stock $(median "$tmp/$m-stock") ns, old $(median "$tmp/$m-old") ns, new" \
        "$(median "$tmp/$m-new") ns; new - stock $(diffmed "$m-stock" "$m-new") ns, new - old" \
        "$(diffmed "$m-old" "$m-new") ns (per-round medians)"
done
for c in ar bc; do
    name=$([ $c = ar ] && echo "device 8 B MPI_Allreduce" || echo "device 8 B MPI_Bcast")
    echo "$name: old $(median "$tmp/dold-$c") us, new $(median "$tmp/dnew-$c") us; new - old" \
        "$(diffmed "dold-$c" "dnew-$c") us (per-round median)"
done
