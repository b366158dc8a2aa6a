#!/bin/bash
# launch/ch04_resnet_mnist.sh -- chapter 04's training program, ddp-train, as a SLURM
# batch job: the ResNet on the bundled MNIST digits, one process on one node (on its
# GPU when the job has one, else on the CPU). Data-parallel training comes in chapter 06.
#
#   sbatch launch/ch04_resnet_mnist.sh                       # a short run (see DDP_TRAIN_ARGS)
#   DDP_TRAIN_ARGS="--epochs 5" SBATCH_GPUS_PER_NODE=1 sbatch -p gpu launch/ch04_resnet_mnist.sh
#
# The last line of a good run starts with "final:". Output: ddp-train-<job id>.out in the
# submit folder. Build folder, modules, partition, account, GPUs: launch/common.sh.
#SBATCH --job-name=ddp-train        # shown by squeue; %x in --output
#SBATCH --nodes=1                   # one machine
#SBATCH --ntasks=1                  # one process
#SBATCH --cpus-per-task=2           # cores for its OpenMP threads (CPU runs)
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
DDP_TRAIN_ARGS=${DDP_TRAIN_ARGS:---epochs 1 --max-steps 50}
program=$(ddp_program ddp-train)   # exits with a hint when it is not built

# srun starts ddp-train as the job's one task; its exit code becomes the job's.
# shellcheck disable=SC2086  # DDP_TRAIN_ARGS is a list of flags
srun "$program" $DDP_TRAIN_ARGS
