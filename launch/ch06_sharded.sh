#!/bin/bash
# launch/ch06_sharded.sh -- chapter 06's data-parallel training as a SLURM job: ddp-train
# on two nodes, two ranks each. Every rank trains on its own shard of each global batch
# of 128 (32 images per rank) and the ranks average their gradients, so all four hold the
# same weights after every step. ddp-doctor runs first, under the same launcher.
#
#   sbatch launch/ch06_sharded.sh                       # srun: one task per rank, tcp backend
#   DDP_LAUNCH=ddprun sbatch launch/ch06_sharded.sh     # srun: one ddprun per node
#   DDP_LAUNCH=mpirun sbatch launch/ch06_sharded.sh     # mpirun in the allocation, tcp backend
#   DDP_BACKEND=mpi DDP_LAUNCH=mpirun sbatch ...        # mpi works too, under mpirun only
#   DDP_TRAIN_ARGS="--epochs 5 --sync-bn" sbatch launch/ch06_sharded.sh   # a full run
#
# A good run ends with "final: test accuracy XX.XX% (N/2000 after epoch 1), wall time T s"
# (rank 0 speaks for the job). Without its wall time that line equals the one that
# `ddprun --nproc-per-node 4 ddp-train` with the same flags prints on one machine: where
# the ranks run does not change the arithmetic. Output: ch06_sharded-<job id>.out.
# Launch methods: launch/README.md; settings: common.sh.
#SBATCH --job-name=ch06_sharded     # shown by squeue; %x in --output
#SBATCH --nodes=2                   # two machines
#SBATCH --ntasks-per-node=2         # two ranks on each (on GPU nodes: one per GPU)
#SBATCH --cpus-per-task=1           # cores per rank (its OpenMP threads)
#SBATCH --time=00:30:00             # wall-clock limit: the job is killed after it
#SBATCH --output=%x-%j.out          # %x = job name, %j = job id
set -euo pipefail
common=${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh
[[ -r $common ]] ||
  { echo "launch: no $common: submit from the repository root, or export DDP_ROOT" >&2; exit 2; }
# shellcheck source=launch/common.sh disable=SC1090
source "$common"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
# The default is a quick run that proves the job works; drop --max-steps to train fully.
# The global batch stays at ddp-train's default, 128, whatever the number of ranks.
DDP_TRAIN_ARGS=${DDP_TRAIN_ARGS:---epochs 1 --max-steps 50}
doctor=$(ddp_program ddp-doctor)
program=$(ddp_program ddp-train)   # exits with a hint when it is not built

# shellcheck disable=SC2086  # DDP_TRAIN_ARGS is a list of flags
case ${DDP_LAUNCH:-srun} in
  srun)
    # One task per rank; each reads SLURM_PROCID/SLURM_LOCALID, and MASTER_ADDR/PORT
    # from the environment common.sh set.
    srun "$doctor"
    srun "$program" $DDP_TRAIN_ARGS --backend "${DDP_BACKEND:-tcp}"
    ;;
  ddprun)
    # One ddprun per node (ddp_ddprun_per_node, common.sh), which starts the node's
    # ranks with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
    ddp_ddprun_per_node "$doctor"
    ddp_ddprun_per_node "$program" $DDP_TRAIN_ARGS --backend "${DDP_BACKEND:-tcp}"
    ;;
  mpirun)
    # mpirun reads the allocation and starts one rank per slot; -x passes variables on.
    # The tcp backend by default, so that the result compares with ddprun's bit for bit;
    # DDP_BACKEND=mpi runs the same training over MPI_Allreduce.
    mpirun -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN "$doctor"
    mpirun -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN -x OMP_NUM_THREADS \
      ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"} "$program" $DDP_TRAIN_ARGS \
      --backend "${DDP_BACKEND:-tcp}"
    ;;
  *) echo "launch: DDP_LAUNCH=${DDP_LAUNCH} is not one of srun, ddprun, mpirun" >&2; exit 2 ;;
esac
