#!/usr/bin/env bash
# Chapter 04, --save / --resume: a run stopped by --max-steps and resumed from its
# checkpoint ends with the same losses, accuracy and checkpoint bytes (weights, momentum
# buffers, counters) as the run that was never stopped. An epoch of the 256 digits of
# small_mnist is 8 steps of 32; the full run is 2 epochs = 16 steps, and it is cut
# at step 5 (mid-epoch 1, the resumed run crosses the epoch boundary), at step 8 (exactly
# at the boundary) and at step 11 (mid-epoch 2). The cut at 8 also plays a run that died
# after writing epoch 2's metrics row and before saving its checkpoint: the row is
# dropped on resume, not doubled. Resuming the finished run trains nothing and reports
# the same `final:` line. Last, resuming with another seed, batch size, lr, momentum,
# weight decay, global batch or data set is refused, naming the flags.
#   resume.sh <ddp-train> <data folder> <scratch folder>
set -u
bin=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
. "$(dirname "$0")/common.sh"
small_mnist "$data" mnist && data=$PWD/mnist

flags=(--epochs 2)
train full.log "${flags[@]}" --save full.ckpt --metrics full.csv
want=$(summary full.log 2)
[ -n "$want" ] || { cat full.log; fail "no 'epoch 2/2:' summary"; }
echo "uninterrupted: $want"

for cut in 5 8 11; do
  train "stop$cut.log" "${flags[@]}" --max-steps "$cut" --save "cut$cut.ckpt" \
    --metrics "cut$cut.csv"
  [ "$cut" -ne 8 ] || echo "2,9,9,9,9,9" >>cut8.csv  # a row whose checkpoint was never saved
  train "resume$cut.log" "${flags[@]}" --resume "cut$cut.ckpt" --save "cut$cut.ckpt" \
    --metrics "cut$cut.csv"
  where="epoch $((cut / 8 + 1)), step $((cut % 8)) of it ($cut steps in all)"
  grep -q "^resumed from cut$cut.ckpt: $where$" \
    "resume$cut.log" || { cat "resume$cut.log"; fail "no 'resumed from' line for the cut at $cut"; }
  got=$(summary "resume$cut.log" 2)
  echo "cut at step $cut: $got"
  [ "$got" = "$want" ] ||
    { cat "stop$cut.log" "resume$cut.log"; fail "resumed at step $cut: '$got' != '$want'"; }
  [ "$(final_line "resume$cut.log")" = "$(final_line full.log)" ] ||
    fail "final: lines differ (cut $cut)"
  # Only whole epochs get a metrics row, and the stopped and resumed runs share the file.
  cmp <(cut -d, -f1-4 full.csv) <(cut -d, -f1-4 "cut$cut.csv") ||
    fail "metrics differ (cut $cut): $(cat "cut$cut.csv")"
  cmp full.ckpt "cut$cut.ckpt" || fail "the final checkpoints differ (cut $cut)"
done
# Stopped exactly at the boundary, the first run must not print an empty epoch 2.
! grep -q '^epoch 2/2' stop8.log || { cat stop8.log; fail "an epoch without steps was printed"; }
train done.log "${flags[@]}" --resume full.ckpt --metrics full.csv --save done.ckpt
grep -q "^nothing left to train: the checkpoint has finished 2 of 2 epochs" done.log ||
  { cat done.log; fail "resuming a finished run does not say that nothing is left"; }
! grep -q '^epoch ' done.log || { cat done.log; fail "resuming a finished run trained"; }
[ "$(final_line done.log)" = "$(final_line full.log)" ] ||
  { cat done.log; fail "resuming a finished run reports another final: line"; }
[ "$(wc -l <full.csv)" -eq 3 ] || fail "resuming a finished run changed its metrics file"
cmp full.ckpt done.ckpt || fail "resuming a finished run with --save did not save the same state"
# A metrics file left empty (a run killed before its first row was flushed) gets its
# header when a resumed run writes to it; a metrics file that cannot be written is an error.
: >empty.csv
train empty.log "${flags[@]}" --resume cut5.ckpt --metrics empty.csv
[ "$(head -n1 empty.csv)" = "$(head -n1 full.csv)" ] ||
  fail "a resumed run wrote an empty metrics file without its header: $(head -n2 empty.csv)"
if [ -w /dev/full ]; then
  out=$("$bin" --data "$data" --device cpu --threads 1 --seed 3 --batch-size 32 --epochs 1 \
        --metrics /dev/full 2>&1) && { echo "$out"; fail "--metrics /dev/full exited 0"; }
  grep -q "cannot write --metrics file /dev/full" <<<"$out" ||
    { echo "$out"; fail "--metrics /dev/full: no message naming the file"; }
fi

# A checkpoint resumed with other settings is refused, naming each flag that differs with
# both values, before anything is trained or written.
refuse() {  # refuse <expected message part> <flags...>
  local want=$1 out rc=0
  shift
  cp full.ckpt other.ckpt
  out=$("$bin" --data "$data" --device cpu --threads 1 --seed 3 --batch-size 32 --epochs 2 \
        --resume other.ckpt --save other.ckpt "$@" 2>&1) || rc=$?
  ((rc != 0)) || { echo "$out"; fail "resuming with $* was accepted"; }
  grep -qF -- "checkpoint other.ckpt was written by a run with $want" <<<"$out" ||
    { echo "$out"; fail "resuming with $* does not say: $want"; }
  ! grep -q '^epoch ' <<<"$out" || { echo "$out"; fail "resuming with $* trained"; }
  cmp full.ckpt other.ckpt || fail "a refused resume (with $*) changed the checkpoint"
}
refuse "--seed 3 (this run: 4)" --seed 4
# The cosine schedule's every step depends on the run's length (chapter 06).
refuse "--epochs (the cosine's length) 2 (this run: 3)" --epochs 3
refuse "the global batch (--batch-size x ranks) 32 (this run: 16)" --batch-size 16
refuse "--lr 0.1 (this run: 0.05)" --lr 0.05
refuse "--momentum 0.9 (this run: 0.5), --weight-decay 5e-04 (this run: 0)" \
  --momentum 0.5 --weight-decay 0
# Another data set: the same test digits, half the training digits.
mkdir -p fewer && cp mnist/t10k-* fewer/ || fail "cannot copy the test digits"
idx_head "$2/train-images-idx3-ubyte.gz" 16 128 784 >fewer/train-images-idx3-ubyte
idx_head "$2/train-labels-idx1-ubyte.gz" 8 128 1 >fewer/train-labels-idx1-ubyte
small=$data data=$PWD/fewer
refuse "--data (training images) 256 (this run: 128)"
data=$small
echo "ok: resumed runs match the uninterrupted one; a finished run resumes to the same end;"
echo "    other settings are refused, each named"
