#!/usr/bin/env bash
# The all-reduce comparison of chapter 05 in one go: bench_allreduce with the tcp backend
# (under ddprun: through shared memory, its ranks being on this host, "tcp"; and over its
# ring on loopback sockets, DDP_TCP_SHM=0, "tcp-ring"), and with the mpi backend under
# Open MPI over TCP (--mca pml ob1 --mca btl self,tcp) and over shared memory (the
# default), at np 2 and 4; and, as the plain Open MPI reference, the anchors' own
# MPI_Allreduce program (bench/anchors/cpp/allreduce_mpi.cpp, compiled into a temporary
# folder) over TCP ("raw-tcp"); and PyTorch's gloo all_reduce (bench/torch/allreduce_gloo.py,
# when Debian's python3-torch is installed). They run interleaved, round after round, so
# that a busy spell of the machine hits all of them; the table takes each one's best
# median over the rounds, and its ratios are times: 1.20x in the column "/raw-tcp" means
# our tcp backend took 1/1.2 of Open MPI's time. The tcp-ring run (the tcp run when
# tcp-ring is not asked for) also times its floors (bench_allreduce --floor): the same
# bytes on plain TCP links with nothing else to do, through memory that stays in the
# cache ("hot", the kernel's copies at their cheapest) or through as much memory as they
# are ("cold", every byte read and written once, as a large tensor's must be). "gloo/hot"
# is then about the most any TCP all-reduce could gain on Gloo on this machine.
#   bench/allreduce.sh [BUILD_DIR] [ROUNDS] [NPS]       # defaults: build/release 2 "2 4"
#   bench/allreduce.sh build/verify 3 "2 4"
# Extra flags for bench_allreduce go in $BENCH_FLAGS (e.g. "--reps 5 --sizes 1048576");
# $LABELS picks the columns to run (default: all of "tcp tcp-ring mpi-tcp mpi-shm raw-tcp
# gloo");
# $BASE names another build whose tcp backend runs beside ours, interleaved, as
# "tcp-base" (before/after a change: BASE=/tmp/before LABELS="tcp raw-tcp").
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
rounds=${2:-2}
nps=${3:-2 4}
bench=$build/bin/bench_allreduce
ddprun=$build/bin/ddprun
flags=${BENCH_FLAGS:-}
for f in "$bench" "$ddprun"; do
  [ -x "$f" ] || { echo "allreduce.sh: $f not found; build the bench_allreduce and ddprun targets"; exit 1; }
done
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Loopback only; vader's single-copy (CMA) needs ptrace rights that containers often lack.
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_btl_vader_single_copy_mechanism=none
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
results=$scratch/results
raw_src=$root/bench/anchors/cpp/allreduce_mpi.cpp
raw=$scratch/allreduce_mpi
wanted=" ${LABELS:-tcp tcp-ring mpi-tcp mpi-shm raw-tcp gloo} "
labels=""
[ -n "${BASE:-}" ] && labels="tcp-base"
for label in tcp tcp-ring mpi-tcp mpi-shm; do
  case $wanted in *" $label "*) labels="$labels $label" ;; esac
done
case $wanted in *" raw-tcp "*)
  if [ -f "$raw_src" ] && mpicxx -O2 -std=c++17 "$raw_src" -o "$raw" 2>/dev/null; then
    labels="$labels raw-tcp"
  else
    echo "allreduce.sh: $raw_src not found or not compiled: no raw Open MPI column" >&2
  fi ;;
esac
gloo_src=$root/bench/torch/allreduce_gloo.py
case $wanted in *" gloo "*)
  if [ -f "$gloo_src" ] && /usr/bin/python3 -c "import torch" 2>/dev/null; then
    labels="$labels gloo"
  else
    echo "allreduce.sh: $gloo_src or python3-torch missing: no live gloo column" >&2
  fi ;;
esac

# The floors (plain TCP links) go with the ring's run when there is one.
case " $labels " in *" tcp-ring "*) tcp_floor="" ;; *) tcp_floor="--floor" ;; esac

run() {  # run <label> <np>: one bench_allreduce job; its result lines go to $results
  local label=$1 np=$2 out
  case $label in
  tcp) out=$("$ddprun" --nproc-per-node "$np" "$bench" --backend tcp $tcp_floor $flags 2>&1) ;;
  tcp-ring) out=$(DDP_TCP_SHM=0 "$ddprun" --nproc-per-node "$np" "$bench" --backend tcp \
                    --label tcp-ring --floor $flags 2>&1) ;;
  tcp-base) out=$("$BASE/bin/ddprun" --nproc-per-node "$np" "$BASE/bin/bench_allreduce" \
                    --backend tcp --label tcp-base $flags 2>&1) ;;
  mpi-tcp) out=$(mpirun -np "$np" --oversubscribe --mca pml ob1 --mca btl self,tcp \
                   "$bench" --backend mpi --label mpi-tcp $flags 2>&1) ;;
  mpi-shm) out=$(mpirun -np "$np" --oversubscribe "$bench" --backend mpi --label mpi-shm \
                   $flags 2>&1) ;;
  raw-tcp)  # its JSON rows -> result lines ({"bytes": 4096, ..., "time_s_median": 4.4e-06, ...})
    out=$(mpirun -np "$np" --oversubscribe --mca pml ob1 --mca btl self,tcp "$raw" 10 tcp 2>&1 |
          sed -n 's/.*"bytes": \([0-9]*\),.*"time_s_median": \([0-9.e+-]*\),.*/\1 \2/p' |
          awk -v np="$np" '{ printf "result label=raw-tcp np=%d bytes=%d time_us_median=%.3f\n",
                                    np, $1, $2 * 1e6 }') ;;
  gloo)  # its lines "np=2     4096 B: median    1095.1 us ..." -> result lines
    out=$(/usr/bin/python3 "$gloo_src" --nproc "$np" --reps 10 --out "$scratch/gloo.json" 2>&1 |
          sed -n 's/^np=\([0-9]*\) *\([0-9]*\) B: median *\([0-9.]*\) us.*/\1 \2 \3/p' |
          awk '{ printf "result label=gloo np=%d bytes=%d time_us_median=%.3f\n", $1, $2, $3 }') ;;
  esac
  local rc=$?
  [ $rc -eq 0 ] || { echo "$out"; echo "allreduce.sh: the $label run at np $np failed ($rc)"; exit 1; }
  echo "$out" | sed -n 's/^\(\[rank 0\] \)\{0,1\}\(result .*\)/\2/p' >>"$results"
}

for np in $nps; do
  for round in $(seq 1 "$rounds"); do
    for label in $labels; do
      echo "np $np, round $round/$rounds: $label" >&2
      run "$label" "$np"
    done
  done
done

# Best median per (np, bytes, label); the anchors as bench_allreduce read them. Only the
# sizes bench_allreduce ran are shown (raw-tcp also measures 4 bytes).
printf "%3s %9s | %9s %9s %9s %9s %9s %9s %9s | %9s %9s | %9s %9s | %8s %8s %8s | %8s %8s %8s %8s %8s %8s | %6s %6s %9s %9s\n" \
  np bytes "tcp" "tcp-ring" "tcp-base" "raw-tcp" "mpi-tcp" "mpi-shm" "gloo" "hot" "cold" "gloo*" \
  "rawtcp*" "/mpi-shm" "ring/shm" "ring/tcp" "/base" "/raw-tcp" "/mpi-tcp" "/gloo" "/gloo*" \
  "/rawtcp*" "/hot" "/cold" "gloo/hot" "gloo/cold"
awk '
  { delete f; for (i = 2; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] } }
  { k = f["np"] " " f["bytes"]; t = f["time_us_median"] + 0; l = f["label"]
    if (!((k, l) in best) || t < best[k, l]) best[k, l] = t
    if (l == "tcp" || l == "tcp-ring") {
                      keys[k] = 1; tcp[k] = f["anchor_MPI_tcp_us"]; gloo[k] = f["anchor_gloo_us"]
                      keep_min(k, "hot", f["floor_hot_us_median"] + 0)
                      keep_min(k, "cold", f["floor_cold_us_median"] + 0) } }
  function keep_min(k, l, t) { if (t > 0 && (!((k, l) in best) || t < best[k, l])) best[k, l] = t }
  function ratio(a, b) { return (a > 0 && b > 0) ? sprintf("%7.2fx", a / b) : "       -" }
  function short(a, b) { return (a > 0 && b > 0) ? sprintf("%5.2fx", a / b) : "     -" }
  function us(k, l) { return ((k, l) in best) ? sprintf("%9.1f", best[k, l]) : "        -" }
  END {
    for (k in keys) {
      split(k, p, " "); a = best[k, "tcp"]
      printf "%3d %9d | %s %s %s %s %s %s %s | %s %s | %9.1f %9.1f | %s %s %s | %s %s %s %s %s %s | %s %s %9s %9s\n",
             p[1], p[2], us(k, "tcp"), us(k, "tcp-ring"), us(k, "tcp-base"), us(k, "raw-tcp"),
             us(k, "mpi-tcp"), us(k, "mpi-shm"), us(k, "gloo"), us(k, "hot"), us(k, "cold"),
             gloo[k], tcp[k],
             ratio(best[k, "mpi-shm"], a), ratio(best[k, "mpi-shm"], best[k, "tcp-ring"]),
             ratio(best[k, "tcp-ring"], a), ratio(best[k, "tcp-base"], a),
             ratio(best[k, "raw-tcp"], a),
             ratio(best[k, "mpi-tcp"], a), ratio(best[k, "gloo"], a),
             ratio(gloo[k], a), ratio(tcp[k], a), short(best[k, "hot"], a), short(best[k, "cold"], a),
             ratio(best[k, "gloo"], best[k, "hot"]), ratio(best[k, "gloo"], best[k, "cold"])
    }
  }' "$results" | sort -k1,1n -k2,2n
cat <<END
us per call: the best median over $rounds round(s). tcp = ddp tcp backend (ddprun), through
shared memory (one host); tcp-ring = the same over its ring on loopback (DDP_TCP_SHM=0);
tcp-base = the same from the build in \$BASE, when given;
raw-tcp = MPI_Allreduce over --mca btl self,tcp (bench/anchors/cpp, live); gloo = PyTorch's
gloo all_reduce (bench/torch/allreduce_gloo.py, live); mpi-tcp / mpi-shm =
ddp's mpi backend over Open MPI tcp / shared memory; hot, cold = the tcp run's traffic on
plain TCP links, nothing else, through cached / uncached memory (bench_allreduce --floor);
* = anchor (bench/anchors/results, the faster median of run1/run2). /X = X's time /
tcp's time (> 1: tcp is faster); ring/shm = mpi-shm's time / tcp-ring's; ring/tcp =
tcp-ring's time / tcp's (what shared memory gains on the ring); gloo/hot = gloo's time /
the hot floor: about the most any TCP all-reduce could gain on Gloo here.
END
