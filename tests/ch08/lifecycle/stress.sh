#!/usr/bin/env bash
# Chapter 08, stress: the kill -9 + restart scenario of lifecycle.sh, N times, with the
# victim (rank 0 or 1) and the moment of the kill (0 to 0.8 s into epoch 2: in epoch 2, 3,
# or during a save; an epoch of this run takes about 0.3 s on an idle 2-core machine, and
# the run is over about 1 s into epoch 2) drawn at random, counting what went wrong. Not
# part of ctest:
#   bash tests/ch08/lifecycle/stress.sh build/release 20
# Counts: hangs (a run still going after 180 s), orphans (a process of a run alive after
# it ended: lifecycle.sh's own check, and any process naming the run's folder), mismatches
# (final checkpoint != the uninterrupted run's) and other failures. Exit 0 when all passed.
set -u
build=$(cd "$1" && pwd) n=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
scratch=$(mktemp -d)   # a fresh folder under $TMPDIR; the failed runs' logs stay there
hangs=0 orphans=0 mismatches=0 others=0 passed=0
for ((i = 1; i <= n; i++)); do
  victim=$((RANDOM % 2))
  delay=$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", r % 81 / 100 }')
  work=$scratch/run$i
  rc=0
  LIFECYCLE_VICTIM=$victim LIFECYCLE_KILL_DELAY=$delay timeout -k 5 180 \
    bash "$here/lifecycle.sh" restart "$build/bin/ddp-train" "$build/bin/ddprun" \
    "$build/tests/ch08_checkpoint_entry" "$root/data/mnist-10k" "$work" \
    >"$scratch/run$i.log" 2>&1 || rc=$?
  sleep 0.5  # let a process that is about to exit do so before it counts as an orphan
  left=$(pgrep -f "$work/" | tr '\n' ' ')
  if ((rc == 124 || rc == 137)); then
    verdict=hang hangs=$((hangs + 1))
  elif grep -q '^FAIL(orphan)' "$scratch/run$i.log" || [ -n "$left" ]; then
    verdict=orphan orphans=$((orphans + 1))
  elif grep -q '^FAIL(mismatch)' "$scratch/run$i.log"; then
    verdict=mismatch mismatches=$((mismatches + 1))
  elif ((rc != 0)); then
    verdict=other others=$((others + 1))
  else
    verdict=ok passed=$((passed + 1))
  fi
  [ -z "$left" ] || kill -9 $left 2>/dev/null
  # Where the restarted job resumed: the last checkpoint before the kill.
  from=$(sed -n 's/.*after the restart: resumed from ck: \(epoch [0-9]*\), .*/\1/p' \
    "$scratch/run$i.log")
  echo "run $i/$n: rank $victim killed $delay s into epoch 2${from:+, resumed at $from}:" \
    "$verdict$([ "$verdict" = ok ] || echo " (log: $scratch/run$i.log)")"
done
echo "stress: $n runs: $passed passed, $hangs hangs, $orphans orphans, $mismatches mismatches," \
  "$others other failures"
((passed == n)) && rm -rf "$scratch"
((passed == n))
