# Shared by the ddp-train process tests (sourced, not run).
#   train <log> <flags...>  runs ddp-train on the bundled digits, CPU, 2 threads; fails
#                           the test unless it exits 0 and prints the `final:` line
#   summary <log> <epoch>   that epoch's summary line without its timing fields:
#                           "epoch 2/2: train loss 0.1234, test loss 0.2345, test accuracy 93.10%"
fail() { echo "FAIL: $*"; exit 1; }

train() {
  local log=$1
  shift
  "$bin" --data "$data" --device cpu --threads 2 --seed 3 "$@" >"$log" 2>&1 ||
    { cat "$log"; fail "ddp-train $* exited $?"; }
  grep -q '^final: test accuracy' "$log" || { cat "$log"; fail "no final: line in $log"; }
}

summary() {
  sed -n "s/^\(epoch $2\/[0-9]*: train loss [^,]*, test loss [^,]*, test accuracy [^,]*\),.*/\1/p" "$1"
}

# The `final:` line without the wall time.
final_line() { sed -n 's/^\(final: .*\), wall time.*/\1/p' "$1"; }
