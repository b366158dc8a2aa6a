#!/bin/bash
# launch/ch04_resnet_mnist.mpirun.sh -- chapter 04's training program, ddp-train,
# started by mpirun without a scheduler: one process, on this machine or on the first
# host of DDP_HOSTFILE.
#
#   launch/ch04_resnet_mnist.mpirun.sh                       # a short run (see DDP_TRAIN_ARGS)
#   DDP_TRAIN_ARGS="--epochs 5" DDP_HOSTFILE=hosts.txt launch/ch04_resnet_mnist.mpirun.sh
#
# The last line of a good run starts with "final:". Settings: launch/common.sh. As root,
# Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# The default is a quick run that proves the job works; drop --max-steps to train fully.
DDP_TRAIN_ARGS=${DDP_TRAIN_ARGS:---epochs 1 --max-steps 50}
program=$(ddp_program ddp-train)   # exits with a hint when it is not built

# -np 1: one process. -x passes a variable on to it (mpirun does not copy the whole
# environment to other hosts). --hostfile only when one is given.
# shellcheck disable=SC2086  # DDP_TRAIN_ARGS is a list of flags
mpirun -np 1 ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} -x OMP_NUM_THREADS \
  "$program" $DDP_TRAIN_ARGS
