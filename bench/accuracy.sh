#!/usr/bin/env bash
# Test accuracy of ddp-train's default recipe over seeds, at several numbers of ranks
# with the same global batch (128). Chapter 06's target: every seed >= 97.3 % and the
# median within 0.2 points of PyTorch's with the same recipe (bench/torch/recipe.py).
#   bench/accuracy.sh [BUILD_DIR] [SEEDS] [RANKS] [extra ddp-train flags...]
#   bench/accuracy.sh build/release "0 1 2 3 4 5 6 7 8 9" "1 2 4"
# One line per run, "ranks R seed S acc XX.XX", then min and median per rank count.
# 1 rank uses 2 threads; R ranks on this 2-core box share the cores (ddp-train gives
# each rank cores / ranks-per-node threads, at least 1). Takes ~45-60 s per run here.
set -euo pipefail
build=${1:-build/release}
seeds=${2:-0 1 2 3 4 5 6 7 8 9}
ranks_list=${3:-1 2 4}
shift $(($# < 3 ? $# : 3))
export MNIST_DIR=
for ranks in $ranks_list; do
  accs=()
  for seed in $seeds; do
    if [ "$ranks" = 1 ]; then
      line=$("$build/bin/ddp-train" --device cpu --threads 2 --seed "$seed" "$@" | grep '^final:')
    else
      line=$("$build/bin/ddprun" --nproc-per-node "$ranks" "$build/bin/ddp-train" --device cpu \
               --seed "$seed" "$@" | sed -n 's/^\[rank 0\] \(final:.*\)/\1/p')
    fi
    acc=$(sed -n 's/^final: test accuracy \([0-9.]*\)%.*/\1/p' <<<"$line")
    echo "ranks $ranks seed $seed acc $acc"
    accs+=("$acc")
  done
  printf '%s\n' "${accs[@]}" | sort -n |
    awk -v r="$ranks" '{a[NR]=$1} END {m = NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2;
                        printf "ranks %s: min %.2f median %.2f (%d seeds)\n", r, a[1], m, NR}'
done
