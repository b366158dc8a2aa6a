#!/usr/bin/env bash
# The layers point one way (README, "Layout"): this fails when a file of a lower layer
# includes a higher one, or names a higher layer's concepts in its code (a dependency
# carried by a string, e.g. the trace recorder parsing the Reducer's event names).
#
#   tests/layers/check_layers.sh ROOT
#
#   base  <-  tensor  <-  autograd  <-  nn  <-  dist/parallel (the DDP layer)
#              ^   ^                             |
#            data  dist (the communication layer) <-+
#
# Exit 0: every file keeps to its layer; 1: violations, one line each (FILE:LINE: what);
# 2: bad arguments. Comments are not read for the words: a lower layer may say who uses it.
set -euo pipefail
if [[ $# -ne 1 || ! -d "$1" ]]; then
  echo "usage: $0 ROOT (the repository root)" >&2
  exit 2
fi
cd "$1"

# layer: the folder, the project folders its files may include, the words that belong
# to the layers above it (case-insensitive, outside comments).
layers=(
  "base|base|bucket|reducer|ledger|all_?reduce|process_?group|fsdp|sharded_?data|zero_?redundancy|tensor|autograd"
  "tensor|base tensor|bucket|reducer|ledger|all_?reduce|process_?group|fsdp|sharded_?data|zero_?redundancy"
  "autograd|base tensor autograd|bucket|reducer|ledger|all_?reduce|process_?group|fsdp|sharded_?data|zero_?redundancy"
  "nn|base tensor autograd nn|bucket|reducer|ledger|all_?reduce|process_?group|fsdp|sharded_?data|zero_?redundancy"
  "data|base tensor data|bucket|reducer|ledger|all_?reduce|process_?group|fsdp|sharded_?data|zero_?redundancy"
  "dist|base tensor dist|bucket|reducer|ledger|syncbatchnorm|distributed_?data_?parallel|fsdp|sharded_?data|zero_?redundancy|nn::"
  "dist/parallel|base tensor autograd nn data dist dist/parallel|"
)

bad=0
for entry in "${layers[@]}"; do
  folder=${entry%%|*}
  rest=${entry#*|}
  allowed=${rest%%|*}
  words=${rest#*|}
  [[ -d "$folder" ]] || { echo "check_layers: no folder '$folder'" >&2; exit 2; }
  files=$(find "$folder" \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) |
          { [[ "$folder" == dist ]] && grep -v '^dist/parallel/' || cat; } | sort)
  for f in $files; do
    # includes: "top/..." must name an allowed folder (dist/parallel/... counts as
    # dist/parallel, so the communication layer cannot include the DDP layer)
    while IFS=: read -r line inc; do
      top=${inc%%/*}
      [[ "$inc" == dist/parallel/* ]] && top=dist/parallel
      [[ -d "$top" ]] || continue  # not a project folder (a system header in quotes)
      if [[ " $allowed " != *" $top "* ]]; then
        echo "$f:$line: includes \"$inc\": $folder may include only: $allowed"
        bad=$((bad + 1))
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
             sed -E 's/^([0-9]+):[^"]*"([^"]+)".*/\1:\2/')
    # words of the layers above, in the code (comments stripped)
    [[ -z "$words" ]] && continue
    while IFS= read -r hit; do
      [[ -z "$hit" ]] && continue
      echo "$f:${hit%%:*}: names '$(grep -oiE "$words" <<<"${hit#*:}" | head -1)', a concept of a layer above $folder"
      bad=$((bad + 1))
    done < <(awk '{
        line = $0; out = ""
        while (line != "") {
          if (inblock) { p = index(line, "*/"); if (p == 0) { line = "" } else { line = substr(line, p + 2); inblock = 0 } ; continue }
          p = index(line, "/*"); q = index(line, "//")
          if (q > 0 && (p == 0 || q < p)) { out = out substr(line, 1, q - 1); line = "" }
          else if (p > 0) { out = out substr(line, 1, p - 1); line = substr(line, p + 2); inblock = 1 }
          else { out = out line; line = "" }
        }
        if (out ~ /^[ \t]*#[ \t]*include/) out = ""
        print FNR ":" out
      }' "$f" | grep -iE "^[0-9]+:.*($words)" || true)
  done
done
if [[ $bad -gt 0 ]]; then
  echo "$bad layering violation(s): a lower layer must not depend on a higher one (README, \"Layout\")"
  exit 1
fi
echo "layers: every file of base, tensor, autograd, nn, data, dist and dist/parallel keeps to its layer"
