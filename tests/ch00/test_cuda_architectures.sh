#!/usr/bin/env bash
# Configure on a machine whose nvidia-smi lists GPUs (a fake one here: a T4 and an A10)
# builds for them, says so, and keeps them when configured again without nvidia-smi; a
# GPU this nvcc does not know keeps the default; asked for other architectures, it builds
# for those; asked for native, for those nvidia-smi lists, by number
# (cmake/DdpDependencies.cmake). Chapter 00. Skipped (77) where CUDA is not built. The
# three build folders are configured side by side (ctest runs one test at a time, and a
# configure keeps one core busy).
#   test_cuda_architectures.sh <repository> <cmake>
set -u
root=$1 cmake=$2
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT
# fake NAME LINES: a folder NAME with an nvidia-smi that prints LINES (the compute
# capabilities) when asked for them, and fails otherwise.
fake() {
  mkdir -p "$work/$1"
  printf '#!/bin/sh\n[ "$1" = "--query-gpu=compute_cap" ] && printf %%s "%s" && exit 0\nexit 1\n' \
    "$2" >"$work/$1/nvidia-smi"
  chmod +x "$work/$1/nvidia-smi"
}
fake t4-a10 $'7.5\n8.6\n7.5\n'
fake newer $'99.0\n'
fake native $'7.5\n8.6\n'
configure() {  # [FAKE=name] configure FOLDER [FLAGS...]; skips the test where CUDA is not built
  local dir=$1
  shift
  PATH=$work/${FAKE:-t4-a10}:$PATH "$cmake" -S "$root" -B "$dir" -DDDP_BUILD_TESTS=OFF \
    -DDDP_BUILD_BENCH=OFF "$@" >"$dir.log" 2>&1 || { cat "$dir.log"; fail "configure failed"; }
  grep -q ', CUDA ON (archs' "$dir.log" || { echo "SKIPPED: CUDA is not built here"; exit 77; }
}
archs() { sed -n 's/.*, CUDA ON (archs: \([^)]*\)).*/\1/p' "$1.log"; }  # its summary line's

# Three independent chains, run side by side; their output is shown in order.
found() {
  configure "$work/found"
  [[ $(archs "$work/found") == "75;86" ]] ||
    fail "with GPUs 7.5 and 8.6 listed, built for '$(archs "$work/found")'"
  grep -q 'nvidia-smi lists GPUs of compute capability 75;86: building for them' "$work/found.log" ||
    fail "the configure did not say why: $(grep -i 'cuda' "$work/found.log")"
  echo "nvidia-smi lists 7.5, 8.6, 7.5: the build is for 75;86, and the configure says so"
  # Configured again where there is no nvidia-smi (a login node, after a git pull): kept.
  "$cmake" -S "$root" -B "$work/found" >"$work/found.log" 2>&1 || fail "reconfigure failed"
  [[ $(archs "$work/found") == "75;86" ]] ||
    fail "reconfigured without nvidia-smi: built for '$(archs "$work/found")', not 75;86"
  echo "configured again without nvidia-smi: still 75;86"
}
newer() {  # a GPU newer than this nvcc: the default, whose PTX the driver compiles for it

  FAKE=newer configure "$work/newer"
  [[ $(archs "$work/newer") == "80-real;90" ]] ||
    fail "a GPU of 99.0, unknown to nvcc: built for '$(archs "$work/newer")'"
  grep -q 'compute capability 990, which .* does not know' "$work/newer.log" ||
    fail "the configure did not say why it kept the default"
  echo "a GPU nvcc does not know: the default architectures, and the configure says why"
}
asked() {
  configure "$work/asked" -DCMAKE_CUDA_ARCHITECTURES=90
  [[ $(archs "$work/asked") == 90 ]] || fail "asked for 90, built for '$(archs "$work/asked")'"
  echo "asked for 90: built for 90, whatever nvidia-smi lists"
  # Asked for native, by -D and by $CUDAARCHS: the GPUs nvidia-smi lists, written out, since
  # the backend's check (tensor/cuda/architectures.hpp) is handed this list, not the word.
  # Both configure the build above again (quicker than a new one): -D over its cached 90, and
  # CUDAARCHS once the cache has no CMAKE_CUDA_ARCHITECTURES (-U).
  FAKE=native configure "$work/asked" -DCMAKE_CUDA_ARCHITECTURES=native
  [[ $(archs "$work/asked") == "75-real;86-real" ]] ||
    fail "-DCMAKE_CUDA_ARCHITECTURES=native, GPUs 7.5 and 8.6: built for '$(archs "$work/asked")'"
  said='native: nvidia-smi lists GPUs of compute capability 75;86: building for them'
  grep -qF "$said (CMAKE_CUDA_ARCHITECTURES=75-real;86-real)" "$work/asked.log" ||
    fail "the configure did not say what native became"
  FAKE=native CUDAARCHS=native configure "$work/asked" -UCMAKE_CUDA_ARCHITECTURES
  [[ $(archs "$work/asked") == "75-real;86-real" ]] ||
    fail "CUDAARCHS=native, GPUs 7.5 and 8.6: built for '$(archs "$work/asked")'"
  echo "asked for native (-D or CUDAARCHS), GPUs 7.5 and 8.6: built for 75-real;86-real, said"
}
chains=(found newer asked) pids=()
for chain in "${chains[@]}"; do
  "$chain" >"$work/$chain.out" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!chains[@]}"; do
  wait "${pids[i]}"
  rc=$?
  cat "$work/${chains[i]}.out"
  ((rc == 77)) && exit 77
  ((rc != 0)) && status=1
done
exit $status
