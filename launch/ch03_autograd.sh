#!/bin/bash
# launch/ch03_autograd.sh -- chapter 03's program, ch03_autograd, as a SLURM batch job: a
# tiny network's backward graph, hook order and gradients against finite differences.
# Its exit code is gradcheck's verdict, and so the job's: a gate that chapter 04's
# training can wait behind, starting only when the gradients are right:
#
#   jid=$(sbatch --parsable launch/ch03_autograd.sh)              # from the repository root
#   sbatch --dependency=afterok:$jid launch/ch04_resnet_mnist.sh
#   squeue --me   # the training waits: "(Dependency)"; if gradcheck failed, it never
#                 # starts: "(DependencyNeverSatisfied)", until you scancel it
#
# Output: ch03_autograd-<job id>.out in the folder you submitted from. Build folder, modules,
# partition, account, GPUs: see the variables in launch/common.sh.
#SBATCH --job-name=ch03_autograd    # shown by squeue; %x in --output
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
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
program=$(ddp_program ch03_autograd)   # exits with a hint when it is not built

# srun starts the program as the job's one task (a "job step": accounted, and killed
# with the job). The job's exit code is the program's: SLURM records it (sacct, `sbatch
# --wait`), and afterok dependencies read it.
rc=0
srun "$program" || rc=$?
if ((rc == 0)); then
  echo "launch: gradcheck passed; jobs waiting with --dependency=afterok:$SLURM_JOB_ID may start"
else
  echo "launch: ch03_autograd failed (exit code $rc); jobs waiting with" \
       "--dependency=afterok:$SLURM_JOB_ID will not start" >&2
fi
exit "$rc"
