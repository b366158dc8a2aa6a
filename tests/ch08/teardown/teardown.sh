#!/usr/bin/env bash
# Chapter 08, an orderly end: a job of N ranks that ends with a final barrier and
# destroy() (or the destructor, or a watched group's destroy()) exits 0 on every rank,
# writes nothing to stderr (no "connection reset", no "closed the connection", no
# warning), and rank 0's store outlives every rank's use of it. Drives ch08_teardown.
#   teardown.sh <ddprun|mpirun> <np> <end> <ch08_teardown> <ddprun> <mpiexec> <scratch>
set -u
launcher=$1 np=$2 end=$3 teardown=$4 ddprun=$5 mpiexec=$6 work=$7
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL ($launcher, $np ranks, $end): $*"; exit 1; }
export OMP_NUM_THREADS=1

if [ "$launcher" = ddprun ]; then
  timeout 60 "$ddprun" --nproc-per-node "$np" "$teardown" --backend tcp --end "$end" \
    --tag "$work/" >out.log 2>err.log
  rc=$?
else
  timeout 60 "$mpiexec" -np "$np" --oversubscribe "$teardown" --backend mpi --end "$end" \
    --tag "$work/" >out.log 2>err.log
  rc=$?
fi
show() { echo "--- stdout"; cat out.log; echo "--- stderr"; cat err.log; }
[ "$rc" -eq 0 ] || { show; fail "the launcher exited $rc, expected 0"; }
# ddprun passes each rank's stderr on with a "[rank N] " prefix: any line at all is a
# warning or an error that a clean end must not print.
[ ! -s err.log ] || { show; fail "stderr is not empty"; }
for ((r = 0; r < np; r++)); do
  grep -Eq "ch08_teardown: rank $r: ok$" out.log || { show; fail "rank $r did not end ok"; }
done
# Rank 0's destroy() returns only once every rank has entered its end: its store (which
# the last rank used one second after the barrier) was there for all of them.
if [ "$launcher" = ddprun ]; then
  stop=$(sed -nE 's/.*rank 0: store may stop at ([0-9]+)$/\1/p' out.log)
  [ -n "$stop" ] || { show; fail "rank 0 did not say when its store may stop"; }
  while read -r entered; do
    [ "$stop" -ge "$entered" ] || { show; fail "rank 0 let its store go before a rank had ended"; }
  done < <(sed -nE 's/.*entered the end at ([0-9]+)$/\1/p' out.log)
fi
pgrep -f -- "--tag $work/" >/dev/null && fail "processes left behind"
echo "ok: $launcher, $np ranks, $end"
