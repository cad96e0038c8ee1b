#!/bin/sh
# layers.sh - the component's files call only down (issue "one engine", mca-coll-gpu/README.md).
#
# Reads the symbols of the built component's objects (nm): every function or variable a file
# uses from another file of mca-coll-gpu/ must belong to a file of the same layer or of a
# layer below.  The layers, top first:
#
#   lifecycle  coll_gpu_module.c coll_gpu_gapfill.c (a communicator's module, its slots)
#   entry      one file per collective family, and the blocking exchange's decision
#   decision   the per-call agreement on memory kinds, blocking and nonblocking
#   engine     the node team's schedules, the hierarchical compositions
#   staged     the staged path, the host fallback, one rank's buffers in the team's shape
#   transport  the team (setup, flags, hang watch), its device side, plans on it, UCX, IPC maps
#   base       staging copies, the pinned pool, the memory hooks
#
# coll_gpu_component.c is the component itself: its parameters and shared helpers (log lines,
# failure reports, test switches) serve every file, and its open and close set up and tear
# down every layer, so it is outside the check both ways.  A file that is new must be given a
# layer here first (the check fails on a file it does not know).
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
objdir="$top_builddir/mca-coll-gpu/.libs"

layer_of() {
    case "$1" in
    module | gapfill) echo 1 ;;
    allreduce | bcast | reduce | gather | scatter | alltoall | neighbor | nonblocking | exchange)
        echo 2 ;;
    kinds | defer) echo 3 ;;
    engine | hier | hier_exchange) echo 4 ;;
    staged_colls | stage_async | fallback | adapt) echo 5 ;;
    team | nvl | select | ucx | ipcmap) echo 6 ;;
    stage | pinned_pool | memhooks) echo 7 ;;
    component) echo 0 ;;
    *) echo unknown ;;
    esac
}

if ! command -v nm >/dev/null 2>&1; then
    echo "1..0 # SKIP no nm on this machine"
    exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/defs"
: > "$tmp/uses"
missing=""
# the objects of the sources that exist (a build tree may keep objects of removed files)
for src in "$top_srcdir"/mca-coll-gpu/coll_gpu_*.c; do
    name=$(basename "$src" .c)
    name=${name#coll_gpu_}
    obj="$objdir/mca_coll_gpu_la-coll_gpu_$name.o"
    if [ ! -f "$obj" ]; then
        missing="$missing $name"
        continue
    fi
    nm "$obj" | awk -v f="$name" '
        NF == 3 && $2 ~ /^[TDBR]$/ { print $3, f >> "'"$tmp/defs"'" }
        NF == 2 && $1 == "U" { print $2, f >> "'"$tmp/uses"'" }'
done
echo "1..2"
if [ -n "$missing" ]; then
    echo "not ok 1 - every source's object is built (missing:$missing in $objdir)"
else
    echo "ok 1 - every source's object is built"
fi
# each cross-file use: user file, symbol, defining file
awk 'NR == FNR { def[$1] = $2; next }
     ($1 in def) && def[$1] != $2 { print $2, $1, def[$1] }' \
    "$tmp/defs" "$tmp/uses" | sort -u > "$tmp/edges"
bad=0
while read -r user sym owner; do
    lu=$(layer_of "$user")
    lo=$(layer_of "$owner")
    if [ unknown = "$lu" ] || [ unknown = "$lo" ]; then
        echo "# no layer for coll_gpu_$user.c or coll_gpu_$owner.c: give it one in layers.sh"
        bad=$((bad + 1))
    elif [ 0 != "$lu" ] && [ 0 != "$lo" ] && [ "$lo" -lt "$lu" ]; then
        echo "# coll_gpu_$user.c (layer $lu) calls up into coll_gpu_$owner.c (layer $lo): $sym"
        bad=$((bad + 1))
    fi
done < "$tmp/edges"
if [ 0 = "$bad" ] && [ -s "$tmp/edges" ]; then
    echo "ok 2 - no file calls a layer above it ($(wc -l < "$tmp/edges") cross-file uses)"
else
    echo "not ok 2 - no file calls a layer above it ($bad uses break it)"
fi
