# shellcheck shell=bash
# launch/common.sh -- sourced (not run) by every launch script, after its scheduler
# directives: loads modules, finds the build, and settles the job's master address and
# port. Chapter 00; launch/README.md explains the launch methods that use it.
# It starts nothing itself: each script says which launcher starts which program.
#
# Settings (environment variables; export them before sbatch, which passes the
# environment on to the job, give them to qsub with -V or -v NAME=value, or edit the
# defaults here):
#   DDP_ROOT     the repository                       [the folder this file is in, minus launch/]
#   DDP_BUILD    the build tree whose bin/ is used     [$DDP_ROOT/build/release]
#   DDP_MODULES  environment modules to load first, e.g. "gcc/12 cmake openmpi cuda/12.4";
#                a missing `module` command or a module that fails to load is a warning [""]
#   DDP_HOSTFILE outside SLURM and PBS (plain mpirun): a hostfile whose first column
#                names the hosts, in launch order; '#' lines are skipped  [unset: this machine]
#   MASTER_ADDR  where rank 0 listens                  [first host of the job]
#   MASTER_PORT  the job's one rendezvous port         [20000 + job id % 10000]
# Partition, account and GPUs are the scheduler's own variables, read by sbatch itself:
#   SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_GPUS_PER_NODE (or -p/-A/--gpus-per-node).

# ---- Modules -------------------------------------------------------------------------
# A job script is not a login shell: where `module` is defined by /etc/profile.d, it may
# be missing here. Whatever is missing is said, once, and the job goes on (the build may
# not need the modules); ddp_program below stops it if the programs cannot run.
if [[ -n ${DDP_MODULES:-} ]]; then
  if ! command -v module >/dev/null 2>&1; then
    echo "launch: warning: DDP_MODULES='$DDP_MODULES', but this shell has no \`module\`" \
      "command: nothing loaded (start the script with '#!/bin/bash -l', or source your" \
      "site's modules init file first)" >&2
  else
    # Lmod and Environment Modules 4+ exit non-zero when a load fails; Environment Modules
    # 3.2 (RHEL 7's) exits 0 and only says "ERROR: Unable to locate a modulefile ..." on
    # stderr. So its stderr goes to a file first (module must run in this shell, not in a
    # $(...), for its variables to stay) and is shown as it was.
    ddp_module_said=$(mktemp)
    for ddp_module in $DDP_MODULES; do
      ddp_loaded=yes
      module load "$ddp_module" 2>"$ddp_module_said" || ddp_loaded=no
      cat "$ddp_module_said" >&2
      if [[ $ddp_loaded == no ]] || grep -q ERROR "$ddp_module_said"; then
        echo "launch: warning: 'module load $ddp_module' failed ('module avail" \
          "${ddp_module%%/*}' lists what there is)" >&2
      fi
    done
    rm -f "$ddp_module_said"
  fi
fi

# ---- The build -----------------------------------------------------------------------
DDP_ROOT=${DDP_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
DDP_BUILD=${DDP_BUILD:-$DDP_ROOT/build/release}
DDP_BIN=$DDP_BUILD/bin
if [[ ! -d $DDP_BIN ]]; then
  echo "launch: no programs in $DDP_BIN (DDP_BUILD=$DDP_BUILD)" >&2
  echo "hint: build first (cmake --preset release && cmake --build --preset release)," >&2
  echo "      or export DDP_BUILD=<your build folder> before sbatch/qsub/mpirun" >&2
  exit 2
fi
export DDP_ROOT DDP_BUILD DDP_BIN

# ---- What mpirun hands on to the ranks -------------------------------------------------
# srun and ddprun give the ranks this script's whole environment; mpirun only what its -x
# flags name. DDP_MPIRUN_X holds -x NAME for every NCCL_* variable set (NCCL reads them:
# the network, debugging; launch/ch07_multinode.sh lists the ones worth knowing), for
# DDP_MEMORY_LIMIT_MB when set (chapter 09's budget) and for the tcp backend's DDP_TCP_*
# settings when set (an emulated link, its scope, shared memory); each mpirun line adds the
# rendezvous's own (MASTER_ADDR, MASTER_PORT, DDP_JOB_TOKEN). The scripts expand it as
# ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"}: bash before 4.4 (RHEL 7) calls an empty array
# unbound under set -u.
DDP_MPIRUN_X=()
for ddp_name in $(compgen -e NCCL_ || true) DDP_MEMORY_LIMIT_MB DDP_TCP_LINK DDP_TCP_LINK_SCOPE \
  DDP_TCP_SHM DDP_TCP_RING; do
  if [[ -n ${!ddp_name:-} ]]; then DDP_MPIRUN_X+=(-x "$ddp_name"); fi
done

# ---- CPUs per task under srun --------------------------------------------------------
# Since Slurm 22.05, "the number of cpus per task specified for salloc or sbatch is not
# automatically inherited by srun" (man srun, --cpus-per-task): a step's task would get
# one CPU whatever #SBATCH --cpus-per-task said, and where Slurm binds tasks to cores
# its OpenMP threads would share that one. SRUN_CPUS_PER_TASK is srun's own way to ask.
if [[ -n ${SLURM_CPUS_PER_TASK:-} ]]; then
  export SRUN_CPUS_PER_TASK=${SRUN_CPUS_PER_TASK:-$SLURM_CPUS_PER_TASK}
fi

# ddp_program NAME: the path of program NAME in the build, or exit with a hint. The hint
# names NAME's CMake target: the program's name with '_' for '-' (ddp-train is built by
# the target ddp_train: tools/*/CMakeLists.txt, OUTPUT_NAME).
ddp_program() {
  if [[ ! -x $DDP_BIN/$1 ]]; then
    echo "launch: $DDP_BIN/$1 does not exist or is not executable" >&2
    echo "hint: cmake --build $DDP_BUILD --target ${1//-/_}   (or check DDP_BUILD)" >&2
    exit 2
  fi
  echo "$DDP_BIN/$1"
}

# ddp_show_gpus: prints the GPUs this job may use (chapter 02): CUDA_VISIBLE_DEVICES, set
# by SLURM for the GPUs it allocated (PBS sites differ), and what nvidia-smi -L names.
ddp_show_gpus() {
  echo "launch: CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-(unset: no GPU allocated by SLURM)}"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi -L || echo "launch: nvidia-smi -L failed on $(hostname): no usable GPU"
  else
    echo "launch: no nvidia-smi on $(hostname) (it comes with the NVIDIA driver): no GPU driver"
  fi
}

# ddp_ddprun_per_node PROGRAM [ARGS...]: inside a SLURM allocation, one ddprun per node
# (the torchrun pattern, launch/README.md method 2), each starting that node's ranks.
# --ntasks-per-node=1 matters: without it srun starts one ddprun per *slot*, and every
# ddprun starts its own set of ranks: duplicates (ddp-doctor says so). --ntasks too: the
# job's own task count is inherited, and srun would ignore --ntasks-per-node=1 in its
# favour. The node rank differs per node, so it is read on the node: bash -c runs there.
# The one task per node holds the CPUs of all that node's ranks.
ddp_ddprun_per_node() {
  ddp_ddprun_per_node_command "$@"
  "${DDP_COMMAND[@]}"
}
# ddp_ddprun_per_node_command PROGRAM [ARGS...]: sets the array DDP_COMMAND to that srun
# command line without running it, for a caller that runs it its own way (chapter 08's
# ddp_run_stoppable: a shell function cannot be sent a signal, a command can).
ddp_ddprun_per_node_command() {
  local ddprun per_node
  ddprun=$(ddp_program ddprun) || exit 2
  per_node=${SLURM_TASKS_PER_NODE%%[(,]*}   # "2(x2)": 2 tasks on each of 2 nodes -> 2
  DDP_COMMAND=(srun --ntasks="$SLURM_NNODES" --ntasks-per-node=1
    --cpus-per-task=$((per_node * ${SLURM_CPUS_PER_TASK:-1})) bash -c 'exec "$0" --nnodes "$SLURM_NNODES" \
    --node-rank "$SLURM_NODEID" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" \
    "$@"' "$ddprun" --nproc-per-node "$per_node" "$@")
}

# ddp_merge_trace TRACE.json RANKS: after `ddp-train --trace TRACE.json` on RANKS ranks,
# joins their files (TRACE.rank0.json ... : ddp-train names them so) into TRACE.json with
# ddp-trace-merge, removes them (the merged file holds every event of theirs) and prints
# where the timeline is. Ranks on other nodes wrote theirs there, so the folder must be
# one that every node sees; the submit folder is (the programs are read from it too). A
# missing rank's file stops the job, naming the file. One rank writes TRACE.json itself.
ddp_merge_trace() {
  local trace=$1 ranks=$2 merge r
  local files=()
  merge=$(ddp_program ddp-trace-merge) || exit 2
  if ((ranks > 1)); then
    for ((r = 0; r < ranks; ++r)); do files+=("${trace%.json}.rank$r.json"); done
    "$merge" "$trace" "${files[@]}" || return 1   # keeps the rank files
    rm -f "${files[@]}"
  fi
  echo "trace: $trace (open it in https://ui.perfetto.dev: one process per rank;" \
    "offline: $merge --svg ${trace%.json}.svg $trace, for any browser)"
}

# ---- The job's hosts, master address and port ----------------------------------------
# The hosts in launch order. SLURM: the allocation's hostlist ("node[1-2]") expanded by
# scontrol. PBS: $PBS_NODEFILE has one line per slot, so a host appears once per rank.
# Plain mpirun: the hostfile's first column, or this machine alone.
if [[ -n ${SLURM_JOB_NODELIST:-} ]]; then
  DDP_HOSTS=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd' ')
  DDP_JOB_ID=$SLURM_JOB_ID
elif [[ -n ${PBS_NODEFILE:-} && -r ${PBS_NODEFILE:-} ]]; then
  DDP_HOSTS=$(awk '!seen[$1]++ { print $1 }' "$PBS_NODEFILE" | paste -sd' ')
  DDP_JOB_ID=${PBS_JOBID%%.*}
  DDP_JOB_ID=${DDP_JOB_ID//[^0-9]/}   # an array job, 123[4], counts as 1234
elif [[ -n ${DDP_HOSTFILE:-} ]]; then
  DDP_HOSTS=$(awk '!/^#/ && NF && !seen[$1]++ { print $1 }' "$DDP_HOSTFILE" | paste -sd' ')
  DDP_JOB_ID=$$
else
  DDP_HOSTS=127.0.0.1   # one machine: rank 0 listens on loopback
  DDP_JOB_ID=$$
fi
# Rank 0 runs on the first host of the list (srun, mpirun and ddprun all place ranks in
# host order), so that host is where the rendezvous store listens.
export MASTER_ADDR=${MASTER_ADDR:-${DDP_HOSTS%% *}}
# One port for the whole job, derived from the job id so that two jobs sharing a node
# do not collide. Every rank must see the same number: it is fixed here, in the batch
# script, and reaches the ranks through the environment.
export MASTER_PORT=${MASTER_PORT:-$((20000 + ${DDP_JOB_ID:-0} % 10000))}
# The rendezvous store admits only ranks that present the job's token (the first set of
# DDP_JOB_TOKEN, SLURM_JOB_ID, PBS_JOBID: default_job_token in dist/job_token.hpp). Ranks
# that mpirun starts on other nodes over ssh (PBS with Debian's Open MPI, built without
# PBS's tm interface) see only what -x passes on, not PBS_JOBID: so the token is fixed
# here and passed on like MASTER_ADDR.
export DDP_JOB_TOKEN=${DDP_JOB_TOKEN:-${SLURM_JOB_ID:-${PBS_JOBID:-}}}
export DDP_HOSTS

echo "launch: job ${DDP_JOB_ID:-?} on ${DDP_HOSTS}; master ${MASTER_ADDR}:${MASTER_PORT};" \
     "programs from $DDP_BIN"

# ddp_run_stoppable COMMAND [ARGS...]: runs COMMAND (a launcher: srun, mpirun, ddprun)
# in the background and passes SIGUSR1, SIGTERM and SIGINT sent to this script on to it;
# returns COMMAND's exit code. Chapter 08. A batch script is the process that a scheduler
# warns (SLURM's --signal=B:USR1@T, PBS's SIGTERM at the walltime), but bash runs a trap
# only between commands: while a foreground srun runs, the warning would wait for it to
# end. So the launcher runs in the background, and `wait` (which a trapped signal
# interrupts) is repeated until the launcher has exited. srun and ddprun pass each signal
# on to every rank; ddp-train stops after its step, saves, exits 75. mpirun does not: a
# SIGTERM or SIGINT makes Open MPI abort the job (the ranks get SIGTERM, then SIGKILL),
# and only SIGUSR1 and SIGUSR2 are forwarded. So mpirun is sent SIGUSR1 whatever came.
ddp_run_stoppable() {
  local pid rc sig to
  # In a process group of its own (set -m): Ctrl-C at a terminal signals the whole
  # foreground group, and mpirun would get its SIGINT directly, not through the trap.
  # Stdin from /dev/null: a background group that reads the terminal is stopped (SIGTTIN),
  # and mpirun reads stdin for rank 0.
  set -m
  "$@" </dev/null &
  pid=$!
  set +m
  for sig in USR1 TERM INT; do
    to=$sig
    [[ $(basename "$1") == mpirun || $(basename "$1") == mpiexec ]] && to=USR1
    # shellcheck disable=SC2064  # $pid, $sig and $to now, on purpose
    trap "echo \"launch: got SIG$sig, passing SIG$to on\" >&2; kill -$to $pid 2>/dev/null" $sig
  done
  # A trapped signal interrupts `wait`; bash keeps the status of a child it has reaped, so
  # the last `wait` returns the launcher's exit code however often the loop was woken.
  while kill -0 "$pid" 2>/dev/null; do wait "$pid" || true; done
  rc=0
  wait "$pid" || rc=$?
  trap - USR1 TERM INT
  return "$rc"
}
