#!/usr/bin/env bash
# Chapter 09, ddp-train's sharding flags end to end, as a user runs them (ddprun; mpirun in
# scenario mpi).
#   train.sh <scenario> <ddp-train> <ddprun> <ch09_compare> <data> <scratch> <mpirun> \
#            <ch09_rename_entry>
# Every run: AdamW with clipping, 4 steps of a global batch of 48 on 256 digits.
# Scenarios:
#   shards      --shard none, zero1, zero2 and fsdp at 3 ranks (uneven shards): the
#               checkpoints (model and consolidated optimizer state) agree within 1e-5;
#               --print-memory's parameter, gradient and optimizer rows are within 2% of
#               the page's prediction under every --shard
#   resume      with --sync-bn (batch statistics of the global batch, whatever the number of
#               ranks) and without clipping: an fsdp checkpoint after 2 steps, resumed by
#               zero1 on the same 2 ranks and by fsdp on 3, each to step 4: the same bits
#               (same ranks) and within 1e-4 (another world size: the same samples, other
#               sums) as an uninterrupted zero2 run
#   evaluate    FSDP evaluates unit by unit on test shards of uneven batches (100 digits,
#               3 ranks, 33 a forward): the same test loss and accuracy as DDP's
#   mpi         zero1, zero2 and fsdp under mpirun on the mpi backend, 2 ranks: the same
#               checkpoint, bit for bit, as under ddprun on tcp
#   accumulate  --grad-accum 3 under fsdp: the recipe says so and the run finishes (with
#               BatchNorm a micro-batch is normalised on its own: not equal to one batch;
#               tests/ch09/sharded_main.cpp checks the equivalence on a model without it)
#   budget      DDP_MEMORY_LIMIT_MB=2: every rank fails naming the budget and the bytes;
#               DDP_MEMORY_LIMIT_MB=lots: refused naming the variable
#   sharded-checkpoint
#               --save-format sharded (Note [Sharded checkpoints]): fsdp on 4 ranks saves
#               after step 2 once full and once sharded (two runs, the same flags): the
#               sharded one reassembles into the full one's entries bit for bit; each is
#               resumed to step 4 on 2 ranks (zero1) and on 1 process (--shard none): the
#               resumed checkpoints are the same bytes (cmp). The same for zero2 on 2
#               ranks resumed by fsdp on 3, the sharded one saving sharded again
#   sharded-faults
#               a zero1 checkpoint on 2 ranks: a missing shard file, one of another size
#               and one of another save (same size, other CRC-32) are refused naming the
#               file and the rank; a save whose rank 1 cannot write its file (a folder in
#               the way) writes no manifest, and the previous checkpoint is the one that
#               --resume auto then resumes, to the same bits as an undisturbed resume; the
#               next save leaves only its own generation's files (killed writers' temporary
#               files "<file>.tmp.<pid>" of generations 1 and 2 and of the manifest gone); a
#               shard file with an entry name that is not <kind>.<index> (the manifest
#               updated to its bytes and CRC-32) is refused naming the file and the entry,
#               and --resume auto reports it as not usable and starts fresh; --shard none
#               refuses --save-format sharded
set -u
scenario=$1 bin=$2 ddprun=$3 compare=$4 data=$5 work=$6 mpirun=${7:-mpirun} rename=${8:-}
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
  # Without clipping, the stages compute the same bits on the same ranks: clipping's norm
  # adds per-rank partial sums over differently cut shards (last-bit differences), and
  # AdamW turns a last-bit difference in a near-zero gradient into one of a few % of lr
  # within two steps (measured: 1.5e-8 after step 2, 2.5e-4 after step 4, lr 3e-3).
  flags+=(--sync-bn --clip-grad-norm 0)
  ranks 2 straight.log --shard zero2 --save straight.ckpt
  ranks 2 half.log --shard fsdp --max-steps 2 --save half.ckpt
  cp half.ckpt half3.ckpt
  ranks 2 rest.log --shard zero1 --resume half.ckpt --save half.ckpt
  grep -q 'resumed from half.ckpt: epoch 1, step 2' rest.log || { cat rest.log; fail "not resumed"; }
  "$compare" straight.ckpt half.ckpt 0 || fail "fsdp -> zero1 on 2 ranks differs"
  ranks 3 rest3.log --shard fsdp --resume half3.ckpt --save half3.ckpt
  grep -q 'resumed on 3 ranks from a checkpoint of 2' rest3.log || { cat rest3.log; fail "not resumed on 3"; }
  "$compare" straight.ckpt half3.ckpt 1e-4 || fail "fsdp 2 -> 3 ranks differs"
  ;;
evaluate)
  # 100 test digits over 3 ranks, 33 per forward: rank 0 has 34 (two forwards), ranks 1
  # and 2 have 33 (one). Under FSDP each forward gathers the units, so ranks 1 and 2 must
  # run an ignored one; without it they would wait in rank 0's gathers (--timeout 30).
  for shard in none fsdp; do
    ranks 3 "eval-$shard.log" --shard "$shard" --clip-grad-norm 0 --eval-batch-size 33 \
      --timeout 30
  done
  [ "$(summary eval-none.log 1)" = "$(summary eval-fsdp.log 1)" ] ||
    fail "FSDP's evaluation differs from DDP's: $(summary eval-fsdp.log 1) against $(summary eval-none.log 1)"
  summary eval-fsdp.log 1
  ;;
mpi)
  # At 2 ranks every sum is a + b, the same bits in any order: each stage under mpirun on
  # the mpi backend must save the very checkpoint it saves under ddprun on tcp.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  for shard in zero1 zero2 fsdp; do
    ranks 2 "tcp-$shard.log" --shard "$shard" --save "tcp-$shard.ckpt"
    run_ranks "mpi-$shard.log" "$mpirun" --oversubscribe -np 2 "$bin" "${flags[@]}" \
      --shard "$shard" --backend mpi --save "mpi-$shard.ckpt"
    ((rc == 0)) && grep -q '^ddp-train: .* 2 ranks (mpi, ' "mpi-$shard.log" ||
      { cat "mpi-$shard.log"; fail "--shard $shard under mpirun exited $rc, or not on mpi"; }
    "$compare" "tcp-$shard.ckpt" "mpi-$shard.ckpt" 0 ||
      fail "--shard $shard: mpi's checkpoint differs from tcp's"
  done
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
sharded-checkpoint)
  all=(model. optimizer. progress. config.)
  ranks 4 full4.log --shard fsdp --max-steps 2 --save full4.ckpt
  ranks 4 sharded4.log --shard fsdp --max-steps 2 --save sharded4.ckpt --save-format sharded
  for r in 0 1 2 3; do
    [ -f sharded4.ckpt.g1.rank$r-of-4 ] || { ls; fail "no shard file of rank $r"; }
  done
  "$compare" full4.ckpt sharded4.ckpt 0 "${all[@]}" ||
    fail "the sharded checkpoint does not reassemble into the full one"
  for from in full4 sharded4; do
    ranks 2 "$from-2.log" --shard zero1 --resume $from.ckpt --save $from-2.ckpt
    run_ranks "$from-1.log" "$bin" "${flags[@]}" --resume $from.ckpt --save $from-1.ckpt
    ((rc == 0)) || { cat "$from-1.log"; fail "one process --resume $from.ckpt exited $rc"; }
  done
  grep -q 'reassembled from its manifest and 4 shard files' sharded4-2.log ||
    { cat sharded4-2.log; fail "the resume does not say it read a sharded checkpoint"; }
  cmp full4-2.ckpt sharded4-2.ckpt || fail "4 -> 2 ranks: sharded and full resumes differ"
  cmp full4-1.ckpt sharded4-1.ckpt || fail "4 ranks -> 1 process: sharded and full resumes differ"
  ranks 2 full2.log --shard zero2 --max-steps 2 --save full2.ckpt
  ranks 2 sharded2.log --shard zero2 --max-steps 2 --save sharded2.ckpt --save-format sharded
  ranks 3 full2-3.log --shard fsdp --resume full2.ckpt --save full2-3.ckpt
  ranks 3 sharded2-3.log --shard fsdp --resume sharded2.ckpt --save sharded2-3.ckpt \
    --save-format sharded
  "$compare" full2-3.ckpt sharded2-3.ckpt 0 "${all[@]}" ||
    fail "2 -> 3 ranks: sharded and full resumes differ"
  ;;
sharded-faults)
  ranks 2 first.log --shard zero1 --max-steps 2 --save ck --save-format sharded
  mkdir keep && cp ck ck.g1.rank0-of-2 ck.g1.rank1-of-2 keep/ || fail "no sharded checkpoint"
  # The undisturbed resume, to step 4 (sharded: its files are "another save's" below).
  ranks 2 ref.log --shard zero1 --resume ck --save ref --save-format sharded
  # refused LOG PATTERN: resuming ck fails, saying PATTERN.
  refused() {
    run_ranks "$1" "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --shard zero1 --resume ck
    ((rc != 0)) && grep -q "$2" "$1" || { cat "$1"; fail "not refused with '$2'"; }
    echo "refused: $(grep -m1 -o "$2.*" "$1")"
    cp keep/* .
  }
  rm ck.g1.rank1-of-2
  refused missing.log "rank 1's shard file ck.g1.rank1-of-2 is missing"
  printf x >>ck.g1.rank1-of-2
  refused size.log "rank 1's shard file ck.g1.rank1-of-2 has [0-9]* bytes, the manifest expects"
  cp ref.g1.rank1-of-2 ck.g1.rank1-of-2
  refused crc.log "rank 1's shard file ck.g1.rank1-of-2 has CRC-32 [0-9]*, the manifest expects"
  # An interrupted save: rank 1 cannot put its generation-2 file in place.
  mkdir -p ck.g2.rank1-of-2/in-the-way
  run_ranks cut.log "$ddprun" --nproc-per-node 2 "$bin" "${flags[@]}" --shard zero1 \
    --resume ck --save ck --save-format sharded
  ((rc != 0)) && grep -q 'rank 1 failed writing its shard file of the checkpoint' cut.log ||
    { cat cut.log; fail "the save with rank 1's file blocked did not fail, naming rank 1"; }
  cmp ck keep/ck || fail "the failed save changed the manifest"
  [ -f ck.g2.rank0-of-2 ] || { ls; fail "rank 0's file of the failed save is not there"; }
  rm -r ck.g2.rank1-of-2
  # What writers killed mid-write leave (nn/state_dict's "<file>.tmp.<pid>"): a rank's of
  # generation 1, one of the failed generation 2 (which the next save reuses) and rank 0's
  # of a manifest. No manifest names them: the next save removes them.
  cp ck.g1.rank1-of-2 ck.g1.rank1-of-2.tmp.4242
  cp ck.g2.rank0-of-2 ck.g2.rank1-of-2.tmp.4243
  cp ck ck.tmp.4244
  ranks 2 auto.log --shard zero1 --resume auto --save ck --save-format sharded
  grep -q 'resumed from ck: epoch 1, step 2' auto.log ||
    { cat auto.log; fail "--resume auto did not resume the previous checkpoint"; }
  "$compare" ref ck 0 model. optimizer. progress. config. ||
    fail "resumed after the interrupted save: not the undisturbed resume's bits"
  left=$(echo ck.*)
  [ "$left" = "ck.g2.rank0-of-2 ck.g2.rank1-of-2" ] ||
    { ls; fail "after the next save: $left (expected generation 2's files only)"; }
  # An entry name that is not <kind>.<index>, in a file that is otherwise the one the
  # manifest names: a ddp::Error naming the file and the entry, not std::stoul's exception.
  "$rename" ck.g2.rank1-of-2 optimizer.exp_avg.0 optimizer.exp_avg.x ck 1 ||
    fail "could not rename an entry of ck.g2.rank1-of-2"
  bad="rank 1's shard file ck.g2.rank1-of-2: entry 'optimizer.exp_avg.x' is not <kind>.<index>"
  rc=0
  "$compare" ck ck 0 >bad-name.log 2>&1 || rc=$?
  ((rc == 2)) && grep -qF "$bad" bad-name.log ||
    { cat bad-name.log; fail "a malformed entry name: exit $rc, not refused naming the file"; }
  ranks 2 bad-auto.log --shard zero1 --resume auto --save ck --save-format sharded
  grep -qF -- "--resume auto: no checkpoint at ck (not usable: sharded checkpoint ck: $bad)" \
    bad-auto.log || { cat bad-auto.log; fail "--resume auto did not report ck as not usable"; }
  echo "not usable: $(grep -m1 -o "$bad" bad-auto.log)"
  rc=0
  "$bin" "${flags[@]}" --shard none --save x --save-format sharded >none.log 2>&1 || rc=$?
  ((rc == 2)) && grep -q 'needs --shard zero1, zero2 or fsdp' none.log ||
    { cat none.log; fail "--shard none --save-format sharded: exit $rc"; }
  ;;
*)
  fail "unknown scenario '$scenario'"
  ;;
esac
echo "PASS: $scenario"
