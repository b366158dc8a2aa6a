#!/usr/bin/env bash
# The other half of expect_output.sh: runs COMMAND and passes only when it FAILS (a
# non-zero exit, not a crash: signals and exit codes above 128 do not count) and a line
# of its output (stdout and stderr) matches the extended regex PATTERN. For planted bugs:
# the bug must be caught by the check that names it, not by anything else.
#   expect_failure.sh PATTERN COMMAND [ARGS...]
set -uo pipefail
pattern=$1
shift
# Shown as it comes (tee), so that a run ctest kills at its TIMEOUT still shows its output.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
((rc != 0)) || { echo "FAIL: $1 succeeded; the planted bug went unnoticed"; exit 1; }
((rc <= 128)) || { echo "FAIL: $1 crashed (exit $rc) instead of failing a check"; exit 1; }
grep -Eq -- "$pattern" "$log" ||
  { echo "FAIL: $1 failed (exit $rc), but no line of its output matches /$pattern/"; exit 1; }
echo "PASS: failed as it must (exit $rc): /$pattern/"
