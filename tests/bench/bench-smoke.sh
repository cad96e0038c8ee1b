#!/bin/sh
# bench-smoke.sh - the benchmark's own correctness, not a timing: coll_gpu_bench in check mode
# on the emulated device with 2 ranks (allreduce and bcast, 8 B to 64 KiB, backends mpi, staged
# and nb with the overlap figure of -O and its pinned allocations per call,
# coll_gpu_uniform_buffers=true as the default) must finish, print a table, and count no wrong
# element anywhere.  Then allgather and reduce_scatter_block, which have no algorithm variable of
# their own: the staged backend forces allgather through coll_gpu_exchange_algorithm (coll/gpu
# runs it as one exchange; coll/gpu's log must show it staged) and says that nothing forces
# reduce_scatter_block, and a forced algorithm says why it cannot apply.  Then allreduce in place
# (-I) through coll/gpu's algorithms and its nonblocking form.  Last, allgatherv, alltoall,
# alltoallv and reduce_scatter (equal counts), blocking and nonblocking, checked like the others;
# the first three are staged through coll_gpu_exchange_algorithm too, reduce_scatter has no
# switch that stages it, and the staged backend says so.  The runs of allreduce and
# bcast, allgather and reduce_scatter_block, and the four new ones measure the copy floor (-K):
# every row must carry busbw's bytes, a copy time and its time over it.  Last, allgather and
# allgatherv in place (-I), blocking and nonblocking, checked after the timed calls.  TAP output.
set -u
: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
bench=$top_builddir/tests/coll_gpu_bench
csv=bench-smoke.csv
out=bench-smoke.out

echo "1..17"
if [ ! -x "$bench" ]; then
    echo "not ok 1 - coll_gpu_bench is built ($bench)"
    echo "# the remaining checks need it"
    for n in $(seq 2 17); do echo "not ok $n - skipped: no coll_gpu_bench"; done
    exit 1
fi
echo "ok 1 - coll_gpu_bench is built"

rm -f "$csv" "$out"
# a hang must not stall make check: mpirun ends the job after COLL_GPU_TEST_TIMEOUT seconds
COLL_GPU_TEST_TIMEOUT=${COLL_GPU_TEST_TIMEOUT:-120} COLL_GPU_TEST_DEVICE=emulated \
    COLL_GPU_TEST_UNIFORM=true \
    "$top_srcdir/tests/run-mpi.sh" 2 "$bench" -d emulated -C -K \
    -c allreduce,bcast -b 8 -e 64K -n 2 -w 1 -B mpi,staged,nb -O 20 -s 12345 -p "$csv" \
    >"$out" 2>&1
rc=$?
sed 's/^/# /' "$out"
if [ $rc -eq 0 ]; then echo "ok 2 - exits 0"; else echo "not ok 2 - exits 0 (got $rc)"; fi

if grep -q "coll/gpu: loaded" "$out"; then
    echo "ok 3 - coll/gpu is loaded, so the mpi backend runs through it"
else
    echo "not ok 3 - coll/gpu is loaded, so the mpi backend runs through it"
fi

# 8 B .. 64 KiB by 2: 14 sizes, for 2 collectives and 2 backends
rows=$(awk -F, 'NR > 1 && ($7 == "mpi" || $7 == "staged")' "$csv" 2>/dev/null | wc -l)
if [ "$rows" -eq 56 ]; then
    echo "ok 4 - a CSV row per size, collective and backend (56)"
else
    echo "not ok 4 - a CSV row per size, collective and backend (56, got $rows)"
fi

wrong=$(awk -F, 'NR > 1 && $17 != "0" { n++ } END { print n + 0 }' "$csv" 2>/dev/null)
if [ -s "$csv" ] && [ "$wrong" -eq 0 ]; then
    echo "ok 5 - #wrong is 0 in every row"
else
    echo "not ok 5 - #wrong is 0 in every row ($wrong rows with wrong elements)"
fi

if grep -q "check: 0 wrong elements in total" "$out" && grep -q "busbw(GB/s)" "$out"; then
    echo "ok 6 - the table and the closing verdict are printed"
else
    echo "not ok 6 - the table and the closing verdict are printed"
fi

# the nonblocking backend: a row per size and collective, each followed by its time over mpi's
# and its overlap figure
nb=$(awk -F, 'NR > 1 && $7 == "nb"' "$csv" 2>/dev/null | wc -l)
ratio=$(grep -c "^#   nb / mpi time, [a-z]* [0-9]* B: [0-9.]*$" "$out")
overlap=$(grep -c "^#   overlap nb [a-z]* [0-9]* B: comm [0-9.]* us, compute [0-9.]* us, together [0-9.]* us, overlap -*[0-9.]*$" "$out")
if [ "$nb" -eq 28 ] && [ "$ratio" -eq 28 ] && [ "$overlap" -eq 28 ]; then
    echo "ok 7 - nb: a row, a ratio to mpi and an overlap figure per size and collective (28)"
else
    echo "not ok 7 - nb: a row, a ratio to mpi and an overlap figure per size and collective (28: $nb, $ratio, $overlap)"
fi
# and the pinned host allocations its timed calls made per call
pinned=$(grep -c "^#   nb pinned host allocations per call, [a-z]* [0-9]* B: [0-9.]*$" "$out")
if [ "$pinned" -eq 28 ]; then
    echo "ok 8 - nb: pinned host allocations per call, per size and collective (28)"
else
    echo "not ok 8 - nb: pinned host allocations per call, per size and collective (28: $pinned)"
fi

# the collectives without an algorithm variable
out2=bench-smoke-staged.out
csv2=bench-smoke-staged.csv
rm -f "$out2" "$csv2"
COLL_GPU_TEST_TIMEOUT=${COLL_GPU_TEST_TIMEOUT:-120} COLL_GPU_TEST_DEVICE=emulated \
    "$top_srcdir/tests/run-mpi.sh" 2 "$bench" -d emulated -C -K \
    -c allgather,reduce_scatter_block -b 16 -e 1K -n 2 -w 1 -B mpi,staged,mpi:ring -s 12345 \
    -p "$csv2" >"$out2" 2>&1
rc=$?
sed 's/^/# /' "$out2"
# before, staged ran both as they are, i.e. on coll/gpu's GPU path, and called that staged
rows=$(awk -F, 'NR > 1 && $1 == "allgather" && $7 == "staged" && $17 == "0"' "$csv2" 2>/dev/null | wc -l)
staged_rsb=$(awk -F, 'NR > 1 && $1 == "reduce_scatter_block" && $7 == "staged"' "$csv2" 2>/dev/null | wc -l)
if [ $rc -eq 0 ] && [ "$rows" -eq 7 ] && [ "$staged_rsb" -eq 0 ] \
    && grep -q "^# backend staged for allgather: forced through coll_gpu_exchange_algorithm" "$out2" \
    && grep -q "^# backend staged for reduce_scatter_block: unavailable: coll/gpu has no switch that forces reduce_scatter_block onto its host staging path" "$out2"; then
    echo "ok 9 - staged: allgather forced through coll_gpu_exchange_algorithm, right (7 rows); reduce_scatter_block has no switch, and says so"
else
    echo "not ok 9 - staged: allgather forced through coll_gpu_exchange_algorithm, right (7 rows); reduce_scatter_block has no switch, and says so (exit $rc, $rows rows, $staged_rsb staged rsb rows)"
fi
if grep -q "^# backend mpi:ring for allgather: unavailable: coll_gpu_exchange_algorithm has no value 'ring'" "$out2" \
    && grep -q "^# backend mpi:ring for reduce_scatter_block: unavailable: coll/gpu has no algorithm to choose for reduce_scatter_block" "$out2"; then
    echo "ok 10 - mpi:ring: each says why it cannot apply"
else
    echo "not ok 10 - mpi:ring: each says why it cannot apply"
fi

# in place: the first call of each size and backend is checked (later ones reduce the result)
out3=bench-smoke-inplace.out
csv3=bench-smoke-inplace.csv
rm -f "$out3" "$csv3"
COLL_GPU_TEST_TIMEOUT=${COLL_GPU_TEST_TIMEOUT:-120} COLL_GPU_TEST_DEVICE=emulated \
    "$top_srcdir/tests/run-mpi.sh" 2 "$bench" -d emulated -C -I -c allreduce -t int32 \
    -b 8 -e 4K -n 2 -w 1 -B mpi,nb,mpi:oneshot,mpi:twoshot -s 12345 -p "$csv3" >"$out3" 2>&1
rc=$?
sed 's/^/# /' "$out3"
rows=$(awk -F, 'NR > 1 && $17 == "0"' "$csv3" 2>/dev/null | wc -l)
if [ $rc -eq 0 ] && [ "$rows" -eq 40 ] && grep -q "^# allreduce in place," "$out3"; then
    echo "ok 11 - in place: 4 backends x 10 sizes right (40 rows)"
else
    echo "not ok 11 - in place: 4 backends x 10 sizes right (exit $rc, $rows of 40 rows)"
fi

# the staged allgather is staged: coll/gpu's own log line for every call says so
out4=bench-smoke-path.out
rm -f "$out4"
COLL_GPU_TEST_TIMEOUT=${COLL_GPU_TEST_TIMEOUT:-120} COLL_GPU_TEST_DEVICE=emulated \
    OMPI_MCA_coll_gpu_verbose=10 \
    "$top_srcdir/tests/run-mpi.sh" 2 "$bench" -d emulated -C -c allgather -b 1K -e 1K -n 2 -w 1 \
    -B staged -s 12345 >"$out4" 2>&1
rc=$?
grep -v "coll:gpu:" "$out4" | sed 's/^/# /'
staged=$(grep -c "coll:gpu:allgather (cid [0-9]*): rank [0-9]*: .* -> staged (" "$out4")
team=$(grep "coll:gpu:allgather (cid [0-9]*): rank [0-9]*: .* -> " "$out4" | grep -vc " -> staged (")
if [ $rc -eq 0 ] && [ "$staged" -gt 0 ] && [ "$team" -eq 0 ]; then
    echo "ok 12 - staged: coll/gpu stages every allgather call ($staged log lines)"
else
    echo "not ok 12 - staged: coll/gpu stages every allgather call (exit $rc, $staged staged and $team other log lines)"
fi

# the collectives added for issue 22
out5=bench-smoke-more.out
csv5=bench-smoke-more.csv
rm -f "$out5" "$csv5"
COLL_GPU_TEST_TIMEOUT=${COLL_GPU_TEST_TIMEOUT:-120} COLL_GPU_TEST_DEVICE=emulated \
    "$top_srcdir/tests/run-mpi.sh" 2 "$bench" -d emulated -C -K \
    -c allgatherv,alltoall,alltoallv,reduce_scatter -b 16 -e 4K -n 2 -w 1 -B mpi,nb,staged \
    -s 12345 -p "$csv5" >"$out5" 2>&1
rc=$?
sed 's/^/# /' "$out5"
# 16 B .. 4 KiB by 2: 9 sizes, for 4 collectives and 2 backends (3 with staged but for
# reduce_scatter), each collective's rows all there
rows=$(awk -F, 'NR > 1 && $17 == "0" { n[$1 "," $7]++ } END { for (k in n) if (n[k] == 9) m++; print m + 0 }' "$csv5" 2>/dev/null)
all=$(awk -F, 'NR > 1' "$csv5" 2>/dev/null | wc -l)
if [ $rc -eq 0 ] && [ "$rows" -eq 11 ] && [ "$all" -eq 99 ] \
    && grep -q "check: 0 wrong elements in total" "$out5"; then
    echo "ok 13 - allgatherv, alltoall, alltoallv, reduce_scatter: mpi, nb and staged right at 9 sizes (99 rows)"
else
    echo "not ok 13 - allgatherv, alltoall, alltoallv, reduce_scatter: mpi, nb and staged right at 9 sizes (exit $rc, $all of 99 rows, $rows of 11 complete)"
fi
why=$(grep -c "^# backend staged for reduce_scatter: unavailable: coll/gpu has no switch that forces reduce_scatter onto its host staging path" "$out5")
forced=$(grep -c "^# backend staged for [a-z]*: forced through coll_gpu_exchange_algorithm" "$out5")
if [ "$why" -eq 1 ] && [ "$forced" -eq 3 ]; then
    echo "ok 14 - staged: allgatherv, alltoall(v) forced through coll_gpu_exchange_algorithm; reduce_scatter says nothing forces it"
else
    echo "not ok 14 - staged: allgatherv, alltoall(v) forced through coll_gpu_exchange_algorithm; reduce_scatter says nothing forces it ($forced of 3, $why of 1)"
fi

# The copy floor of every row, 2 ranks: busbw's bytes (allreduce 2 x (n-1)/n of the size, bcast
# all of it, the others (n-1)/n), a time, and the row's time over it (CSV columns 20 to 22).
# Prints the rows that break one of these, and how many rows there were.
copy_rows() {
    awk -F, 'NR == 1 { ok = ($20 == "copy_bytes" && $21 == "copy_us" && $22 == "time_over_copy"); next }
        { rows++
          want = ($1 == "allreduce" || $1 == "bcast") ? $2 : $2 / 2
          ratio = ($21 > 0) ? $12 / $21 : -1
          if (!ok || $20 != want || !($21 > 0) || ratio - $22 > 0.01 * $22 + 0.001 || $22 - ratio > 0.01 * $22 + 0.001) bad++ }
        END { print bad + 0, rows + 0 }' "$1" 2>/dev/null
}
set -- $(copy_rows "$csv") $(copy_rows "$csv2") $(copy_rows "$csv5")
if [ $# -eq 6 ] && [ "$1" -eq 0 ] && [ "$2" -eq 84 ] && [ "$3" -eq 0 ] && [ "$4" -eq 21 ] \
    && [ "$5" -eq 0 ] && [ "$6" -eq 99 ]; then
    echo "ok 15 - copy floor: every row of 8 collectives has busbw's bytes, a copy time and its time over it (204 rows)"
else
    echo "not ok 15 - copy floor: every row of 8 collectives has busbw's bytes, a copy time and its time over it (bad/rows: $*)"
fi
heads=$(cat "$out" "$out2" "$out5" | grep -c "^#     size(B) .* #wrong   copy(us)  x copy$")
if [ "$heads" -eq 8 ] && grep -q "^# copy floor (-K): " "$out5"; then
    echo "ok 16 - copy floor: each table has the copy(us) and x copy columns, the method is printed"
else
    echo "not ok 16 - copy floor: each table has the copy(us) and x copy columns, the method is printed ($heads of 8 tables)"
fi

# allgather(v) in place: the poison around this rank's own block, every peer's block right
# after the timed calls (MPI_IN_PLACE as the send buffer; before -I took allreduce only)
out6=bench-smoke-inplace-gather.out
csv6=bench-smoke-inplace-gather.csv
rm -f "$out6" "$csv6"
COLL_GPU_TEST_TIMEOUT=${COLL_GPU_TEST_TIMEOUT:-120} COLL_GPU_TEST_DEVICE=emulated \
    "$top_srcdir/tests/run-mpi.sh" 2 "$bench" -d emulated -C -I -c allgather,allgatherv \
    -b 16 -e 4K -n 2 -w 1 -B mpi,nb -s 12345 -p "$csv6" >"$out6" 2>&1
rc=$?
sed 's/^/# /' "$out6"
rows=$(awk -F, 'NR > 1 && $17 == "0"' "$csv6" 2>/dev/null | wc -l)
heads=$(grep -c "^# allgatherv* in place," "$out6")
if [ $rc -eq 0 ] && [ "$rows" -eq 36 ] && [ "$heads" -eq 2 ]; then
    echo "ok 17 - allgather and allgatherv in place: mpi and nb right at 9 sizes (36 rows)"
else
    echo "not ok 17 - allgather and allgatherv in place: mpi and nb right at 9 sizes (exit $rc, $rows of 36 rows, $heads of 2 headers)"
fi
