#!/bin/bash
# A job whose program fails (exit code 3): the cluster tests run it through the same
# harness as the real launch scripts, to prove that a broken job fails its test and that
# the job's log appears in the test output (expect_failure.sh). Chapter 00.
#SBATCH --job-name=failing_job      # shown by squeue
#SBATCH --nodes=1                   # one machine
#SBATCH --ntasks=1                  # one process
#SBATCH --time=00:02:00             # wall-clock limit
set -euo pipefail
echo "failing_job: starting a program that exits with code 3"
srun bash -c 'echo "failing_job: rank $SLURM_PROCID on $(hostname) fails now"; exit 3'
echo "failing_job: not reached: set -e ends the script at the failed srun"
