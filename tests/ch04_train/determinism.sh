#!/usr/bin/env bash
# Chapter 04, ddp-train is deterministic: for a fixed seed and thread count, two runs print
# the same losses and accuracy, and write the same metrics (timing columns aside).
#   determinism.sh <ddp-train> <data folder> <scratch folder>
set -u
bin=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
. "$(dirname "$0")/common.sh"
small_mnist "$data" mnist && data=$PWD/mnist

flags=(--epochs 1 --max-steps 6 --threads 2)
train a.log "${flags[@]}" --metrics a.csv
train b.log "${flags[@]}" --metrics b.csv
a=$(summary a.log 1) b=$(summary b.log 1)
[ -n "$a" ] || { cat a.log; fail "no 'epoch 1/1:' summary line"; }
echo "run a: $a"
echo "run b: $b"
[ "$a" = "$b" ] || fail "two runs with the same seed and threads differ"
[ "$(final_line a.log)" = "$(final_line b.log)" ] || fail "the final: lines differ"
# --max-steps 6 stops the 8-step epoch early: no metrics row (rows are whole epochs).
[ "$(cat a.csv)" = "epoch,train_loss,test_loss,test_accuracy,images_per_second,train_seconds" ] ||
  fail "metrics of a partial epoch: $(cat a.csv)"
echo "ok: identical losses"
