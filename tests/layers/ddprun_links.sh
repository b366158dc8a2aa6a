#!/usr/bin/env bash
# The launcher depends on the base layer alone (tools/ddprun/CMakeLists.txt): it starts
# and watches processes, so it must run on a login node or in a job step where the CUDA
# runtime, OpenMP or MPI are not loaded. This fails when ddprun links any of them, or
# carries the tensor library's code (the project's libraries are static, so ldd cannot
# see that; the symbol table can).
#
#   tests/layers/ddprun_links.sh PATH/TO/ddprun
set -euo pipefail
if [[ $# -ne 1 || ! -x "$1" ]]; then
  echo "usage: $0 PATH/TO/ddprun (an executable)" >&2
  exit 2
fi
bin="$1"
bad=0
libs=$(ldd "$bin")
for lib in libgomp libcudart libcublas libnccl libmpi libopen-pal libEigen; do
  if grep -q "$lib" <<<"$libs"; then
    echo "ddprun links $lib: $(grep "$lib" <<<"$libs" | head -1 | xargs)"
    bad=$((bad + 1))
  fi
done
# Code of the layers above base, by namespace-qualified names that only they define.
symbols=$(nm -C "$bin")
for name in 'ddp::Tensor' 'ddp::Storage' 'ddp::Variable' 'ddp::nn::' 'ddp::ProcessGroup' 'GOMP_' \
    'cuda[A-Z]'; do
  if grep -qE "$name" <<<"$symbols"; then
    echo "ddprun carries '$name' code: $(grep -E "$name" <<<"$symbols" | head -1)"
    bad=$((bad + 1))
  fi
done
if [[ $bad -gt 0 ]]; then
  echo "ddprun depends on more than the base layer ($bad finding(s)); it links ddp::base alone"
  exit 1
fi
echo "ddprun: links $(grep -c '=>' <<<"$libs") shared libraries, none of CUDA, OpenMP or MPI; no tensor code"
