#!/usr/bin/env bash
# The cluster path without root (tutorial/ch00_setup/README.md, "On a cluster, without
# root", and README.md), run as a user without root that this test creates: the pages'
# block, as written, on a copy of the repository's files in that user's home. Chapter 00.
#   no_root.sh <repository> <CUDA built: ON|OFF> <NCCL found: ON|OFF>
# The last two are what this build's own configure found; the user's must find as much.
# Needs root (useradd, runuser); elsewhere it exits 77, which ctest reports as Skipped.
#
# Where the test departs from the block, and why:
#   - `module` and `srun` are stand-ins (shell functions): `module load` loads nothing (the
#     libraries are in the system's folders here), and srun with a command runs it
#     here. A SLURM installed here may have no cluster to talk to; the local one is the
#     `cluster` tests' (tests/cluster), started as root.
#   - The build is `--target ddprun deps_probe`, not the `main` preset's ddp_train: from a
#     fresh tree ddp_train needs the whole tensor library and its CUDA kernels, minutes on
#     2 cores, where these take well under one. deps_probe (deps_probe.cpp) links every
#     library ddp_train does and calls one function of each, so a library that is not
#     found, does not link or does not load still fails here; the 2-rank job runs it in
#     ddp-train's place.
# The user's shell is a login shell (runuser -l): none of root's environment (a compiler
# launcher such as ccache, PATH, CMake variables) reaches it, and it reads nothing of the
# build tree that runs this test.
set -u
root=$1 cuda=$2 nccl=$3
user=ddp-noroot
tag="ddp.cpp no-root test (tests/ch00/no_root.sh)"   # the user's comment field: ours
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }

((EUID == 0)) || skip "not root: creating a user needs root (CI runs this as root)"
for tool in useradd runuser getent tar; do
  command -v "$tool" >/dev/null || skip "no $tool on this machine"
done

# ---- The block, from the pages -------------------------------------------------------
# The first ```bash block after the marker line; README.md shows the same block as
# chapter 00, and the two must not drift apart.
marked_block() {
  awk '/<!-- tests\/ch00\/no_root.sh runs this block/ { on = 1; next }
       on && /^```bash$/ { inside = 1; next }
       inside && /^```$/ { exit }
       inside { print }' "$1"
}
page=$root/tutorial/ch00_setup/README.md
block=$(marked_block "$page")
[[ -n $block ]] || fail "no block marked for tests/ch00/no_root.sh in $page"
[[ $(marked_block "$root/README.md") == "$block" ]] ||
  fail "README.md's no-root block differs from chapter 00's:"$'\n'"$(diff <(marked_block "$root/README.md") <(echo "$block"))"
# What the path promises, on the page itself.
for want in 'cmake --preset release -DDDP_NATIVE=OFF' 'srun ' 'pgrep -u "$USER"'; do
  grep -qF -- "$want" <<<"$block" || fail "the page's block lost '$want':"$'\n'"$block"
done
if sed 's/#.*//' <<<"$block" | grep -qE 'install-deps|sudo'; then   # commands, not comments
  fail "the page's no-root block uses install-deps.sh or sudo:"$'\n'"$block"
fi
# The two departures above; each must find its line.
script=$block
for swap in 'cmake --build --preset main|cmake --build --preset main --target ddprun deps_probe' \
            'build/release/bin/ddp-train|build/release/tests/deps_probe' \
            "'ddprun|ddp-train'|'ddprun|deps_probe'"; do
  from=${swap%%|*} to=${swap#*|}
  grep -qF -- "$from" <<<"$script" || fail "the page's block has no '$from' to swap"
  script=${script//"$from"/"$to"}
done

# ---- The user ------------------------------------------------------------------------
# Created once and reused: a user of that name that this test did not create is left alone.
# (A useradd that fails because another checkout's run created the user just now is fine.)
getent passwd "$user" >/dev/null ||
  useradd --create-home --shell /bin/bash --comment "$tag" "$user" ||
  getent passwd "$user" >/dev/null || fail "useradd $user failed"
[[ $(getent passwd "$user" | cut -d: -f5) == "$tag" ]] ||
  fail "a user '$user' exists that this test did not create (its comment is not '$tag'); remove it or rename this test's user"
home=$(getent passwd "$user" | cut -d: -f6)
[[ $(runuser -u "$user" -- id -u) != 0 ]] || fail "$user has uid 0"
if command -v sudo >/dev/null && runuser -u "$user" -- sudo -n true 2>/dev/null; then
  fail "$user may use sudo: it would not be a user without root"
fi
as_user() { runuser -u "$user" -- "$@"; }

# One folder per run in the user's home: runs of this test from other checkouts on the same
# machine share the user, not the folder.
work=$home/ddp.cpp.$$.$RANDOM
as_user mkdir -m 700 "$work" || fail "cannot make $work as $user"
nap=60.$RANDOM   # the hanging rank's sleep, found by this exact number below
cleanup() {
  pkill -KILL -u "$user" -f -- "$work/|sleep $nap" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# ---- The source: the repository's files as they are now, no build tree --------------
# git's list (tracked, and new files not ignored) where this is a git checkout; else every
# file but build/ and .git. Written by the user, so everything in the copy is the user's.
as_user mkdir "$work/src" || fail "mkdir $work/src"
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$root" && git ls-files -z --cached --others --exclude-standard |
     tar -c --null --ignore-failed-read -T - 2>/dev/null) | as_user tar -x -C "$work/src"
else
  (cd "$root" && tar -c --exclude=./build --exclude=./.git .) | as_user tar -x -C "$work/src"
fi
[[ -f $work/src/CMakePresets.json ]] || fail "the copy of $root in $work/src has no CMakePresets.json"

# ---- The path, as the user -----------------------------------------------------------
cat >"$work/path.sh" <<EOF
set -eo pipefail
module() { echo "no-root test: 'module \$*' stands in: loads nothing (the system's folders have it all)"; }
srun() {
  local pty=0
  while [[ \$# -gt 0 && \$1 == -* ]]; do [[ \$1 == --pty ]] && pty=1; shift; done
  echo "no-root test: srun stands in: '\$*' on this machine, no allocation"
  ((pty)) && return 0   # the lines after it are that shell's
  "\$@"
}
$script
EOF
chown "$user" "$work/path.sh"
log=$work/path.log
start=$SECONDS
runuser -l "$user" -c "cd '$work/src' && bash '$work/path.sh'" >"$log" 2>&1
rc=$?
echo "the page's block, as $user (configure, build ddprun and deps_probe, the 2-rank job): $((SECONDS - start)) s"
[[ $rc == 0 ]] || { cat "$log"; fail "the page's block failed as $user (exit code $rc)"; }

# ---- What it must have found and done -------------------------------------------------
# Written only into the copy (its build/release): nothing new of the user's in the home
# outside the runs' folders, nor in the shared temporary folders.
written=$(find "$home" /tmp /var/tmp /dev/shm -xdev -user "$user" -newer "$work/path.sh" \
            -not -path "$home/ddp.cpp.*" -not -path "$home" 2>/dev/null | head -n 20)
[[ -z $written ]] || fail "the block wrote outside the repository:"$'\n'"$written"
if grep -E '^CMAKE_(C|CXX|CUDA)_COMPILER_LAUNCHER:[A-Z]+=.+' "$work/src/build/release/CMakeCache.txt"; then
  fail "$user's configure took a compiler launcher from somewhere (root's environment?)"
fi
for want in 'Found Eigen3' 'Found ZLIB' 'Found MPI' 'Found Catch2' 'native OFF'; do
  grep -qF -- "$want" "$log" || { cat "$log"; fail "the configure as $user did not print '$want'"; }
done
if [[ $cuda == ON ]]; then
  grep -qE -- ', CUDA ON \(archs' "$log" ||
    { cat "$log"; fail "this build has CUDA, but $user's configure did not find it"; }
fi
if [[ $nccl == ON ]]; then
  grep -qF -- 'Found NCCL' "$log" ||
    { cat "$log"; fail "this build has NCCL, but $user's configure did not find it"; }
fi
for r in 0 1; do
  grep -qF -- "deps_probe: rank $r of 2" "$log" ||
    { cat "$log"; fail "rank $r of the 2-rank job did not start"; }
done
[[ $(grep -c 'deps_probe: every library answered' "$log") == 2 ]] ||
  { cat "$log"; fail "not both ranks found every library"; }
if [[ $cuda == ON ]]; then
  [[ $(grep -cE '^\[rank [01]\] +(CUDA +runtime|cuBLAS) ' "$log") == 4 ]] ||
    { cat "$log"; fail "not both ranks called the CUDA runtime and cuBLAS"; }
fi
if [[ $nccl == ON ]]; then
  [[ $(grep -cE '^\[rank [01]\] +NCCL ' "$log") == 2 ]] ||
    { cat "$log"; fail "not both ranks called NCCL"; }
fi
grep -qF 'nothing of yours left running' "$log" ||
  { cat "$log"; fail "the block's pgrep -u found processes of $user after the job"; }
sed -n 's/^-- \(Found \(MPI\|CUDA\|NCCL\|Catch2\).*\)/  configure: \1/p' "$log"
grep -E '^\[rank 0\]' "$log" | sed 's/^/  /'

# ---- A job that fails leaves nothing of the user's --------------------------------
# Rank 1 fails at once while rank 0 would sleep for a minute: ddprun must stop rank 0 (and
# its child, the sleep), and then pgrep -u finds nothing of this run, as the page says.
printf '#!/bin/bash\nif [ "$RANK" = 1 ]; then exit 3; fi\nsleep %s\n' "$nap" >"$work/rank.sh"
chown "$user" "$work/rank.sh" && chmod +x "$work/rank.sh"
start=$SECONDS
runuser -l "$user" -c "cd '$work/src' && build/release/bin/ddprun --nproc-per-node 2 '$work/rank.sh'" \
  >"$work/fail.log" 2>&1
rc=$?
[[ $rc != 0 ]] || { cat "$work/fail.log"; fail "ddprun exited 0 although rank 1 failed"; }
((SECONDS - start < 30)) || { cat "$work/fail.log"; fail "ddprun took $((SECONDS - start)) s to stop rank 0"; }
left=$(as_user pgrep -u "$user" -a -f -- "$work/|sleep $nap")
[[ -z $left ]] || { cat "$work/fail.log"; fail "processes of $user left after the failed job:"$'\n'"$left"; }
echo "a job whose rank 1 failed (ddprun exit code $rc): nothing of $user's left (pgrep -u $user)"

# ---- README command (1)'s first step, where everything is installed ------------------
# tools/install-deps.sh checks before it installs: with nothing missing it needs no root.
if "$root/tools/install-deps.sh" --dry-run >/dev/null 2>&1; then
  runuser -l "$user" -c "cd '$work/src' && tools/install-deps.sh" >"$work/deps.log" 2>&1 ||
    { cat "$work/deps.log"; fail "tools/install-deps.sh failed as $user with nothing missing"; }
  grep -E '^install-deps: all [0-9]+ packages present' "$work/deps.log" | sed 's/^/  as the user: /'
else
  echo "  (tools/install-deps.sh --dry-run finds packages missing here: not run as $user)"
fi
echo "the cluster path runs as $user (uid $(id -u "$user")), without install-deps.sh or sudo"
