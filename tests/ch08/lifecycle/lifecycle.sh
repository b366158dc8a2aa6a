#!/usr/bin/env bash
# Chapter 08, a run's life: stopped on request, killed, restarted, resumed elsewhere.
# ddp-train on 2 (or 1, 4) CPU ranks under ddprun, on the 256 digits of small_mnist with
# a global batch of 32: 8 steps per epoch.
#   lifecycle.sh <scenario> <ddp-train> <ddprun> <ch08_checkpoint_entry> <data> <scratch>
# Scenarios:
#   stop             SIGUSR1 to ddprun mid-run: every rank exits 75, rank 0 says after
#                    which step and how to resume, ddprun exits 75; resuming ends with
#                    the uninterrupted run's checkpoint, bit for bit. SIGUSR1 to rank 1
#                    alone: both ranks stop after the same step (they agree), ddprun exits
#                    75. Without --save, SIGTERM to the ranks and to ddprun (each rank gets
#                    it twice, as under srun): 75 and "no checkpoint". Two SIGINTs: gone
#                    at once.
#   resume-any-step  stopped by --max-steps k for several k, resumed: the same final
#                    checkpoint as the uninterrupted run, bit for bit (2 ranks, tcp).
#                    A truncated checkpoint: --resume names the file and the fault;
#                    --resume auto says it is not usable and starts fresh
#   world-size       saved on 2 ranks at step 5, resumed on 1 and on 4 (and 4 -> 2): the
#                    resumed run says it continues at sample 160 of epoch 1's order, trains
#                    to the end (16 steps), and the per-rank loss sums are folded (totals
#                    kept); another global batch is still refused
#   restart-options  ddprun --max-restarts with a stand-in program: DDPRUN_RESTART_COUNT
#                    counts 0..N, "restart k of N" is printed, then the failing code; exit
#                    75 and a signal to ddprun are not restarted
#   restart          ddprun --max-restarts 1 ddp-train --resume auto --save ck: rank 1 is
#                    killed (-9) after the first checkpoint; the job restarts, resumes from
#                    it, and ends with the uninterrupted run's checkpoint, bit for bit; no
#                    process is left
#   kill9            rank 1 killed (-9), no restarts, ddp-train --timeout 10: ddprun exits
#                    non-zero within timeout + 5 s, no process is left
#   timeout          rank 1 paused (SIGSTOP) mid-training, ddp-train --timeout 3: rank 0's
#                    watchdog gives up after the group's 3 s, naming 3000 ms; ddprun exits
#                    4; no process is left. (That --timeout reaches the group; that no wait
#                    of the DDP layer keeps a 300 s of its own is test_ch08_group_deadline's.)
#   start-up         a stop signal while a rank waits in the rendezvous for a rank that
#                    never comes (rank 0 serving the store, rank 1 dialling it): the rank
#                    exits 75 at once, saying it stopped before the first step, instead of
#                    waiting out its --timeout 30
# A failure prints one "FAIL(kind): ..." line; kind is hang, orphan, mismatch or other
# (stress.sh counts them). stress.sh varies the restart scenario through two variables:
# LIFECYCLE_VICTIM (the rank killed, default 1) and LIFECYCLE_KILL_DELAY (seconds to wait
# after epoch 2 has begun, default 0).
set -u
scenario=$1 bin=$2 ddprun=$3 entry=$4 data=$5 work=$6
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
. "$here/../../ch04_train/common.sh"
small_mnist "$data" mnist && data=$PWD/mnist
export OMP_NUM_THREADS=1
flags=(--data "$data" --device cpu --threads 1 --seed 3 --global-batch-size 32)

failk() { echo "FAIL($1): $2"; exit 1; }

# wait_for <seconds> <command...>: true once the command succeeds, false after the time.
wait_for() {  # (scaled for sanitizer builds: DDP_TEST_TIME_SCALE, cmake/DdpTesting.cmake)
  local deadline=$((SECONDS + $1 * ${DDP_TEST_TIME_SCALE:-1}))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}
# start <log> <ddprun args...>: ddprun in the background; its pid in $job.
start() {
  local log=$1
  shift
  "$ddprun" "$@" >"$log.raw" 2>&1 &
  job=$!
}
# finish <log> <seconds>: waits for $job; its exit code in $rc; <log> without prefixes.
# A job still running after <seconds> is a hang: killed, and the test fails.
finish() {
  wait_for "$2" eval '! kill -0 $job 2>/dev/null' || {
    kill -9 "$job" 2>/dev/null
    cat "$1.raw"
    failk hang "the job was still running after $2 s"
  }
  rc=0
  wait "$job" || rc=$?
  sed 's/^\[rank [0-9]*\] //' "$1.raw" >"$1"
}
# rank_pid <rank>: the pid of $job's rank (ddprun's child with RANK=<rank>).
rank_pid() {
  local p
  for p in $(pgrep -P "$job"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$1" && { echo "$p"; return 0; }
  done
  return 1
}
# Training is under way once rank 0 reports a step of epoch <e>.
in_epoch() { grep -qs "^\[rank 0\] epoch $1/[0-9]* step" "$log.raw"; }
# start_training <log> <flags...>: ddp-train on 2 ranks for 4 epochs under ddprun, in the
# background ($job), returning once epoch 2 is under way.
start_training() {
  log=$1
  shift
  start "$log" --nproc-per-node 2 "$bin" "${flags[@]}" --epochs 4 "$@"
  wait_for 60 in_epoch 2 || { cat "$log.raw"; failk other "training did not reach epoch 2"; }
}
# no_orphans <pids...>: none of these processes may still exist.
no_orphans() {
  local p
  for p in "$@"; do
    if kill -0 "$p" 2>/dev/null; then
      ps -o pid,stat,args -p "$p"
      failk orphan "process $p outlived its job"
    fi
  done
}
# uninterrupted <epochs>: full.ckpt from a run that nobody stopped.
uninterrupted() {
  run_ranks full.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --epochs "$1" \
    --save full.ckpt
  ((rc == 0)) || { cat full.log; failk other "the uninterrupted run exited $rc"; }
}
same_as_full() {  # same_as_full <checkpoint> <what>
  cmp full.ckpt "$1" ||
    failk mismatch "$2: the final checkpoint differs from the uninterrupted run's"
}

case $scenario in
stop)
  uninterrupted 4
  # 1. SIGUSR1 to ddprun, which forwards it to both ranks.
  start_training usr1 --save s.ckpt
  kill -USR1 "$job"
  finish $log 60
  ((rc == 75)) || { cat $log; failk other "ddprun exited $rc after SIGUSR1, expected 75"; }
  line=$(grep '^stopped by SIGUSR1 after step' $log) ||
    { cat $log; failk other "no 'stopped by SIGUSR1' line"; }
  grep -q 'checkpoint s.ckpt written; continue with --resume s.ckpt$' <<<"$line" ||
    failk other "the stop line does not say how to resume: $line"
  [ "$(grep -c '^\[rank 0\] stopped by' $log.raw)" = 1 ] &&
    ! grep -q '^\[rank 1\] stopped' $log.raw ||
    { cat $log.raw; failk other "rank 0, and only rank 0, should print the stop line"; }
  grep -q 'every rank stopped on request (exit code 75)' $log ||
    { cat $log; failk other "ddprun does not say that the ranks stopped on request"; }
  step=$(sed -n 's/^stopped by SIGUSR1 after step \([0-9]*\):.*/\1/p' $log)
  echo "SIGUSR1 to ddprun: stopped after step $step"
  [ "$("$entry" s.ckpt progress.global_step)" = "$step" ] ||
    failk other "the checkpoint is not at step $step"
  run_ranks rest.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --epochs 4 \
    --resume s.ckpt --save s.ckpt
  ((rc == 0)) || { cat rest.log; failk other "the resumed run exited $rc"; }
  same_as_full s.ckpt "stopped by SIGUSR1 at step $step and resumed"

  # 2. SIGUSR1 to rank 1 alone: rank 0 learns of it through the agreement.
  start_training one --save one.ckpt
  kill -USR1 "$(rank_pid 1)"
  finish $log 60
  ((rc == 75)) || { cat $log; failk other "SIGUSR1 to rank 1: ddprun exited $rc, expected 75"; }
  grep -q '^stopped by SIGUSR1 after step' $log || { cat $log; failk other "no stop line"; }
  grep -q 'the ranks stopped on request (exit code 75)' $log ||
    { cat $log; failk other "ddprun does not report the requested stop"; }
  echo "SIGUSR1 to rank 1 only: $(grep '^stopped by' $log)"

  # 3. Without --save: stopped all the same, and saying that nothing can be resumed. The
  # SIGTERM reaches each rank twice, directly and forwarded by ddprun, as under srun, which
  # signals every process of its step: a repeated SIGTERM must not end a rank at once.
  start_training nosave
  pids=$(pgrep -P "$job")
  kill -TERM $pids && sleep 0.02 && kill -TERM "$job"
  finish $log 60
  ((rc == 75)) || { cat $log; failk other "ddprun exited $rc after SIGTERM, expected 75"; }
  grep -q '^stopped by SIGTERM after step [0-9]*: no --save was given' $log ||
    { cat $log; failk other "no 'no --save was given' line"; }

  # 4. Ctrl-C twice: the second one ends the ranks at once, without a checkpoint.
  start_training twice --save twice.ckpt
  pids=$(pgrep -P "$job")
  # To the ranks directly, every 2 ms until one of them is gone: the same signal sent twice
  # at once is delivered once, and a stop can take less than the 20 ms this used to wait
  # (a step of this test's batch takes ~20 ms on an idle 2-core box), so one fixed second
  # signal could come after the ranks had already stopped. Some signal after the first
  # surely arrives during the stop.
  for ((i = 0; i < 2500; ++i)); do
    kill -INT $pids 2>/dev/null || break
    sleep 0.002
  done
  finish $log 30
  ((rc != 0 && rc != 75)) || { cat $log; failk other "two SIGINTs: ddprun exited $rc"; }
  grep -q 'killed by signal 2' $log ||
    { cat $log; failk other "no rank died of the second SIGINT"; }
  no_orphans $pids
  echo "ok: stopped on request (75) and resumed bit for bit; one signalled rank stops all;"
  echo "    no --save is said; a second SIGINT ends the ranks at once"
  ;;

resume-any-step)
  uninterrupted 2
  for k in 1 7 8 13; do
    run_ranks "part$k.log" "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --epochs 2 \
      --max-steps "$k" --save "cut$k.ckpt"
    ((rc == 0)) || { cat "part$k.log"; failk other "--max-steps $k exited $rc"; }
    run_ranks "rest$k.log" "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --epochs 2 \
      --resume "cut$k.ckpt" --save "cut$k.ckpt"
    ((rc == 0)) || { cat "rest$k.log"; failk other "resuming at step $k exited $rc"; }
    where="epoch $((k / 8 + 1)), step $((k % 8)) of it ($k steps in all)"
    grep -q "^resumed from cut$k.ckpt: $where$" "rest$k.log" ||
      { cat "rest$k.log"; failk other "no resume line at step $k"; }
    same_as_full "cut$k.ckpt" "resumed at step $k"
    echo "resumed at step $k: the same checkpoint"
  done
  # What a save that was not atomic, killed halfway, would leave.
  head -c 30000 cut7.ckpt >half.ckpt
  rc=0
  out=$("$bin" "${flags[@]}" --epochs 2 --resume half.ckpt 2>&1) || rc=$?
  ((rc == 1)) && grep -q 'read_state_dict(half.ckpt): .*the file is truncated' <<<"$out" ||
    { echo "$out"; failk other "--resume of a truncated file: exit $rc, or no message naming it"; }
  rc=0
  out=$("$bin" "${flags[@]}" --epochs 2 --max-steps 1 --resume auto --save half.ckpt 2>&1) || rc=$?
  skipped='^--resume auto: no checkpoint at half.ckpt (not usable: read_state_dict(half.ckpt): '
  ((rc == 0)) && grep -q "$skipped.*truncated.*): starting fresh$" <<<"$out" ||
    { echo "$out"; failk other "--resume auto of a truncated file: exit $rc, or no fresh start"; }
  [ "$("$entry" half.ckpt progress.global_step)" = 1 ] ||
    failk other "--resume auto did not replace the truncated file with a fresh run's checkpoint"
  echo "ok: resumed at every step tried, bit for bit; a truncated checkpoint is named, or skipped"
  ;;

world-size)
  run_ranks two.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --epochs 2 --max-steps 5 \
    --save two.ckpt
  ((rc == 0)) || { cat two.log; failk other "the 2-rank run exited $rc"; }
  loss=$("$entry" two.ckpt progress.loss_sum_bits double)
  [ "$("$entry" two.ckpt progress.images_seen)" = "80 80" ] ||
    failk other "2 ranks after 5 steps of 16 images: images_seen is not '80 80'"
  # resume_on <ranks> <from checkpoint> <log>: continue on <ranks> ranks to the end.
  resume_on() {
    cp "$2" "$3.ckpt"
    if (($1 == 1)); then
      rc=0
      "$bin" "${flags[@]}" --epochs 2 --resume "$3.ckpt" --save "$3.ckpt" >"$3.log" 2>&1 || rc=$?
    else
      run_ranks "$3.log" "$ddprun" --nproc-per-node "$1" "$bin" "${flags[@]}" --epochs 2 \
        --resume "$3.ckpt" --save "$3.ckpt"
    fi
    ((rc == 0)) || { cat "$3.log"; failk other "resuming on $1 ranks exited $rc"; }
  }
  for to in 1 4; do
    resume_on $to two.ckpt "to$to"
    continues="epoch 1's order continues at sample 160 (global batch 32)"
    grep -q "^resumed on $to ranks\? from a checkpoint of 2: $continues" "to$to.log" ||
      { cat "to$to.log"; failk other "2 -> $to: no line saying where it continues"; }
    grep -q '^final: test accuracy' "to$to.log" ||
      { cat "to$to.log"; failk other "2 -> $to did not finish"; }
    [ "$("$entry" "to$to.ckpt" progress.global_step)" = 16 ] ||
      failk other "2 -> $to: the final checkpoint is not at step 16"
    echo "2 -> $to ranks: $(grep '^resumed on' "to$to.log" | cut -d';' -f1)"
  done
  # The per-rank sums, folded: stopped again at once (--max-steps 5 is used up), each
  # run saves what it loaded. 2 -> 1: rank 0 holds both; 2 -> 4: ranks 0, 1 their own.
  for to in 1 4; do
    cp two.ckpt "fold$to.ckpt"
    if ((to == 1)); then
      "$bin" "${flags[@]}" --epochs 2 --max-steps 5 --resume fold1.ckpt --save fold1.ckpt \
        >fold1.log 2>&1 || { cat fold1.log; failk other "folding into 1 rank failed"; }
    else
      run_ranks fold4.log "$ddprun" --nproc-per-node 4 "$bin" "${flags[@]}" --epochs 2 \
        --max-steps 5 --resume fold4.ckpt --save fold4.ckpt
      ((rc == 0)) || { cat fold4.log; failk other "folding into 4 ranks failed"; }
    fi
  done
  [ "$("$entry" fold1.ckpt progress.images_seen)" = 160 ] ||
    failk other "2 -> 1: images_seen is $("$entry" fold1.ckpt progress.images_seen), not 160"
  [ "$("$entry" fold4.ckpt progress.images_seen)" = "80 80 0 0" ] ||
    failk other "2 -> 4: images_seen is $("$entry" fold4.ckpt progress.images_seen)"
  [ "$("$entry" fold4.ckpt progress.loss_sum_bits double)" = "$loss 0 0" ] ||
    failk other "2 -> 4: the loss sums $loss were not kept by ranks 0 and 1"
  one=$("$entry" fold1.ckpt progress.loss_sum_bits double)
  want=$(awk -v a="${loss% *}" -v b="${loss#* }" 'BEGIN { printf "%.6g", a + b }')
  [ "$(awk -v x="$one" 'BEGIN { printf "%.6g", x }')" = "$want" ] ||
    failk other "2 -> 1: the loss sum $one is not the sum of $loss"
  # 4 -> 2: the same position from a checkpoint of 4 ranks.
  run_ranks four.log "$ddprun" --nproc-per-node 4 "$bin" "${flags[@]}" --epochs 2 --max-steps 5 \
    --save four.ckpt
  ((rc == 0)) || { cat four.log; failk other "the 4-rank run exited $rc"; }
  resume_on 2 four.ckpt 4to2
  grep -q "^resumed on 2 ranks from a checkpoint of 4: epoch 1's order continues at sample 160" \
    4to2.log || { cat 4to2.log; failk other "4 -> 2: no line saying where it continues"; }
  echo "4 -> 2 ranks: $(grep '^resumed on' 4to2.log | cut -d';' -f1)"
  # The global batch decides the samples of a step: another one is refused.
  run_ranks other.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --epochs 2 \
    --global-batch-size 64 --resume two.ckpt
  ((rc != 0)) && grep -q 'the global batch (--batch-size x ranks) 32 (this run: 64)' other.log ||
    { cat other.log; failk other "another global batch was not refused by name"; }
  echo "ok: the same sample position on 1, 2 and 4 ranks; loss sums folded; another global"
  echo "    batch refused"
  ;;

restart-options)
  # A stand-in rank that fails until its restart count reaches 2.
  stand_in='echo "count=$DDPRUN_RESTART_COUNT of $DDPRUN_MAX_RESTARTS"
            ((DDPRUN_RESTART_COUNT >= 2)) || exit 3'
  out=$("$ddprun" --nproc-per-node 2 --max-restarts 3 bash -c "$stand_in" 2>&1)
  rc=$?
  ((rc == 0)) || { echo "$out"; failk other "ddprun --max-restarts 3 exited $rc"; }
  for k in 0 1 2; do
    [ "$(grep -c "^\[rank [01]\] count=$k of 3$" <<<"$out")" = 2 ] ||
      { echo "$out"; failk other "DDPRUN_RESTART_COUNT=$k not seen by both ranks"; }
  done
  grep -q '^ddprun: restart 2 of 3 (--max-restarts): starting 2 ranks again$' <<<"$out" &&
    ! grep -q 'restart 3 of 3' <<<"$out" || { echo "$out"; failk other "wrong restart lines"; }
  # Out of restarts: the failing rank's code.
  out=$("$ddprun" --nproc-per-node 2 --max-restarts 1 bash -c 'exit 3' 2>&1)
  rc=$?
  ((rc == 3)) && grep -q 'no restarts left (--max-restarts 1)' <<<"$out" ||
    { echo "$out"; failk other "out of restarts: exit $rc"; }
  # Ranks that stop on request are not restarted.
  out=$("$ddprun" --nproc-per-node 2 --max-restarts 2 bash -c 'exit 75' 2>&1)
  rc=$?
  ((rc == 75)) && ! grep -q 'restart' <<<"$out" ||
    { echo "$out"; failk other "exit 75 restarted ($rc)"; }
  # Nor is a job that ddprun was told to stop.
  log=sig
  start $log --nproc-per-node 2 --max-restarts 2 sleep 60
  wait_for 10 eval '[ "$(pgrep -P $job | wc -l)" = 2 ]' || failk other "the ranks did not start"
  pids=$(pgrep -P "$job")
  kill -TERM "$job"
  finish $log 20
  ((rc == 143)) && ! grep -q 'restart' $log ||
    { cat $log; failk other "SIGTERM to ddprun: exit $rc"; }
  no_orphans $pids
  echo "ok: restarts counted in DDPRUN_RESTART_COUNT; none after exit 75 or a signal"
  ;;

restart)
  uninterrupted 4
  log=job
  start $log --nproc-per-node 2 --max-restarts 1 "$bin" "${flags[@]}" --epochs 4 --save ck \
    --resume auto
  # Killed once the first checkpoint (end of epoch 1) is there and epoch 2 is under way.
  wait_for 60 eval '[ -f ck ] && in_epoch 2' ||
    { cat $log.raw; failk other "no checkpoint after epoch 1"; }
  sleep "${LIFECYCLE_KILL_DELAY:-0}"
  pids=$(pgrep -P "$job")
  rank=${LIFECYCLE_VICTIM:-1}
  victim=$(rank_pid "$rank") || { cat $log.raw; failk other "rank $rank had already exited"; }
  kill -9 "$victim"
  finish $log 120
  ((rc == 0)) || { cat $log; failk other "the restarted job exited $rc"; }
  grep -q "rank $rank (pid [0-9]*) failed first: killed by signal 9" $log &&
    grep -q '^ddprun: restart 1 of 1 (--max-restarts): starting 2 ranks again$' $log ||
    { cat $log; failk other "ddprun did not report the kill and the restart"; }
  grep -q '^--resume auto: no checkpoint at ck (none there yet): starting fresh$' $log &&
    grep -q '^--resume auto: resuming from ck$' $log ||
    { cat $log; failk other "--resume auto did not start fresh, then resume"; }
  echo "rank $rank killed; after the restart: $(grep '^resumed from ck' $log)"
  no_orphans $pids
  same_as_full ck "killed (-9) in epoch 2 and restarted"
  echo "ok: killed, restarted, resumed, the uninterrupted run's checkpoint bit for bit"
  ;;

kill9)
  log=job
  start $log --nproc-per-node 2 "$bin" "${flags[@]}" --epochs 50 --timeout 10
  wait_for 60 in_epoch 2 || { cat $log.raw; failk other "training did not reach epoch 2"; }
  pids=$(pgrep -P "$job")
  victim=$(rank_pid 1) || failk other "rank 1 had already exited"
  killed_at=$SECONDS
  kill -9 "$victim"
  finish $log 15  # --timeout 10 + 5 s
  ((rc != 0)) || { cat $log; failk other "ddprun exited 0 after rank 1 was killed"; }
  grep -q 'rank 1 (pid [0-9]*) failed first: killed by signal 9' $log ||
    { cat $log; failk other "ddprun does not blame the killed rank"; }
  # The survivor's watchdog names the lost rank with its pid (chapter 08, watchdog.hpp): its
  # connection closed (the ring), or its process died (shared memory, both ranks here).
  grep -Eq "^ddp watchdog: rank 0/2 .*rank 1 \([^)]*pid $victim\) (closed the connection|died)" $log ||
    { cat $log; failk other "rank 0 did not fail naming rank 1 and its pid $victim"; }
  no_orphans $pids
  echo "ok: rank 1 killed, ddprun exited $rc after $((SECONDS - killed_at)) s, nothing left"
  ;;

timeout)
  log=job
  start $log --nproc-per-node 2 "$bin" "${flags[@]}" --epochs 50 --timeout 3
  wait_for 60 in_epoch 2 || { cat $log.raw; failk other "training did not reach epoch 2"; }
  pids=$(pgrep -P "$job")
  victim=$(rank_pid 1) || failk other "rank 1 had already exited"
  stopped_at=$(date +%s%N)
  kill -STOP "$victim"
  finish $log 20  # --timeout 3, the ledger's gather (3 s) and ddprun's grace
  ms=$((($(date +%s%N) - stopped_at) / 1000000))
  kill -CONT "$victim" 2>/dev/null
  ((rc == 4)) || { cat $log; failk other "ddprun exited $rc, expected 4 (the watchdog's)"; }
  line=$(grep -m1 '^ddp watchdog: rank 0/2' $log) ||
    { cat $log; failk other "rank 0's watchdog said nothing"; }
  [[ $line == *"3000 ms"* ]] ||
    { cat $log; failk other "rank 0 did not give up after --timeout's 3000 ms: $line"; }
  ((ms >= 3000)) || { cat $log; failk other "the job ended after $ms ms, before --timeout 3"; }
  no_orphans $pids
  echo "ok: rank 1 paused, rank 0 gave up after --timeout's 3000 ms; ddprun exited 4 after $ms ms"
  ;;

start-up)
  # One rank of two, started by hand as a launcher would (torchrun's variables), waits in
  # the rendezvous for a rank that never comes. (Ports: tests/ch05/test_port.hpp's band,
  # apart from the cluster jobs'.)
  port=$((24576 + RANDOM % 8192))
  # Signals are handled once SigCgt shows SIGINT (bit 1), SIGUSR1 (9) and SIGTERM (14).
  handlers_in() {
    local caught
    caught=$(sed -n 's/^SigCgt:\t*//p' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$caught" ] && (((0x$caught & 0x4202) == 0x4202))
  }
  for rank in 0 1; do
    for sig in TERM USR1 INT; do
      log=$sig$rank.log
      RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$port "$bin" "${flags[@]}" --timeout 30 >$log.raw 2>&1 &
      job=$!
      wait_for 10 handlers_in $job || { cat $log.raw; failk other "no stop handlers in $job"; }
      sleep 0.2  # into the rendezvous (before it, the signal is handled the same way)
      kill -$sig $job
      finish $log 5
      what="rank $rank, SIG$sig while the ranks meet"
      ((rc == 75)) || { cat $log; failk other "$what: exit $rc, expected 75"; }
      grep -q "^ddp-train: stopped by SIG$sig while starting, before the first step" $log ||
        { cat $log; failk other "$what: no line saying so"; }
    done
  done
  echo "ok: SIGTERM, SIGUSR1 and SIGINT in the rendezvous end rank 0 and rank 1 at once (75)"
  ;;

*)
  failk other "unknown scenario '$scenario'"
  ;;
esac
