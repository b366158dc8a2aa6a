#!/bin/bash
# launch/ch02_cuda.sh -- chapter 02's program, ch02_cuda, as a SLURM batch job:
# a few ops and a matmul on the best device present, compared with the CPU.
# One process on one node: nothing is distributed yet, this is the job-script skeleton.
#
#   sbatch launch/ch02_cuda.sh                  # from the repository root
#   SBATCH_GPUS_PER_NODE=1 sbatch -p gpu -A myproject   launch/ch02_cuda.sh
#   (without a GPU it runs on the CPU and says why)
#
# Output: ch02_cuda-<job id>.out in the folder you submitted from. Build folder, modules,
# partition, account, GPUs: see the variables in launch/common.sh.
#SBATCH --job-name=ch02_cuda        # shown by squeue; %x in --output
#SBATCH --nodes=1                   # one machine
#SBATCH --ntasks=1                  # one process
#SBATCH --cpus-per-task=2           # cores for its OpenMP threads
#SBATCH --time=00:10:00             # wall-clock limit: the job is killed after it
#SBATCH --output=%x-%j.out          # %x = job name, %j = job id
set -euo pipefail
source "${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
program=$(ddp_program ch02_cuda)   # exits with a hint when it is not built

# srun starts the program as the job's one task (a "job step": accounted, and killed
# with the job). Its exit code becomes the job's, which `sbatch --wait` returns.
# shellcheck disable=SC2086  # DDP_ARGS: extra arguments for the program, split on spaces
srun "$program" ${DDP_ARGS:-}
