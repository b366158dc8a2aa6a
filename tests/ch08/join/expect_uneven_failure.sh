#!/usr/bin/env bash
# Chapter 08: uneven inputs without a Join must FAIL, never hang. Runs COMMAND (a launcher
# with ch08_join --scenario no-join) and passes only when the job exits non-zero (not a
# crash: exit codes above 128 do not count), at least one rank reported
# "error after T s" with T <= LIMIT, no rank reported a later one, no rank finished
# without an error, and the whole job took at most LIMIT + 10 s (the launcher's start).
#   expect_uneven_failure.sh LIMIT COMMAND [ARGS...]
# (A launcher ends the job once one rank has failed: the ranks it killed print nothing,
# so "every rank" is checked as "the job ended, non-zero, in time".)
set -uo pipefail
limit=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s.%N)
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
elapsed=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.1f", a - b }')
((rc != 0)) || { echo "FAIL: the job succeeded; uneven inputs went unnoticed"; exit 1; }
((rc <= 128)) || { echo "FAIL: the job crashed (exit $rc) instead of failing"; exit 1; }
if grep -q "finished without an error" "$log"; then
  echo "FAIL: a rank finished without an error"; exit 1
fi
times=$(grep -Eo "error after [0-9.]+ s" "$log" | grep -Eo "[0-9.]+")
[[ -n "$times" ]] || { echo "FAIL: no rank reported 'error after T s' (exit $rc)"; exit 1; }
for t in $times; do
  le "$t" "$limit" || { echo "FAIL: a rank failed only after $t s > $limit s"; exit 1; }
done
le "$elapsed" "$((limit + 10))" ||
  { echo "FAIL: the job took $elapsed s > $limit + 10 s"; exit 1; }
echo "PASS: failed as it must (exit $rc) after $elapsed s; ranks reported:" $times "s"
