#!/usr/bin/env bash
# expect_failure.sh PATTERN COMMAND...: passes when COMMAND fails AND its output contains
# PATTERN (a planted bug must be caught by the check that names it, not by anything else).
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
