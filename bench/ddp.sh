#!/usr/bin/env bash
# Chapter 06's DDP step against PyTorch's, in one session: bench_ddp_step under ddprun and
# bench/torch/bench_ddp.py (DDP over Gloo, Debian's python3-torch) at np 2 and 4 (4 ranks
# oversubscribe this 2-core box), global batch 128, 1 thread per rank, `rounds` rounds
# alternating the two. Prints each program's lines, then per np the best median of the
# normal DDP step over the rounds and the ratio ours / PyTorch's (below 1: we are faster).
#   bench/ddp.sh [BUILD_DIR] [ROUNDS] [NPS]       # defaults: build/release 2 "2 4"
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
rounds=${2:-2}
nps=${3:-2 4}
export OMP_NUM_THREADS=1 MNIST_DIR=
have_torch=1
/usr/bin/python3 -c 'import torch' 2>/dev/null || have_torch=0
((have_torch)) || echo "ddp.sh: no python3-torch (apt-get install python3-torch): ours only"
declare -A ours theirs
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a < b) ? a : b }'; }
for round in $(seq "$rounds"); do
  for np in $nps; do
    echo "== round $round, np $np"
    out=$("$build/bin/ddprun" --nproc-per-node "$np" "$build/bin/bench_ddp_step" |
          sed 's/^\[rank 0\] //')
    echo "$out"
    m=$(sed -n "s/^np=$np flat *: step min [0-9.]* ms, median \([0-9.]*\) ms.*/\1/p" <<<"$out")
    ours[$np]=$(best "$m" "${ours[$np]:-}")
    if ((have_torch)); then
      out=$(/usr/bin/python3 "$root/bench/torch/bench_ddp.py" --nproc "$np" --steps 50 \
              --epochs 0 2>&1 | grep -E '^(np=|comm share)')
      echo "$out"
      m=$(sed -n "s/^np=$np sync *: step min [0-9.]* ms, median \([0-9.]*\) ms.*/\1/p" <<<"$out")
      theirs[$np]=$(best "$m" "${theirs[$np]:-}")
    fi
  done
done
echo "== best median DDP step over $rounds rounds (ms)"
for np in $nps; do
  if ((have_torch)); then
    awk -v np="$np" -v a="${ours[$np]}" -v b="${theirs[$np]}" \
      'BEGIN { printf "np %s: ddp.cpp %.1f, PyTorch/Gloo %.1f, ratio %.2fx\n", np, a, b, a / b }'
  else
    echo "np $np: ddp.cpp ${ours[$np]}"
  fi
done
