#!/usr/bin/env bash
# The other half of expect_output.sh: runs COMMAND and passes only when it FAILS and its
# output (stdout and stderr) contains the fixed string PATTERN. For planted bugs: the
# bug must be caught by the check that names it, not by anything else.
#   expect_failure.sh PATTERN COMMAND [ARGS...]
set -u
pattern=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out" | tail -n 30
if [ "$rc" -eq 0 ]; then
  echo "expect_failure.sh: the command succeeded; the planted bug went unnoticed"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -qF -- "$pattern"; then
  echo "expect_failure.sh: the command failed (exit $rc), but not with: $pattern"
  exit 1
fi
echo "expect_failure.sh: failed as it must (exit $rc): $pattern"
