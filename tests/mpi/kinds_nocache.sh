#!/bin/sh
# kinds_nocache.sh - where the classification cache cannot be kept true it must stay off, and
# every call is still right: test_kinds on 2 ranks (a) without Open MPI's memory hooks (the
# memory framework's patcher component left out: support level 0), (b) with
# COLL_GPU_CLASSIFY_CACHE=0.  One TAP stream: each run is one line, its own TAP output is
# shown on failure.
. "$(dirname "$0")/mpitest.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

COLL_GPU_TEST_UNIFORM=false
export COLL_GPU_TEST_UNIFORM
OMPI_MCA_memory='^patcher' run_tap 2 "$MPI_TESTS/test_kinds" --mixed --expect-cache=off \
    >"$log" 2>&1
rc=$?
grep -q '^not ok' "$log" && rc=1
t_ok "$rc" "without memory hooks: cache off, every call right"
[ "$rc" -eq 0 ] || t_diag "$log" 40

COLL_GPU_CLASSIFY_CACHE=0 run_tap 2 "$MPI_TESTS/test_kinds" --mixed --expect-cache=off \
    >"$log" 2>&1
rc=$?
grep -q '^not ok' "$log" && rc=1
t_ok "$rc" "COLL_GPU_CLASSIFY_CACHE=0: cache off, every call right"
[ "$rc" -eq 0 ] || t_diag "$log" 40
t_done
