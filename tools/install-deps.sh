#!/usr/bin/env bash
# Installs what ddp.cpp needs to build and test, and only what is missing, with apt (Debian,
# Ubuntu) or dnf (Fedora; RHEL, Rocky Linux, AlmaLinux 8 and 9): every package is checked
# first (dpkg-query, rpm), so a second run changes nothing and takes well under a second.
# Chapter 00 ("installing the dependencies").
#
# Reports, without failing when absent: nvcc (PATH or /usr/local/cuda/bin) and a usable
# GPU (nvidia-smi). The CUDA toolkit itself is not installed here: clusters provide it
# (`module load cuda`), and the CPU build needs none of it. On other systems, or without
# root, it says what to get instead (modules, Spack: README.md, "On a cluster without root").
#
#   tools/install-deps.sh             # install what is missing, then print a summary
#   tools/install-deps.sh --dry-run   # only say what is missing (exit 1 when anything is);
#                                     # DDP_DEPS_DRY_RUN=1 does the same
set -euo pipefail

dry_run=${DDP_DEPS_DRY_RUN:-}
case "${1:-}" in
  "") ;;
  --dry-run) dry_run=1 ;;
  *) echo "usage: tools/install-deps.sh [--dry-run]" >&2; exit 2 ;;
esac
readonly CMAKE_MIN=3.25
# What the build needs, by name, for systems without a table below.
readonly NEEDS="g++ >= 12, CMake >= $CMAKE_MIN, Ninja, Eigen 3 (>= 3.3), zlib, Open MPI;
  Catch2 v2 (2.13; for the tests only, v3 is a different library);
  optional: CUDA toolkit >= 12 with NCCL >= 2.14 (the GPU backend)"

die() {
  echo "install-deps: error: $*" >&2
  exit 1
}

# ---- Which system -------------------------------------------------------------------
# os-release names the distribution. $DDP_OS_RELEASE names another file: the test of this
# script (tests/ch00/test_install_deps.sh) fakes a system that way.
os_release=${DDP_OS_RELEASE:-/etc/os-release}
if [[ -z "${DDP_OS_RELEASE:-}" && ! -e "$os_release" ]]; then
  os_release=/usr/lib/os-release
fi
os_field() {  # os_field KEY: the value of KEY= in os-release, without quotes ("" if absent)
  [[ -r "$os_release" ]] || return 0
  sed -n "s/^$1=//p" "$os_release" | head -n1 | tr -d "\"'"
}
os_id=$(os_field ID)
os_major=$(os_field VERSION_ID)
os_major=${os_major%%.*}
os_name=$(os_field PRETTY_NAME)
os_name=${os_name:-"this system ($os_release)"}
case " $os_id $(os_field ID_LIKE) " in
  *" debian "* | *" ubuntu "*) system=apt ;;
  " fedora "*) system=fedora ;;
  *" rhel "* | *" fedora "*) system="el$os_major" ;;  # RHEL, Rocky, Alma, CentOS Stream
  *) system=unknown ;;
esac

# ---- What to install: one table per package manager --------------------------------
# apt: Debian 12 and Ubuntu. Package -> why ddp.cpp needs it. Later chapters add to it.
APT_PACKAGES=(
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
# dnf: Fedora, and EL 8 and 9 with EPEL and CRB (EL 9) or PowerTools (EL 8) enabled. Two
# names differ between the releases: the C++ compiler and Catch2 v2. No SLURM: the local
# test cluster is set up for Debian's, and its tests report Skipped without it.
case $system in
  el8) dnf_cxx=gcc-toolset-12-gcc-c++ dnf_catch2=catch-devel ;;   # EL 8's own gcc is 8
  el9) dnf_cxx=gcc-toolset-12-gcc-c++ dnf_catch2=catch2-devel ;;  # EL 9's own gcc is 11
  *) dnf_cxx=gcc-c++ dnf_catch2=catch2-devel ;;                   # Fedora's own gcc
esac
DNF_PACKAGES=(
  "$dnf_cxx"          # g++ >= 12; on EL, gcc-toolset-12, used after `source .../enable`
  cmake               # >= 3.25: EL 8.10 and current EL 9 ship 3.26 (older: see below)
  ninja-build         # on EL from CRB / PowerTools
  eigen3-devel        # Eigen 3 up to Fedora 43; Fedora 44's is Eigen 5 (see the summary)
  zlib-devel          # on Fedora >= 40 provided by zlib-ng-compat-devel
  openmpi-devel       # in /usr/lib64/openmpi: `module load mpi/openmpi-x86_64` finds it
  environment-modules # the `module` command
  "$dnf_catch2"       # Catch2 v2: catch2-devel on Fedora and EPEL 9 (there catch-devel
                      # is v3), catch-devel on EPEL 8 (2.13.8)
)
# Where EL's packages come from, for the error that names one that cannot be had.
readonly EL_REPOS="catch2-devel/catch-devel are in EPEL, ninja-build in CRB (EL 9) or
  PowerTools (EL 8): enable both. Rocky/AlmaLinux: dnf install epel-release, then
  dnf config-manager --set-enabled crb (EL 8: powertools). RHEL 9: subscription-manager
  repos --enable codeready-builder-for-rhel-9-\$(arch)-rpms, then EPEL as
  https://docs.fedoraproject.org/en-US/epel/ says"

case $system in
  apt) PACKAGES=("${APT_PACKAGES[@]}") manager=apt-get query=dpkg-query ;;
  fedora | el8 | el9) PACKAGES=("${DNF_PACKAGES[@]}") manager=dnf query=rpm ;;
  el*) die "$os_name: this script knows EL 8 and 9 only. Install these yourself
  (the EL 8 and 9 names: tutorial/ch00_setup/README.md, \"Other systems\"):
  $NEEDS" ;;
  *) die "$os_name: this script knows apt (Debian, Ubuntu) and dnf (Fedora; RHEL, Rocky,
  AlmaLinux 8 and 9) only. Install these with your package manager, as modules or with
  Spack (README.md, \"On a cluster without root\"):
  $NEEDS
  then configure with: cmake --preset release" ;;
esac
command -v "$query" >/dev/null 2>&1 ||
  die "$query not found on $os_name: cannot tell which packages are installed"

# ---- Which packages are missing ----------------------------------------------------
installed() {  # installed PACKAGE: is it (or, with rpm, a package providing it) installed?
  if [[ $system == apt ]]; then
    # "ii " = wanted and installed; anything else (absent, half-removed) counts as missing.
    [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null || true)" == ii* ]]
  else
    rpm -q --whatprovides "$1" >/dev/null 2>&1
  fi
}
missing=()
for pkg in "${PACKAGES[@]}"; do
  installed "$pkg" || missing+=("$pkg")
done

# ---- Install them -----------------------------------------------------------------
# install_missing: installs ${missing[@]} with apt-get or dnf, as root or through sudo, and
# names the package that cannot be had before the package manager prints a page about it.
install_missing() {
  local sudo=() pkg candidate
  if ((EUID == 0)); then
    sudo=()
  elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    local how="dnf install ${missing[*]}"
    if [[ $system == apt ]]; then
      how="apt-get install --no-install-recommends ${missing[*]}"
    fi
    die "not root and no sudo: ask an administrator to run
  $how
  or load them as modules or with Spack (README.md, \"On a cluster without root\")"
  fi
  command -v "$manager" >/dev/null 2>&1 || die "$manager not found; install by hand: ${missing[*]}"

  if [[ $system == apt ]]; then
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq || die "apt-get update failed (network? apt sources?)"
    for pkg in "${missing[@]}"; do
      candidate=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')
      if [[ -z "$candidate" || "$candidate" == "(none)" ]]; then
        die "package '$pkg' is not available from the configured apt sources"
      fi
    done
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" \
      || die "apt-get install failed for: ${missing[*]}"
  else
    for pkg in "${missing[@]}"; do
      if [[ -z "$(dnf -q repoquery --whatprovides "$pkg" 2>/dev/null)" ]]; then
        local hint=""
        if [[ $system == el* ]]; then
          hint=$'\n'"  hint: $EL_REPOS"
        fi
        die "package '$pkg' is not available from the configured dnf repositories$hint"
      fi
    done
    "${sudo[@]}" dnf install -y -q "${missing[@]}" || die "dnf install failed for: ${missing[*]}"
  fi
  for pkg in "${missing[@]}"; do
    installed "$pkg" || die "package '$pkg' is still not installed after $manager install"
  done
}

if ((${#missing[@]} > 0)); then
  echo "install-deps: missing: ${missing[*]}"
  if [[ -n "$dry_run" ]]; then
    echo "install-deps: dry run ($os_name, $manager): installing nothing"
    exit 1
  fi
  install_missing
fi

# ---- Tool versions ----------------------------------------------------------------
cmake_version=$(cmake --version 2>/dev/null | awk 'NR == 1 {print $3}')
[[ -n "$cmake_version" ]] || die "cmake is installed but does not run"
oldest=$(printf '%s\n%s\n' "$CMAKE_MIN" "$cmake_version" | sort -V | head -n1)
if [[ "$oldest" != "$CMAKE_MIN" ]]; then
  die "cmake $cmake_version is older than $CMAKE_MIN (the presets need workflows).
  hint: python3 -m pip install --user 'cmake>=$CMAKE_MIN' and put ~/.local/bin first on PATH
  (or module load a newer cmake; on EL, dnf upgrade cmake: EL 8.10 and 9 have 3.26)"
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
# dnf puts Open MPI (and, on EL, g++ 12) outside PATH: each new shell needs these first.
# Fedora 44 moved eigen3-devel to Eigen 5, which find_package(Eigen3 3.3) does not accept.
if [[ $system == fedora ]] && ((${os_major:-0} >= 44)); then
  echo "install-deps: warning: $os_name's eigen3-devel is Eigen 5, not 3: configure with"
  echo "  -DCMAKE_PREFIX_PATH=<an Eigen 3.4 install> (spack install eigen@3.4, or a module)"
fi
case $system in
  fedora) echo "install-deps: before cmake, in each new shell: module load mpi/openmpi-x86_64" ;;
  el8 | el9) echo "install-deps: before cmake, in each new shell:" \
    "source /opt/rh/gcc-toolset-12/enable && module load mpi/openmpi-x86_64" ;;
esac
