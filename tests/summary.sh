#!/bin/sh
# summary.sh [TEST-SUITE-LOG] - print the closing line of a `make check` run:
#   N passed, M failed, K skipped
# counted over every TAP result of every test program (a skipped program counts once).
log=${1:-tests/test-suite.log}
[ -f "$log" ] || { echo "0 passed, 1 failed (no $log)"; exit 1; }
total=$(sed -n 's/^# TOTAL: *//p' "$log" | head -1)
pass=$(sed -n 's/^# PASS: *//p' "$log" | head -1)
skip=$(sed -n 's/^# SKIP: *//p' "$log" | head -1)
fail=$(sed -n 's/^# FAIL: *//p' "$log" | head -1)
xpass=$(sed -n 's/^# XPASS: *//p' "$log" | head -1)
err=$(sed -n 's/^# ERROR: *//p' "$log" | head -1)
echo "${pass:-0} passed, $(( ${fail:-0} + ${xpass:-0} + ${err:-0} )) failed, ${skip:-0} skipped"
