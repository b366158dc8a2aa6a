#!/usr/bin/env bash
# Runs COMMAND and passes only when it exits 0 and a line of its output (stdout and
# stderr) matches the extended regex PATTERN. For tests of programs that print a final
# "ok" line: ctest's PASS_REGULAR_EXPRESSION alone would ignore the exit code, so a rank
# that crashed after that line was printed would go unnoticed.
#   expect_output.sh PATTERN COMMAND [ARGS...]
set -uo pipefail
pattern=$1
shift
# Shown as it comes (tee), so that a run ctest kills at its TIMEOUT still shows its output.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
((rc == 0)) || { echo "FAIL: $1 exited with $rc"; exit 1; }
grep -Eq -- "$pattern" "$log" ||
  { echo "FAIL: no line of the output matches /$pattern/"; exit 1; }
