#!/usr/bin/env bash
# Chapter 06, ddp-train on several ranks, as a user runs it (ddprun, mpirun, by hand).
#   train.sh <scenario> <ddp-train> <ddprun> <mpirun> <ch06_equivalence> <data> <scratch>
#            [<ch08_checkpoint_entry>]
# Scenarios:
#   deterministic  2 ranks twice: the same log lines and byte-identical checkpoints; only
#                  rank 0 prints and writes --metrics; ddprun and mpirun (tcp backend)
#                  print the same final line
#   resume         2 ranks stopped after 5 steps and resumed = an uninterrupted run, bit
#                  for bit (the checkpoint rank 0 wrote, loaded by both ranks); its
#                  checkpoint resumes on 4 ranks too (same global batch, chapter 08)
#   bad-input      ranks whose data differ, ranks that disagree on the world size, a
#                  global batch that does not split: every rank exits non-zero, naming it
#   sync-bn        --sync-bn: after one step rank 0's running statistics are the global
#                  batch's (one process on the same 32 images, within 1e-5; rank 0's own 16
#                  give others, checked to differ); every rank holds the same ones (with
#                  --no-broadcast-buffers, where each rank evaluates its half of the test
#                  set with its own, the epochs print exactly what they print with the
#                  broadcast); evaluation through SyncBatchNorm2d's running statistics
#                  matches one process's (test loss within 0.001)
#   no-broadcast-buffers
#                  each rank keeps its own statistics: training is the same bit for bit
#                  (rank 0's checkpoint too: it never receives), the evaluation is not
#   find-unused-parameters
#                  the Reducer gets the option (recipe line), a run completes and, every
#                  parameter being used, saves the very checkpoint a run without it saves;
#                  refused with --grad-sync flat, which has no unused parameters to find
#   different-model, drift, sum
#                  ch06_equivalence with a planted fault: DDP refuses different models on
#                  every rank; --check-sync names the rank that drifted; gradients summed
#                  instead of averaged fail the equivalence check (it can fail)
set -u
scenario=$1 bin=$2 ddprun=$3 mpirun=$4 equivalence=$5 data=$6 work=$7 entry=${8:-}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
. "$(dirname "$0")/../ch04_train/common.sh"
small_mnist "$data" mnist && data=$PWD/mnist
flags=(--data "$data" --device cpu --threads 1 --seed 3 --global-batch-size 32 --epochs 2)

case $scenario in
deterministic)
  run_ranks a.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --save a.ckpt --metrics a.csv
  ((rc == 0)) || { cat a.log; fail "ddprun -n 2 ddp-train exited $rc"; }
  # --check-sync 1 compares the replicas after every step: they agree, and checking
  # changes nothing.
  run_ranks b.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --save b.ckpt --check-sync 1
  ((rc == 0)) || { cat b.log; fail "second run exited $rc"; }
  grep -q '2 ranks (tcp (shared memory), auto: the ranks train on the CPU; gradients bucketed, 1 bucket (a bucket closes at >= 25 MiB, the first at >= 1 MiB)), batch 16 per rank = 32 global' a.log ||
    { cat a.log; fail "the log does not state the ranks and the global batch"; }
  [ "$(grep -c '^\[rank 0\] epoch 2/2:' a.log.raw)" = 1 ] &&
    ! grep -q '^\[rank 1\] epoch' a.log.raw ||
    { cat a.log.raw; fail "rank 0, and only rank 0, should print the epochs"; }
  [ "$(summary a.log 2)" = "$(summary b.log 2)" ] ||
    fail "two runs differ: $(summary a.log 2) vs $(summary b.log 2)"
  cmp a.ckpt b.ckpt || fail "the checkpoints of two identical runs differ"
  [ "$(wc -l <a.csv)" = 3 ] || { cat a.csv; fail "--metrics should hold a header and 2 rows"; }
  echo "ddprun:  $(final_line a.log)"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # mpirun says who each rank is, but not where rank 0's store listens: a port of our own.
  port=$((24576 + RANDOM % 8192))  # tests/ch05/test_port.hpp's band
  run_ranks m.log "$mpirun" -np 2 --oversubscribe -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port \
    "$bin" "${flags[@]}" --backend tcp
  ((rc == 0)) || { cat m.log; fail "mpirun -np 2 ddp-train exited $rc"; }
  echo "mpirun:  $(final_line m.log)"
  [ -n "$(final_line a.log)" ] && [ "$(final_line a.log)" = "$(final_line m.log)" ] ||
    fail "ddprun and mpirun give different final lines"
  ;;
resume)
  run_ranks full.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --save full.ckpt
  ((rc == 0)) || { cat full.log; fail "uninterrupted run exited $rc"; }
  run_ranks part.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --max-steps 5 \
    --save part.ckpt
  ((rc == 0)) || { cat part.log; fail "the first half exited $rc"; }
  run_ranks rest.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --resume part.ckpt \
    --save part.ckpt
  ((rc == 0)) || { cat rest.log; fail "the resumed run exited $rc"; }
  grep -q 'resumed from part.ckpt: epoch 1, step 5' rest.log ||
    { cat rest.log; fail "no resume line"; }
  [ "$(summary full.log 2)" = "$(summary rest.log 2)" ] ||
    fail "resumed run differs: $(summary rest.log 2) vs $(summary full.log 2)"
  cmp full.ckpt part.ckpt || fail "resumed checkpoint differs from the uninterrupted one"
  # Another number of ranks with the same global batch continues at the same sample
  # (chapter 08, Note [Resuming on another world size]); here, at the end of the run.
  run_ranks four.log "$ddprun" --nproc-per-node 4 "$bin" "${flags[@]}" --resume part.ckpt
  ((rc == 0)) && grep -q '^resumed on 4 ranks from a checkpoint of 2' four.log ||
    { cat four.log; fail "resuming on 4 ranks with the same global batch did not say so"; }
  ;;
bad-input)
  # Rank 1 reads a folder with fewer training images: both ranks must say so.
  mkdir -p other && cp mnist/* other/
  head -c $((16 + 100 * 784)) mnist/train-images-idx3-ubyte >other/train-images-idx3-ubyte
  count_100() { printf '\x00\x00\x00\x64' | dd of="$1" bs=1 seek=4 conv=notrunc 2>/dev/null; }
  count_100 other/train-images-idx3-ubyte
  head -c $((8 + 100)) mnist/train-labels-idx1-ubyte >other/train-labels-idx1-ubyte
  count_100 other/train-labels-idx1-ubyte
  common=(--device cpu --threads 1 --epochs 1 --global-batch-size 32)
  # by_hand <name> <world of rank 0> <world of rank 1> <data of rank 1>: two ranks started
  # by hand with torchrun's variables; rank r's output in <name>r.log, exit code in $code_r.
  by_hand() {
    local port=$((24576 + RANDOM % 8192)) r world data_r  # test_port.hpp's band
    for r in 0 1; do
      world=$2 data_r=$data
      ((r == 1)) && world=$3 data_r=$4
      (MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=$world LOCAL_RANK=$r \
        LOCAL_WORLD_SIZE=$world timeout 90 "$bin" --data "$data_r" "${common[@]}" \
        >"$1$r.log" 2>&1; echo $? >"$1$r.rc") &
    done
    wait
    code_0=$(cat "${1}0.rc") code_1=$(cat "${1}1.rc")
  }
  by_hand r 2 2 "$PWD/other"
  for r in 0 1; do
    code=code_$r
    [ "${!code}" = 1 ] || { cat r$r.log; fail "rank $r exited ${!code}, expected 1"; }
    grep -q "the ranks read different data (rank $r reads .*): rank 0 has 256 training and" \
      r$r.log &&
      grep -q 'rank 1 has 100 training and 100 test images' r$r.log ||
      { cat r$r.log; fail "rank $r did not name the data that differ"; }
  done
  echo "different data: $(grep -h -m1 error r1.log)"
  # A world size the ranks disagree on: refused at rendezvous, nobody waits 5 minutes.
  start=$SECONDS
  by_hand w 2 4 "$data"
  for r in 0 1; do
    code=code_$r
    ((${!code} != 0 && ${!code} != 124)) ||
      { cat w$r.log; fail "world-size disagreement: rank $r exited ${!code}"; }
    grep -q 'rank 1 was started with world size 4, but rank 0 with 2' w$r.log ||
      { cat w$r.log; fail "rank $r does not name the world sizes"; }
  done
  echo "world sizes 2 and 4: exits $code_0/$code_1 after $((SECONDS - start)) s"
  # The same under mpirun and the mpi backend (MPMD: each rank its own --data): mpirun
  # must end the job, both ranks naming the difference.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  run_ranks mpmd.log "$mpirun" --oversubscribe -np 1 "$bin" --data "$data" "${common[@]}" \
    --backend mpi : -np 1 "$bin" --data "$PWD/other" "${common[@]}" --backend mpi
  ((rc != 0 && rc != 124)) || { cat mpmd.log; fail "mpirun with different data exited $rc"; }
  [ "$(grep -c 'the ranks read different data' mpmd.log)" = 2 ] ||
    { cat mpmd.log; fail "under mpirun, not both ranks named the data that differ"; }
  run_ranks split.log "$ddprun" --nproc-per-node 3 "$bin" --data "$data" "${common[@]}"
  ((rc != 0)) &&
    grep -q 'a global batch of 32 images does not split evenly over 3 ranks' split.log ||
    { cat split.log; fail "an uneven global batch was not refused by name"; }
  ;;
sync-bn)
  # (1) One step: every BatchNorm's running mean and variance in rank 0's checkpoint.
  one=("${flags[@]}" --epochs 1 --max-steps 1)
  run_ranks s1.log "$ddprun" --nproc-per-node 2 "$bin" "${one[@]}" --sync-bn --save s1.ckpt
  ((rc == 0)) && grep -q 'SyncBatchNorm), batch 16 per rank' s1.log ||
    { cat s1.log; fail "ddp-train --sync-bn: exit $rc, or no SyncBatchNorm in the recipe"; }
  run_ranks p1.log "$ddprun" --nproc-per-node 2 "$bin" "${one[@]}" --save p1.ckpt
  ((rc == 0)) || { cat p1.log; fail "ddp-train without --sync-bn exited $rc"; }
  train g1.log "${one[@]}" --save g1.ckpt
  # Largest relative difference of two lists of floats (relative to max(|b|, 1e-3)).
  maxrel() {
    paste <(tr ' ' '\n' <<<"$1") <(tr ' ' '\n' <<<"$2") |
      awk '{ d = $1 - $2; d = d < 0 ? -d : d; m = $2 < 0 ? -$2 : $2; m = m > 1e-3 ? m : 1e-3
             if (d / m > x) x = d / m } END { printf "%.3g\n", x + 0 }'
  }
  keys=$(grep -aoE 'model\.[a-z0-9_.]*running_(mean|var)' g1.ckpt | sort -u)
  [ "$(wc -w <<<"$keys")" -ge 10 ] || fail "expected every BatchNorm's statistics, found: $keys"
  for k in $keys; do
    g=$("$entry" g1.ckpt "$k") s=$("$entry" s1.ckpt "$k") p=$("$entry" p1.ckpt "$k") ||
      fail "cannot read $k"
    sync=$(maxrel "$s" "$g") plain=$(maxrel "$p" "$g")
    echo "$k: --sync-bn vs one process $sync, without it $plain"
    awk -v x="$sync" 'BEGIN { exit !(x <= 1e-5) }' ||
      fail "$k after one --sync-bn step differs from the global batch's by $sync"
    awk -v x="$plain" 'BEGIN { exit !(x > 1e-4) }' ||
      fail "$k without --sync-bn equals the global batch's ($plain): the check cannot tell"
  done
  # (2) The same statistics on every rank; (3) evaluation against one process.
  run_ranks s.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --sync-bn
  ((rc == 0)) || { cat s.log; fail "ddp-train --sync-bn exited $rc"; }
  run_ranks sn.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --sync-bn \
    --no-broadcast-buffers
  ((rc == 0)) || { cat sn.log; fail "ddp-train --sync-bn --no-broadcast-buffers exited $rc"; }
  for e in 1 2; do
    [ -n "$(summary s.log $e)" ] && [ "$(summary s.log $e)" = "$(summary sn.log $e)" ] ||
      fail "ranks' statistics differ under --sync-bn: $(summary sn.log $e) vs $(summary s.log $e)"
  done
  train g.log "${flags[@]}"
  echo "--sync-bn:     $(summary s.log 2)"
  echo "one process:   $(summary g.log 2)"
  test_loss() { summary "$1" "$2" | sed 's/.*test loss \([0-9.]*\),.*/\1/'; }
  for e in 1 2; do
    awk -v a="$(test_loss s.log $e)" -v b="$(test_loss g.log $e)" \
      'BEGIN { d = a - b; exit !(a != "" && (d < 0 ? -d : d) <= 0.001) }' ||
      fail "epoch $e: --sync-bn evaluates to $(summary s.log $e), one process to $(summary g.log $e)"
  done
  ;;
no-broadcast-buffers)
  run_ranks b.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --save b.ckpt
  ((rc == 0)) || { cat b.log; fail "ddp-train exited $rc"; }
  run_ranks n.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --no-broadcast-buffers \
    --check-sync 1 --save n.ckpt
  ((rc == 0)) && grep -q 'buffers not broadcast), batch 16' n.log ||
    { cat n.log; fail "--no-broadcast-buffers: exit $rc, or not in the recipe"; }
  cmp b.ckpt n.ckpt || fail "--no-broadcast-buffers changed training (rank 0's checkpoint)"
  train_loss() { summary "$1" "$2" | sed 's/, test loss.*//'; }
  echo "broadcast:     $(summary b.log 2)"
  echo "not broadcast: $(summary n.log 2)"
  [ -n "$(train_loss n.log 2)" ] && [ "$(train_loss b.log 2)" = "$(train_loss n.log 2)" ] ||
    fail "--no-broadcast-buffers changed the training loss"
  [ "$(summary b.log 2)" != "$(summary n.log 2)" ] ||
    fail "rank 1 evaluated with rank 0's statistics: the buffers were broadcast after all"
  ;;
find-unused-parameters)
  run_ranks b.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --save b.ckpt
  ((rc == 0)) || { cat b.log; fail "ddp-train exited $rc"; }
  run_ranks u.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --find-unused-parameters \
    --save u.ckpt
  ((rc == 0)) && grep -q '1 bucket (a bucket closes at >= 25 MiB, the first at >= 1 MiB), find_unused_parameters), batch 16' u.log ||
    { cat u.log; fail "--find-unused-parameters: exit $rc, or the Reducer did not get it"; }
  cmp b.ckpt u.ckpt || fail "--find-unused-parameters changed a run that uses every parameter"
  echo "find_unused_parameters: $(final_line u.log)"
  run_ranks f.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --find-unused-parameters \
    --grad-sync flat --max-steps 1
  ((rc != 0)) && grep -q 'find-unused-parameters needs --grad-sync bucketed' f.log ||
    { cat f.log; fail "--find-unused-parameters with --grad-sync flat was not refused"; }
  ;;
different-model)
  run_ranks dm.log "$ddprun" --nproc-per-node 3 "$equivalence" --backend tcp --plant different-model
  ((rc != 0)) || { cat dm.log; fail "different models were accepted"; }
  want="rank 1 holds a different model than rank 0 .*first difference at entry 3: "
  want+="rank 0 has 'parameter 1.weight float32 (2, 8)', "
  want+="rank 1 has 'parameter 1.weight float32 (3, 8)'"
  n=$(grep -c "$want" dm.log)
  [ "$n" = 3 ] || { cat dm.log; fail "expected all 3 ranks to name the difference, got $n"; }
  ;;
drift)
  run_ranks drift.log "$ddprun" --nproc-per-node 3 "$equivalence" --backend tcp --plant drift
  ((rc != 0)) || { cat drift.log; fail "a drifted rank went unnoticed"; }
  n=$(grep -c 'check-sync at step 3: the parameters of rank 2 differ from the other' drift.log)
  [ "$n" = 3 ] || { cat drift.log; fail "expected all 3 ranks to name rank 2, got $n"; }
  ;;
sum)
  run_ranks sum.log "$ddprun" --nproc-per-node 2 "$equivalence" --backend tcp --plant sum
  ((rc != 0)) && grep -q 'parameters differ from the reference by' sum.log ||
    { cat sum.log; fail "gradients summed instead of averaged passed the equivalence check"; }
  grep -m2 'differ from the reference' sum.log
  ;;
*) fail "unknown scenario $scenario" ;;
esac
echo "ok: $scenario"
