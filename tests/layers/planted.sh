#!/usr/bin/env bash
# The layering checks must be able to fail: each runs once on a clean tree (passes) and
# once per planted violation (fails with the violation named).
#
#   tests/layers/planted.sh TESTS_LAYERS_DIR PATH/TO/ddp-train
set -euo pipefail
here="$1"
ddp_train="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

expect() {  # expect EXIT_CODE TEXT_IN_OUTPUT DESCRIPTION COMMAND...
  local want="$1" text="$2" what="$3"
  shift 3
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  if [[ $rc -ne $want ]] || ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL: $what: exit $rc (expected $want), output:"
    sed 's/^/  | /' <<<"$out"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

# ---- check_layers.sh on a small tree of its own -------------------------------------
tree="$tmp/tree"
for d in base tensor autograd nn data dist dist/parallel; do
  mkdir -p "$tree/$d"
  echo "// ${d}'s file: the buckets of the Reducer may be named in a comment" > "$tree/$d/x.hpp"
done
echo '#include "base/x.hpp"' >> "$tree/tensor/x.hpp"
echo '#include "nn/x.hpp"' >> "$tree/dist/parallel/x.hpp"
expect 0 "keeps to its layer" "a clean tree passes" bash "$here/check_layers.sh" "$tree"

cp -r "$tree" "$tmp/t1"
echo '#include "dist/parallel/x.hpp"' >> "$tmp/t1/dist/x.hpp"
expect 1 'dist/x.hpp:2: includes "dist/parallel/x.hpp"' \
  "the communication layer including the DDP layer fails" bash "$here/check_layers.sh" "$tmp/t1"

cp -r "$tree" "$tmp/t2"
echo '#include "tensor/x.hpp"' >> "$tmp/t2/base/x.hpp"
expect 1 'base/x.hpp:2: includes "tensor/x.hpp"' \
  "base including tensor fails" bash "$here/check_layers.sh" "$tmp/t2"

cp -r "$tree" "$tmp/t3"
echo 'inline bool is_launch(const char* c) { return c[0] == *"reducer"; }' >> "$tmp/t3/base/x.hpp"
expect 1 "base/x.hpp:2: names 'reducer'" \
  "base naming the Reducer in a string fails" bash "$here/check_layers.sh" "$tmp/t3"

# ---- ddprun_links.sh on a program that links everything -------------------------------
expect 1 "links libgomp" "ddp-train, which links OpenMP, fails the launcher's check" \
  bash "$here/ddprun_links.sh" "$ddp_train"
expect 1 "carries 'ddp::Variable' code" "ddp-train, which carries autograd, fails it by symbol" \
  bash "$here/ddprun_links.sh" "$ddp_train"

# ---- function_lengths.sh: 120 lines pass, 121 fail, a reason lets 121 pass --------------
mkdir -p "$tmp/fl/dist"
long_function() {  # long_function LINES [REASON_LINE]
  [[ $# -gt 1 ]] && echo "$2"
  echo "int f() {"
  for ((i = 0; i < $1 - 2; i++)); do echo "  int x$i = $i;"; done
  echo "}"
}
long_function 120 > "$tmp/fl/dist/a.cpp"
expect 0 "" "a function of 120 lines passes" bash "$here/function_lengths.sh" "$tmp/fl" dist
long_function 121 > "$tmp/fl/dist/a.cpp"
expect 1 "dist/a.cpp:1: f is 121 lines" "a function of 121 lines fails" \
  bash "$here/function_lengths.sh" "$tmp/fl" dist
long_function 121 "// Kept whole: one table, read top to bottom" > "$tmp/fl/dist/a.cpp"
expect 0 "" "a function of 121 lines with a reason passes" \
  bash "$here/function_lengths.sh" "$tmp/fl" dist

# ---- group_deadline.sh: the 300 s default where a group is made passes; a wait on it,
# or a DDP option defaulting to it, fails ------------------------------------------------
mkdir -p "$tmp/gd/dist/parallel" "$tmp/gd/tools"
echo '  std::chrono::milliseconds timeout = kDefaultTimeout;  // InitOptions' > "$tmp/gd/dist/init.hpp"
echo '  group.all_reduce(t)->wait();  // not kDefaultTimeout: the group'"'"'s' > "$tmp/gd/dist/parallel/a.cpp"
expect 0 "only where a group or a store is made" "a clean tree passes" \
  bash "$here/group_deadline.sh" "$tmp/gd"
echo '  work->block_stream(kDefaultTimeout);' >> "$tmp/gd/dist/parallel/a.cpp"
expect 1 "dist/parallel/a.cpp:2: a wait passes kDefaultTimeout" \
  "the Reducer's wait on the old default fails" bash "$here/group_deadline.sh" "$tmp/gd"
echo '  std::chrono::milliseconds timeout = kDefaultTimeout;' > "$tmp/gd/dist/parallel/a.cpp"
expect 1 "dist/parallel/a.cpp:1: names kDefaultTimeout" \
  "a DDP option defaulting to it fails" bash "$here/group_deadline.sh" "$tmp/gd"

if [[ $failures -gt 0 ]]; then
  echo "$failures planted check(s) did not behave"
  exit 1
fi
echo "every planted violation was caught"
