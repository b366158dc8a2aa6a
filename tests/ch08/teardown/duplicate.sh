#!/usr/bin/env bash
# Chapter 08, a launcher started twice. Two launchers for one job, started at once on
# loopback with one --master-port, make two processes for every rank. Both must exit
# non-zero within 10 s (not wait out the 60 s timeout), say why with the likely cause,
# and leave no rank behind. Two ways it is found:
#   A  two ddprun: the second finds the first's claim on this node of the job and both
#      say "a second ddprun was started" (Note [A launcher started twice], tools/ddprun);
#   B  ddprun and mpirun, which cannot see each other: the ranks find the duplicate at the
#      store and name both pids (Note [Claiming a rank], dist/tcp_store.cpp).
#   duplicate.sh <ch08_desync> <ch05_fault> <ddprun> <mpiexec> <scratch folder>
set -u
desync=$1 fault=$2 ddprun=$3 mpiexec=$4 work=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL (duplicate): $*"; exit 1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
export OMP_NUM_THREADS=1 DDP_JOB_TOKEN=duplicate-$$  # one job, whichever launcher
# A long loop (3000 steps): the ranks that met must be stopped by the conflict, not
# finish first. --timeout-s 60: a rank that waits for a peer instead would be a hang.
job=(--scenario ok --steps 3000 --timeout-s 60 --tag "$work/")

# pair <case> <launcher b: ddprun|mpirun>: launchers a (ddprun) and b at once; their exit
# codes in rc_a, rc_b and logs in <case>.a.log, <case>.b.log.
pair() {
  local port start pids=()
  port=$("$fault" free-port) || fail "could not pick a free port"
  start=$(now_ms)
  timeout 60 "$ddprun" --nproc-per-node 2 --master-port "$port" "$desync" "${job[@]}" \
    >"$1.a.log" 2>&1 &
  pids+=($!)
  if [ "$2" = ddprun ]; then
    timeout 60 "$ddprun" --nproc-per-node 2 --master-port "$port" "$desync" "${job[@]}" \
      >"$1.b.log" 2>&1 &
  else
    timeout 60 "$mpiexec" -np 2 --oversubscribe -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" \
      -x DDP_JOB_TOKEN "$desync" --backend tcp "${job[@]}" >"$1.b.log" 2>&1 &
  fi
  pids+=($!)
  wait "${pids[0]}"; rc_a=$?
  wait "${pids[1]}"; rc_b=$?
  took=$(($(now_ms) - start))
  echo "  $1: launchers exited $rc_a and $rc_b after ${took} ms"
  [ "$took" -le 10000 ] || { cat "$1".*.log; fail "$1: took ${took} ms, more than 10 s"; }
  for set in a b; do
    rc=rc_$set
    [ "${!rc}" -ne 0 ] && [ "${!rc}" -ne 124 ] ||
      { cat "$1.$set.log"; fail "$1: launcher $set exited ${!rc}"; }
    grep -q "the launcher was started twice on this node" "$1.$set.log" ||
      { cat "$1.$set.log"; fail "$1: launcher $set's output has no hint"; }
  done
}

pair A ddprun
for set in a b; do
  grep -q "a second ddprun was started for node 0 of the job at 127.0.0.1:" A.$set.log ||
    { cat A.$set.log; fail "A: launcher $set does not name the second ddprun"; }
done

pair B mpirun
for set in a b; do
  line=$(grep -E "(two processes were started as rank 0|is claimed twice)" B.$set.log | head -1)
  [ -n "$line" ] || { cat B.$set.log; fail "B: launcher $set's ranks do not name the duplicate"; }
  pid_list=$(echo "$line" | grep -oE "pid [0-9]+" | sort -u | wc -l)
  [ "$pid_list" -ge 2 ] || { cat B.$set.log; fail "B: launcher $set's message names < 2 pids"; }
done

sleep 0.5
if pgrep -f -- "--tag $work/" >/dev/null; then
  pgrep -af -- "--tag $work/"
  pkill -9 -u "$EUID" -f -- "--tag $work/"
  fail "processes left behind"
fi
grep -h "a second ddprun" A.b.log | head -1 | cut -c1-200
grep -hE "claimed twice|started as rank 0" B.a.log B.b.log | head -1 | cut -c1-200
echo "ok: duplicate"
