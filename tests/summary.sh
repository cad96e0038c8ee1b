#!/bin/sh
# summary.sh [TEST-SUITE-LOG] - the end of a `make check` run: every skipped test by name with
# its reason, every expected failure (a known bug a test documents with TAP's "# TODO"), then
# the closing line
#   N passed, M failed, K skipped
# counted over every TAP result of every test program (a skipped program counts once).  The
# closing line is always the last line, in exactly that form (CI reads it).
#
# The skips come from the TAP driver's result lines, which automake copies into the suite log
# for every program with a result other than PASS ("SKIP: mpi/x.sh 3 - what # SKIP why" for one
# check, "SKIP: gpu/y.sh - why" for a program that printed "1..0 # SKIP why"); tap.h says how a
# test skips, and that a skip always gives its reason.
log=${1:-tests/test-suite.log}
[ -f "$log" ] || { echo "0 passed, 1 failed, 0 skipped (no $log)"; exit 1; }
total=$(sed -n 's/^# TOTAL: *//p' "$log" | head -1)
pass=$(sed -n 's/^# PASS: *//p' "$log" | head -1)
skip=$(sed -n 's/^# SKIP: *//p' "$log" | head -1)
fail=$(sed -n 's/^# FAIL: *//p' "$log" | head -1)
xpass=$(sed -n 's/^# XPASS: *//p' "$log" | head -1)
err=$(sed -n 's/^# ERROR: *//p' "$log" | head -1)
: "$total"
if [ "${skip:-0}" -gt 0 ]; then
    echo "skipped (${skip}):"
    # one line per skip: the test, the check when one check was skipped, and the reason
    awk '
        # the section headers of the suite log ("SKIP: name" over a line of "=") are not results
        function show(line,    why) {
            why = ""
            if (match(line, / # [Ss][Kk][Ii][Pp]/)) {
                why = substr(line, RSTART + RLENGTH)
                line = substr(line, 1, RSTART - 1)
            } else if (line !~ /^[^ ]+ [0-9]+ - / && match(line, / - /)) {
                why = substr(line, RSTART + RLENGTH)
                line = substr(line, 1, RSTART - 1)
            }
            sub(/^[ \t]+/, "", why)
            printf "  %s: %s\n", line, (why == "") ? "(no reason given)" : why
        }
        held != "" && !/^=+$/ { show(held) }
        { held = "" }
        /^SKIP: / { held = substr($0, 7) }
        END { if (held != "") show(held) }' "$log"
fi
# expected failures (TAP "# TODO": known bugs a test documents) are listed, not counted
xfail=$(sed -n 's/^# XFAIL: *//p' "$log" | head -1)
if [ "${xfail:-0}" -gt 0 ]; then
    echo "expected failures, known bugs (${xfail}):"
    sed -n 's/^XFAIL: /  /p' "$log"
fi
echo "${pass:-0} passed, $(( ${fail:-0} + ${xpass:-0} + ${err:-0} )) failed, ${skip:-0} skipped"
