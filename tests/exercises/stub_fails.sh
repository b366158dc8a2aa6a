#!/usr/bin/env bash
# An exercise's stub twin (cmake/DdpExercises.cmake): every test case tagged [exID] must
# fail on the untouched stub, and the output must carry the stub's pointer to the page.
#   stub_fails.sh TWIN ID POINTER-REGEX
set -uo pipefail
twin=$1 id=$2 pointer=$3
out=$("$twin" "[ex$id]" --reporter compact 2>&1)
rc=$?
echo "$out"
((rc != 0)) || { echo "FAIL: the stub passed exercise $id's tests"; exit 1; }
grep -Eq -- "$pointer" <<<"$out" || { echo "FAIL: no '$pointer' in the output"; exit 1; }
# Catch2's compact summary says "Failed 1 test case", "Failed both 2 test cases" or
# "Failed all N test cases" when every one of the N cases failed; partly passing runs say
# "Failed K test cases" with K < N.
n=$("$twin" "[ex$id]" --list-test-names-only | grep -c .)
case $n in
  1) all='^Failed 1 test case,' ;;
  2) all='^Failed both (2 )?test cases' ;;
  *) all="^Failed all $n test cases" ;;
esac
grep -Eq -- "$all" <<<"$out" ||
  { echo "FAIL: of the $n cases tagged [ex$id], some pass on the stub: they do not check it"; exit 1; }
echo "PASS: every test case of exercise $id fails on the stub, pointing at the page"
