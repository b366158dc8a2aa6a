#!/bin/bash
# launch/ch05_rendezvous.sh -- chapter 05's program, ch05_rendezvous, as a SLURM job: two
# nodes, two ranks each, meet through rank 0's TCPStore, all-reduce a tensor with a known
# answer and time a 4 MiB all-reduce. ddp-doctor runs first, under the same launcher.
#
#   sbatch launch/ch05_rendezvous.sh                    # srun: one task per rank, tcp backend
#   DDP_LAUNCH=ddprun sbatch launch/ch05_rendezvous.sh  # srun: one ddprun per node
#   DDP_LAUNCH=mpirun sbatch launch/ch05_rendezvous.sh  # mpirun in the allocation, mpi backend
#   DDP_BACKEND=tcp DDP_LAUNCH=mpirun sbatch ...        # tcp with any launcher; mpi under mpirun
#   DDP_BACKEND=nccl sbatch --gpus-per-node=2 launch/ch05_rendezvous.sh
#                          # GPU nodes, any launcher: NCCL, each rank's tensors on its own GPU
#                          # (cuda:<local rank>); a rank without one stops and says so
#
# A good run ends with "ok: 4 ranks met, reduced and left together". Output:
# ch05_rendezvous-<job id>.out. Launch methods: launch/README.md; settings: common.sh.
#SBATCH --job-name=ch05_rendezvous  # shown by squeue; %x in --output
#SBATCH --nodes=2                   # two machines
#SBATCH --ntasks-per-node=2         # two ranks on each (on GPU nodes: one per GPU)
#SBATCH --cpus-per-task=1           # cores per rank
#SBATCH --time=00:10:00             # wall-clock limit: the job is killed after it
#SBATCH --output=%x-%j.out          # %x = job name, %j = job id
set -euo pipefail
common=${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh
[[ -r $common ]] ||
  { echo "launch: no $common: submit from the repository root, or export DDP_ROOT" >&2; exit 2; }
# shellcheck source=launch/common.sh disable=SC1090
source "$common"
doctor=$(ddp_program ddp-doctor)
program=$(ddp_program ch05_rendezvous)

case ${DDP_LAUNCH:-srun} in
  srun)
    # One task per rank; each reads SLURM_PROCID/SLURM_LOCALID, and MASTER_ADDR/PORT
    # from the environment common.sh set.
    srun "$doctor"
    srun "$program" --backend "${DDP_BACKEND:-tcp}"
    ;;
  ddprun)
    # One ddprun per node (ddp_ddprun_per_node, common.sh), which starts the node's
    # ranks with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
    ddp_ddprun_per_node "$doctor"
    ddp_ddprun_per_node "$program" --backend "${DDP_BACKEND:-tcp}"
    ;;
  mpirun)
    # mpirun reads the allocation and starts one rank per slot; -x passes variables on.
    mpirun -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN "$doctor"
    mpirun -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"} \
      "$program" --backend "${DDP_BACKEND:-mpi}"
    ;;
  *) echo "launch: DDP_LAUNCH=${DDP_LAUNCH} is not one of srun, ddprun, mpirun" >&2; exit 2 ;;
esac
