#!/usr/bin/env bash
# Installs what ddp.cpp needs to build and test on Debian/Ubuntu, and only what is
# missing: every package is checked with dpkg-query first, so a second run changes
# nothing and takes well under a second. Chapter 00 ("installing the dependencies").
#
# Reports, without failing when absent: nvcc (PATH or /usr/local/cuda/bin) and a usable
# GPU (nvidia-smi). The CUDA toolkit itself is not installed here: clusters provide it
# (`module load cuda`), and the CPU build needs none of it.
#
#   tools/install-deps.sh            # install what is missing, then print a summary
#   DDP_DEPS_DRY_RUN=1 tools/install-deps.sh   # only say what would be installed
set -euo pipefail

# Debian package -> why ddp.cpp needs it. Later chapters add to this list.
PACKAGES=(
  g++              # C++20 compiler (g++ 12 on Debian 12), with OpenMP
  cmake            # >= 3.25: presets with workflows
  ninja-build      # the generator the presets use
  libeigen3-dev    # CPU matmul kernels (chapter 01)
  zlib1g-dev       # reading the gzip'd MNIST files (chapter 04)
  openmpi-bin      # mpirun (chapters 05-07)
  libopenmpi-dev   # MPI headers and libraries
  catch2           # the test framework (v2, catch2/catch.hpp)
  slurm-wlm        # slurmctld + slurmd: the local cluster the launch scripts are tested on
  munge            # SLURM's authentication daemon (tools/local-cluster.sh runs its own)
  slurm-wlm-torque # qsub/qstat wrappers: the .pbs launch scripts run on that same cluster
  iproute2         # ss: local-cluster.sh checks that its daemons' ports are free
)
readonly CMAKE_MIN=3.25

die() {
  echo "install-deps: error: $*" >&2
  exit 1
}

# ---- Which packages are missing ----------------------------------------------------
if ! command -v dpkg-query >/dev/null 2>&1; then
  die "dpkg-query not found: this script knows Debian and Ubuntu only.
  Install these yourself (or load them as modules): ${PACKAGES[*]}
  then configure with: cmake --preset release"
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  # "ii " = wanted and installed; anything else (absent, half-removed) counts as missing.
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
  [[ "$status" == ii* ]] || missing+=("$pkg")
done

# ---- Install them -----------------------------------------------------------------
if ((${#missing[@]} > 0)); then
  echo "install-deps: missing: ${missing[*]}"
  if [[ -n "${DDP_DEPS_DRY_RUN:-}" ]]; then
    echo "install-deps: DDP_DEPS_DRY_RUN is set, installing nothing"
    exit 1
  fi
  if ((EUID == 0)); then
    SUDO=()
  elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    die "not root and no sudo: ask an administrator to run
  apt-get install --no-install-recommends ${missing[*]}"
  fi
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install by hand: ${missing[*]}"

  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq || die "apt-get update failed (network? apt sources?)"
  # Name the package that cannot be had before apt-get prints a page about it.
  for pkg in "${missing[@]}"; do
    candidate=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')
    if [[ -z "$candidate" || "$candidate" == "(none)" ]]; then
      die "package '$pkg' is not available from the configured apt sources"
    fi
  done
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || die "apt-get install failed for: ${missing[*]}"
  for pkg in "${missing[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
    [[ "$status" == ii* ]] || die "package '$pkg' is still not installed after apt-get install"
  done
fi

# ---- Tool versions ----------------------------------------------------------------
cmake_version=$(cmake --version 2>/dev/null | awk 'NR == 1 {print $3}')
[[ -n "$cmake_version" ]] || die "cmake is installed but does not run"
oldest=$(printf '%s\n%s\n' "$CMAKE_MIN" "$cmake_version" | sort -V | head -n1)
if [[ "$oldest" != "$CMAKE_MIN" ]]; then
  die "cmake $cmake_version is older than $CMAKE_MIN (the presets need workflows).
  hint: python3 -m pip install --user 'cmake>=$CMAKE_MIN' and put ~/.local/bin first on PATH"
fi
cxx_version=$(g++ -dumpfullversion 2>/dev/null || echo "?")

# ---- CUDA: report only --------------------------------------------------------------
nvcc=$(command -v nvcc 2>/dev/null || true)
if [[ -z "$nvcc" && -x /usr/local/cuda/bin/nvcc ]]; then
  nvcc=/usr/local/cuda/bin/nvcc
fi
if [[ -n "$nvcc" ]]; then
  nvcc_version=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  nvcc_line="$nvcc (CUDA ${nvcc_version:-?}): the CUDA backend will be built"
else
  nvcc_line="not found: CPU backend only (CUDA toolkit: module load cuda, or /usr/local/cuda)"
fi
gpus=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [[ -n "$gpus" && "$gpus" != 0 ]]; then
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
  gpu_line="$gpus usable ($gpu_name)"
else
  gpu_line="none usable (nvidia-smi absent or sees none): GPU tests will report Skipped"
fi

# ---- Summary ----------------------------------------------------------------------
if ((${#missing[@]} > 0)); then
  echo "install-deps: installed: ${missing[*]}"
fi
echo "install-deps: all ${#PACKAGES[@]} packages present; cmake $cmake_version, g++ $cxx_version"
echo "install-deps: nvcc: $nvcc_line"
echo "install-deps: GPU:  $gpu_line"
