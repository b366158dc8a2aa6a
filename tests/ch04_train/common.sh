# Shared by the ddp-train process tests (sourced, not run).
#   small_mnist <from> <to> writes the first 256 training and 100 test digits of the MNIST
#                           folder <from> into <to> as raw IDX files: with --batch-size 32
#                           an epoch is 8 steps, and a whole test group runs in about a
#                           minute on two busy cores
#   train <log> <flags...>  runs ddp-train on $data, CPU, 1 thread, seed 3, batch 32 (a
#                           later flag overrides these; with 2 threads on a busy 2-core
#                           box every OpenMP barrier waits for a time slice, ~20x slower);
#                           fails the test unless it exits 0 and prints the `final:` line
#   run_ranks <log> <cmd...> runs a multi-rank command (ddprun, mpirun), exit code in $rc;
#                           <log> has its lines without ddprun's "[rank N] " prefix,
#                           <log>.raw as they came (chapters 06 and 07)
#   summary <log> <epoch>   that epoch's summary line without its timing fields:
#                           "epoch 2/2: train loss 0.1234, test loss 0.2345, test accuracy 93.10%"
fail() { echo "FAIL: $*"; exit 1; }

run_ranks() {
  local log=$1
  shift
  rc=0
  # Sanitizer builds run slower (DDP_TEST_TIME_SCALE, cmake/DdpTesting.cmake).
  timeout $((120 * ${DDP_TEST_TIME_SCALE:-1})) "$@" >"$log.raw" 2>&1 || rc=$?
  sed 's/^\[rank [0-9]*\] //' "$log.raw" >"$log"
}

# idx_head <file.gz> <header bytes> <count> <bytes per item>: the first <count> items of an
# IDX file, with the count in the header (bytes 4..7, big-endian) rewritten.
idx_head() {
  local magic
  magic=$(gunzip -c "$1" | head -c 4 | od -An -tx1 | tr -d ' \n')
  printf "$(echo "$magic" | sed 's/../\\x&/g')"
  printf "$(printf '%08x' "$3" | sed 's/../\\x&/g')"
  gunzip -c "$1" | tail -c +9 | head -c $(($2 - 8 + $3 * $4))
}

small_mnist() {
  mkdir -p "$2" || fail "cannot create $2"
  idx_head "$1/train-images-idx3-ubyte.gz" 16 256 784 >"$2/train-images-idx3-ubyte"
  idx_head "$1/train-labels-idx1-ubyte.gz" 8 256 1 >"$2/train-labels-idx1-ubyte"
  idx_head "$1/t10k-images-idx3-ubyte.gz" 16 100 784 >"$2/t10k-images-idx3-ubyte"
  idx_head "$1/t10k-labels-idx1-ubyte.gz" 8 100 1 >"$2/t10k-labels-idx1-ubyte"
  [ "$(wc -c <"$2/train-images-idx3-ubyte")" -eq $((16 + 256 * 784)) ] ||
    fail "could not cut the bundled digits to a small set in $2"
}

train() {
  local log=$1
  shift
  local rc=0
  "$bin" --data "$data" --device cpu --threads 1 --seed 3 --batch-size 32 "$@" >"$log" 2>&1 ||
    rc=$?
  ((rc == 0)) || { cat "$log"; fail "ddp-train $* exited $rc"; }
  grep -q '^final: test accuracy' "$log" || { cat "$log"; fail "no final: line in $log"; }
}

summary() {
  local fields='train loss [^,]*, test loss [^,]*, test accuracy [^,]*'
  sed -n "s/^\(epoch $2\/[0-9]*: $fields\),.*/\1/p" "$1"
}

# The `final:` line without the wall time.
final_line() { sed -n 's/^\(final: .*\), wall time.*/\1/p' "$1"; }
