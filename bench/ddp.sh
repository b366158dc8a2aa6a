#!/usr/bin/env bash
# The DDP step against PyTorch's, in one session (chapters 06 and 07): bench_ddp_step
# under ddprun and bench/torch/bench_ddp.py (DDP over Gloo, Debian's python3-torch) at
# each np (4 ranks oversubscribe this 2-core box) and model width, global batch 128,
# 1 thread per rank, `rounds` rounds alternating the two. Prints each program's lines,
# then per np and width the best median over the rounds of our bucketed step (the
# Reducer, PyTorch's default 25 MiB caps), our flat step (chapter 06) and PyTorch's
# DDP step, and the ratio bucketed / PyTorch (below 1: we are faster).
#   bench/ddp.sh [BUILD_DIR] [ROUNDS] [NPS] [WIDTHS]   # defaults: build/release 2 "2 4" "1"
#   STEPS=10 bench/ddp.sh build/release 1 "2 4" "1 4" # fewer steps for wide models
#   DDP_TCP_LINK=1gbit,50us bench/ddp.sh ...           # our ranks over an emulated link
# With DDP_TCP_LINK set, PyTorch (whose Gloo cannot emulate a link) is left out: the
# question there is how much of the communication the buckets hide, which
# bench_ddp_step prints itself (exposed communication against flat's).
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
rounds=${2:-2}
nps=${3:-2 4}
widths=${4:-1}
steps=${STEPS:-50}
export OMP_NUM_THREADS=1 MNIST_DIR=
have_torch=1
/usr/bin/python3 -c 'import torch' 2>/dev/null || have_torch=0
((have_torch)) || echo "ddp.sh: no python3-torch (apt-get install python3-torch): ours only"
[ -z "${DDP_TCP_LINK:-}" ] || { have_torch=0; echo "ddp.sh: DDP_TCP_LINK=$DDP_TCP_LINK: ours only"; }
declare -A bucketed flat theirs
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a < b) ? a : b }'; }
median_of() { sed -n "s/^np=$1 $2 *: step min [0-9.]* ms, median \([0-9.]*\) ms.*/\1/p" <<<"$3"; }
for round in $(seq "$rounds"); do
  for width in $widths; do
    for np in $nps; do
      key="$np,$width"
      echo "== round $round, np $np, width $width"
      out=$("$build/bin/ddprun" --nproc-per-node "$np" "$build/bin/bench_ddp_step" \
              --width "$width" --steps "$steps" --warmup 3 | sed 's/^\[rank 0\] //')
      echo "$out"
      bucketed[$key]=$(best "$(median_of "$np" "bucketed 25" "$out")" "${bucketed[$key]:-}")
      flat[$key]=$(best "$(median_of "$np" flat "$out")" "${flat[$key]:-}")
      if ((have_torch)); then
        out=$(/usr/bin/python3 "$root/bench/torch/bench_ddp.py" --nproc "$np" --steps "$steps" \
                --warmup 3 --width "$width" --epochs 0 2>&1 | grep -E '^(np=|comm share)')
        echo "$out"
        theirs[$key]=$(best "$(median_of "$np" sync "$out")" "${theirs[$key]:-}")
      fi
    done
  done
done
echo "== best median DDP step over $rounds rounds (ms)"
for width in $widths; do
  for np in $nps; do
    key="$np,$width"
    if ((have_torch)); then
      awk -v np="$np" -v w="$width" -v a="${bucketed[$key]}" -v f="${flat[$key]}" \
        -v b="${theirs[$key]}" 'BEGIN { printf "np %s, width %s: ddp.cpp bucketed %.1f, flat %.1f, PyTorch/Gloo %.1f, ratio bucketed/PyTorch %.2fx\n", np, w, a, f, b, a / b }'
    else
      echo "np $np, width $width: ddp.cpp bucketed ${bucketed[$key]}, flat ${flat[$key]}"
    fi
  done
done
