#!/usr/bin/env bash
# The machine time of the workshop track (tutorial/WORKSHOP.md): every command of the
# chapters' main paths, in the order the plans take them, timed one after the other, with
# the load average before each. Run it on the machine your group will use, to see how much
# of each slot goes to waiting; reading time is not in it.
#   bench/workshop.sh [BUILD_DIR]          # default build/release, built beforehand
# Prints one tab-separated line per command: step, seconds, exit code, 1/5/15-minute load
# average before, command; then the seconds per chapter. Files the commands write (run.csv,
# the trace, the checkpoint) go to a temporary folder, removed at the end unless a command
# ended with another exit code than it should (the script then says where its output is,
# and exits 1). Not run: the GPU-only and cluster commands, and the first exercise check
# (it needs a build/exercises that does not exist yet: time `tools/exercise check`
# itself). ~10 min on 2 idle cores.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build/release}" && pwd) || exit 2
bin=$build/bin
[[ -x $bin/ddp-train && -x $bin/ddprun ]] || {
  echo "bench/workshop.sh: no ddp-train and ddprun in $bin: build first (cmake --build --preset release)" >&2
  exit 2
}
work=$(mktemp -d) || exit 2
cd "$work" || exit 2
export LC_ALL=C OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MNIST_DIR=
declare -A per_chapter
failed=0
log=  # the running step's output, for stop_in_first_epoch

# seconds_since START: seconds from START (an $EPOCHREALTIME) to now, one decimal.
seconds_since() {
  local now=$EPOCHREALTIME
  local us=$((${now/./} - ${1/./}))
  printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000))
}

# step NAME EXPECTED_EXIT COMMAND...: runs COMMAND (output to NAME.log), prints its line.
step() {
  local name=$1 expected=$2
  shift 2
  local load start rc seconds shown="$*"
  shown=${shown//"$bin"\//}
  shown=${shown//"$root"\//}
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  log=$work/$name.log
  start=$EPOCHREALTIME
  "$@" >"$log" 2>&1
  rc=$?
  seconds=$(seconds_since "$start")
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$seconds" "$rc" "$load" "$shown"
  if [[ $rc != "$expected" ]]; then
    echo "  ^ $name: exit code $rc, expected $expected; its output: $log" >&2
    failed=$((failed + 1))
  fi
  per_chapter[${name%%.*}]=$(awk -v a="${per_chapter[${name%%.*}]:-0}" -v b="$seconds" \
                                 'BEGIN { printf "%.1f", a + b }')
}

# stop_in_first_epoch COMMAND...: chapter 08's "Run it": SIGUSR1 to ddprun once rank 0
# has printed its first progress line of epoch 1 (after 2 minutes at the latest), so that
# the run stops inside epoch 1 on a fast machine as on a slow one.
stop_in_first_epoch() {
  "$@" &
  local pid=$! waited=0
  until grep -q 'epoch 1/[0-9]* step' "$log" || ((waited >= 1200)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  kill -USR1 "$pid"
  wait "$pid"
}

printf 'step\tseconds\texit\tload (1, 5, 15 min)\tcommand\n'
step fast.train2 0 "$bin/ddprun" --nproc-per-node 2 "$bin/ddp-train"
step ch00.setup 0 "$bin/ch00_setup"
step ch00.ctest 0 ctest --test-dir "$build" -L ch00 -LE cluster
step ch01.prog 0 "$bin/ch01_tensor"
step ch01.ctest 0 ctest --test-dir "$build" -L ch01 -LE cluster
step ch02.prog 0 "$bin/ch02_cuda"
step ch02.ctest 0 ctest --test-dir "$build" -L ch02 -LE cluster
step ch03.prog 0 "$bin/ch03_autograd"
step ch03.ctest 0 ctest --test-dir "$build" -L ch03 -LE cluster
step ch04.prog 0 "$bin/ch04_resnet_mnist"
step ch04.train1 0 "$bin/ddp-train" --epochs 1 --device cpu --threads 2 --metrics run.csv
step ch04.train5 0 "$bin/ddp-train"
step ch04.ctest 0 ctest --test-dir "$build" -L ch04 -LE cluster
step ch05.ddprun 0 "$bin/ddprun" --nproc-per-node 4 "$bin/ch05_rendezvous"
step ch05.mpirun 0 mpirun -np 4 --oversubscribe "$bin/ch05_rendezvous" --backend mpi
step ch05.ctest 0 ctest --test-dir "$build" -L ch05 -LE cluster
step ch06.prog 0 "$bin/ddprun" --nproc-per-node 2 "$bin/ch06_sharded"
step ch06.mpirun4 0 mpirun -np 4 --oversubscribe "$bin/ddp-train" --backend tcp
step ch06.ctest 0 ctest --test-dir "$build" -L ch06 -LE cluster
step ch07.trace 0 "$bin/ddprun" --nproc-per-node 2 "$bin/ddp-train" --trace run.json
step ch07.merge 0 "$bin/ddp-trace-merge" run.json run.rank0.json run.rank1.json
step ch07.buckets 0 "$bin/ddprun" --nproc-per-node 2 "$bin/ch07_buckets"
step ch07.timeline 0 env DDP_TCP_LINK=1gbit,50us "$bin/ddprun" --nproc-per-node 2 "$bin/ch07_timeline"
step ch07.costmodel 0 "$bin/bench_cost_model" --params 1226442 --world 2 --link 1gbit,50us
step ch07.ctest 0 ctest --test-dir "$build" -L ch07 -LE cluster
# 75: stopped on request (chapter 08); 4: the watchdog's exit that ch08_desync plants.
step ch08.stop 75 stop_in_first_epoch "$bin/ddprun" --nproc-per-node 2 "$bin/ddp-train" --epochs 2 --save ck
step ch08.resume 0 "$bin/ddprun" --nproc-per-node 2 "$bin/ddp-train" --epochs 2 --save ck --resume ck
step ch08.desync 4 "$bin/ddprun" --nproc-per-node 4 "$bin/ch08_desync" --scenario skip --rank 2 --step 3 --timeout-s 3
step ch08.ctest 0 ctest --test-dir "$build" -L ch08 -LE cluster

printf '\nchapter\tseconds\n'
for chapter in fast ch00 ch01 ch02 ch03 ch04 ch05 ch06 ch07 ch08; do
  printf '%s\t%s\n' "$chapter" "${per_chapter[$chapter]}"
done
if ((failed > 0)); then
  echo "bench/workshop.sh: $failed command(s) ended with another exit code than expected;" \
       "their output is in $work" >&2
  exit 1
fi
rm -rf "$work"
