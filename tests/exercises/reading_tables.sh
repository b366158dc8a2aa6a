#!/usr/bin/env bash
# Every chapter's "Read in this order" table reaches an exercise before its answer
# (tutorial/EXERCISES.md names the answer: the file the participant rewrites). For each
# exercise of the table: a row that names the answer file must come after the row that
# says, in bold, to stop and do it ("**... do [exercise 06.1](#exercise-1)**"), or be that
# row and name the file after it. Label `exercises`.
#   reading_tables.sh REPOSITORY
set -uo pipefail
root=$1
fail() { echo "FAIL: $*"; exit 1; }
failed=0
bad() { echo "FAIL: $*"; failed=1; }  # every such row is named, then the test fails
table=$root/tutorial/EXERCISES.md
rows=$(grep -E '^\| [0-9][0-9]\.[0-9] ' "$table") || fail "no exercises in $table"
while IFS='|' read -r _ id chapter _ file _; do
  id=$(xargs <<<"$id") chapter=$(xargs <<<"$chapter") file=$(xargs <<<"$file")
  page=$root/tutorial/$chapter/README.md
  answer=$(basename "$file")
  # The table's rows, one a line: "N<TAB>the row".
  reading=$(awk '/^## Read in this order/ { on = 1; next } /^## / { on = 0 }
                 on && /^\| [0-9]+ \|/ { split($0, f, "|"); n = f[2]; gsub(/ /, "", n);
                                         print n "\t" $0 }' "$page")
  [[ -n $reading ]] || fail "$page has no \"Read in this order\" table"
  stop="do \\[exercise $id\\]\\(#exercise-${id#*.}\\)\\*\\*"
  stop_row=$(grep -E "$stop" <<<"$reading" | head -n 1 | cut -f 1)
  # The answer, as a file name of its own: `size_classes.cpp`, `tensor/cuda/size_classes.cpp`.
  named="(^|[^A-Za-z0-9_])${answer//./\\.}([^A-Za-z0-9_]|$)"
  was=$failed failed=0
  while IFS=$'\t' read -r n row; do
    [[ -n $n ]] || continue
    if [[ -z $stop_row ]] || ((n < stop_row)); then
      bad "exercise $id: $chapter's reading table sends the reader to its answer" \
        "$answer in row $n, before any row says **... do [exercise $id](#exercise-${id#*.})**"
    fi
    if ((n == stop_row)); then
      before=$(sed -E "s/$stop.*//" <<<"$row")
      ! grep -Eq "$named" <<<"$before" ||
        bad "exercise $id: row $n of $chapter's reading table names $answer before its stop"
    fi
  done <<<"$(grep -E "$named" <<<"$reading")"
  if ((failed == 0)) && [[ -n $stop_row ]]; then
    echo "exercise $id: $chapter's reading table stops at row $stop_row, before $answer"
  elif ((failed == 0)); then
    echo "exercise $id: $chapter's reading table does not name $answer"
  fi
  failed=$((was | failed))
done <<<"$rows"
exit $failed
