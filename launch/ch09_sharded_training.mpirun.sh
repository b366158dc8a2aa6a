#!/bin/bash
# launch/ch09_sharded_training.mpirun.sh -- chapter 09's job with plain mpirun (no
# scheduler): ddp-train on DDP_RANKS ranks (default 4) of this machine or of the hosts in
# DDP_HOSTFILE, with FSDP (parameters, gradients and AdamW's state sharded over the ranks),
# gradients clipped by their global norm, on the 4x wider model (--width 4); after the
# epoch every rank prints its memory table, the bytes it holds per category beside the
# page's prediction.
#
#   launch/ch09_sharded_training.mpirun.sh                      # 4 ranks on this machine
#   DDP_SHARD=zero2 launch/ch09_sharded_training.mpirun.sh      # or zero1, or none (DDP)
#   DDP_RANKS=8 DDP_HOSTFILE=hosts.txt launch/ch09_sharded_training.mpirun.sh
#   export DDP_TRAIN_ARGS="--epochs 1 --max-steps 4 --width 8 --batch-size 4"
#   DDP_TRAIN_ARGS+=" --eval-batch-size 16 --optimizer adamw --lr 0.001"  # the budget's model
#   DDP_MEMORY_LIMIT_MB=110 launch/ch09_sharded_training.mpirun.sh                 # fits
#   DDP_MEMORY_LIMIT_MB=110 DDP_SHARD=none launch/ch09_sharded_training.mpirun.sh  # refused
#
# The budget, DDP_MEMORY_LIMIT_MB (MiB of tensors per rank), is passed on to every rank
# with -x. What the table shows for each DDP_SHARD, what a budget of 110 MiB lets through
# on the --width 8 model and what a good run prints: launch/ch09_sharded_training.sh.
# With a hostfile, this folder must be one that every host sees. Settings:
# launch/common.sh. As root (containers, CI) Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1
# and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}   # ranks share the cores: one thread each
# The default is a short run; drop --max-steps to train fully.
default_args="--epochs 1 --max-steps 20 --width 4 --optimizer adamw --clip-grad-norm 1.0"
DDP_TRAIN_ARGS=${DDP_TRAIN_ARGS:-$default_args}
program=$(ddp_program ddp-train)    # exits with a hint when it is not built

# --oversubscribe: allow more ranks than cores (a laptop, a CI box); without a hostfile
# every rank is local. -x passes variables to ranks on other hosts.
# shellcheck disable=SC2086  # DDP_TRAIN_ARGS is a list of flags
mpirun -np "${DDP_RANKS:-4}" --oversubscribe ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} \
  -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN -x OMP_NUM_THREADS \
    ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"} \
  "$program" $DDP_TRAIN_ARGS --shard "${DDP_SHARD:-fsdp}" --print-memory \
  --backend "${DDP_BACKEND:-auto}"
