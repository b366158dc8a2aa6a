#!/usr/bin/env bash
# Chapter 09, ddp-train's sharding flags end to end, as a user runs them (ddprun).
#   train.sh <scenario> <ddp-train> <ddprun> <ch09_compare> <data> <scratch>
# Every run: AdamW with clipping, 4 steps of a global batch of 48 on 256 digits.
# Scenarios:
#   shards      --shard none, zero1, zero2 and fsdp at 3 ranks (uneven shards): the
#               checkpoints (model and consolidated optimizer state) agree within 1e-5;
#               --print-memory's parameter, gradient and optimizer rows are within 2% of
#               the page's prediction under every --shard
#   resume      with --sync-bn (batch statistics of the global batch, whatever the number of
#               ranks): an fsdp checkpoint after 2 steps, resumed by zero1 on the same 2
#               ranks and by fsdp on 3, each to step 4: within 1e-5 (same ranks) and 1e-4
#               (another world size: the same samples, other sums) of an uninterrupted
#               zero2 run
#   accumulate  --grad-accum 3 under fsdp: the recipe says so and the run finishes (with
#               BatchNorm a micro-batch is normalised on its own: not equal to one batch;
#               tests/ch09/sharded_main.cpp checks the equivalence on a model without it)
#   budget      DDP_MEMORY_LIMIT_MB=2: every rank fails naming the budget and the bytes;
#               DDP_MEMORY_LIMIT_MB=lots: refused naming the variable
set -u
scenario=$1 bin=$2 ddprun=$3 compare=$4 data=$5 work=$6
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
. "$(dirname "$0")/../ch04_train/common.sh"
small_mnist "$data" mnist && data=$PWD/mnist
flags=(--data "$data" --device cpu --threads 1 --seed 3 --global-batch-size 48 --epochs 1
       --max-steps 4 --optimizer adamw --lr 0.003 --clip-grad-norm 0.5 --progress none)

# ranks N LOG FLAGS...: ddp-train on N ranks; fails the test unless it ends with `final:`.
ranks() {
  local n=$1 log=$2
  shift 2
  run_ranks "$log" "$ddprun" --nproc-per-node "$n" "$bin" "${flags[@]}" "$@"
  ((rc == 0)) && grep -q '^final: ' "$log" || { cat "$log"; fail "ddp-train on $n ranks $* exited $rc"; }
}

# row LOG CATEGORY: rank 0's "live bytes" and "predicted bytes" of that row of --print-memory.
row() {
  awk -v c="$2" '$0 ~ "^  " c " " { n = split($0, f, " +"); print f[n - 1], f[n]; exit }' "$1"
}

case $scenario in
shards)
  for shard in none zero1 zero2 fsdp; do
    ranks 3 "$shard.log" --shard "$shard" --save "$shard.ckpt" --print-memory
  done
  grep -q 'parameters and optimizer state sharded in 6 units (fsdp)' fsdp.log ||
    { cat fsdp.log; fail "the recipe line does not say how the model is sharded"; }
  for shard in zero1 zero2 fsdp; do
    "$compare" none.ckpt "$shard.ckpt" 1e-5 || fail "--shard $shard differs from --shard none"
  done
  for shard in none zero1 zero2 fsdp; do
    for category in parameters gradients "optimizer state"; do
      read -r live predicted <<<"$(row "$shard.log" "$category")"
      [ -n "$live" ] && [ -n "$predicted" ] &&
        awk -v l="$live" -v p="$predicted" 'BEGIN { exit !(l <= 1.02 * p && l >= 0.98 * p) }' ||
        { cat "$shard.log"; fail "--shard $shard: $category $live bytes, predicted $predicted"; }
      echo "--shard $shard: $category $live bytes, predicted $predicted"
    done
  done
  ;;
resume)
  flags+=(--sync-bn)
  ranks 2 straight.log --shard zero2 --save straight.ckpt
  ranks 2 half.log --shard fsdp --max-steps 2 --save half.ckpt
  cp half.ckpt half3.ckpt
  ranks 2 rest.log --shard zero1 --resume half.ckpt --save half.ckpt
  grep -q 'resumed from half.ckpt: epoch 1, step 2' rest.log || { cat rest.log; fail "not resumed"; }
  "$compare" straight.ckpt half.ckpt 1e-5 || fail "fsdp -> zero1 on 2 ranks differs"
  ranks 3 rest3.log --shard fsdp --resume half3.ckpt --save half3.ckpt
  grep -q 'resumed on 3 ranks from a checkpoint of 2' rest3.log || { cat rest3.log; fail "not resumed on 3"; }
  "$compare" straight.ckpt half3.ckpt 1e-4 || fail "fsdp 2 -> 3 ranks differs"
  ;;
accumulate)
  ranks 2 accum.log --shard fsdp --grad-accum 3
  grep -q 'batch 24 per rank = 48 global in 3 micro-batches' accum.log ||
    { cat accum.log; fail "the recipe line does not state the micro-batches"; }
  ;;
budget)
  DDP_MEMORY_LIMIT_MB=2 run_ranks tight.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}"
  ((rc != 0)) || { cat tight.log; fail "2 MiB per rank was enough?"; }
  grep -q 'memory budget exceeded: allocating .* bytes .* over the budget of 2.0 MiB (DDP_MEMORY_LIMIT_MB=2)' tight.log ||
    { cat tight.log; fail "the budget's error does not name the budget and the bytes"; }
  DDP_MEMORY_LIMIT_MB=lots run_ranks bad.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}"
  ((rc != 0)) && grep -q "DDP_MEMORY_LIMIT_MB='lots' is not a budget" bad.log ||
    { cat bad.log; fail "a bad DDP_MEMORY_LIMIT_MB is not refused by name"; }
  ;;
*)
  fail "unknown scenario '$scenario'"
  ;;
esac
echo "PASS: $scenario"
