#!/bin/sh
# killsweep.sh - a rank killed (SIGKILL) while its communicator's node team sets up leaves its
# names in /dev/shm: the team's control block (/collgpu-ctl-<pid>-<n>, which lives only during
# the setup) and its emulated device memory (/collgpu-<pid>-<n>).  The next job's dev_open
# (kernels/dev_emulated.c) must remove every collgpu* name whose owner pid is dead.
#   1. test_faults late 20 setup, 2 ranks: rank 1 sleeps before the first device allreduce,
#      so rank 0 waits in the team's setup with its control block made; rank 0 is killed with
#      SIGKILL as soon as its control block is seen in /dev/shm;
#   2. the names of the killed job's processes are still there (else this test sees nothing);
#   3. a second job (test_smoke device, 2 ranks) gives right answers;
#   4. after it, no collgpu* name of any process of the first job is left.
# Only the first job's own pids are judged: other jobs on this machine may own names too.
. "$(dirname "$0")/../mpi/mpitest.sh"
out=${TMPDIR:-/tmp}/coll_gpu_killsweep.$$
trap 'rm -f "$out" "$out.2"; [ -n "${job:-}" ] && kill -KILL "$job" 2>/dev/null' EXIT
COLL_GPU_TEST_UNIFORM=true
COLL_GPU_TEST_TIMEOUT=60
export COLL_GPU_TEST_UNIFORM COLL_GPU_TEST_TIMEOUT
unset COLL_GPU_EMULATED_SWEEP

# is_ours PID: PID descends from the first job ($job)
is_ours() {
    p=$1
    while [ -n "$p" ] && [ "$p" -gt 1 ]; do
        [ "$p" = "$job" ] && return 0
        p=$(sed -n 's/^[0-9]* (.*) [A-Za-z] \([0-9]*\) .*/\1/p' "/proc/$p/stat" 2>/dev/null)
    done
    return 1
}

# names PIDS...: the collgpu* names in /dev/shm owned by any of PIDS
names() {
    for p in "$@"; do
        ls /dev/shm 2>/dev/null | grep -E "^collgpu-(ctl-)?$p-[0-9]+\$"
    done
}

COLL_GPU_MPIRUN_ARGS="--mca coll_gpu_allreduce_algorithm oneshot ${COLL_GPU_MPIRUN_ARGS:-}" \
    "$RUN_MPI" 2 "$top_builddir/tests/fastpath/test_faults" late 20 setup >"$out" 2>&1 &
job=$!
victim=
pids=
i=0
while [ -z "$victim" ] && [ "$i" -lt 600 ] && kill -0 "$job" 2>/dev/null; do
    for n in $(ls /dev/shm 2>/dev/null | sed -n 's/^collgpu-ctl-\([0-9]*\)-[0-9]*$/\1/p'); do
        if is_ours "$n"; then
            victim=$n
            break
        fi
    done
    [ -n "$victim" ] || sleep 0.1
    i=$((i + 1))
done
if [ -n "$victim" ]; then
    # every process of the job that may own names (the ranks: their pids name their memory)
    for d in /proc/[0-9]*; do
        p=${d#/proc/}
        if [ "$p" != "$job" ] && grep -q test_faults "$d/cmdline" 2>/dev/null && is_ours "$p"; then
            pids="$pids $p"
        fi
    done
    kill -KILL "$victim"
fi
wait "$job"
rc=$?
job=
[ -n "$victim" ] && [ "$rc" -ne 0 ]
r=$?
t_ok $r "rank 0 killed in the team's setup (pid ${victim:-none}, job exit $rc)"
[ "$r" -eq 0 ] || t_diag "$out" 20
left=$(names $victim $pids | tr '\n' ' ')
if echo "$left" | grep -q "collgpu-ctl-$victim-"; then
    t_ok 0 "the killed job left its names behind: $left"
elif [ -z "$left" ]; then
    # under make check -j another test's dev_open may have swept them already (the rule under
    # test, done by a process that is not ours): the end state (4.) is still checked
    t_skip "the killed job left its names behind" "another job's dev_open swept them first"
else
    t_ok 1 "the killed job left its names behind, its control block among them: $left"
fi

"$RUN_MPI" 2 "$MPI_TESTS/test_smoke" device >"$out.2" 2>&1
rc=$?
! grep -q '^not ok' "$out.2" && grep -q '^ok' "$out.2"
t_ok $((rc != 0 || $? != 0)) "a second job gives right answers (exit $rc)"
[ "$tap_failed" -eq 0 ] || t_diag "$out.2" 20
left=$(names $victim $pids | tr '\n' ' ')
t_ok $((${#left} != 0)) \
    "after it, no collgpu* name of the killed job's processes is left: ${left:-none}"
t_done
