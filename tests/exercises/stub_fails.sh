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
# Catch2's summary says "test cases: N | N failed" (or "N | 0 passed | N failed", padded,
# when some assertions passed) when every one of the N cases failed, "K passed" when not.
n=$("$twin" "[ex$id]" --list-test-names-only | grep -c .)
grep -Eq -- "^test cases: +$n \|( +0 passed \|)? +$n failed\$" <<<"$out" ||
  { echo "FAIL: of the $n cases tagged [ex$id], some pass on the stub: they do not check it"; exit 1; }
echo "PASS: every test case of exercise $id fails on the stub, pointing at the page"
