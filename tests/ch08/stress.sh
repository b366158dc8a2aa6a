#!/usr/bin/env bash
# Chapter 08, the lost-rank tests again and again: a kill -9 that is named in time once
# may hang or leave a process behind one run in fifty. Not part of ctest (minutes long):
#   tests/ch08/stress.sh BUILD_DIR [N]       (N runs of each scenario, default 20)
# Runs desync.sh's kill-tcp (rank 2 of 4), kill-tcp-rank0 (rank 0 of 4, the store's
# process) and kill-mpi (rank 1 of 3) N times each, then prints, per scenario, how many
# passed, hung (past the timeout + 5 s, or killed at 60 s), left processes behind, or
# failed otherwise; then lifecycle/stress.sh (kill -9 + ddprun --max-restarts) N times.
# Exits 0 only when every run passed.
set -u
build=${1:?usage: stress.sh BUILD_DIR [N]}
n=${2:-20}
build=$(cd "$build" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
desync=$build/bin/ch08_desync
ddprun=$build/bin/ddprun
mpiexec=$(command -v mpiexec || command -v mpirun)
for f in "$desync" "$ddprun" "$mpiexec"; do
  [ -x "$f" ] || { echo "stress.sh: $f is missing: build ch08_desync and ddprun first"; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_oob_tcp_if_include=lo OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for scenario in kill-tcp kill-tcp-rank0 kill-mpi; do
  pass=0 hang=0 orphan=0 other=0
  for ((i = 1; i <= n; i++)); do
    log=$work/$scenario.$i.log
    timeout 90 bash "$here/ledger/desync.sh" "$scenario" "$desync" "$ddprun" "$mpiexec" \
      "$work/$scenario.$i" >"$log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then
      pass=$((pass + 1))
    elif [ "$rc" -eq 124 ] || grep -q "more than .* s$" "$log"; then
      hang=$((hang + 1)); cp "$log" "/tmp/ch08-stress-$scenario-$i.log"
    elif grep -q "processes left behind" "$log"; then
      orphan=$((orphan + 1)); cp "$log" "/tmp/ch08-stress-$scenario-$i.log"
    else
      other=$((other + 1)); cp "$log" "/tmp/ch08-stress-$scenario-$i.log"
    fi
  done
  echo "$scenario: $n runs: $pass passed, $hang hangs, $orphan with orphans, $other other failures"
  [ "$pass" -eq "$n" ] || status=1
done
[ "$status" -eq 0 ] || echo "logs of the failed runs: /tmp/ch08-stress-*.log"
# And the other half of chapter 08's stress: a rank killed mid-training under
# ddprun --max-restarts, restarted, and ending with the uninterrupted run's parameters.
bash "$here/lifecycle/stress.sh" "$build" "$n" || status=1
exit $status
