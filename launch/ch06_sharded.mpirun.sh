#!/bin/bash
# launch/ch06_sharded.mpirun.sh -- chapter 06's data-parallel training without a
# scheduler: mpirun starts the ranks of ddp-train on this machine or on the hosts of
# DDP_HOSTFILE; each trains on its shard of every global batch of 128 and the ranks
# average their gradients. ddp-doctor runs first.
#
#   launch/ch06_sharded.mpirun.sh                       # 4 ranks on this machine
#   DDP_RANKS=8 DDP_HOSTFILE=hosts.txt launch/ch06_sharded.mpirun.sh
#   DDP_BACKEND=mpi launch/ch06_sharded.mpirun.sh       # MPI_Allreduce instead of the tcp ring
#
# A good run ends with "final: test accuracy XX.XX% (N/2000 after epoch 1), wall time T s".
# The tcp backend is the default even under mpirun, so that the line, without its wall
# time, equals the one of `ddprun --nproc-per-node 4 ddp-train` with the same flags.
# Settings: launch/common.sh (DDP_TRAIN_ARGS below). As root (containers, CI) Open MPI
# also wants OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}   # ranks share the cores: one thread each
# The default is a quick run that proves the job works; drop --max-steps to train fully.
# The global batch stays at ddp-train's default, 128, whatever the number of ranks.
DDP_TRAIN_ARGS=${DDP_TRAIN_ARGS:---epochs 1 --max-steps 50}
doctor=$(ddp_program ddp-doctor)
program=$(ddp_program ddp-train)   # exits with a hint when it is not built
ranks=${DDP_RANKS:-4}

# --oversubscribe: allow more ranks than cores (a laptop, a CI box); without a hostfile
# every rank is local. -x passes variables to ranks on other hosts.
mpirun -np "$ranks" --oversubscribe ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} \
  -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN "$doctor"
# shellcheck disable=SC2086  # DDP_TRAIN_ARGS is a list of flags
mpirun -np "$ranks" --oversubscribe ${DDP_HOSTFILE:+--hostfile "$DDP_HOSTFILE"} \
  -x MASTER_ADDR -x MASTER_PORT -x DDP_JOB_TOKEN -x OMP_NUM_THREADS \
    ${DDP_MPIRUN_X[@]+"${DDP_MPIRUN_X[@]}"} \
  "$program" $DDP_TRAIN_ARGS --backend "${DDP_BACKEND:-tcp}"
