#!/usr/bin/env bash
# Chapter 09's step against DDP's and PyTorch's ZeRO-1, in one session: bench_sharded_step
# under ddprun (ddp, zero1, zero2, fsdp, AdamW) and bench/torch/bench_zero.py (DDP and
# ZeroRedundancyOptimizer over Gloo, Debian's python3-torch) at each np (4 ranks
# oversubscribe this 2-core box) and model width, global batch 128, one thread per rank,
# `rounds` rounds alternating the two. Prints each program's lines, then per np and width
# the best median over the rounds and the ratios: zero1, zero2 and fsdp against our ddp
# step, and our zero1 against PyTorch's (below 1: we are faster); rank 0's memory lines
# (held and predicted, peaks) are in bench_sharded_step's own output above.
#   bench/sharded.sh [BUILD_DIR] [ROUNDS] [NPS] [WIDTHS] # defaults: build/release 2 "2 4" "1 4"
#   STEPS=10 bench/sharded.sh                            # fewer timed steps
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
rounds=${2:-2}
nps=${3:-2 4}
widths=${4:-1 4}
steps=${STEPS:-20}
export OMP_NUM_THREADS=1 MNIST_DIR=
have_torch=1
/usr/bin/python3 -c 'import torch' 2>/dev/null || have_torch=0
((have_torch)) || echo "sharded.sh: no python3-torch (apt-get install python3-torch): ours only"
declare -A best
keep_best() {  # keep_best KEY VALUE: the smaller of the two
  local old=${best[$1]:-}
  best[$1]=$(awk -v a="$2" -v b="$old" 'BEGIN { print (b == "" || a < b) ? a : b }')
}
median_of() { sed -n "s/^np=$1 width=$2 $3 *: step min [0-9.]* ms, median \([0-9.]*\) ms.*/\1/p" <<<"$4"; }
for round in $(seq "$rounds"); do
  for width in $widths; do
    for np in $nps; do
      echo "== round $round, np $np, width $width"
      out=$("$build/bin/ddprun" --nproc-per-node "$np" "$build/bin/bench_sharded_step" \
              --width "$width" --steps "$steps" --warmup 3 | sed 's/^\[rank 0\] //')
      echo "$out"
      for mode in ddp zero1 zero2 fsdp; do keep_best "$np,$width,$mode" "$(median_of "$np" "$width" "$mode" "$out")"; done
      if ((have_torch)); then
        out=$(/usr/bin/python3 "$root/bench/torch/bench_zero.py" --nproc "$np" --steps "$steps" \
                --warmup 3 --width "$width" 2>&1 | grep '^np=')
        echo "PyTorch: $out"
        keep_best "$np,$width,torch-ddp" "$(median_of "$np" "$width" ddp "$out")"
        keep_best "$np,$width,torch-zero1" "$(median_of "$np" "$width" zero1 "$out")"
      fi
    done
  done
done
echo "== best median step over $rounds rounds (ms), and ratios"
for width in $widths; do
  for np in $nps; do
    k="$np,$width"
    awk -v np="$np" -v w="$width" -v d="${best[$k,ddp]}" -v z1="${best[$k,zero1]}" \
      -v z2="${best[$k,zero2]}" -v f="${best[$k,fsdp]}" -v td="${best[$k,torch-ddp]:-}" \
      -v tz="${best[$k,torch-zero1]:-}" 'BEGIN {
        printf "np %s, width %s: ddp %.1f, zero1 %.1f (x%.2f), zero2 %.1f (x%.2f), fsdp %.1f (x%.2f)", np, w, d, z1, z1 / d, z2, z2 / d, f, f / d
        if (tz != "") printf "; PyTorch ddp %.1f, zero1 %.1f: our zero1 / theirs x%.2f", td, tz, z1 / tz
        printf "\n" }'
  done
done
