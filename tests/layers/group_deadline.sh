#!/usr/bin/env bash
# One deadline per process group (ProcessGroup::timeout(), issue 28): kDefaultTimeout
# (base/deadline.hpp, 300 s) is the default for making a group or a store, and nothing
# else. This fails when code (comments are not read) names it anywhere but where a group
# or a store is made, or passes it to a wait: such a wait ignores the group's deadline,
# as DDP's did when ddp-train --timeout 420 ended at 300 s.
#
#   tests/layers/group_deadline.sh ROOT
#
# Exit 0: none; 1: one line each (FILE:LINE: what); 2: bad arguments.
set -euo pipefail
if [[ $# -ne 1 || ! -d "$1" ]]; then
  echo "usage: $0 ROOT (the repository root)" >&2
  exit 2
fi
cd "$1"

# Where a group or a store is made, and the flags that feed InitOptions::timeout.
allowed=(
  base/deadline.hpp          # the definition
  dist/init.hpp              # InitOptions::timeout
  dist/process_group_tcp.hpp dist/process_group_mpi.hpp dist/process_group_nccl.hpp
  dist/store.hpp dist/tcp_store.hpp dist/file_store.hpp
  tools/ddp_train/options.hpp  # --timeout's default, which becomes InitOptions::timeout
  bench/allreduce.cpp          # its --timeout's default, likewise
)

bad=0
for folder in base dist tools tests tutorial bench; do
  [[ -d "$folder" ]] || continue
  while IFS= read -r f; do
    while IFS=: read -r line code; do
      if grep -qE '(wait|block_stream)[[:space:]]*\([^)]*\<kDefaultTimeout\>' <<<"$code"; then
        echo "$f:$line: a wait passes kDefaultTimeout: call wait() (the group's deadline)"
        bad=$((bad + 1))
      elif [[ " ${allowed[*]} " != *" $f "* ]]; then
        echo "$f:$line: names kDefaultTimeout: only making a group or a store may" \
             "(use the group's timeout(), or wait() with no argument)"
        bad=$((bad + 1))
      fi
    done < <(sed 's://.*$::' "$f" | grep -nw 'kDefaultTimeout' || true)
  done < <(find "$folder" \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) |
           sort)
done
if [[ $bad -gt 0 ]]; then
  echo "$bad use(s) of kDefaultTimeout outside the making of a group or store: every wait" \
       "above the group waits its deadline, ProcessGroup::timeout()"
  exit 1
fi
echo "group deadline: kDefaultTimeout only where a group or a store is made"
