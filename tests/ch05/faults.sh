#!/usr/bin/env bash
# Chapter 05, faults: a job whose rank dies, never arrives, or cannot meet must end, in
# time, with an error that names what went wrong. Drives ch05_fault (fault_main.cpp).
#   faults.sh <scenario> <ch05_fault> <ddprun> <mpiexec> <scratch folder>
# Scenarios:
#   kill-direct     4 ranks started here (RANK=... by hand), rank 2 SIGKILLs itself: every
#                   survivor exits 3 within the 10 s timeout, its error naming rank 2; no
#                   shared-memory segment of the job is left in /dev/shm (nor in kill-ddprun)
#   kill-ddprun     the same under ddprun --nproc-per-node 3 (rank 1 dies): ddprun exits
#                   137 within 20 s, naming rank 1 as the rank that failed first (signal
#                   9), and a survivor's forwarded error names rank 1 too
#   kill-mpi        the mpi backend under mpirun -np 3 (rank 1 dies): Open MPI tears the
#                   job down; mpirun exits non-zero naming "rank 1" and signal 9
#   never-arrives   world size 3, only ranks 0 and 1 start, timeout 3 s: both fail in time,
#                   rank 1 names rank 2 and its store key, rank 0 says 2 of 3 connected
#   port-in-use     rank 0's MASTER_PORT is already bound by a listener: it fails at once,
#                   naming the address and "Address already in use"
#   unreachable     rank 1 with nothing listening at MASTER_PORT, timeout 3 s: fails in
#                   time naming the address and asking whether rank 0 is up
#   world-disagree  rank 0 says world size 2, rank 1 says 3: both fail within the timeout,
#                   each saying which rank was started with which world size
#   shm-left        ranks under ddprun leave a segment in /dev/shm named as a tcp group
#                   names its own (as a crash during its set-up would): ddprun removes it
set -u
scenario=$1 fault=$2 ddprun=$3 mpiexec=$4 work=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL ($scenario): $*"; exit 1; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
export OMP_NUM_THREADS=1
port=$("$fault" free-port) || fail "could not pick a free port"
# The job's shared-memory segments are named after its token (dist/shm_name.hpp).
export DDP_JOB_TOKEN=faults$$
no_segment_left() {
  local left
  left=$(ls /dev/shm | grep "^ddp-$DDP_JOB_TOKEN-")
  [ -z "$left" ] || fail "left in /dev/shm: $left"
}

# start_rank <rank> <world> <log> ARGS...: one rank in the background, env:// by hand.
start_rank() {
  local rank=$1 world=$2 log=$3
  shift 3
  RANK=$rank WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 60 "$fault" "$@" >"$log" 2>&1 &
}
# ranks_0_and_1_fail <world of rank 0> <world of rank 1> ARGS...: starts ranks 0 and 1
# (rank0.log, rank1.log); both must exit 3, a ddp::Error, within 10 s.
ranks_0_and_1_fail() {
  local w0=$1 w1=$2 start p0 p1 rc0 rc1
  shift 2
  start=$(now_ms)
  start_rank 0 "$w0" rank0.log "$@"
  p0=$!
  start_rank 1 "$w1" rank1.log "$@"
  p1=$!
  wait $p0; rc0=$?
  wait $p1; rc1=$?
  within "$start" 10
  [ "$rc0" -eq 3 ] && [ "$rc1" -eq 3 ] || fail "ranks exited $rc0 and $rc1, expected 3 and 3"
}
# expect_in <file> <extended regex> <what>: fails, showing the file, unless it matches.
expect_in() {
  grep -Eq -- "$2" "$1" || { cat "$1"; fail "$3 (no match for /$2/ in $1)"; }
}
# within <start ms> <limit s>: fails when more than <limit> seconds have passed.
within() {
  local took=$(($(now_ms) - $1))
  [ "$took" -le $(($2 * 1000)) ] || fail "took ${took} ms, more than $2 s"
  echo "  ended after ${took} ms"
}

case $scenario in
kill-direct)
  start=$(now_ms)
  pids=()
  for r in 0 1 2 3; do
    start_rank $r 4 rank$r.log loop --kill-rank 2 --kill-at 40 --timeout-s 10
    pids+=($!)
  done
  for r in 0 1 2 3; do
    wait "${pids[$r]}" 2>/dev/null
    rc[$r]=$?
  done
  within "$start" 10
  [ "${rc[2]}" -eq 137 ] || { cat rank2.log; fail "rank 2 exited ${rc[2]}, not killed (137)"; }
  for r in 0 1 3; do
    [ "${rc[$r]}" -eq 3 ] || { cat rank$r.log; fail "survivor rank $r exited ${rc[$r]}, not 3"; }
    expect_in rank$r.log "rank $r: error after" "rank $r printed no error"
    # Its neighbours see rank 2 close the connection; rank 0 hears it through rank 1 or 3.
    expect_in rank$r.log "rank 2 .*(closed the connection|no failure report|died)" \
      "rank $r's error does not name the lost rank 2"
  done
  no_segment_left
  ;;
kill-ddprun)
  start=$(now_ms)
  timeout 60 "$ddprun" --nproc-per-node 3 "$fault" loop --kill-rank 1 --kill-at 40 \
    --timeout-s 10 >job.log 2>&1
  rc=$?
  within "$start" 20
  # A survivor can see the connection close, fail and be reaped before the kernel has
  # finished tearing rank 1 down; ddprun's blame window (kBlameWindow) still names rank 1,
  # the one killed by a signal, and exits with its code.
  [ "$rc" -eq 137 ] || { cat job.log; fail "ddprun exited $rc, expected 137 (rank 1's SIGKILL)"; }
  expect_in job.log "^ddprun: rank 1 .*failed first: killed by signal 9" \
    "ddprun does not name rank 1 as the rank that failed first"
  expect_in job.log "^\[rank [02]\] .*rank 1 " "no survivor names the lost rank 1"
  no_segment_left
  ;;
kill-mpi)
  start=$(now_ms)
  timeout 60 "$mpiexec" -np 3 --oversubscribe "$fault" loop --backend mpi --kill-rank 1 \
    --kill-at 40 --timeout-s 10 >job.log 2>&1
  rc=$?
  within "$start" 30
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat job.log; fail "mpirun exited $rc"; }
  # Open MPI's own report: "mpirun noticed that process rank 1 with PID ... exited on
  # signal 9 (Killed)." The survivors are killed by the runtime, not by our error path.
  expect_in job.log "process rank 1 .*signal 9" "mpirun's message does not name rank 1"
  ;;
never-arrives)
  ranks_0_and_1_fail 3 3 init --timeout-s 3
  expect_in rank1.log "rank 2 .*never" "rank 1 does not name the missing rank 2"
  expect_in rank1.log "tcp/addr/2" "rank 1 does not name the missing key"
  expect_in rank0.log "2 of 3 ranks" "rank 0 does not say how many ranks arrived"
  expect_in rank0.log "missing: rank 2" "rank 0 does not name the missing rank 2"
  ;;
port-in-use)
  start=$(now_ms)
  RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 60 "$fault" init-port-taken --timeout-s 3 >rank0.log 2>&1
  rc=$?
  within "$start" 3
  [ "$rc" -eq 3 ] || { cat rank0.log; fail "rank 0 exited $rc, expected 3"; }
  expect_in rank0.log "127\.0\.0\.1:$port.*Address already in use" \
    "the error does not name the address and the cause"
  ;;
unreachable)
  start=$(now_ms)
  start_rank 1 2 rank1.log init --timeout-s 3
  wait $!
  rc=$?
  within "$start" 10
  [ "$rc" -eq 3 ] || { cat rank1.log; fail "rank 1 exited $rc, expected 3"; }
  expect_in rank1.log "127\.0\.0\.1:$port" "the error does not name the master's address"
  expect_in rank1.log "rank 0 up" "the error does not ask whether rank 0 is up"
  ;;
world-disagree)
  ranks_0_and_1_fail 2 3 init --timeout-s 3
  want="rank 1 was started with world size 3, but rank 0 with 2"
  expect_in rank0.log "$want" "rank 0 does not report the disagreement"
  expect_in rank1.log "$want" "rank 1 does not report the disagreement"
  ;;
shm-left)
  # $$ in each rank's shell is that rank's pid: gone once ddprun returns.
  "$ddprun" --nproc-per-node 2 bash -c "touch /dev/shm/ddp-$DDP_JOB_TOKEN-x-\$\$-1" \
    >job.log 2>&1 || { cat job.log; fail "ddprun failed"; }
  no_segment_left
  ;;
*)
  fail "unknown scenario"
  ;;
esac
cat ./*.log | grep -E "error|ddprun:|noticed" | head -4 | cut -c1-160
echo "ok: $scenario"
