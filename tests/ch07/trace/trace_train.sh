#!/usr/bin/env bash
# Chapter 07, ddp-train --trace and --width as a user runs them.
#   trace_train.sh <ddp-train> <ddprun> <ddp-trace-merge> <data> <scratch>
# One process: the epoch's timeline summary line (no communication to overlap) and a
# trace file with the network's forward and backward spans by module path, the
# optimizer step and the evaluation. Two ranks under ddprun: rank R writes
# FILE.rankR.json (no FILE.json), only rank 0 prints the summary, and ddp-trace-merge
# joins the two files into processes "rank 0" and "rank 1"; --svg draws them, from the
# rank files and from the merged one, a row per rank, and --metrics-svg draws the run's
# --metrics file (test_trace_svg.cpp checks the pictures' geometry). --width 2 trains; resuming
# its checkpoint with another width is refused, naming the flag.
set -u
bin=$1 ddprun=$2 merge=$3 data=$4 work=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
. "$(dirname "$0")/../../ch04_train/common.sh"
small_mnist "$data" mnist && data=$PWD/mnist
summary_line='^epoch 1: compute [0-9]+ ms, communication [0-9]+ ms, exposed [0-9]+ ms, overlap'

# ---- one process
train one.log --epochs 1 --trace one.json
grep -Eq "$summary_line n/a \(no communication\)$" one.log ||
  { cat one.log; fail "no timeline summary line for one process"; }
for event in '"cat":"forward","name":"block2.conv1"' '"cat":"backward","name":"block2.conv1"' \
  '"cat":"forward","name":"model"' '"cat":"optimizer","name":"SGD step"' \
  '"cat":"evaluation","name":"evaluation"' '"name":"conv: gradient in"'; do
  grep -qF "$event" one.json || fail "one.json has no event with $event"
done
"$merge" one.merged.json one.json >merge1.log 2>&1 || { cat merge1.log; fail "merging one file"; }

# ---- two ranks, merged
rc=0
timeout 120 "$ddprun" --nproc-per-node 2 "$bin" --data "$data" --device cpu --threads 1 \
  --seed 3 --global-batch-size 32 --epochs 1 --trace two.json --metrics two.csv \
  >two.log 2>&1 || rc=$?
((rc == 0)) || { cat two.log; fail "ddprun -n 2 ddp-train --trace exited $rc"; }
[ -s two.rank0.json ] && [ -s two.rank1.json ] && [ ! -e two.json ] ||
  { ls; fail "2 ranks should write two.rank0.json and two.rank1.json, not two.json"; }
[ "$(sed 's/^\[rank [0-9]*\] //' two.log | grep -Ec "$summary_line")" = 1 ] &&
  grep -Eq "^\[rank 0\] epoch 1: compute" two.log ||
  { cat two.log; fail "rank 0, and only rank 0, should print the timeline summary"; }
"$merge" two.json two.rank0.json two.rank1.json >merge2.log 2>&1 ||
  { cat merge2.log; fail "ddp-trace-merge exited non-zero"; }
grep -q '2 ranks -> two.json' merge2.log || { cat merge2.log; fail "merge: no report line"; }
for rank in 0 1; do
  grep -q "\"name\":\"process_name\",\"args\":{\"name\":\"rank $rank\"}" two.json ||
    fail "the merged file has no process 'rank $rank'"
done
for input in "two.rank0.json two.rank1.json" two.json; do
  # shellcheck disable=SC2086  # two file names
  "$merge" --svg two.svg $input >svg.log 2>&1 || { cat svg.log; fail "--svg two.svg $input"; }
  for rank in 0 1; do
    grep -q "<g class=\"rank\" data-rank=\"$rank\">" two.svg ||
      fail "--svg two.svg $input: no row for rank $rank"
  done
done
"$merge" --metrics-svg two-metrics.svg two.csv >svg.log 2>&1 &&
  grep -q 'data-rows="1"' two-metrics.svg ||
  { cat svg.log; fail "--metrics-svg: no picture of the run's one epoch"; }
rc=0
"$merge" --metrics-svg m.svg missing.csv >svg.log 2>&1 || rc=$?
((rc == 1)) && grep -q 'cannot open missing.csv' svg.log ||
  { cat svg.log; fail "--metrics-svg of a missing file should fail naming it (exit $rc)"; }
rc=0
"$merge" bad.json two.rank0.json missing.json >merge3.log 2>&1 || rc=$?
((rc == 1)) && grep -q 'cannot open missing.json' merge3.log ||
  { cat merge3.log; fail "a missing input should fail naming it (exit $rc)"; }

# ---- --width: recorded in the checkpoint
train wide.log --epochs 1 --max-steps 2 --width 2 --save wide.ckpt
grep -q '^final:' wide.log || fail "--width 2 did not train"
rc=0
"$bin" --data "$data" --device cpu --threads 1 --seed 3 --batch-size 32 --epochs 1 \
  --resume wide.ckpt >resume.log 2>&1 || rc=$?
((rc == 1)) && grep -q -- '--width 2 (this run: 1)' resume.log ||
  { cat resume.log; fail "resuming a --width 2 checkpoint at width 1 must fail (exit $rc)"; }
echo "ok: $(grep -E "$summary_line" one.log)"
