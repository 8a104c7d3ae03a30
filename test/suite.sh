# test/suite.sh — how test/run runs its suites and reports them; sourced by
# test/run, and by test/tap/018_suite_summary.pl, which runs it on suites of
# its own.
#
# suite NAME WHAT COUNTER COMMAND...
#     Runs COMMAND (a shell function or a program) with its output into
#     $SUITE_LOGS/NAME.log, appended to the run's full log $RUN_LOG; COUNTER
#     counts that log's passes and failures (count_tap, count_regress,
#     count_ok, count_exit below); adds them to PASSED and FAILED, and prints
#     one line: the name, the counts, the seconds, WHAT it ran.  A suite that
#     failed also prints the last $SUITE_TAIL lines of its log.
# suite_total
#     Prints the total, "N passed, N failed" (the last line: .ci/run reads
#     it), after the name of the full log; returns non-zero on any failure.
#
# Adding a suite to `test/run check` is one line of check(): a suite NAME
# WHAT COUNTER COMMAND; COMMAND prints what COUNTER counts.

PASSED=0
FAILED=0
SUITE_TAIL=${SUITE_TAIL:-40}

# A counter reads the log $1 of a suite that exited with status $2 and sets
# SUITE_PASSED and SUITE_FAILED.  A suite that failed without a failing
# test (a crash, a bad plan, a build error) counts one failure.
counted() {
	SUITE_PASSED=$1 SUITE_FAILED=$2
	if [ "$3" -ne 0 ] && [ "$SUITE_FAILED" -eq 0 ]; then SUITE_FAILED=1; fi
}

# TAP: "ok N" and "not ok N" lines, also of subtests (pgTAP, prove --verbose).
count_tap() {
	counted "$(grep -cE '^\s*ok [0-9]+' "$1" || true)" "$(grep -cE '^\s*not ok [0-9]+' "$1" || true)" "$2"
}

# pg_regress prints one "... ok" or "... FAILED" per test up to PostgreSQL 15,
# a TAP line ("ok 1 - name", "not ok 2 - name") from 16 on.
count_regress() {
	counted "$(grep -cE '\.\.\. ok|^ok [0-9]+' "$1" || true)" "$(grep -ciE '\.\.\. failed|^not ok [0-9]+' "$1" || true)" "$2"
}

# Named results: "ok - what" and "not ok - what" lines.
count_ok() {
	counted "$(grep -cE '^ok - ' "$1" || true)" "$(grep -cE '^not ok - ' "$1" || true)" "$2"
}

# One test: the command's exit status.
count_exit() {
	if [ "$2" -eq 0 ]; then counted 1 0 0; else counted 0 1 "$2"; fi
}

suite() {
	local name=$1 what=$2 counter=$3 status=0 start=$SECONDS log
	shift 3
	: "${SUITE_LOGS:=$WORK/logs}" "${RUN_LOG:=$SUITE_LOGS/run.log}"
	mkdir -p "$SUITE_LOGS"
	log=$SUITE_LOGS/$name.log
	"$@" >"$log" 2>&1 </dev/null || status=$?
	{ echo "==== $name: $what"; cat "$log"; } >>"$RUN_LOG"
	"$counter" "$log" "$status"
	PASSED=$((PASSED + SUITE_PASSED))
	FAILED=$((FAILED + SUITE_FAILED))
	printf '%-12s %5d passed %3d failed %5d s   %s\n' "$name" "$SUITE_PASSED" "$SUITE_FAILED" \
		"$((SECONDS - start))" "$what"
	if [ "$SUITE_FAILED" -gt 0 ]; then
		echo "---- $name failed (exit $status); the last $SUITE_TAIL lines of its log:"
		tail -n "$SUITE_TAIL" "$log" | sed 's/^/    /'
		echo "----"
	fi
}

suite_total() {
	echo "full log: $RUN_LOG"
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" -eq 0 ]
}
