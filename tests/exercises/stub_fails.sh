#!/usr/bin/env bash
# An exercise's stub twin (cmake/DdpExercises.cmake): every test case tagged [exID] must
# fail on the untouched stub, and the output must carry the stub's pointer to the page.
#   stub_fails.sh TWIN ID POINTER-REGEX
set -uo pipefail
twin=$1 id=$2 pointer=$3
# The console reporter, as `tools/exercise check` shows it: the pointer must be on one line
# (Note [Console width], tests/support/catch_config.hpp).
out=$("$twin" "[ex$id]" 2>&1)
rc=$?
echo "$out"
((rc != 0)) || { echo "FAIL: the stub passed exercise $id's tests"; exit 1; }
grep -Eq -- "$pointer" <<<"$out" || { echo "FAIL: no '$pointer' on one line of the output"; exit 1; }
# Catch2's summary row reads "test cases: N | N failed" when every one of the N cases
# failed (padded, and in some layouts with a "0 passed" column), "K passed", K > 0, when
# not.
n=$("$twin" "[ex$id]" --list-test-names-only | grep -c .)
grep -Eq -- "^test cases: +$n \|( +0 passed \|)? +$n failed\$" <<<"$out" ||
  { echo "FAIL: expected 'test cases: $n | $n failed' in the output: of the $n cases" \
         "tagged [ex$id], some pass on the stub (they do not check it), or the program died"; exit 1; }
echo "PASS: every test case of exercise $id fails on the stub, pointing at the page"
