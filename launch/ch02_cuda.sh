#!/bin/bash
# launch/ch02_cuda.sh -- chapter 02's program, ch02_cuda, as a SLURM batch job on one GPU:
# a few ops and a matmul on the GPU, compared with the CPU. The job asks for the GPU and
# says which one it got before the program runs.
#
#   sbatch launch/ch02_cuda.sh                      # from the repository root
#   sbatch -p gpu -A myproject launch/ch02_cuda.sh  # most clusters keep GPUs in a partition
#   sbatch --gpus-per-node=0 launch/ch02_cuda.sh    # no GPU: ch02_cuda runs on the CPU
#
# The GPU request (--gpus-per-node=1 below) is what varies per site: GPUs usually live in
# their own partition (-p gpu, or SBATCH_PARTITION=gpu); some sites want the GPU type
# (--gpus-per-node=a100:1); Slurm before 19.05 knows only --gres=gpu:1. A cluster without
# GPUs refuses the job when it is submitted ("Invalid generic resource (gres)
# specification"): submit with --gpus-per-node=0 (or SBATCH_GPUS_PER_NODE=0), and without
# a GPU ch02_cuda runs on the CPU and says why. tools/local-cluster.sh offers fake GPUs
# (LOCAL_SLURM_GPUS=1): SLURM allocates them, the program finds no device and uses the CPU.
#
# Output: ch02_cuda-<job id>.out in the folder you submitted from. Build folder, modules,
# partition, account: see the variables in launch/common.sh.
#SBATCH --job-name=ch02_cuda        # shown by squeue; %x in --output
#SBATCH --nodes=1                   # one machine
#SBATCH --ntasks=1                  # one process
#SBATCH --gpus-per-node=1           # one GPU (what varies per site: see above)
#SBATCH --cpus-per-task=2           # cores for its OpenMP threads (the CPU reference)
#SBATCH --time=00:10:00             # wall-clock limit: the job is killed after it
#SBATCH --output=%x-%j.out          # %x = job name, %j = job id
set -euo pipefail
common=${DDP_ROOT:-$SLURM_SUBMIT_DIR}/launch/common.sh
[[ -r $common ]] ||
  { echo "launch: no $common: submit from the repository root, or export DDP_ROOT" >&2; exit 2; }
# shellcheck source=launch/common.sh disable=SC1090
source "$common"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}
program=$(ddp_program ch02_cuda)   # exits with a hint when it is not built

# The GPU the job got: SLURM sets CUDA_VISIBLE_DEVICES to the allocated GPUs (CUDA numbers
# them from 0 inside the job); nvidia-smi, which comes with the NVIDIA driver, names them.
# (nvidia-smi ignores CUDA_VISIBLE_DEVICES: it lists every GPU the node lets the job see,
# only the allocated ones where SLURM confines jobs with cgroups.)
ddp_show_gpus

# srun starts the program as the job's one task (a "job step": accounted, and killed
# with the job). Its exit code becomes the job's, which `sbatch --wait` returns.
# shellcheck disable=SC2086  # DDP_ARGS: extra arguments for the program, split on spaces
srun "$program" ${DDP_ARGS:-}
