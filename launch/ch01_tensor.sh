#!/bin/bash
# launch/ch01_tensor.sh -- chapter 01's program, ch01_tensor, as a SLURM batch job, run
# twice: on 1 thread and on the job's cores, and the two outputs compared. One process
# on one node: nothing is distributed yet, this is the job-script skeleton.
#
#   sbatch launch/ch01_tensor.sh                  # from the repository root
#   sbatch --cpus-per-task=8 -p short -A myproject launch/ch01_tensor.sh
#
# Output: ch01_tensor-<job id>.out in the folder you submitted from. Build folder, modules,
# partition, account, GPUs: see the variables in launch/common.sh.
#SBATCH --job-name=ch01_tensor      # shown by squeue; %x in --output
#SBATCH --nodes=1                   # one machine
#SBATCH --ntasks=1                  # one process
#SBATCH --cpus-per-task=2           # cores for its OpenMP threads
#SBATCH --time=00:10:00             # wall-clock limit: the job is killed after it
#SBATCH --output=%x-%j.out          # %x = job name, %j = job id
set -euo pipefail
common=${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh
[[ -r $common ]] ||
  { echo "launch: no $common: submit from the repository root, or export DDP_ROOT" >&2; exit 2; }
# shellcheck source=launch/common.sh disable=SC1090
source "$common"
program=$(ddp_program ch01_tensor)   # exits with a hint when it is not built
cores=${SLURM_CPUS_PER_TASK:-1}

# Chapter 01's promise, on the cluster's CPU: the thread count does not change a result.
# An elementwise op or a reduction computes each output element on one thread, in a fixed
# order, and a random number is a function of (seed, position) alone (tests/ch01/
# test_threads.cpp checks large tensors; a large matmul, which Eigen splits itself, need
# not agree to the bit: Note [Eigen inside our loops]). srun starts each run as a "job
# step" (accounted, killed with the job); the first line, which says the thread count, is
# left out of the comparison. A failed run or a difference fails the job.
one=$(OMP_NUM_THREADS=1 srun "$program")
all=$(OMP_NUM_THREADS=$cores srun "$program")
echo "$all"
diff <(sed 1d <<<"$one") <(sed 1d <<<"$all") ||
  { echo "launch: the results on 1 thread and on $cores differ (diff above)" >&2; exit 1; }
echo "launch: the same results on 1 thread and on $cores threads"
