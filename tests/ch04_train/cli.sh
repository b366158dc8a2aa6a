#!/usr/bin/env bash
# Chapter 04, ddp-train's exits: --help prints the usage and exits 0; a bad flag exits 2
# with one line on stderr; a missing data folder exits 1 naming the folder.
#   cli.sh <ddp-train> <scratch folder>
set -u
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

"$bin" --help >help.out 2>help.err
rc=$?
[ "$rc" -eq 0 ] || fail "--help exited $rc"
grep -q '^usage: ddp-train' help.out || fail "--help printed no usage line"
for flag in --data --epochs --max-steps --batch-size --lr --momentum --weight-decay --seed \
            --device --threads --metrics --save --resume --progress; do
  grep -q -- "^  $flag " help.out || fail "--help does not list $flag"
done
[ ! -s help.err ] || fail "--help wrote to stderr"

"$bin" --batch-size abc >bad.out 2>bad.err
rc=$?
[ "$rc" -eq 2 ] || fail "a bad value exited $rc, expected 2"
[ "$(wc -l <bad.err)" -eq 1 ] || fail "a bad value printed $(wc -l <bad.err) lines on stderr"
grep -q "^ddp-train: --batch-size .*'abc'" bad.err || fail "unexpected message: $(cat bad.err)"

"$bin" --progress fancy >progress.out 2>progress.err
rc=$?
[ "$rc" -eq 2 ] || fail "--progress fancy exited $rc, expected 2"
grep -q "^ddp-train: --progress expects auto, bar, lines or none, got 'fancy'" progress.err ||
  fail "unexpected message: $(cat progress.err)"

"$bin" --no-such-flag 1 >unknown.out 2>unknown.err
rc=$?
[ "$rc" -eq 2 ] || fail "an unknown flag exited $rc, expected 2"
[ "$(wc -l <unknown.err)" -eq 1 ] || fail "an unknown flag printed more than one line"
grep -q -- "--no-such-flag" unknown.err || fail "unexpected message: $(cat unknown.err)"

"$bin" --data /nonexistent/mnist --device cpu --epochs 1 >missing.out 2>missing.err
rc=$?
[ "$rc" -eq 1 ] || fail "a missing data folder exited $rc, expected 1"
grep -q "/nonexistent/mnist" missing.err ||
  fail "the error does not name the folder: $(cat missing.err)"
echo "ok: --help, bad flags, unknown flag, missing data folder"
