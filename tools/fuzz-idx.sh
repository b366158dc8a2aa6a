#!/usr/bin/env bash
# Fuzzes the IDX reader (data/idx_reader.cpp) with libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer. Chapter 04.
#
#   tools/fuzz-idx.sh [seconds]     (default 60)
#
# Builds build/fuzz/idx_fuzz with clang++, writes a seed corpus of small valid IDX files
# (raw and gzip) into build/fuzz/corpus, and runs for the given time. Every input that
# crashes is copied into tests/data/idx_regressions/, which the ch04 tests replay.
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "fuzz-idx.sh: the argument is a number of seconds, got '$seconds'" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/build/fuzz"
regressions="$root/tests/data/idx_regressions"
mkdir -p "$out/corpus" "$out/artifacts" "$regressions"

if ! command -v clang++ >/dev/null; then
  echo "fuzz-idx.sh: clang++ not found." >&2
  echo "hint: apt-get install -y clang libclang-rt-14-dev (Debian 12)" >&2
  exit 1
fi

# ---- Build: the reader, the one file of ddp::tensor it needs, and the target -------------
echo "== building $out/idx_fuzz with $(clang++ --version | head -n 1)"
if ! clang++ -std=c++20 -g -O1 -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I "$root" \
    "$root/tests/fuzz/idx_fuzz.cpp" "$root/data/idx_reader.cpp" "$root/base/error.cpp" \
    -lz -o "$out/idx_fuzz"; then
  echo "fuzz-idx.sh: the build failed." >&2
  echo "hint: libFuzzer comes with libclang-rt-14-dev: apt-get install -y libclang-rt-14-dev" >&2
  exit 1
fi

# ---- Seed corpus: small valid files, so the fuzzer starts past the magic number -----------
# idx <file> <hex bytes...>: writes the bytes, and a gzip copy beside it.
idx() {
  local file="$out/corpus/$1"; shift
  printf "$(printf '\\x%s' "$@")" > "$file"
  gzip -n -c "$file" > "$file.gz"
}
idx seed-labels      00 00 08 01  00 00 00 04  00 01 02 09
idx seed-images-2x3  00 00 08 03  00 00 00 02  00 00 00 02  00 00 00 03  00 10 20 30 40 50 \
                     60 70 80 90 a0 ff
idx seed-images-1x1  00 00 08 03  00 00 00 01  00 00 00 01  00 00 00 01  7f
idx seed-empty       00 00 08 01  00 00 00 00
cp "$root/data/mnist-10k/t10k-labels-idx1-ubyte.gz" "$out/corpus/seed-t10k-labels.gz"
for f in "$regressions"/*; do
  [[ -f "$f" && "$f" != *.md ]] && cp "$f" "$out/corpus/"
done

# ---- Run ----------------------------------------------------------------------------------
# -max_len 4096: long enough for a header, some gzip blocks and a trailer; short inputs
# keep the runs per second high. -rss_limit_mb: a runaway allocation is a finding.
echo "== fuzzing for ${seconds}s"
(cd "$out" && ./idx_fuzz -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=1024 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$out/artifacts/" corpus) \
  2>&1 | tee "$out/last-run.log" | grep -E "^#[0-9]+.*(DONE|pulse)|^stat::|ERROR|SUMMARY" \
  || true  # a finding makes the fuzzer exit non-zero: counted from artifacts/ below
# A fuzzer that never ran (a missing library, a bad flag) writes no artifact either:
# libFuzzer's last words on a finished run are its "Done N runs" line.
grep -q "^Done [0-9]* runs" "$out/last-run.log" || [[ -n $(ls "$out/artifacts") ]] ||
  { tail -20 "$out/last-run.log" >&2; echo "fuzz-idx.sh: the fuzzer did not run to the end" >&2; exit 1; }

found=0
for f in "$out"/artifacts/*; do
  [[ -f "$f" ]] || continue
  cp "$f" "$regressions/"
  echo "finding: $f -> tests/data/idx_regressions/$(basename "$f")"
  found=$((found + 1))
done
rm -f "$out"/artifacts/*
echo "== corpus: $(ls "$out/corpus" | wc -l) inputs; findings: $found; full log: $out/last-run.log"
if [[ $found -gt 0 ]]; then
  echo "fuzz-idx.sh: $found crashing input(s) copied; fix the reader, then rerun the ch04 tests" >&2
  exit 1
fi
