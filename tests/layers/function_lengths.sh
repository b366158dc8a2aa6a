#!/usr/bin/env bash
# Lists the functions longer than a limit in the C++ files under the folders given, and
# fails when one of them has no reason written beside it. A function is "kept whole" when
# one of the three lines above its first line holds a comment starting `// Kept whole:`,
# followed by why cutting it would make it harder to read.
#
#   tests/layers/function_lengths.sh [--limit N] [--all] ROOT FOLDER...
#
# --all lists every function over the limit, kept whole or not. Exit 0: none without a
# reason; 1: some (listed as FILE:LINE: NAME is N lines); 2: bad arguments.
#
# The reading is a brace count, not a C++ parser: a function is a `{` opened at namespace
# or class level after a `(...)` (a lambda stored at namespace level counts too), and it
# ends at its matching `}`. Braces inside strings, character literals and comments are
# skipped.
set -euo pipefail
limit=120
all=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --limit) limit="$2"; shift 2 ;;
    --all) all=1; shift ;;
    *) break ;;
  esac
done
if [[ $# -lt 2 ]]; then
  echo "usage: $0 [--limit N] [--all] ROOT FOLDER..." >&2
  exit 2
fi
root="$1"; shift
cd "$root"
files=()
for folder in "$@"; do
  [[ -d "$folder" ]] || { echo "function_lengths: no folder '$folder' under $root" >&2; exit 2; }
  while IFS= read -r f; do files+=("$f"); done < <(find "$folder" -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' | sort)
done

awk -v limit="$limit" -v all="$all" '
function flush_statement() { statement = "" }
FNR == 1 { depth = 0; in_block_comment = 0; statement = ""; delete kind; delete start; delete name; delete kept;
           delete recent; }
{
  line = $0
  recent[FNR] = line
  out = ""
  i = 1; n = length(line)
  while (i <= n) {
    c = substr(line, i, 1); two = substr(line, i, 2)
    if (in_block_comment) {
      if (two == "*/") { in_block_comment = 0; i += 2 } else i++
      continue
    }
    if (two == "//") break
    if (two == "/*") { in_block_comment = 1; i += 2; continue }
    if (c == "\"" || c == "\047") {            # a string or character literal
      q = c; i++
      while (i <= n && substr(line, i, 1) != q) { if (substr(line, i, 1) == "\\") i++; i++ }
      i++; out = out "x"; continue
    }
    if (c == "{") {
      s = statement out
      parent = (depth == 0) ? "namespace" : kind[depth]
      depth++
      if ((parent == "namespace" || parent == "class") && s ~ /\)/ && s !~ /^[ \t]*(namespace|struct|class|enum|union)[ \t]/ && s !~ /^[ \t]*(namespace|extern)/) {
        kind[depth] = "function"; start[depth] = FNR
        t = s; sub(/\(.*/, "", t); m = split(t, parts, /[ \t*&:]+/); nm = parts[m]
        if (nm == "" || nm == "operator") nm = t
        name[depth] = nm
        k = 0
        for (j = FNR - 1; j >= FNR - 3 && j >= 1; j--) if (recent[j] ~ /\/\/ Kept whole:/) k = 1
        if (line ~ /\/\/ Kept whole:/) k = 1
        kept[depth] = k
      } else if (s ~ /(^|[ \t])(namespace)([ \t]|$)/ || s ~ /extern "x"/ || s ~ /^[ \t]*extern/) {
        kind[depth] = "namespace"
      } else if (s ~ /(^|[ \t])(struct|class|union)[ \t]/ && parent != "function" && parent != "other") {
        kind[depth] = "class"
      } else {
        kind[depth] = "other"
      }
      statement = ""; out = ""; i++; continue
    }
    if (c == "}") {
      if (depth > 0) {
        if (kind[depth] == "function") {
          len = FNR - start[depth] + 1
          if (len > limit && (all || !kept[depth])) {
            printf "%s:%d: %s is %d lines%s\n", FILENAME, start[depth], name[depth], len, kept[depth] ? " (kept whole)" : ""
            if (!kept[depth]) bad++
          }
        }
        depth--
      }
      statement = ""; out = ""; i++; continue
    }
    if (c == ";") { statement = ""; out = ""; i++; continue }
    out = out c; i++
  }
  statement = statement " " out
  # a preprocessor line is not part of a statement
  if (line ~ /^[ \t]*#/) statement = ""
}
END {
  if (bad > 0) {
    printf "%d function(s) over %d lines without a `// Kept whole:` reason above them\n", bad, limit
    exit 1
  }
}' "${files[@]}"
