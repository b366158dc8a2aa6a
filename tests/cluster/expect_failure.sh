#!/usr/bin/env bash
# Runs the harness (run_job.sh) on a job that must fail and passes only when the harness
# reports the failure: exit code not 0, a FAIL line naming the job's exit code, and the
# job's own log in the output. Chapter 00 (label `cluster`).
#
#   expect_failure.sh METHOD SCRIPT EXPECTED-LOG-LINE [FORBIDDEN-LOG-LINE]
#
# FORBIDDEN-LOG-LINE: a line the job prints when it failed the wrong way (too slowly, say).
set -uo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
output=$(bash "$here/run_job.sh" "$1" "$2" line 'never printed by any job' 2>&1)
rc=$?
echo "$output"
echo "---- the harness exited with $rc ----"
((rc != 77)) || exit 77
((rc != 0)) || { echo "FAIL: the harness passed a job that exited non-zero"; exit 1; }
grep -q '^FAIL: .* exited with code [1-9]' <<<"$output" ||
  { echo "FAIL: the harness did not report the job's exit code"; exit 1; }
grep -qF -- "$3" <<<"$output" ||
  { echo "FAIL: the job's log line '$3' is not in the harness output"; exit 1; }
if (($# > 3)) && grep -qF -- "$4" <<<"$output"; then
  echo "FAIL: the job failed the wrong way: '$4'"
  exit 1
fi
echo "PASS: the harness reported the failed job with its log"
