#!/bin/bash
# launch/ch01_tensor.sh -- chapter 01's program, ch01_tensor, as a SLURM batch job:
# views, broadcasting, reductions, matmul and random numbers, each result checked.
# One process on one node: nothing is distributed yet, this is the job-script skeleton.
#
#   sbatch launch/ch01_tensor.sh                  # from the repository root
#   DDP_BUILD=$PWD/build/cpu-only sbatch -p short -A myproject launch/ch01_tensor.sh
#
# Output: ch01_tensor-<job id>.out in the folder you submitted from. Build folder, modules,
# partition, account, GPUs: see the variables in launch/common.sh.
#SBATCH --job-name=ch01_tensor        # shown by squeue; %x in --output
#SBATCH --nodes=1                   # one machine
#SBATCH --ntasks=1                  # one process
#SBATCH --cpus-per-task=2           # cores for its OpenMP threads
#SBATCH --time=00:10:00             # wall-clock limit: the job is killed after it
#SBATCH --output=%x-%j.out          # %x = job name, %j = job id
set -euo pipefail
source "${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
program=$(ddp_program ch01_tensor)   # exits with a hint when it is not built

# srun starts the program as the job's one task (a "job step": accounted, and killed
# with the job). Its exit code becomes the job's, which `sbatch --wait` returns.
# shellcheck disable=SC2086  # DDP_ARGS: extra arguments for the program, split on spaces
srun "$program" ${DDP_ARGS:-}
