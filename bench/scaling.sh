#!/usr/bin/env bash
# Weak scaling of ddp-train over an emulated link (chapter 07): images per second on 1
# rank, and on 2 ranks with chapter 06's flat all-reduce and with the Reducer at two bucket
# caps, each rank with 64 images a step and 1 thread, width 2, 40 steps, ROUNDS rounds.
# Efficiency = 2-rank images/s / (2 x 1-rank images/s). More ranks than this box has cores
# would measure the ranks sharing cores, not the network: the 8-GPU case is the cost
# model's (bench_cost_model --headline).
#   bench/scaling.sh [BUILD_DIR] [ROUNDS] [LINK]     # defaults: build/release 2 1gbit,50us
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/release}/bin
rounds=${2:-2}
export OMP_NUM_THREADS=1 MNIST_DIR= DDP_TCP_LINK=${3:-1gbit,50us}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch" || exit 1
echo "scaling.sh: DDP_TCP_LINK=$DDP_TCP_LINK, width 2, 64 images per rank and step, 40 steps"
run() {  # label, ranks, flags...
  local label=$1 ranks=$2 out
  shift 2
  out=$("$bin/ddprun" --nproc-per-node "$ranks" "$bin/ddp-train" --width 2 --batch-size 64 \
          --epochs 1 --max-steps 40 --threads 1 --trace t.json "$@" 2>&1 | sed 's/^\[rank 0\] //')
  echo "$label: $(grep -o '[0-9]* img/s' <<<"$out" | tail -1); $(grep '^epoch 1:' <<<"$out")"
}
for round in $(seq "$rounds"); do
  echo "== round $round"
  run "1 rank" 1
  run "2 ranks, flat" 2 --grad-sync flat
  run "2 ranks, bucketed 25 MiB" 2
  run "2 ranks, bucketed 0.25 MiB" 2 --bucket-cap-mb 0.25 --first-bucket-mb 0.25
done
