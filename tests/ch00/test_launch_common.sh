#!/usr/bin/env bash
# launch/common.sh and the job scripts' first lines, as a participant meets them on a
# cluster (chapter 00): a job submitted from outside the repository stops at once, naming
# the fix; DDP_MODULES without a `module` command, or with a module that fails to load, is
# said (Lmod's failed load exits non-zero, Environment Modules 3.2's exits 0 and says
# ERROR); mpirun's -x list carries every NCCL_* variable set, chapter 09's budget and the
# tcp backend's DDP_TCP_* settings.
#   test_launch_common.sh <repository>
set -u
root=$1
fail() { echo "FAIL: $*"; exit 1; }
work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT
mkdir -p "$work/build/bin" "$work/elsewhere"

# 1. Every SLURM and PBS script, submitted from a folder that is not the repository.
count=0
for script in "$root"/launch/*.sh "$root"/launch/*.pbs; do
  [[ $script == */common.sh || $script == *.mpirun.sh ]] && continue
  out=$(cd "$work/elsewhere" && env -u DDP_ROOT -u PBS_O_WORKDIR PBS_NODEFILE="$work/nodes" \
        SLURM_SUBMIT_DIR="$work/elsewhere" bash "$script" 2>&1)
  rc=$?
  ((rc == 2)) && grep -q 'submit from the repository root, or export DDP_ROOT' <<<"$out" ||
    fail "$(basename "$script") from another folder: exit $rc, said: $out"
  count=$((count + 1))
done
echo "$count job scripts submitted from another folder: each stops with exit 2 and the fix"

# 2. Modules. Sourced as the scripts do, with a build folder that exists.
source_common() {  # source_common no|lmod|3.2: common.sh's stderr, with that `module`
  # shellcheck disable=SC2069  # stderr to the caller, stdout dropped: on purpose
  (
    export DDP_ROOT=$root DDP_BUILD=$work/build DDP_MODULES="gcc/12 nosuch/1"
    unset -f module 2>/dev/null
    # Lmod (and Environment Modules 4+): a module that is not there fails the load.
    if [[ $1 == lmod ]]; then module() { [[ $1 == load && $2 != nosuch/1 ]]; }; fi
    # Environment Modules 3.2 (RHEL 7): the load says ERROR on stderr, and exits 0.
    if [[ $1 == 3.2 ]]; then
      module() {
        [[ $1 == load && $2 == nosuch/1 ]] &&
          echo "ModuleCmd_Load.c(213):ERROR:105: Unable to locate a modulefile for '$2'" >&2
        return 0
      }
    fi
    # shellcheck source=/dev/null
    source "$root/launch/common.sh"
  ) 2>&1 >/dev/null
}
said=$(PATH=/usr/bin:/bin source_common no)
grep -q "DDP_MODULES='gcc/12 nosuch/1', but this shell has no \`module\` command" <<<"$said" ||
  fail "no module command: common.sh said: $said"
for modules in lmod 3.2; do
  said=$(source_common $modules)
  [[ $(grep -c "'module load nosuch/1' failed" <<<"$said") == 1 ]] ||
    fail "a failed module ($modules): said: $said"
  grep -q "gcc/12" <<<"$said" && fail "a module that loaded was reported ($modules): $said"
done
grep -q "ERROR:105: Unable to locate a modulefile for 'nosuch/1'" <<<"$said" ||
  fail "Environment Modules 3.2's own message was not shown: $said"
echo "modules: a missing module command and a failed module (Lmod's exit status," \
  "Environment Modules 3.2's ERROR with exit 0) are said, once each"

# 3. What mpirun passes on.
x=$( (export DDP_ROOT=$root DDP_BUILD=$work/build NCCL_DEBUG=INFO NCCL_IB_DISABLE=1 \
      DDP_MEMORY_LIMIT_MB=110 DDP_TCP_LINK=1gbit,50us DDP_TCP_LINK_SCOPE=between-hosts
      source "$root/launch/common.sh" >/dev/null 2>&1
      echo "${DDP_MPIRUN_X[*]}") )
[[ $x == *"-x NCCL_DEBUG"* && $x == *"-x NCCL_IB_DISABLE"* && $x == *"-x DDP_MEMORY_LIMIT_MB"* &&
   $x == *"-x DDP_TCP_LINK "* && $x == *"-x DDP_TCP_LINK_SCOPE"* ]] ||
  fail "DDP_MPIRUN_X with NCCL_DEBUG, NCCL_IB_DISABLE, a budget and a link set: '$x'"
x=$( (unset DDP_MEMORY_LIMIT_MB DDP_TCP_LINK DDP_TCP_LINK_SCOPE DDP_TCP_SHM DDP_TCP_RING
      for v in $(compgen -e NCCL_); do unset "$v"; done
      export DDP_ROOT=$root DDP_BUILD=$work/build; source "$root/launch/common.sh" >/dev/null 2>&1
      echo "${#DDP_MPIRUN_X[@]}") )
[[ $x == 0 ]] || fail "DDP_MPIRUN_X with nothing set has $x entries"
echo "mpirun's -x list: every NCCL_* variable, the budget and the DDP_TCP_* settings when set, nothing otherwise"

# 4. Bash before 4.4 (RHEL 7) calls an empty array unbound under set -u: every script
# expands DDP_MPIRUN_X in the form that holds there too.
if grep -n '"${DDP_MPIRUN_X\[@\]}"' "$root"/launch/* | grep -v '+"${DDP_MPIRUN_X\[@\]}"' |
   grep -v '^[^:]*:[0-9]*:#'; then
  fail "the lines above expand DDP_MPIRUN_X bare: \${DDP_MPIRUN_X[@]+\"\${DDP_MPIRUN_X[@]}\"}"
fi
echo "every mpirun line expands DDP_MPIRUN_X so that an empty one holds on bash 4.2"
