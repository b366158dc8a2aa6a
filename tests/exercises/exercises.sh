#!/usr/bin/env bash
# The exercise table and tools/exercise (tutorial/EXERCISES.md), label `exercises`:
#  - every row's page has the anchor its stub points at, and the stub says exactly
#    "exercise ID is not done yet: see tutorial/CHAPTER/README.md#exercise-M";
#  - tools/exercise, run on a copy of the tutorial (never on the repository's own),
#    starts a copy, refuses to start it twice, resets it keeping the old copy, shows the
#    reference, lists the states, and refuses an unknown id or command with exit code 2.
#   exercises.sh REPOSITORY
set -uo pipefail
root=$1
fail() { echo "FAIL: $*"; exit 1; }
table=$root/tutorial/EXERCISES.md
rows=$(grep -E '^\| [0-9][0-9]\.[0-9] ' "$table") || fail "no exercises in $table"
while IFS='|' read -r _ id chapter _ file _; do
  id=$(xargs <<<"$id") chapter=$(xargs <<<"$chapter") file=$(xargs <<<"$file")
  number=${id#*.}
  page=$root/tutorial/$chapter/README.md
  stub=$root/tutorial/$chapter/exercises/$(basename "$file")
  grep -q "<a id=\"exercise-$number\"></a>" "$page" ||
    fail "exercise $id: $page has no anchor <a id=\"exercise-$number\"></a>"
  pointer="exercise $id is not done yet: see tutorial/$chapter/README.md#exercise-$number"
  grep -qF "\"$pointer\"" "$stub" || fail "exercise $id: $stub does not say \"$pointer\""
  [[ -f $root/$file ]] || fail "exercise $id: the reference $file does not exist"
  echo "exercise $id: page anchor, stub pointer and reference are in place"
done <<<"$rows"

# tools/exercise on a scratch copy: it finds the root from its own path.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/tools" && cp "$root/tools/exercise" "$scratch/tools/"
cp -r "$root/tutorial" "$scratch/" && rm -rf "$scratch"/tutorial/*/mine
IFS='|' read -r _ id chapter _ file _ <<<"$(head -n 1 <<<"$rows")"
id=$(xargs <<<"$id") chapter=$(xargs <<<"$chapter") file=$(xargs <<<"$file")
mkdir -p "$scratch/$(dirname "$file")" && cp "$root/$file" "$scratch/$file"
tool=$scratch/tools/exercise
mine=$scratch/tutorial/$chapter/mine/$(basename "$file")
grep -Eq "^$id +not started " <<<"$("$tool" list)" || fail "list does not say $id is not started"
"$tool" start "$id" >/dev/null || fail "start $id failed"
cmp -s "$mine" "$scratch/tutorial/$chapter/exercises/$(basename "$file")" ||
  fail "start did not copy the stub to $mine"
grep -Eq "^$id +untouched " <<<"$("$tool" list)" || fail "list does not say $id is untouched"
"$tool" start "$id" >/dev/null 2>&1 && fail "a second start of $id did not refuse"
echo "// my work" >>"$mine"
grep -Eq "^$id +started " <<<"$("$tool" list)" || fail "list does not say $id is started"
"$tool" reset "$id" >/dev/null || fail "reset $id failed"
grep -q "// my work" "$mine.bak" || fail "reset did not keep the old copy as $mine.bak"
echo "// more work" >>"$mine"
"$tool" reset "$id" >/dev/null || fail "the second reset of $id failed"
[[ $(grep -l "// more work" "$mine".bak* | wc -l) == 1 ]] && grep -q "// my work" "$mine.bak" ||
  fail "the second reset overwrote the first backup"
"$tool" show "$id" | tail -n +2 | cmp -s - "$root/$file" || fail "show does not print $file"
"$tool" start 99.9 >/dev/null 2>&1; [[ $? == 2 ]] || fail "an unknown id does not exit 2"
"$tool" frobnicate >/dev/null 2>&1; [[ $? == 2 ]] || fail "an unknown command does not exit 2"
echo "tools/exercise: list, start, reset, show and the refusals behave"
