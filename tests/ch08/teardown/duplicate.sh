#!/usr/bin/env bash
# Chapter 08, a launcher started twice (Note [Claiming a rank], dist/tcp_store.cpp): two
# `ddprun --nproc-per-node 2 --master-port P` started at once on loopback make two
# processes for every rank. Both launchers must exit non-zero within 10 s (not wait out
# the 60 s timeout), each output naming the duplicate with two different pids and the
# likely cause, and no rank may be left behind.
#   duplicate.sh <ch08_desync> <ch05_fault> <ddprun> <scratch folder>
set -u
desync=$1 fault=$2 ddprun=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL (duplicate): $*"; exit 1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
export OMP_NUM_THREADS=1
port=$("$fault" free-port) || fail "could not pick a free port"

start=$(now_ms)
for set in a b; do
  # A long loop (3000 steps): the ranks that met must be stopped by the conflict, not
  # finish first. --timeout-s 60: a rank that waits for a peer instead would be a hang.
  timeout 60 "$ddprun" --nproc-per-node 2 --master-port "$port" "$desync" --scenario ok \
    --steps 3000 --timeout-s 60 --tag "$work/" >"$set.log" 2>&1 &
  pids+=($!)
done
wait "${pids[0]}"; rc_a=$?
wait "${pids[1]}"; rc_b=$?
took=$(($(now_ms) - start))
echo "  launchers exited $rc_a and $rc_b after ${took} ms"
[ "$took" -le 10000 ] || { cat a.log b.log; fail "took ${took} ms, more than 10 s"; }
for set in a b; do
  rc=rc_$set
  [ "${!rc}" -ne 0 ] && [ "${!rc}" -ne 124 ] ||
    { cat $set.log; fail "launcher $set exited ${!rc}"; }
  line=$(grep -E "(two processes were started as rank 0|is claimed twice)" $set.log | head -1)
  [ -n "$line" ] || { cat $set.log; fail "launcher $set's ranks do not name the duplicate"; }
  pid_list=$(echo "$line" | grep -oE "pid [0-9]+" | sort -u | wc -l)
  [ "$pid_list" -ge 2 ] || { cat $set.log; fail "launcher $set's message names fewer than 2 pids"; }
  grep -q "the launcher was started twice on this node" $set.log ||
    { cat $set.log; fail "launcher $set's message has no hint"; }
done
sleep 0.5
if pgrep -f -- "--tag $work/" >/dev/null; then
  pgrep -af -- "--tag $work/"
  pkill -9 -f -- "--tag $work/"
  fail "processes left behind"
fi
grep -hE "claimed twice|started as rank 0" a.log b.log | head -2 | cut -c1-200
echo "ok: duplicate"
