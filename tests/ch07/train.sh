#!/usr/bin/env bash
# Chapter 07, ddp-train with the Reducer, as a user runs it.
#   train.sh <scenario> <ddp-train> <ddprun> <data> <scratch>
# Scenarios:
#   same-as-flat   2 ranks, bucketed with one bucket (the default caps) and with 0.02 MiB
#                  buckets (many), against chapter 06's flat all-reduce: byte-identical
#                  checkpoints. At 2 ranks every element's sum is the same two numbers
#                  whatever the bucket or chunk, so the Reducer must change no bit.
#   print-buckets  --print-buckets: rank 0 alone prints the table, every parameter once
#   bad-flags      bad --bucket-cap-mb / --grad-sync values are named
set -u
scenario=$1 bin=$2 ddprun=$3 data=$4 work=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
. "$(dirname "$0")/../ch04_train/common.sh"
small_mnist "$data" mnist && data=$PWD/mnist
flags=(--data "$data" --device cpu --threads 1 --seed 3 --global-batch-size 32 --epochs 1)

case $scenario in
same-as-flat)
  run_ranks flat.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --grad-sync flat --save flat.ckpt
  ((rc == 0)) || { cat flat.log; fail "flat exited $rc"; }
  for cap in 25 0.02; do
    run_ranks b$cap.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --bucket-cap-mb $cap \
      --first-bucket-mb $cap --save b$cap.ckpt
    ((rc == 0)) || { cat b$cap.log; fail "bucketed (cap $cap MiB) exited $rc"; }
    grep -q "gradients bucketed, [0-9]* buckets\? (a bucket closes at >= $cap MiB)" b$cap.log ||
      { cat b$cap.log; fail "the header does not name the buckets"; }
    cmp flat.ckpt b$cap.ckpt || fail "bucketed (cap $cap MiB) and flat checkpoints differ"
    echo "cap $cap MiB: $(grep -o 'gradients bucketed[^)]*)' b$cap.log): checkpoint = flat's"
  done
  grep -q " 1 bucket (" b25.log && ! grep -q " 1 bucket (" b0.02.log ||
    fail "the caps did not give one bucket and many"
  ;;
print-buckets)
  run_ranks p.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --max-steps 1 \
    --print-buckets --bucket-cap-mb 0.1 --first-bucket-mb 0.1
  ((rc == 0)) || { cat p.log; fail "--print-buckets exited $rc"; }
  ! grep -q '^\[rank 1\] bucket' p.log.raw || fail "rank 1 printed the table too"
  [ "$(grep -c '^bucket [0-9]*:' p.log)" = 3 ] || { cat p.log; fail "expected 3 buckets"; }
  names=$(grep '^bucket [0-9]*:' p.log | sed 's/^[^:]*: [^:]*://' | tr ' ' '\n' | grep -c .)
  [ "$names" = 29 ] || fail "the table lists $names parameters, not the ResNet's 29"
  grep '^bucket 0:' p.log
  ;;
bad-flags)
  for bad in "--bucket-cap-mb 0" "--bucket-cap-mb abc" "--grad-sync ring"; do
    out=$("$bin" $bad 2>&1) && fail "ddp-train $bad succeeded"
    grep -q -- "${bad%% *}" <<<"$out" || fail "ddp-train $bad: the error does not name the flag: $out"
    echo "$bad: $out"
  done
  ;;
*) fail "unknown scenario $scenario" ;;
esac
echo PASS
