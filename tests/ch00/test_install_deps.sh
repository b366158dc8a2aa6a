#!/usr/bin/env bash
# tools/install-deps.sh on systems this machine is not: each case fakes one with an
# os-release file ($DDP_OS_RELEASE) and, first on PATH, fake dpkg-query/apt-get/apt-cache
# (apt) or rpm/dnf (dnf) that read and write a list of installed packages. The expected
# package lists are written out here by hand, from each distribution's package names
# (tutorial/ch00_setup/README.md, "Other systems"), not computed from the script's tables.
#
#   test_install_deps.sh <path to tools/install-deps.sh>
set -euo pipefail
script=${1:?usage: test_install_deps.sh <path to tools/install-deps.sh>}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/bin"
failures=0

# ---- The fake systems -------------------------------------------------------------
# $scratch/installed: one package per line; $scratch/available: what the repositories
# have; $scratch/calls: every call of a tool that could change the system.
fake() {  # fake NAME BODY: a command NAME on PATH running BODY (bash)
  printf '#!/usr/bin/env bash\nS=%q\n%s\n' "$scratch" "$2" >"$scratch/bin/$1"
  chmod +x "$scratch/bin/$1"
}
fake dpkg-query 'grep -qx -- "${@: -1}" "$S/installed" && printf "ii "'
fake rpm 'grep -qx -- "${@: -1}" "$S/installed"'
fake apt-cache 'if grep -qx -- "${@: -1}" "$S/available"; then echo "  Candidate: 1.0"
else echo "  Candidate: (none)"; fi'
fake record-install 'for p in "${@:2}"; do [[ $p == -* ]] || echo "$p"; done >>"$S/installed"'
fake apt-get 'echo "apt-get $*" >>"$S/calls"; [[ $1 != install ]] || record-install "$@"'
fake dnf 'if [[ " $* " == *" repoquery "* ]]; then grep -x -- "${@: -1}" "$S/available"; exit 0; fi
echo "dnf $*" >>"$S/calls"; [[ $1 != install ]] || record-install "$@"'
fake sudo 'echo "sudo $1" >>"$S/calls"; exec "$@"'
fake cmake 'echo "cmake version ${FAKE_CMAKE:-3.27.9}"'
fake g++ 'echo 12.2.0'

os() {  # os FILE KEY=VALUE...: an os-release file
  printf '%s\n' "${@:2}" >"$scratch/$1"
}
os debian12 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"' 'ID=debian' 'VERSION_ID="12"'
os ubuntu2204 'PRETTY_NAME="Ubuntu 22.04.4 LTS"' 'ID=ubuntu' 'ID_LIKE=debian' 'VERSION_ID="22.04"'
os fedora40 'PRETTY_NAME="Fedora Linux 40 (Workstation Edition)"' 'ID=fedora' 'VERSION_ID=40'
os rocky8 'PRETTY_NAME="Rocky Linux 8.10 (Green Obsidian)"' 'ID="rocky"' \
  'ID_LIKE="rhel centos fedora"' 'VERSION_ID="8.10"'
os alma9 'PRETTY_NAME="AlmaLinux 9.4 (Seafoam Ocelot)"' 'ID="almalinux"' \
  'ID_LIKE="rhel centos fedora"' 'VERSION_ID="9.4"'
os rhel9 'PRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"' 'ID="rhel"' 'ID_LIKE="fedora"' \
  'VERSION_ID="9.4"'
os rocky10 'PRETTY_NAME="Rocky Linux 10.0 (Red Quartz)"' 'ID="rocky"' \
  'ID_LIKE="rhel centos fedora"' 'VERSION_ID="10.0"'
os arch 'PRETTY_NAME="Arch Linux"' 'ID=arch'

# Every package of each system, in the order the script installs them.
APT="g++ cmake ninja-build libeigen3-dev zlib1g-dev openmpi-bin libopenmpi-dev catch2 \
slurm-wlm munge slurm-wlm-torque iproute2"
EL8="gcc-toolset-12-gcc-c++ cmake ninja-build eigen3-devel zlib-devel openmpi-devel \
environment-modules catch-devel"
EL9="gcc-toolset-12-gcc-c++ cmake ninja-build eigen3-devel zlib-devel openmpi-devel \
environment-modules catch2-devel"

# ---- Running a case ---------------------------------------------------------------
# run OS INSTALLED AVAILABLE [ARGS...]: the script on that system; sets $rc, $out, $err.
run() {
  tr ' ' '\n' <<<"$2" | sed '/^$/d' >"$scratch/installed"
  tr ' ' '\n' <<<"$3" | sed '/^$/d' >"$scratch/available"
  : >"$scratch/calls"
  rc=0
  PATH="$scratch/bin:$PATH" DDP_OS_RELEASE="$scratch/$1" \
    bash "$script" "${@:4}" >"$scratch/out" 2>"$scratch/err" || rc=$?
  out=$(<"$scratch/out") err=$(<"$scratch/err")
}
fail() {
  echo "FAIL: $case_name: $*"
  echo "  exit code $rc; stdout:"; sed 's/^/    /' <<<"$out"
  echo "  stderr:"; sed 's/^/    /' <<<"$err"
  echo "  calls:"; sed 's/^/    /' "$scratch/calls"
  failures=$((failures + 1))
}
expect_rc() { [[ $rc == "$1" ]] || fail "exit code $rc, expected $1"; }
expect_out() { [[ "$out" == "$1" ]] || fail "stdout is not exactly: $1"; }
expect_line() { grep -qxF -- "$1" <<<"$out" || fail "no stdout line: $1"; }
expect_err() { grep -qF -- "$1" <<<"$err" || fail "stderr does not contain: $1"; }
expect_no_calls() { [[ ! -s "$scratch/calls" ]] || fail "a dry run called a package manager"; }
expect_installed() {  # expect_installed "PKG...": exactly these are installed now, in any order
  local now expected
  now=$(sort "$scratch/installed" | tr '\n' ' ')
  expected=$(tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort | tr '\n' ' ')
  [[ "$now" == "$expected" ]] || fail "installed now: $now, expected: $1"
}

# ---- Dry runs: the exact list of what is missing, and nothing changed ---------------
case_name="Debian 12, 3 of 12 installed, --dry-run"
run debian12 "g++ cmake zlib1g-dev" "" --dry-run
expect_rc 1
expect_out "install-deps: missing: ninja-build libeigen3-dev openmpi-bin libopenmpi-dev catch2 \
slurm-wlm munge slurm-wlm-torque iproute2
install-deps: dry run (Debian GNU/Linux 12 (bookworm), apt-get): installing nothing"
expect_no_calls

case_name="Debian 12, DDP_DEPS_DRY_RUN=1 (the older spelling)"
tr ' ' '\n' <<<"g++ cmake zlib1g-dev" >"$scratch/installed"
rc=0
DDP_DEPS_DRY_RUN=1 PATH="$scratch/bin:$PATH" DDP_OS_RELEASE="$scratch/debian12" \
  bash "$script" >"$scratch/out" 2>"$scratch/err" || rc=$?
out=$(<"$scratch/out") err=$(<"$scratch/err")
expect_rc 1
expect_line "install-deps: missing: ninja-build libeigen3-dev openmpi-bin libopenmpi-dev catch2 \
slurm-wlm munge slurm-wlm-torque iproute2"
expect_no_calls

case_name="Ubuntu 22.04 (ID_LIKE=debian), nothing installed"
run ubuntu2204 "" "" --dry-run
expect_rc 1
expect_line "install-deps: missing: $APT"

case_name="Fedora 40, zlib-devel installed"
run fedora40 "zlib-devel" "" --dry-run
expect_rc 1
expect_out "install-deps: missing: gcc-c++ cmake ninja-build eigen3-devel openmpi-devel \
environment-modules catch2-devel
install-deps: dry run (Fedora Linux 40 (Workstation Edition), dnf): installing nothing"
expect_no_calls

case_name="Rocky Linux 8.10: gcc-toolset-12, Catch2 v2 as catch-devel"
run rocky8 "" "" --dry-run
expect_rc 1
expect_line "install-deps: missing: $EL8"
expect_no_calls

case_name="AlmaLinux 9.4: gcc-toolset-12, Catch2 v2 as catch2-devel"
run alma9 "" "" --dry-run
expect_rc 1
expect_line "install-deps: missing: $EL9"

case_name="RHEL 9.4 (ID=rhel, ID_LIKE=fedora) is EL 9, not Fedora"
run rhel9 "cmake" "" --dry-run
expect_rc 1
expect_line "install-deps: missing: gcc-toolset-12-gcc-c++ ninja-build eigen3-devel zlib-devel \
openmpi-devel environment-modules catch2-devel"

# ---- Systems it does not know: an error that says what to get ----------------------
case_name="Rocky Linux 10: an EL it has no table for"
run rocky10 "" "" --dry-run
expect_rc 1
expect_err "Rocky Linux 10.0 (Red Quartz): this script knows EL 8 and 9 only"
expect_err "Catch2 v2 (2.13"

case_name="Arch Linux: no apt, no dnf"
run arch "" "" --dry-run
expect_rc 1
expect_err "Arch Linux: this script knows apt (Debian, Ubuntu) and dnf"
expect_err "g++ >= 12, CMake >= 3.25, Ninja, Eigen 3 (>= 3.3), zlib, Open MPI;"
expect_err "then configure with: cmake --preset release"

# ---- Nothing missing: the version checks and the summary ---------------------------
case_name="Debian 12, everything installed"
run debian12 "$APT" "" --dry-run
expect_rc 0
expect_line "install-deps: all 12 packages present; cmake 3.27.9, g++ 12.2.0"
expect_no_calls

case_name="Fedora 44, everything installed: its eigen3-devel is Eigen 5"
os fedora44 'PRETTY_NAME="Fedora Linux 44 (Server Edition)"' 'ID=fedora' 'VERSION_ID=44'
run fedora44 "gcc-c++ cmake ninja-build eigen3-devel zlib-devel openmpi-devel environment-modules \
catch2-devel" ""
expect_rc 0
expect_line "install-deps: all 8 packages present; cmake 3.27.9, g++ 12.2.0"
expect_line "install-deps: warning: Fedora Linux 44 (Server Edition)'s eigen3-devel is \
Eigen 5, not 3: configure with"
expect_line "install-deps: before cmake, in each new shell: module load mpi/openmpi-x86_64"

case_name="Debian 12, everything installed but cmake 3.20 (too old for workflow presets)"
FAKE_CMAKE=3.20.2 run debian12 "$APT" ""
expect_rc 1
expect_err "cmake 3.20.2 is older than 3.25"

# ---- Installing (through the fakes): what was missing, and only that --------------
case_name="Debian 12, install catch2 and ninja-build"
run debian12 "g++ cmake libeigen3-dev zlib1g-dev openmpi-bin libopenmpi-dev slurm-wlm munge \
slurm-wlm-torque iproute2" "$APT"
expect_rc 0
expect_line "install-deps: installed: ninja-build catch2"
expect_installed "$APT"

case_name="AlmaLinux 9, install everything"
run alma9 "" "$EL9"
expect_rc 0
expect_line "install-deps: installed: $EL9"
expect_line "install-deps: before cmake, in each new shell: source /opt/rh/gcc-toolset-12/enable \
&& module load mpi/openmpi-x86_64"
expect_installed "$EL9"

case_name="Rocky Linux 8 without EPEL: catch-devel cannot be had, nothing is installed"
run rocky8 "" "${EL8% catch-devel}"
expect_rc 1
expect_err "package 'catch-devel' is not available from the configured dnf repositories"
expect_err "catch2-devel/catch-devel are in EPEL"
expect_installed ""

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "install-deps.sh: all cases passed (apt, Fedora, EL 8, EL 9, unknown systems)"
