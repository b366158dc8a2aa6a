#!/usr/bin/env bash
# Chapter 04, ddp-train's output in a log: plain progress lines (no carriage returns), one
# summary per epoch, the `final:` line last, and a metrics CSV with its header and one
# row per epoch whose losses match the summary lines.
#   output.sh <ddp-train> <data folder> <scratch folder>
set -u
bin=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
. "$(dirname "$0")/common.sh"
small_mnist "$data" mnist && data=$PWD/mnist

train run.log --epochs 2 --batch-size 64 --metrics run.csv
cat run.log
! grep -q $'\r' run.log || fail "carriage returns in a log"
recipe='ddp-train: device cpu, 1 thread, 1 process, batch 64, lr 0.1 (1 warm-up epoch '
recipe+='from lr/10, then cosine to 0), momentum 0.9, weight decay 0.0005, seed 3'
grep -qxF "$recipe" \
  run.log || fail "no header line with the recipe"
grep -q '^epoch 1/2 step 4/4 loss [0-9.]* [0-9]* img/s$' run.log || fail "no plain progress line"
[ -n "$(summary run.log 1)" ] && [ -n "$(summary run.log 2)" ] || fail "missing epoch summaries"
[ "$(tail -n 1 run.log | cut -c1-6)" = "final:" ] || fail "final: is not the last line"
grep -q '^final: test accuracy [0-9.]*% ([0-9]*/100 after epoch 2), wall time [0-9.]* s$' \
  run.log || fail "final: line malformed: $(grep final: run.log)"

header=epoch,train_loss,test_loss,test_accuracy,images_per_second,train_seconds
[ "$(head -n 1 run.csv)" = "$header" ] ||
  fail "metrics header: $(head -n 1 run.csv)"
[ "$(wc -l <run.csv)" -eq 3 ] || fail "metrics has $(wc -l <run.csv) lines, expected 1 + 2 epochs"
for epoch in 1 2; do
  row=$(sed -n "$((epoch + 1))p" run.csv)
  IFS=, read -r e train_loss test_loss accuracy _ _ <<<"$row"
  [ "$e" = "$epoch" ] || fail "row $epoch says epoch $e"
  # The CSV has more digits than the summary. Each number of the summary must be the
  # CSV's, rounded: within half a unit of its last printed place (printf's own rounding
  # of the 6-digit CSV value could differ from the log's rounding of the full value).
  line=$(summary run.log "$epoch")
  [[ $line =~ ^epoch\ $epoch/2:\ train\ loss\ ([0-9.]+),\ test\ loss\ ([0-9.]+),\ test\ accuracy\ ([0-9.]+)%$ ]] ||
    fail "summary of epoch $epoch malformed: '$line'"
  close() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN { d = a - b; exit !(d <= tol && -d <= tol) }'; }
  close "$train_loss" "${BASH_REMATCH[1]}" 0.0000501 &&
    close "$test_loss" "${BASH_REMATCH[2]}" 0.0000501 &&
    close "$accuracy" "${BASH_REMATCH[3]}" 0.00501 ||
    fail "metrics row $epoch ($row) does not match '$line'"
done
echo "ok: log format, final: line, metrics CSV"
