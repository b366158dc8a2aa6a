#!/bin/bash
# launch/ch00_hello.sh -- "hello, cluster": chapter 00's first multi-node job. Two nodes,
# two ranks each; every rank says who it is and rank 0 prints the table. ddp-doctor runs
# first, under the same launcher, and stops the job with a hint if the setup is off.
#
#   sbatch launch/ch00_hello.sh                         # srun: one task per rank (per GPU)
#   DDP_LAUNCH=ddprun sbatch launch/ch00_hello.sh       # srun: one ddprun per node
#   DDP_LAUNCH=mpirun sbatch launch/ch00_hello.sh       # mpirun inside the allocation
#   sbatch -N 4 --ntasks-per-node=8 launch/ch00_hello.sh   # bigger: flags beat #SBATCH
#
# Output: ch00_hello-<job id>.out in the submit folder. The three launch methods, and why
# each looks the way it does: launch/README.md. Settings: launch/common.sh.
#SBATCH --job-name=ch00_hello       # shown by squeue; %x in --output
#SBATCH --nodes=2                   # two machines
#SBATCH --ntasks-per-node=2         # two ranks on each (on GPU nodes: one per GPU)
#SBATCH --cpus-per-task=1           # cores per rank
#SBATCH --time=00:05:00             # wall-clock limit: the job is killed after it
#SBATCH --output=%x-%j.out          # %x = job name, %j = job id
set -euo pipefail
common=${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh
[[ -r $common ]] ||
  { echo "launch: no $common: submit from the repository root, or export DDP_ROOT" >&2; exit 2; }
# shellcheck source=launch/common.sh disable=SC1090
source "$common"
doctor=$(ddp_program ddp-doctor)
hello=$(ddp_program ch00_hello)

case ${DDP_LAUNCH:-srun} in
  srun)
    # srun starts SLURM_NTASKS copies, placed by the allocation (block: ranks 0,1 on the
    # first node). Each reads SLURM_PROCID/SLURM_LOCALID; MASTER_ADDR/PORT come from
    # common.sh through the environment.
    srun "$doctor"
    srun "$hello"
    ;;
  ddprun)
    # One task per node, and ddprun (the torchrun of ddp.cpp) starts the node's ranks:
    # ddp_ddprun_per_node in common.sh (why --ntasks-per-node=1 matters is said there).
    ddp_ddprun_per_node "$doctor"
    ddp_ddprun_per_node "$hello"
    ;;
  mpirun)
    # mpirun reads the allocation itself (hosts and slots) and starts its daemons on
    # the other nodes through srun. -x passes variables to remote ranks.
    mpirun -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN "$doctor"
    mpirun -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN "$hello"
    ;;
  *) echo "launch: DDP_LAUNCH=${DDP_LAUNCH} is not one of srun, ddprun, mpirun" >&2; exit 2 ;;
esac
