#!/bin/bash
# launch/ch02_cuda.mpirun.sh -- chapter 02's program, ch02_cuda, started by mpirun
# without a scheduler: a few ops and a matmul on the GPU, compared with the CPU (on the
# CPU, and it says why, where there is no usable GPU).
# One process, on this machine or on the first host of DDP_HOSTFILE.
#
#   launch/ch02_cuda.mpirun.sh
#   DDP_HOSTFILE=hosts.txt launch/ch02_cuda.mpirun.sh   # "gpu01 slots=4" lines
#   CUDA_VISIBLE_DEVICES=1 launch/ch02_cuda.mpirun.sh   # the second GPU (no scheduler picks)
#
# Settings: launch/common.sh. As root, Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (containers, CI); launch/README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
program=$(ddp_program ch02_cuda)   # exits with a hint when it is not built

# This machine's GPUs (common.sh). With DDP_HOSTFILE the program runs on the first host
# of the file, and its own first line names the device it took there.
ddp_show_gpus

# -np 1: one process. -x passes a variable on to it (mpirun does not copy the whole
# environment to other hosts). --hostfile only when one is given.
# shellcheck disable=SC2086  # DDP_ARGS: extra arguments for the program, split on spaces
mpirun -np 1 ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} -x OMP_NUM_THREADS \
  ${CUDA_VISIBLE_DEVICES+-x CUDA_VISIBLE_DEVICES} "$program" ${DDP_ARGS:-}
