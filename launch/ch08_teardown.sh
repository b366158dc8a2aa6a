#!/bin/bash
# launch/ch08_teardown.sh -- chapter 08's job: training that survives its time limit.
# ddp-train on two nodes saves a checkpoint every epoch and when told to stop; SLURM warns
# the job 120 s before the time limit (--signal=B:USR1@120); the script passes the warning
# on, every rank finishes its step, rank 0 writes the checkpoint, they exit 75, and the
# script requeues the job (--requeue): the next allocation continues where this one
# stopped (--resume auto), to the same result as a run that was never stopped.
#
#   sbatch launch/ch08_teardown.sh                        # srun: one task per rank
#   DDP_LAUNCH=ddprun sbatch launch/ch08_teardown.sh      # srun: one ddprun per node
#   DDP_LAUNCH=mpirun sbatch launch/ch08_teardown.sh      # mpirun in the allocation
#   DDP_TRAIN_ARGS="--epochs 5" sbatch --time=00:10:00 launch/ch08_teardown.sh
#   scancel --signal=USR1 --batch <job id>                # the warning, now (to try it)
#
# The checkpoint is ch08_teardown-<job id>.ckpt in the submit folder (DDP_CKPT_DIR: another
# folder every node sees); a requeued job keeps its id, so it finds it. Every collective
# and store call has a deadline, DDP_TIMEOUT seconds when set (ddp-train --timeout; unset:
# ddp-train's default, kDefaultTimeout in base/deadline.hpp, 300 s):
# a rank that dies or hangs ends the job within it, with a diagnosis, instead of burning
# the allocation. Exit codes (base/exit_codes.hpp): 0 done, 75 stopped on request
# (requeued here up to DDP_MAX_REQUEUES times, default 3), 4 the watchdog gave up, 1 an
# error. A good run ends with "final: test accuracy XX.XX% ...". Settings: common.sh;
# the failure zoo (what each failure prints, and what to do): tutorial/ch08_teardown.
#
# On a real cluster, edit the #SBATCH lines (partition, account, GPUs, modules, network:
# launch/ch07_multinode.sh explains each). --open-mode=append keeps every allocation's
# output in one file; --requeue lets the job requeue itself.
#SBATCH --job-name=ch08_teardown    # shown by squeue; %x in --output
#SBATCH --nodes=2                   # two machines
#SBATCH --ntasks-per-node=2         # ranks on each: on GPU nodes, = GPUs per node
##SBATCH --gpus-per-node=2          # GPU nodes: remove one '#' (and match ntasks-per-node)
##SBATCH --partition=gpu            # remove one '#' and name your cluster's partition
##SBATCH --account=proj42           # remove one '#' and name your project's account
#SBATCH --cpus-per-task=1           # cores per rank (its OpenMP threads)
#SBATCH --time=00:30:00             # wall-clock limit
#SBATCH --signal=B:USR1@120         # SIGUSR1 to this script 120 s before it
#SBATCH --requeue                   # the job may be put back in the queue
#SBATCH --open-mode=append          # ... and its next run appends to the same output
#SBATCH --output=%x-%j.out          # %x = job name, %j = job id
set -euo pipefail
common=${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh
[[ -r $common ]] ||
  { echo "launch: no $common: submit from the repository root, or export DDP_ROOT" >&2; exit 2; }
# shellcheck source=launch/common.sh disable=SC1090
source "$common"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
# The default is a short run (20 s or so on CPUs); drop --max-steps to train fully.
DDP_TRAIN_ARGS=${DDP_TRAIN_ARGS:---epochs 1 --max-steps 60}
program=$(ddp_program ddp-train)    # exits with a hint when it is not built
checkpoint=${DDP_CKPT_DIR:-$PWD}/ch08_teardown-$DDP_JOB_ID.ckpt
echo "launch: run $((${SLURM_RESTART_COUNT:-0} + 1)) of job $DDP_JOB_ID; checkpoint $checkpoint"
args=(--backend "${DDP_BACKEND:-auto}" --save "$checkpoint" --resume auto
      ${DDP_TIMEOUT:+--timeout "$DDP_TIMEOUT"})

rc=0
# shellcheck disable=SC2086  # DDP_TRAIN_ARGS is a list of flags
case ${DDP_LAUNCH:-srun} in
  srun) ddp_run_stoppable srun "$program" $DDP_TRAIN_ARGS "${args[@]}" || rc=$? ;;
  ddprun)
    ddp_ddprun_per_node_command "$program" $DDP_TRAIN_ARGS "${args[@]}"   # sets DDP_COMMAND
    ddp_run_stoppable "${DDP_COMMAND[@]}" || rc=$?
    ;;
  mpirun)
    ddp_run_stoppable mpirun -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN -x OMP_NUM_THREADS \
      ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"} "$program" $DDP_TRAIN_ARGS "${args[@]}" || rc=$?
    ;;
  *) echo "launch: DDP_LAUNCH=${DDP_LAUNCH} is not one of srun, ddprun, mpirun" >&2; exit 2 ;;
esac

# 75: stopped on request, checkpoint written (base/exit_codes.hpp). SLURM keeps
# the job id, so the next run finds the checkpoint; it starts after SLURM's requeue delay
# (the credential lifetime, AuthInfo cred_expire: 120 s by default) once resources are free.
if ((rc == 75)) && ((${SLURM_RESTART_COUNT:-0} < ${DDP_MAX_REQUEUES:-3})); then
  echo "launch: stopped on request (75); requeueing job $DDP_JOB_ID"
  scontrol requeue "$DDP_JOB_ID"
  exit 0
fi
exit "$rc"
